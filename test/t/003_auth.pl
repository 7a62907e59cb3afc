# test/t/003_auth.pl
#   Who a non-superuser connects as: a shard that demands a password, a
#   password file in the coordinator's environment, and the libpq options
#   that name the coordinator's own credentials.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

# A shard that asks every TCP client for a SCRAM password, and a remote
# superuser "admin" whose current_user a view shows.
my $shard = PostgreSQL::Test::Cluster->new('auth_shard');
$shard->init;
$shard->append_conf('postgresql.conf', "listen_addresses = '127.0.0.1'\n");
$shard->start;
$shard->safe_psql('postgres', q{
	SET password_encryption = 'scram-sha-256';
	CREATE ROLE admin SUPERUSER LOGIN PASSWORD 'adminpw';
	CREATE VIEW whoami AS SELECT current_user::text AS who;
	CREATE TABLE secret (v text);
	INSERT INTO secret VALUES ('only admin reads this');
	REVOKE ALL ON secret FROM PUBLIC;
});
my $hba = $shard->data_dir . '/pg_hba.conf';
open(my $fh, '>', $hba) or die "could not write $hba: $!";
print $fh "local all all trust\n";
print $fh "host all all 127.0.0.1/32 scram-sha-256\n";
close($fh);
$shard->reload;
my $port = $shard->port;

# admin's password in a password file that the coordinator's server
# process reads: libpq's fallback when a connection gives no password.
my $passfile = PostgreSQL::Test::Utils::tempdir() . '/pgpass';
open($fh, '>', $passfile) or die "could not write $passfile: $!";
print $fh "127.0.0.1:$port:*:admin:adminpw\n";
close($fh);
chmod(0600, $passfile) or die "could not chmod $passfile: $!";
$ENV{PGPASSFILE} = $passfile;

my $coord = PostgreSQL::Test::Cluster->new('auth_coordinator');
$coord->init;
$coord->start;
$coord->safe_psql('postgres', qq{
	CREATE EXTENSION async_fdw;
	CREATE EXTENSION postgres_fdw;
	CREATE ROLE alice LOGIN NOSUPERUSER;
	CREATE SERVER shard FOREIGN DATA WRAPPER async_fdw
	  OPTIONS (host '127.0.0.1', port '$port', dbname 'postgres');
	CREATE SERVER pg_shard FOREIGN DATA WRAPPER postgres_fdw
	  OPTIONS (host '127.0.0.1', port '$port', dbname 'postgres');
	GRANT USAGE ON FOREIGN SERVER shard, pg_shard TO alice;
	CREATE FOREIGN TABLE whoami (who text) SERVER shard OPTIONS (table_name 'whoami');
	CREATE FOREIGN TABLE secret (v text) SERVER shard OPTIONS (table_name 'secret');
	CREATE FOREIGN TABLE pg_whoami (who text) SERVER pg_shard OPTIONS (table_name 'whoami');
	GRANT SELECT ON whoami, secret, pg_whoami TO alice;
});

# Run SQL as alice (a non-superuser); returns stdout and stderr, with the
# SQLSTATE in error messages.
sub as_alice
{
	my ($sql) = @_;
	my ($ret, $out, $err) = $coord->psql('postgres',
		"SET ROLE alice;\n\\set VERBOSITY verbose\n$sql");
	return ($out, $err);
}

# The setup is real: a superuser's mapping without a password connects
# as admin with the password from the coordinator's password file.
$coord->safe_psql('postgres', q{
	CREATE USER MAPPING FOR CURRENT_USER SERVER shard OPTIONS (user 'admin');
});
is($coord->safe_psql('postgres', 'SELECT who FROM whoami'),
	'admin', 'the password file lets the coordinator log in as admin');

# An empty password: libpq would take admin's from the password file.
my ($out, $err);
as_alice(q{CREATE USER MAPPING FOR alice SERVER shard OPTIONS (user 'admin', password '');
	CREATE USER MAPPING FOR alice SERVER pg_shard OPTIONS (user 'admin', password '');});
($out, $err) = as_alice('SELECT who FROM whoami');
like($err, qr/ERROR:  2F003: password is required/,
	'an empty password is no password (SQLSTATE 2F003)');
unlike($out, qr/admin/, 'alice does not run queries as admin');
($out, $err) = as_alice('SELECT v FROM secret');
like($err, qr/ERROR:  2F003: password is required/,
	'the remote table only admin may read stays out of reach');
unlike($out, qr/only admin/, 'no row of the secret table comes back');
($out, $err) = as_alice('SELECT who FROM pg_whoami');
# (postgres_fdw 16 and later also accept delegated GSSAPI credentials, and
# say so.)
like($err, qr/ERROR:  2F003: password (or GSSAPI delegated credentials )?(is )?required/,
	'postgres_fdw refuses the empty password the same way');

# No password option at all.
as_alice(q{ALTER USER MAPPING FOR alice SERVER shard OPTIONS (DROP password);});
($out, $err) = as_alice('SELECT who FROM whoami');
like($err, qr/ERROR:  2F003: password is required/,
	'a mapping without a password is refused');

# The right password works; a wrong one does not fall back to the file.
as_alice(q{ALTER USER MAPPING FOR alice SERVER shard OPTIONS (ADD password 'adminpw');});
($out, $err) = as_alice('SELECT who FROM whoami');
is($out, 'admin', 'the right password connects');
unlike($err, qr/ERROR/, 'without an error');
as_alice(q{ALTER USER MAPPING FOR alice SERVER shard OPTIONS (SET password 'wrong');});
($out, $err) = as_alice('SELECT who FROM whoami');
like($err,
	qr/ERROR:  08001: could not connect to server "shard".*password authentication failed for user "admin"/s,
	'a wrong password is refused by the shard');
is($out, '', 'and no row comes back');

# Over the shard's Unix socket, trusted without a password: a password
# given but never asked for proves nothing.
my $sockdir = $shard->host;
$coord->safe_psql('postgres', qq{
	CREATE SERVER shard_sock FOREIGN DATA WRAPPER async_fdw
	  OPTIONS (host '$sockdir', port '$port', dbname 'postgres');
	GRANT USAGE ON FOREIGN SERVER shard_sock TO alice;
	CREATE FOREIGN TABLE whoami_sock (who text) SERVER shard_sock
	  OPTIONS (table_name 'whoami');
	GRANT SELECT ON whoami_sock TO alice;
});
as_alice(q{CREATE USER MAPPING FOR alice SERVER shard_sock
	OPTIONS (user 'admin', password 'x');});
($out, $err) = as_alice('SELECT who FROM whoami_sock');
like($err, qr/ERROR:  2F003: password is required.*did not ask for the password/s,
	'a connection that asked for no password is refused');
is($out, '', 'and runs nothing');
$coord->safe_psql('postgres', 'DROP USER MAPPING FOR alice SERVER shard');

# The libpq options that name the coordinator's credentials are for
# superusers only, on servers and on user mappings.
$coord->safe_psql('postgres', q{
	GRANT USAGE ON FOREIGN DATA WRAPPER async_fdw TO alice;
	GRANT CREATE ON SCHEMA public TO alice;
});
my %opt_values = (
	passfile => $passfile,
	service  => 'coordinator_service',
	sslcert  => '/etc/ssl/certs/coordinator.crt',
	sslkey   => '/etc/ssl/private/coordinator.key');
for my $opt (sort keys %opt_values)
{
	my $value = $opt_values{$opt};
	($out, $err) = as_alice(qq{CREATE SERVER s_$opt FOREIGN DATA WRAPPER async_fdw
		OPTIONS (host '127.0.0.1', port '$port', $opt '$value');});
	like($err,
		qr/ERROR:  42501: only a superuser may set option "$opt" on a server/,
		"a non-superuser may not set $opt on a server");
	($out, $err) = as_alice(qq{CREATE SERVER s_$opt FOREIGN DATA WRAPPER async_fdw
		OPTIONS (host '127.0.0.1');
		ALTER SERVER s_$opt OPTIONS (ADD $opt '$value');});
	like($err,
		qr/ERROR:  42501: only a superuser may set option "$opt" on a server/,
		"nor add $opt to a server of their own");
	$coord->safe_psql('postgres', qq{
		CREATE SERVER su_$opt FOREIGN DATA WRAPPER async_fdw
		  OPTIONS (host '127.0.0.1', $opt '$value');
		ALTER SERVER s_$opt OPTIONS (ADD $opt '$value');
	});
	is( $coord->safe_psql('postgres', qq{
			SELECT count(*) FROM pg_foreign_server
			WHERE srvname IN ('su_$opt', 's_$opt')
			  AND '$opt=$value' = ANY (srvoptions)}),
		'2', "a superuser may set $opt on a server");
}
for my $opt ('sslcert', 'sslkey')
{
	($out, $err) = as_alice(qq{CREATE USER MAPPING FOR alice SERVER shard
		OPTIONS (user 'admin', password 'adminpw', $opt 'x');});
	like($err,
		qr/ERROR:  42501: only a superuser may set option "$opt" on a user mapping/,
		"a non-superuser may not set $opt on a user mapping");
}
for my $opt ('passfile', 'service')
{
	($out, $err) = as_alice(qq{CREATE USER MAPPING FOR alice SERVER shard
		OPTIONS (user 'admin', password 'adminpw', $opt 'x');});
	like($err, qr/ERROR:  HV00D: invalid option "$opt"/,
		"$opt is no user mapping option");
}

# The options that only check the shard stay open, as in postgres_fdw.
($out, $err) = as_alice(q{CREATE SERVER s_verify FOREIGN DATA WRAPPER async_fdw
	OPTIONS (host '127.0.0.1', sslmode 'prefer', sslrootcert 'root.crt',
	         sslcrl 'root.crl', sslcrldir 'crl', gssencmode 'disable');});
unlike($err, qr/ERROR/, 'a non-superuser may set the options that check the server');

$coord->stop;
$shard->stop;
done_testing();
