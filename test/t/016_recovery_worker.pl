# test/t/016_recovery_worker.pl
#   The recovery worker of two-phase commit: with shared_preload_libraries =
#   'async_fdw', a coordinator killed after its local commit, before the
#   COMMIT PREPAREDs, gets both remote transactions committed by the worker
#   once it is up again, and one killed before its local commit gets them
#   rolled back; async_fdw.recovery_interval = 0 stops the worker (by reload
#   or at start) and another value (by reload) starts it again; a database
#   whose recovery fails does not stop the others', nor does a server that
#   never answers stop the other servers'.

use strict;
use warnings;

use IO::Socket::INET;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my @shards;
for my $i (1 .. 2)
{
	my $node = PostgreSQL::Test::Cluster->new("rshard$i");
	$node->init;
	$node->append_conf('postgresql.conf', "max_prepared_transactions = 10\n");
	$node->start;
	$node->safe_psql('postgres', 'CREATE TABLE t (a int PRIMARY KEY, b text)');
	push @shards, $node;
}

my $coord = PostgreSQL::Test::Cluster->new('rcoordinator');
$coord->init;
$coord->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'async_fdw'
async_fdw.recovery_interval = 1000
});
$coord->start;
$coord->safe_psql('postgres', q{
	CREATE EXTENSION async_fdw;
	CREATE TABLE t (a int, b text) PARTITION BY RANGE (a);
});
for my $i (1 .. 2)
{
	my $node = $shards[ $i - 1 ];
	my ($host, $port) = ($node->host, $node->port);
	my ($from, $to) = (($i - 1) * 1000, $i * 1000);
	$coord->safe_psql('postgres', qq{
		CREATE SERVER shard$i FOREIGN DATA WRAPPER async_fdw
		  OPTIONS (host '$host', port '$port', dbname 'postgres');
		CREATE USER MAPPING FOR CURRENT_USER SERVER shard$i;
		CREATE FOREIGN TABLE t$i PARTITION OF t FOR VALUES FROM ($from) TO ($to)
		  SERVER shard$i OPTIONS (table_name 't');
	});
}

# A database whose recovery always fails (its server is down), and one
# without async_fdw: the worker must go on with the others.
my $dead_port = PostgreSQL::Test::Cluster::get_free_port();
$coord->safe_psql('postgres', 'CREATE DATABASE broken');
$coord->safe_psql('postgres', 'CREATE DATABASE plain');
$coord->safe_psql('broken', qq{
	CREATE EXTENSION async_fdw;
	CREATE SERVER dead FOREIGN DATA WRAPPER async_fdw
	  OPTIONS (host '127.0.0.1', port '$dead_port', dbname 'postgres');
	CREATE USER MAPPING FOR CURRENT_USER SERVER dead;
});

is($coord->safe_psql('postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'async_fdw recovery launcher'"),
	'1', 'the launcher runs');
my $launcher_pid = $coord->safe_psql('postgres',
	"SELECT pid FROM pg_stat_activity WHERE backend_type = 'async_fdw recovery launcher'");

# The remote prepared transactions of each shard.
sub prepared
{
	return join ',', map {
		$_->safe_psql('postgres', "SELECT count(*) FROM pg_prepared_xacts WHERE gid LIKE 'afdw\\_%'")
	} @shards;
}

# The rows of key A and A + 1000, one on each shard.
sub rows_of
{
	my ($a) = @_;
	my $b = $a + 1000;
	return join ',', map {
		$_->safe_psql('postgres', "SELECT count(*) FROM t WHERE a IN ($a, $b)")
	} @shards;
}

# Start, in the background, a transaction writing to both shards that
# pauses at step PAUSE of its two-phase commit; wait until both shards hold
# its prepared transaction.
sub start_in_doubt
{
	my ($pause, $a) = @_;
	my $b = $a + 1000;
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start(
		[
			'psql', '-X', '-d', $coord->connstr('postgres'),
			'-c', "SET async_fdw.debug_two_phase_pause = '$pause'",
			'-c', 'BEGIN',
			'-c', "INSERT INTO t VALUES ($a, 'x'), ($b, 'y')",
			'-c', 'COMMIT'
		],
		'>', \$out, '2>', \$err);
	foreach my $shard (@shards)
	{
		$shard->poll_query_until('postgres',
			"SELECT count(*) = 1 FROM pg_prepared_xacts WHERE gid LIKE 'afdw\\_%'")
		  or die "no prepared transaction on " . $shard->name;
	}
	return $h;
}

# Wait until the worker finished everything: no prepared transaction on
# either shard, no record left.
sub wait_recovered
{
	my ($what) = @_;
	foreach my $shard (@shards)
	{
		ok( $shard->poll_query_until('postgres',
				"SELECT count(*) = 0 FROM pg_prepared_xacts WHERE gid LIKE 'afdw\\_%'"),
			"$what: nothing left prepared on " . $shard->name);
	}
	ok($coord->poll_query_until('postgres', 'SELECT count(*) = 0 FROM async_fdw_prepared_xacts'),
		"$what: no record left");
}

# 1. Interval 0 by reload: a transaction in doubt stays so.  Then the
# coordinator dies after its local commit, before any COMMIT PREPARED, and
# starts again with the worker on: it commits both.
$coord->append_conf('postgresql.conf', "async_fdw.recovery_interval = 0\n");
$coord->reload;
$coord->poll_query_until('postgres', "SELECT current_setting('async_fdw.recovery_interval') = '0'");
my $h = start_in_doubt('before_commit_prepared', 1);
ok($coord->poll_query_until('postgres', 'SELECT count(*) = 2 FROM async_fdw_prepared_xacts'),
	'the local transaction committed its records');
sleep 3;
is(prepared(), '1,1', 'interval 0: the worker leaves the transaction in doubt');
is($coord->safe_psql('postgres', 'SELECT count(*) FROM async_fdw_prepared_xacts'), '2',
	'interval 0: the records are kept');
$coord->stop('immediate');
$h->finish;
$coord->append_conf('postgresql.conf', "async_fdw.recovery_interval = 1000\n");
my $log_from = -s $coord->logfile;
$coord->start;
wait_recovered('committed locally');
is(rows_of(1), '1,1', 'the worker committed the rows on both shards');
like(slurp_file($coord->logfile, $log_from),
	qr/recovery of the prepared remote transactions of database "postgres": 2 committed, 0 rolled back/,
	'the worker logs what it committed');
like(slurp_file($coord->logfile, $log_from),
	qr/recovery of the prepared remote transactions of database "broken": 0 committed, 0 rolled back, 1 not finished/,
	'the recovery of database broken reports its unreachable server');

# 2. The coordinator dies after the remote PREPAREs, before its local
# commit: the worker rolls both back.  While the local transaction is in
# progress, it leaves them.
$launcher_pid = $coord->safe_psql('postgres',
	"SELECT pid FROM pg_stat_activity WHERE backend_type = 'async_fdw recovery launcher'");
$h = start_in_doubt('after_prepare', 2);
sleep 3;
is(prepared(), '1,1', 'a transaction in progress is left prepared');
is($coord->safe_psql('postgres',
		"SELECT pid FROM pg_stat_activity WHERE backend_type = 'async_fdw recovery launcher'"),
	$launcher_pid, 'the launcher survives the failures of database broken');
$coord->stop('immediate');
$h->finish;
$log_from = -s $coord->logfile;
$coord->start;
wait_recovered('aborted locally');
is(rows_of(2), '0,0', 'the worker rolled the rows back on both shards');
like(slurp_file($coord->logfile, $log_from),
	qr/database "postgres": 0 committed, 2 rolled back/,
	'the worker logs what it rolled back');

# 3. A coordinator that starts with the interval at 0 leaves a transaction
# in doubt; a reload to another interval gets it committed.  (The backend
# that paused is gone: a reload would wake it from its pause.)
$coord->append_conf('postgresql.conf', "async_fdw.recovery_interval = 0\n");
$coord->reload;
$coord->poll_query_until('postgres', "SELECT current_setting('async_fdw.recovery_interval') = '0'");
$h = start_in_doubt('before_commit_prepared', 3);
ok($coord->poll_query_until('postgres', 'SELECT count(*) = 2 FROM async_fdw_prepared_xacts'),
	'the local transaction committed its records again');
$coord->stop('immediate');
$h->finish;
$coord->start;
sleep 3;
is(prepared(), '1,1', 'started with interval 0: nothing is recovered');
$log_from = -s $coord->logfile;
$coord->append_conf('postgresql.conf', "async_fdw.recovery_interval = 500\n");
$coord->reload;
wait_recovered('after the reload');
is(rows_of(3), '1,1', 'the worker, on again, committed the rows');
like(slurp_file($coord->logfile, $log_from),
	qr/database "postgres": 2 committed, 0 rolled back/,
	'the worker, on again, logs what it committed');

# 4. A server that accepts connections and never answers (no
# connect_timeout): the worker gives it up after its time limit, each round,
# and recovers the other servers of the database all the same.  Its name
# comes first: before the limit, the worker waited on it for good.
my $silent = IO::Socket::INET->new(
	LocalAddr => '127.0.0.1',
	LocalPort => 0,
	Listen => 64,
	ReuseAddr => 1) or die "listen: $!";
my $silent_port = $silent->sockport;
$coord->safe_psql('postgres', qq{
	CREATE SERVER a_silent FOREIGN DATA WRAPPER async_fdw
	  OPTIONS (host '127.0.0.1', port '$silent_port', dbname 'postgres');
	CREATE USER MAPPING FOR CURRENT_USER SERVER a_silent;
});
$h = start_in_doubt('before_commit_prepared', 4);
ok($coord->poll_query_until('postgres', 'SELECT count(*) = 2 FROM async_fdw_prepared_xacts'),
	'silent server: the local transaction committed its records');
$coord->stop('immediate');
$h->finish;
$log_from = -s $coord->logfile;
$coord->start;
wait_recovered('with a silent server');
is(rows_of(4), '1,1', 'the worker committed the rows past the silent server');
like(slurp_file($coord->logfile, $log_from),
	qr/database "postgres": 2 committed, 0 rolled back, 1 not finished/,
	'the worker logs the silent server as not finished');
$coord->safe_psql('postgres', 'DROP SERVER a_silent CASCADE');
close $silent;

done_testing();
