# test/t/002_async_cancel.pl
#   Asynchronous scans over four shards: the same rows as synchronous
#   scans, and cancellation of every busy remote query on every
#   connection (statement_timeout, query cancel, an error in one scan) in
#   each fetch mode.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my @shards;
for my $i (1 .. 4)
{
	my $node = PostgreSQL::Test::Cluster->new("shard$i");
	$node->init;
	$node->start;
	# Two tables per shard, and a view whose rows come slowly.
	$node->safe_psql('postgres', qq{
		CREATE TABLE t_a (id int, v text);
		CREATE TABLE t_b (id int, v text);
		INSERT INTO t_a SELECT g, 'a' || g FROM generate_series(($i - 1) * 2000 + 1, ($i - 1) * 2000 + 1000) g;
		INSERT INTO t_b SELECT g, 'b' || g FROM generate_series(($i - 1) * 2000 + 1001, $i * 2000) g;
		CREATE FUNCTION slow(int) RETURNS int LANGUAGE sql AS 'SELECT \$1 FROM pg_sleep(0.2)';
		CREATE VIEW slow_rows AS SELECT slow(g) AS id FROM generate_series(1, 300) g;
		CREATE FUNCTION fail_at(int) RETURNS int LANGUAGE plpgsql AS
		  'BEGIN IF \$1 = 3 THEN RAISE EXCEPTION ''shard $i gives up''; END IF; PERFORM pg_sleep(0.1); RETURN \$1; END';
		CREATE VIEW failing AS SELECT fail_at(g) AS id FROM generate_series(1, 300) g;
	});
	push @shards, $node;
}

my $coord = PostgreSQL::Test::Cluster->new('coordinator');
$coord->init;
$coord->start;
$coord->safe_psql('postgres', q{
	CREATE EXTENSION async_fdw;
	CREATE TABLE items (id int, v text) PARTITION BY RANGE (id);
	CREATE TABLE slow (id int, shard int) PARTITION BY LIST (shard);
	CREATE TABLE failing (id int, shard int) PARTITION BY LIST (shard);
});
for my $i (1 .. 4)
{
	my ($host, $port) = ($shards[ $i - 1 ]->host, $shards[ $i - 1 ]->port);
	my $lo = ($i - 1) * 2000 + 1;
	my $mid = $lo + 1000;
	my $hi = $i * 2000 + 1;
	# The failing view is on shard 4 only; the others are slow.
	my $failing_table = $i == 4 ? 'failing' : 'slow_rows';
	$coord->safe_psql('postgres', qq{
		CREATE SERVER s$i FOREIGN DATA WRAPPER async_fdw
		  OPTIONS (host '$host', port '$port', dbname 'postgres', fetch_size '50');
		CREATE USER MAPPING FOR CURRENT_USER SERVER s$i;
		CREATE FOREIGN TABLE items_a$i PARTITION OF items FOR VALUES FROM ($lo) TO ($mid)
		  SERVER s$i OPTIONS (table_name 't_a');
		CREATE FOREIGN TABLE items_b$i PARTITION OF items FOR VALUES FROM ($mid) TO ($hi)
		  SERVER s$i OPTIONS (table_name 't_b');
		CREATE FOREIGN TABLE slow$i (id int, shard int) SERVER s$i OPTIONS (table_name 'slow_rows');
		ALTER TABLE slow ATTACH PARTITION slow$i FOR VALUES IN ($i);
		CREATE FOREIGN TABLE failing$i (id int, shard int) SERVER s$i OPTIONS (table_name '$failing_table');
		ALTER TABLE failing ATTACH PARTITION failing$i FOR VALUES IN ($i);
	});
}

# Async and sync plans give the same rows: eight partitions, two per shard.
my $q = 'SELECT count(*), sum(id), min(v), max(v), count(DISTINCT v) FROM items';
like($coord->safe_psql('postgres', "EXPLAIN (COSTS OFF) SELECT * FROM items"),
	qr/Async Foreign Scan on items_b4/, 'the plan is asynchronous');
my $async = $coord->safe_psql('postgres', $q);
my $sync = $coord->safe_psql('postgres', "SET enable_async_append = off; $q");
is($async, '8000|32004000|a1|b8000|8000', 'async rows are right');
is($sync, $async, 'sync and async plans return the same rows');

# remote_busy(): how many remote queries still run on the shards.
sub remote_busy
{
	my $n = 0;
	for my $node (@shards)
	{
		$n += $node->safe_psql('postgres',
			"SELECT count(*) FROM pg_stat_activity WHERE application_name = 'async_fdw' AND state = 'active'");
	}
	return $n;
}

# wait_for(CODE, SECONDS): call CODE every 0.1 s until it returns true or
# SECONDS have passed; returns its last result.  Polling replaces fixed
# sleeps, so a test waits no longer than the condition needs.
sub wait_for
{
	my ($cond, $seconds) = @_;
	my $deadline = time + $seconds;
	my $ok;
	until (($ok = $cond->()) || time >= $deadline)
	{
		usleep(100_000);
	}
	return $ok;
}

# How long a cancelled remote query may take to leave pg_stat_activity's
# 'active' state.  One left running stays active much longer: a cursor FETCH
# of 50 rows of slow_rows takes 10 s, a stream of its 300 rows 60 s.  (The
# fixed sleep this replaces waited 1 s; the deadline leaves room for a busy
# machine without letting an uncancelled FETCH end first most of the time.)
my $cancel_deadline = 2;

my $session = $coord->background_psql('postgres', on_error_stop => 0);
my ($start, $elapsed, $out);
# Each fetch mode in turn; auto is the default, without the option.
for my $mode ('stream', 'cursor', 'auto')
{
	$coord->safe_psql('postgres',
		join('', map { "ALTER SERVER s$_ OPTIONS (ADD fetch_mode '$mode');" } 1 .. 4))
	  unless $mode eq 'auto';
	# The plan shows the mode of each shard's scan; full scans stream in
	# auto mode.
	my $want = $mode eq 'auto' ? 'stream' : $mode;
	my @modes = $coord->safe_psql('postgres',
		'EXPLAIN (VERBOSE, COSTS OFF) SELECT count(*) FROM slow') =~ /Fetch Mode: (\w+)/g;
	is("@modes", "$want $want $want $want", "$mode: the four scans use fetch mode $want");
	$session->{stderr} = '';

	# statement_timeout cancels the remote queries on all four shards at once.
	$start = time;
	$out = $session->query("SET statement_timeout = '1s'; SELECT count(*) FROM slow");
	$elapsed = time - $start;
	like($session->{stderr}, qr/canceling statement due to statement timeout/,
		"$mode: statement_timeout ends a four-shard scan of slow rows");
	cmp_ok($elapsed, '<', 30, "$mode: the timeout takes effect without waiting for the shards");
	ok(wait_for(sub { remote_busy() == 0 }, $cancel_deadline),
		"$mode: no remote query still runs shortly after the timeout");
	$session->{stderr} = '';
	is($session->query_safe("RESET statement_timeout; SELECT count(*) FROM items"),
		'8000', "$mode: the pooled connections are usable afterwards");

	# A query cancel from another session does the same.
	my $pid = $session->query_safe('SELECT pg_backend_pid()');
	$session->query_until(qr/started/, "\\echo started\nSELECT count(*) FROM slow;\n");
	# Wait until the shards are at work, then cancel.
	$coord->poll_query_until('postgres',
		"SELECT count(*) > 0 FROM pg_stat_activity WHERE pid = $pid AND state = 'active'");
	ok(wait_for(sub { remote_busy() >= 4 }, $PostgreSQL::Test::Utils::timeout_default),
		"$mode: the shards run the scan concurrently");
	$coord->safe_psql('postgres', "SELECT pg_cancel_backend($pid)");
	$out = $session->query('SELECT 1');
	ok(wait_for(sub { remote_busy() == 0 }, $cancel_deadline),
		"$mode: a cancelled scan leaves no remote query running");
	$session->{stderr} = '';
	is($session->query_safe('SELECT count(*) FROM items'), '8000',
		"$mode: the pooled connections are usable after a cancel");

	# An error in one shard's scan cancels the scans of the others.
	$start = time;
	$out = $session->query('SELECT count(*) FROM failing');
	$elapsed = time - $start;
	like($session->{stderr}, qr/shard 4 gives up/, "$mode: the remote error is reported");
	cmp_ok($elapsed, '<', 30, "$mode: the error ends the query without waiting for the other shards");
	ok(wait_for(sub { remote_busy() == 0 }, $cancel_deadline),
		"$mode: no remote query still runs after an error in one scan");
	$session->{stderr} = '';
	is($session->query_safe('SELECT count(*) FROM items'), '8000',
		"$mode: the pooled connections are usable after the error");

	$coord->safe_psql('postgres',
		join('', map { "ALTER SERVER s$_ OPTIONS (DROP fetch_mode);" } 1 .. 4))
	  unless $mode eq 'auto';
}
$session->quit;

done_testing();
