# test/t/017_join_rowmarks.pl
#   A remote join under row marks when the executor rechecks a row
#   (EvalPlanQual).  Session 1 changes rows of a local table and holds its
#   transaction; session 2 locks them with SELECT ... FOR UPDATE OF the
#   local table, joined with a remote join of two foreign tables, and
#   waits.  Once session 1 commits, session 2 rechecks the changed rows:
#   the remote join's row is made again by its local join plan, and the
#   result must be the one the same query gives over local copies of the
#   foreign tables (an inner and an outer remote join, and one with a
#   condition checked locally).  Then the remote
#   rows themselves: FOR UPDATE OF a foreign table of the join waits on
#   the remote lock and, the remote transaction being REPEATABLE READ,
#   fails with a serialization error once the other commits (as
#   postgres_fdw and a scan of one foreign table do).

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $shard = PostgreSQL::Test::Cluster->new('rmshard');
$shard->init;
$shard->append_conf('postgresql.conf', "log_statement = 'all'\n");
$shard->start;
$shard->safe_psql('postgres', q{
	CREATE TABLE a (id int PRIMARY KEY, x int, t text);
	CREATE TABLE b (id int PRIMARY KEY, y int, u text);
	INSERT INTO a SELECT g, g % 7, 'a' || g FROM generate_series(1, 100) g;
	INSERT INTO b SELECT g, g % 5, 'b' || g FROM generate_series(1, 100, 2) g;
});

my $coord = PostgreSQL::Test::Cluster->new('rmcoord');
$coord->init;
$coord->start;
my ($host, $port) = ($shard->host, $shard->port);
$coord->safe_psql('postgres', qq{
	CREATE EXTENSION async_fdw;
	CREATE SERVER s FOREIGN DATA WRAPPER async_fdw
	  OPTIONS (host '$host', port '$port', dbname 'postgres');
	CREATE USER MAPPING FOR CURRENT_USER SERVER s;
	CREATE FOREIGN TABLE fa (id int, x int, t text) SERVER s OPTIONS (table_name 'a');
	CREATE FOREIGN TABLE fb (id int, y int, u text) SERVER s OPTIONS (table_name 'b');
	ANALYZE fa; ANALYZE fb;
	-- Local copies of the foreign tables, for the expected results.
	CREATE TABLE la AS SELECT * FROM fa;
	CREATE TABLE lb AS SELECT * FROM fb;
	ANALYZE la; ANALYZE lb;
	CREATE TABLE loc (id int PRIMARY KEY, z int);
});

my $inner = q{SELECT loc.id, loc.z, a.t, b.u FROM loc JOIN %A a ON loc.id = a.id
	JOIN %B b ON a.id = b.id WHERE loc.id < 10 ORDER BY loc.id FOR UPDATE OF loc};
my $outer = q{SELECT loc.id, loc.z, a.t, b.u FROM loc JOIN %A a ON loc.id = a.id
	LEFT JOIN %B b ON a.id = b.id WHERE loc.id < 10 ORDER BY loc.id FOR UPDATE OF loc};

sub tables
{
	my ($sql, $a, $b) = @_;
	$sql =~ s/%A/$a/;
	$sql =~ s/%B/$b/;
	return $sql;
}

# The plan: the foreign tables join remotely, with a local join plan under
# the Foreign Scan for rechecks.
for my $q ([ 'inner', $inner ], [ 'outer', $outer ])
{
	my $plan = $coord->safe_psql('postgres',
		'EXPLAIN (COSTS OFF) ' . tables($q->[1], 'fa', 'fb'));
	like($plan, qr/Foreign Scan\n\s+Relations: fa a (INNER|LEFT) JOIN fb b\n\s+->  \w+ (Left )?Join/,
		"$q->[0] join: a remote join, its local join plan under it");
}

# Run QUERY in session 2 while session 1 holds its changes to loc; return
# session 2's rows once session 1 committed.
sub recheck
{
	my ($query) = @_;
	$coord->safe_psql('postgres', q{
		TRUNCATE loc;
		INSERT INTO loc SELECT g, g FROM generate_series(1, 30) g;
	});
	my $s1 = $coord->background_psql('postgres');
	my $s2 = $coord->background_psql('postgres');
	my $pid2 = $s2->query_safe('SELECT pg_backend_pid()');
	$s1->query_safe(q{BEGIN;
		UPDATE loc SET z = z + 1000 WHERE id IN (3, 4);
		UPDATE loc SET id = id + 100 WHERE id = 5;});
	$s2->query_until(qr/started/, "\\echo started\n$query;\n");
	ok( $coord->poll_query_until('postgres',
			"SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = $pid2"),
		'session 2 waits for the rows session 1 changed');
	$s1->query_safe('COMMIT');
	my ($rows, $err) = $s2->query('');
	$s1->quit;
	$s2->quit;
	return $rows;
}

for my $q ([ 'inner', $inner ], [ 'outer', $outer ])
{
	my $want = recheck(tables($q->[1], 'la', 'lb'));
	my $got = recheck(tables($q->[1], 'fa', 'fb'));
	is($got, $want, "$q->[0] remote join: the rechecked rows are those of local tables");
	like($got, qr/^3\|1003\|a3\|b3$/m, "$q->[0] join: a changed row comes with its new values");
	unlike($got, qr/^5\|/m, "$q->[0] join: a row whose key changed is gone");
}
like(recheck(tables($outer, 'fa', 'fb')), qr/^4\|1004\|a4\|$/m,
	'outer join: a row without a match is rechecked with nulls');

# A join condition that cannot be sent: the Foreign Scan checks it on the
# joined rows, rechecked ones too (its local join plan leaves it to the
# scan).  Row 3, changed by session 1 and rechecked, still fails it.
$coord->safe_psql('postgres', q{
	CREATE FUNCTION sum_not_6(int, int) RETURNS boolean LANGUAGE plpgsql
	  IMMUTABLE AS 'BEGIN RETURN $1 + $2 <> 6; END';
});
my $filtered = q{SELECT loc.id, loc.z, a.t, b.u FROM loc JOIN %A a ON loc.id = a.id
	JOIN %B b ON a.id = b.id AND sum_not_6(a.id, b.id) WHERE loc.id < 10
	ORDER BY loc.id FOR UPDATE OF loc};
my $fplan = $coord->safe_psql('postgres',
	'EXPLAIN (COSTS OFF) ' . tables($filtered, 'fa', 'fb'));
like($fplan, qr/Foreign Scan\n\s+Filter: sum_not_6\((a\.)?id, (b\.)?id\)\n\s+Relations: fa a INNER JOIN fb b\n/,
	'a condition checked locally: the join is remote, with a Filter');
my $fwant = recheck(tables($filtered, 'la', 'lb'));
my $fgot = recheck(tables($filtered, 'fa', 'fb'));
is($fgot, $fwant, 'with a local condition: the rechecked rows are those of local tables');
unlike($fgot, qr/^3\|/m, 'a rechecked row that fails the local condition is dropped');
like($fgot, qr/^1\|1\|a1\|b1$/m, 'a row that passes it comes');

# The remote rows: FOR UPDATE OF a foreign table of the join waits for the
# remote lock of session 1's UPDATE, then the REPEATABLE READ remote
# transaction cannot lock the changed row.
my $s1 = $coord->background_psql('postgres');
my $s2 = $coord->background_psql('postgres', on_error_stop => 0);
$s1->query_safe("BEGIN; UPDATE fa SET t = 'new' WHERE id = 3;");
my $join_lock = q{SELECT a.id, a.t, b.u FROM fa a JOIN fb b ON a.id = b.id
	WHERE a.id < 10 ORDER BY a.id FOR UPDATE OF a};
like($coord->safe_psql('postgres', "EXPLAIN (VERBOSE, COSTS OFF) $join_lock"),
	qr/Remote SQL: SELECT .* FOR UPDATE OF r1\n/, 'the remote join locks a\'s rows');
$s2->query_until(qr/started/, "\\echo started\n$join_lock;\n");
ok( $shard->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity
		  WHERE application_name = 'async_fdw' AND wait_event_type = 'Lock'
		    AND query LIKE '%FOR UPDATE OF r1%'"),
	'session 2 waits on the remote row lock');
$s1->query_safe('COMMIT');
$s2->query('');
like($s2->{stderr}, qr/could not serialize access due to concurrent update/,
	'then fails as the remote REPEATABLE READ transaction must');
$s2->{stderr} = '';
is($s2->query_safe($join_lock), "1|a1|b1\n3|new|b3\n5|a5|b5\n7|a7|b7\n9|a9|b9",
	'the next statement locks and returns the new row');
$s1->quit;
$s2->quit;

# The scans of the local join plans sent nothing: the shard saw no SELECT
# of one table (their queries) from the coordinator.
my $log = slurp_file($shard->logfile);
unlike($log, qr/FROM public\.a (WHERE|FOR)/, 'no scan of a alone was sent');
like($log, qr/FROM \(public\.a r\d INNER JOIN public\.b r\d/, 'the joins were sent');

done_testing();
