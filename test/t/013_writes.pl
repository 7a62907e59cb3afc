# test/t/013_writes.pl
#   Writes against four real shards: a bulk load streamed to all of them at
#   once, a constraint violation on one shard in the middle of it, reading
#   one's own writes with several partitions on one server, and many
#   sessions writing and reading at the same time.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $rows = 40000;

my @shards;
for my $i (1 .. 4)
{
	my $node = PostgreSQL::Test::Cluster->new("wshard$i");
	$node->init;
	$node->append_conf('postgresql.conf',
		"log_statement = 'all'\nlog_line_prefix = '%a|'\nlog_min_error_statement = 'panic'\n");
	# Writes to several shards commit with two-phase commit (auto); each of
	# the 16 pgbench sessions of part 4 may hold a prepared transaction on
	# every shard at once, so at least 16 (README: "Two-phase commit").
	$node->append_conf('postgresql.conf', "max_prepared_transactions = 20\n");
	$node->start;
	$node->safe_psql('postgres', q{
		CREATE TABLE events (a int PRIMARY KEY, b int, c text);
		CREATE TABLE d1 (a int PRIMARY KEY, b int, c text);
		CREATE TABLE d2 (LIKE d1 INCLUDING ALL);
		CREATE TABLE d3 (LIKE d1 INCLUDING ALL);
		CREATE TABLE d4 (LIKE d1 INCLUDING ALL);
	});
	push @shards, $node;
}

my $coord = PostgreSQL::Test::Cluster->new('wcoordinator');
$coord->init;
$coord->start;
$coord->safe_psql('postgres', q{
	CREATE EXTENSION async_fdw;
	CREATE TABLE events (a int, b int, c text) PARTITION BY HASH (a);
	CREATE TABLE d (a int, b int, c text) PARTITION BY HASH (a);
	CREATE SEQUENCE keys START 1000000;
});
for my $i (1 .. 4)
{
	my $node = $shards[ $i - 1 ];
	my ($host, $port, $r) = ($node->host, $node->port, $i - 1);
	$coord->safe_psql('postgres', qq{
		CREATE SERVER shard$i FOREIGN DATA WRAPPER async_fdw
		  OPTIONS (host '$host', port '$port', dbname 'postgres');
		CREATE USER MAPPING FOR CURRENT_USER SERVER shard$i;
		CREATE FOREIGN TABLE events_$i PARTITION OF events
		  FOR VALUES WITH (MODULUS 4, REMAINDER $r)
		  SERVER shard$i OPTIONS (table_name 'events');
		-- d: four partitions on the first shard, one server object.
		CREATE FOREIGN TABLE d_$i PARTITION OF d
		  FOR VALUES WITH (MODULUS 4, REMAINDER $r)
		  SERVER shard1 OPTIONS (table_name 'd$i');
	});
}

# The rows to load, as a file the coordinator reads.
my $file = $coord->basedir . '/events.txt';
open my $fh, '>', $file or die $!;
print $fh join("\t", $_, $_ % 97, "event $_"), "\n" for 1 .. $rows;
close $fh;

sub shard_totals
{
	my ($table) = @_;
	return join ',', map {
		$_->safe_psql('postgres', "SELECT count(*) || ':' || coalesce(sum(a), 0) FROM $table")
	} @shards;
}

sub copies_logged
{
	my ($node, $from) = @_;
	my $log = slurp_file($node->logfile, $from);
	return scalar(() = $log =~ /COPY public\.events \(a, b, c\) FROM STDIN/g);
}

# 1. COPY into the partitioned table: each shard gets its rows through one
# COPY FROM STDIN of its own, all of them streaming at once.
my @log_at = map { -s $_->logfile } @shards;
$coord->safe_psql('postgres', "COPY events FROM '$file'");
my $expected_sum = $rows * ($rows + 1) / 2;
is($coord->safe_psql('postgres', 'SELECT count(*), sum(a) FROM events'),
	"$rows|$expected_sum", 'COPY loaded every row');
my @counts = map { $_->safe_psql('postgres', 'SELECT count(*) FROM events') } @shards;
ok((grep { $_ > 0 } @counts) == 4, "every shard has rows (@counts)");
for my $i (0 .. 3)
{
	is(copies_logged($shards[$i], $log_at[$i]), 1,
		'shard ' . ($i + 1) . ' got its rows in one COPY FROM STDIN');
}

# 2. A constraint violation on one shard in the middle of a 4-shard COPY:
# the statement fails with the shard's error, and no shard keeps any row
# of it.
my $part = $coord->safe_psql('postgres',
	'SELECT tableoid::regclass FROM events WHERE a = 20000');
my ($owner) = $part =~ /events_(\d)/;
$owner -= 1;
$_->safe_psql('postgres', 'TRUNCATE events') for @shards;
$shards[$owner]->safe_psql('postgres', "INSERT INTO events VALUES (20000, 0, 'already')");
my $before = shard_totals('events');
my ($rc, $out, $err) = $coord->psql('postgres',
	"\\set VERBOSITY verbose\nCOPY events FROM '$file'");
isnt($rc, 0, 'the COPY with a conflicting row fails');
like($err, qr/ERROR:  23505: duplicate key value violates unique constraint "events_pkey"/,
	'with the remote SQLSTATE and message');
like($err, qr/writing to foreign table "events_@{[$owner + 1]}"/,
	'naming the foreign table');
is(shard_totals('events'), $before, 'no shard keeps a row of the failed COPY');
is($coord->safe_psql('postgres', 'SELECT count(*) FROM pg_prepared_xacts'), '0',
	'nothing left behind');

# The same load succeeds once the conflict is gone.
$shards[$owner]->safe_psql('postgres', 'DELETE FROM events WHERE a = 20000');
$coord->safe_psql('postgres', "COPY events FROM '$file'");
is($coord->safe_psql('postgres', 'SELECT count(*), sum(a) FROM events'),
	"$rows|$expected_sum", 'the load succeeds afterwards');

# 3. Reading one's own writes: four partitions on one server, writes and
# reads interleaved in a transaction, a savepoint rolled back.
my $tx = $coord->safe_psql('postgres', q{
	BEGIN;
	INSERT INTO d SELECT g, 1, 'x' FROM generate_series(1, 1000) g;
	SELECT count(*), sum(a) FROM d;
	SAVEPOINT s;
	UPDATE d SET b = 2 WHERE a <= 500;
	INSERT INTO d SELECT g, 3, 'y' FROM generate_series(1001, 1100) g;
	SELECT count(*), sum(b) FROM d;
	ROLLBACK TO SAVEPOINT s;
	SELECT count(*), sum(b) FROM d;
	DELETE FROM d WHERE a > 900;
	SELECT count(*), sum(b) FROM d;
	COMMIT;
});
is($tx, "1000|500500\n1100|1800\n1000|1000\n900|900",
	'every read of the transaction sees its writes, and not those rolled back');
is($shards[0]->safe_psql('postgres',
		'SELECT (SELECT count(*) FROM d1) + (SELECT count(*) FROM d2) + (SELECT count(*) FROM d3) + (SELECT count(*) FROM d4)'),
	'900', 'the shard holds what was committed');

# 4. Sixteen sessions write and read at once: each transaction inserts
# rows into the four shards, reads them back (a wrong count is a division
# by zero) and commits.  No transaction fails, and the shards hold exactly
# the rows of all of them.
my $script = $coord->basedir . '/write.sql';
open my $sfh, '>', $script or die $!;
print $sfh <<'EOS';
BEGIN;
SELECT nextval('keys') AS k \gset
INSERT INTO events SELECT :k * 10 + g, 1, 'bench' FROM generate_series(0, 9) g;
SELECT 1 / (count(*) = 10)::int FROM events WHERE a BETWEEN :k * 10 AND :k * 10 + 9;
UPDATE events SET b = 2 WHERE a = :k * 10;
COMMIT;
EOS
close $sfh;
$_->safe_psql('postgres', 'TRUNCATE events') for @shards;
my ($pout, $perr) = ('', '');
my $ok = IPC::Run::run(
	[ 'pgbench', '-n', '-h', $coord->host, '-p', $coord->port,
	  '-c', 16, '-j', 4, '-T', 5, '-f', $script, 'postgres' ],
	'>', \$pout, '2>', \$perr);
ok($ok, 'pgbench: 16 writing sessions end without error') or diag($perr);
my ($done) = $pout =~ /number of transactions actually processed: (\d+)/;
like($pout, qr/number of failed transactions: 0/, 'no failed transaction')
  if $pout =~ /failed transactions/;
ok($done > 0, "transactions ran ($done)");
my $total = 0;
$total += $_->safe_psql('postgres', 'SELECT count(*) FROM events') for @shards;
is($total, $done * 10, 'the shards hold the rows of every committed transaction');
my $twos = 0;
$twos += $_->safe_psql('postgres', 'SELECT count(*) FROM events WHERE b = 2') for @shards;
is($twos, $done, 'and each transaction\'s update');

# 5. COMMIT goes to every written shard at once: a deferred trigger on each
# shard holds its commit for half a second and notes when; the four
# intervals overlap (each began before any ended).
for my $node (@shards)
{
	$node->safe_psql('postgres', q{
		CREATE TABLE commit_log (started timestamptz, ended timestamptz);
		CREATE FUNCTION slow_commit() RETURNS trigger LANGUAGE plpgsql AS $$
		DECLARE
		  t0 timestamptz := clock_timestamp();
		BEGIN
		  PERFORM pg_sleep(0.5);
		  INSERT INTO public.commit_log VALUES (t0, clock_timestamp());
		  RETURN NULL;
		END
		$$;
		CREATE CONSTRAINT TRIGGER events_commit AFTER INSERT ON events
		  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION slow_commit();
	});
}
# Rows written to the partitions themselves must belong there (the
# partition constraint holds): two negative keys of each partition.
my @key_of = map {
	[ split /\n/, $coord->safe_psql('postgres', qq{
		SELECT g FROM generate_series(-1, -1000, -1) g
		 WHERE satisfies_hash_partition('events'::regclass, 4, $_, g)
		 ORDER BY g DESC LIMIT 2}) ]
} 0 .. 3;
$coord->safe_psql('postgres', qq{
	BEGIN;
	INSERT INTO events_1 VALUES ($key_of[0][0], 0, 'c');
	INSERT INTO events_2 VALUES ($key_of[1][0], 0, 'c');
	INSERT INTO events_3 VALUES ($key_of[2][0], 0, 'c');
	INSERT INTO events_4 VALUES ($key_of[3][0], 0, 'c');
	COMMIT;
});
my @intervals = map {
	[ split /\|/, $_->safe_psql('postgres',
		"SELECT extract(epoch FROM started), extract(epoch FROM ended) FROM commit_log") ]
} @shards;
my $last_start = (sort { $b <=> $a } map { $_->[0] } @intervals)[0];
my $first_end = (sort { $a <=> $b } map { $_->[1] } @intervals)[0];
ok($last_start < $first_end,
	'the four remote commits ran at the same time (every one began before any ended)');

# A deferred constraint failing at one shard's commit fails the local
# COMMIT with the remote error.
$shards[2]->safe_psql('postgres', q{
	CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$
	BEGIN
	  RAISE EXCEPTION 'shard 3 refuses the commit' USING ERRCODE = 'check_violation';
	END
	$$;
	CREATE CONSTRAINT TRIGGER events_refuse AFTER INSERT ON events
	  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION refuse();
});
($rc, $out, $err) = $coord->psql('postgres', qq{
	\\set VERBOSITY verbose
	BEGIN;
	INSERT INTO events_3 VALUES ($key_of[2][1], 0, 'c');
	COMMIT;
});
like($err, qr/ERROR:  23514: shard 3 refuses the commit/,
	'a remote commit failure fails the local commit with the remote error');
is($shards[2]->safe_psql('postgres', "SELECT count(*) FROM events WHERE a = $key_of[2][1]"), '0',
	'and its rows are not there');

done_testing();
