# test/t/020_scram_passthrough.pl
#   use_scram_passthrough (PostgreSQL 18): a non-superuser who logged in to
#   the coordinator with SCRAM reads through a user mapping without a
#   password, the coordinator proving the client's own SCRAM keys to the
#   shard, which holds the same verifier (same salt and iterations).
#   Without the option (or with the mapping's false over the server's
#   true) the password rules refuse the connection (2F003); a shard that
#   does not ask for SCRAM is refused by libpq (require_auth).  Before 18
#   the option does not exist (sql/options.sql checks the refusal).

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $coord = PostgreSQL::Test::Cluster->new('coordinator');
if ($coord->pg_version < 18)
{
	plan skip_all => 'SCRAM pass-through needs PostgreSQL 18';
}

# alice logs in with SCRAM on both servers (unix sockets); the test's own
# superuser is trusted.
sub hba_scram_for_alice
{
	my ($node, $method) = @_;
	my $hba = $node->data_dir . '/pg_hba.conf';
	my $rest = PostgreSQL::Test::Utils::slurp_file($hba);
	open my $fh, '>', $hba or die "could not write $hba: $!";
	print $fh "local all alice $method\n", $rest;
	close $fh;
}

my $shard = PostgreSQL::Test::Cluster->new('shard');
$shard->init;
hba_scram_for_alice($shard, 'scram-sha-256');
$shard->start;
$coord->init;
hba_scram_for_alice($coord, 'scram-sha-256');
$coord->start;

# The same verifier on both: the shard gets the coordinator's stored one.
$coord->safe_psql('postgres', q{
	SET password_encryption = 'scram-sha-256';
	CREATE ROLE alice LOGIN PASSWORD 'wonderland';
});
my $verifier = $coord->safe_psql('postgres',
	q{SELECT rolpassword FROM pg_authid WHERE rolname = 'alice'});
like($verifier, qr/^SCRAM-SHA-256\$/, 'a SCRAM verifier on the coordinator');
$shard->safe_psql('postgres', qq{
	CREATE ROLE alice LOGIN PASSWORD '$verifier';
	CREATE TABLE t AS SELECT g AS id FROM generate_series(1, 7) g;
	GRANT SELECT ON t TO alice;
});
is($shard->safe_psql('postgres', q{SELECT rolpassword FROM pg_authid WHERE rolname = 'alice'}),
	$verifier, 'the shard holds the same verifier');

my ($host, $port) = ($shard->host, $shard->port);
$coord->safe_psql('postgres', qq{
	CREATE EXTENSION async_fdw;
	CREATE SERVER s FOREIGN DATA WRAPPER async_fdw
	  OPTIONS (host '$host', port '$port', dbname 'postgres', use_scram_passthrough 'true');
	GRANT USAGE ON FOREIGN SERVER s TO alice;
	CREATE USER MAPPING FOR alice SERVER s;
	CREATE FOREIGN TABLE t (id int) SERVER s OPTIONS (table_name 't');
	GRANT SELECT ON t TO alice;
});

# as_alice(SQL): run SQL as alice, logged in with her password (SCRAM);
# returns (exit code, stdout, stderr).
sub as_alice
{
	my ($sql) = @_;
	my $connstr = $coord->connstr('postgres') . ' user=alice password=wonderland';
	my ($out, $err);
	my $rc = $coord->psql('postgres', "\\set VERBOSITY verbose\n$sql",
		connstr => $connstr, stdout => \$out, stderr => \$err);
	return ($rc, $out, $err);
}

# A mapping that names no remote user logs in as the local server's
# operating system user, whom the shard trusts: libpq refuses the session
# that SCRAM did not prove (require_auth), rather than let alice in as a
# superuser.
my ($rc, $out, $err) = as_alice('SELECT count(*) FROM t');
like($err, qr/ERROR:  08001: could not connect to server "s"\n.*authentication method requirement "scram-sha-256" failed/,
	'a remote login SCRAM did not prove is refused');
$coord->safe_psql('postgres', q{ALTER USER MAPPING FOR alice SERVER s OPTIONS (ADD user 'alice')});

($rc, $out, $err) = as_alice('SELECT count(*) FROM t');
is($out, '7', 'through a mapping without password, with the server option: rows')
  or diag($err);
($rc, $out, $err) = as_alice(q{
	SELECT count(*) FROM t;
	SELECT current_user || '|' || count(*) FROM async_fdw_get_connections()});
is($out, "7\nalice|1", 'one connection, as alice');

# The mapping's option wins over the server's.
$coord->safe_psql('postgres', q{ALTER USER MAPPING FOR alice SERVER s OPTIONS (ADD use_scram_passthrough 'false')});
($rc, $out, $err) = as_alice('SELECT count(*) FROM t');
like($err, qr/ERROR:  2F003: password is required/, "the mapping's false over the server's true: 2F003");

# Without the option at all: the password rules, 2F003.
$coord->safe_psql('postgres', q{
	ALTER USER MAPPING FOR alice SERVER s OPTIONS (DROP use_scram_passthrough);
	ALTER SERVER s OPTIONS (DROP use_scram_passthrough);
});
($rc, $out, $err) = as_alice('SELECT count(*) FROM t');
like($err, qr/ERROR:  2F003: password is required/, 'without the option: 2F003');

# On the user mapping alone.
$coord->safe_psql('postgres', q{ALTER USER MAPPING FOR alice SERVER s OPTIONS (ADD use_scram_passthrough 'true')});
($rc, $out, $err) = as_alice('SELECT count(*) FROM t');
is($out, '7', 'with the option on the user mapping alone: rows') or diag($err);

# A client that did not log in with SCRAM has no keys to pass: the
# password rules apply (alice trusted on the coordinator).
hba_scram_for_alice($coord, 'trust');
$coord->reload;
($rc, $out, $err) = as_alice('SELECT count(*) FROM t');
like($err, qr/ERROR:  2F003: password is required/, 'a client logged in without SCRAM: 2F003');
hba_scram_for_alice($coord, 'scram-sha-256');
$coord->reload;

# A shard that does not ask for SCRAM (trusts alice) is refused: the keys
# must be proven, not skipped.
hba_scram_for_alice($shard, 'trust');
$shard->reload;
($rc, $out, $err) = as_alice('SELECT count(*) FROM t');
like($err, qr/ERROR:  08001: could not connect to server "s"\n.*authentication method requirement "scram-sha-256" failed/,
	'a shard that does not ask for SCRAM is refused');
hba_scram_for_alice($shard, 'scram-sha-256');
$shard->reload;

# The keys are async_fdw's to set, not an option.
($rc, $out, $err) = (0, '', '');
$coord->psql('postgres', q{ALTER SERVER s OPTIONS (ADD scram_client_key 'x')}, stderr => \$err);
like($err, qr/invalid option "scram_client_key"/, 'scram_client_key is not an option');

($rc, $out, $err) = as_alice('SELECT count(*) FROM t');
is($out, '7', 'again through SCRAM') or diag($err);

done_testing();
