# test/t/024_savepoint_transfers.pl
#   Many sessions at once, each transaction moving money between accounts
#   on different shards with part of its work rolled back: a savepoint
#   rolled back, a PL/pgSQL exception block that catches a remote error,
#   a bulk INSERT rolled back with its savepoint.  Every transaction notes
#   what it committed in a local ledger.  Checked while they run: a reader
#   never sees a total other than the constant one (the commit fence).
#   Checked after: every account's balance is exactly what the ledger says
#   (no rolled-back change kept, no committed one lost), the bulk rows of
#   every committed transaction and none of the rolled-back ones are on the
#   shards, and nothing stays prepared.
#
#   AFDW_SP_SECONDS (default 5) sets the run's length; AFDW_SP_ONLY (a
#   comma-separated list of savepoint, catching, bulk) runs only those
#   writers.
#
#   It found that a direct UPDATE in a function (transfer_catching's first)
#   was committed on its own: when the transaction then failed (a remote
#   serialization failure of a later UPDATE), the debit stayed.

use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $seconds = $ENV{AFDW_SP_SECONDS} // 5;
my %done;

my @shards;
for my $i (1 .. 4)
{
	my $node = PostgreSQL::Test::Cluster->new("spshard$i");
	$node->init;
	$node->append_conf('postgresql.conf', "max_prepared_transactions = 40\n");
	$node->start;
	push @shards, $node;
}

my $coord = PostgreSQL::Test::Cluster->new('spcoord');
$coord->init;
$coord->append_conf('postgresql.conf', "shared_preload_libraries = 'async_fdw'\n");
$coord->start;
$coord->safe_psql('postgres', q{
	CREATE EXTENSION async_fdw;
	CREATE TABLE acc (id int, bal int) PARTITION BY RANGE (id);
	CREATE TABLE events (k int, client int, n int) PARTITION BY HASH (k);
	-- What each committed transaction did: the accounts it moved money
	-- between, its kind, and the bulk rows it kept.
	CREATE TABLE ledger (kind text, a int, b int, kept int);
	CREATE TABLE wrong (total bigint);
	CREATE SEQUENCE keys;
});

# Accounts 1-200, 50 a shard, 1000 each; events hashed over the 4 shards;
# marks, on shard 3, holds the key that the exception block's INSERT
# collides with.
for my $i (1 .. 4)
{
	my $node = $shards[ $i - 1 ];
	my ($host, $port, $lo, $hi) = ($node->host, $node->port, ($i - 1) * 50 + 1, $i * 50);
	$node->safe_psql('postgres', qq{
		CREATE TABLE acc (id int PRIMARY KEY, bal int NOT NULL);
		INSERT INTO acc SELECT g, 1000 FROM generate_series($lo, $hi) g;
		CREATE TABLE events (k int PRIMARY KEY, client int, n int);
		CREATE TABLE marks (id int PRIMARY KEY);
		INSERT INTO marks VALUES (1);
	});
	$coord->safe_psql('postgres', qq{
		CREATE SERVER sp$i FOREIGN DATA WRAPPER async_fdw
		  OPTIONS (host '$host', port '$port', dbname 'postgres');
		CREATE USER MAPPING FOR CURRENT_USER SERVER sp$i;
		CREATE FOREIGN TABLE acc_$i PARTITION OF acc
		  FOR VALUES FROM ($lo) TO (@{[ $hi + 1 ]}) SERVER sp$i
		  OPTIONS (table_name 'acc');
		CREATE FOREIGN TABLE events_$i PARTITION OF events
		  FOR VALUES WITH (MODULUS 4, REMAINDER @{[ $i - 1 ]}) SERVER sp$i
		  OPTIONS (table_name 'events');
	});
}
$coord->safe_psql('postgres', q{
	CREATE FOREIGN TABLE marks (id int) SERVER sp3;
	-- A transfer whose inner block writes to both shards, then fails on a
	-- third (a duplicate key there), and is caught: the block's writes go,
	-- the rest of the transfer stays.
	CREATE FUNCTION transfer_catching(a int, b int, c int) RETURNS void
	LANGUAGE plpgsql AS $$
	BEGIN
	  UPDATE acc SET bal = bal - 1 WHERE id = a;
	  BEGIN
	    UPDATE acc SET bal = bal + 500 WHERE id = c;
	    INSERT INTO events SELECT nextval('keys'), -1, g FROM generate_series(1, 3) g;
	    INSERT INTO marks VALUES (1);
	  EXCEPTION WHEN unique_violation THEN
	    NULL;
	  END;
	  UPDATE acc SET bal = bal + 1 WHERE id = b;
	  INSERT INTO ledger VALUES ('catching', a, b, 0);
	END
	$$;
});

my $dir = $coord->basedir;

# write_script(name, text): a pgbench script file.
sub write_script
{
	my ($name, $text) = @_;
	open my $fh, '>', "$dir/$name" or die $!;
	print $fh $text;
	close $fh;
	return "$dir/$name";
}

# Locks are taken in one order (an account of 1-100 first, then one of
# 101-200, one at a time): the sessions cannot deadlock across shards.
my $savepoint = write_script('savepoint.sql', q{
\set a random(1, 100)
\set b random(101, 200)
\set c random(101, 200)
BEGIN;
UPDATE acc SET bal = bal - 1 WHERE id = :a;
SAVEPOINT s;
UPDATE acc SET bal = bal + 1000 WHERE id = :c;
ROLLBACK TO SAVEPOINT s;
UPDATE acc SET bal = bal + 1 WHERE id = :b;
INSERT INTO ledger VALUES ('savepoint', :a, :b, 0);
COMMIT;
});
my $catching = write_script('catching.sql', q{
\set a random(1, 100)
\set b random(101, 200)
\set c random(101, 200)
SELECT transfer_catching(:a, :b, :c);
});
my $bulk = write_script('bulk.sql', q{
\set a random(1, 100)
\set b random(101, 200)
BEGIN;
INSERT INTO events SELECT nextval('keys'), :client_id, g FROM generate_series(1, 8) g;
UPDATE acc SET bal = bal - 1 WHERE id = :a;
SAVEPOINT s;
INSERT INTO events SELECT nextval('keys'), -2, g FROM generate_series(1, 8) g;
UPDATE acc SET bal = bal + 7 WHERE id = :b;
ROLLBACK TO SAVEPOINT s;
SAVEPOINT t;
UPDATE acc SET bal = bal + 1 WHERE id = :b;
RELEASE SAVEPOINT t;
INSERT INTO ledger VALUES ('bulk', :a, :b, 8);
COMMIT;
});
my $reader = write_script('reader.sql', q{
SELECT sum(bal) AS total FROM acc \gset
\if :total != 200000
INSERT INTO wrong VALUES (:total);
\endif
});

# start_pgbench(script, clients): a pgbench run of $seconds.
sub start_pgbench
{
	my ($script, $clients) = @_;
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start(
		[ 'pgbench', '-n', '-h', $coord->host, '-p', $coord->port,
		  '-c', $clients, '-T', $seconds, '-f', $script, 'postgres' ],
		'>', \$out, '2>', \$err);
	return { name => $script, h => $h, out => \$out, err => \$err };
}

my %script = (savepoint => $savepoint, catching => $catching, bulk => $bulk);
my @only = split /,/, ($ENV{AFDW_SP_ONLY} // 'savepoint,catching,bulk');
my @runs = ((map { start_pgbench($script{$_}, 3) } @only), start_pgbench($reader, 1));
$done{$_} = 0 for keys %script;
for my $run (@runs)
{
	$run->{h}->finish;
	my ($name) = $run->{name} =~ m{([^/]+)\.sql$};
	is($run->{h}->result(0), 0, "$name: pgbench ends without error")
	  or diag(${ $run->{out} } . ${ $run->{err} });
	($done{$name}) = ${ $run->{out} } =~ /number of transactions actually processed: (\d+)/;
	$done{$name} //= 0;
	cmp_ok($done{$name}, '>', 0, "$name: transactions ran ($done{$name})");
}

is($coord->safe_psql('postgres', 'SELECT count(*) FROM wrong'), '0',
	'no read saw a total other than 200000');
is($coord->safe_psql('postgres', q{
	SELECT k, (SELECT count(*) FROM ledger WHERE kind = k)
	  FROM unnest(ARRAY['bulk', 'catching', 'savepoint']) k ORDER BY k}),
	"bulk|$done{bulk}\ncatching|$done{catching}\nsavepoint|$done{savepoint}",
	'the ledger has one entry per committed transaction');
is($coord->safe_psql('postgres', 'SELECT sum(bal) FROM acc'), '200000',
	'the total is right');

# Each account's balance from the ledger against the shards' own rows.
my $expected = $coord->safe_psql('postgres', q{
	SELECT string_agg(id || ':' || bal, ',' ORDER BY id) FROM (
	  SELECT g AS id, 1000 - (SELECT count(*) FROM ledger WHERE a = g)
	                        + (SELECT count(*) FROM ledger WHERE b = g) AS bal
	    FROM generate_series(1, 200) g) s
});
my $actual = join ',', grep { $_ ne '' } map {
	$_->safe_psql('postgres', "SELECT string_agg(id || ':' || bal, ',' ORDER BY id) FROM acc")
} @shards;
is($actual, $expected, 'every account holds exactly what the ledger says');

# The bulk rows: each committed bulk transaction's 8, none of the rolled
# back ones (client -2) nor of the caught block's (client -1).
my ($kept, $lost) = (0, 0);
for my $node (@shards)
{
	my ($k, $l) = split /\|/, $node->safe_psql('postgres',
		'SELECT count(*) FILTER (WHERE client >= 0), count(*) FILTER (WHERE client < 0) FROM events');
	$kept += $k;
	$lost += $l;
}
is($kept, 8 * $done{bulk}, 'the shards hold the bulk rows of every committed transaction');
is($lost, 0, 'and none of those rolled back');
is($shards[2]->safe_psql('postgres', 'SELECT count(*) FROM marks'), '1',
	'the caught duplicate left nothing');

for my $s (@shards)
{
	ok($s->poll_query_until('postgres', 'SELECT count(*) = 0 FROM pg_prepared_xacts'),
		'nothing stays prepared on ' . $s->name);
}

done_testing();
