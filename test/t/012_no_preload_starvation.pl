# test/t/012_no_preload_starvation.pl
#   Without preloading, a session's first connection is not starved by the
#   further (optional) connections of other sessions.  A shard with room
#   for 8 clients is filled by 2 sessions that each keep 4 connections to
#   scan 4 partitions: a new session's first query still succeeds, while
#   they loop (they give their further connections back at the end of a
#   transaction and open none while a first connection waits), and when one
#   of them commits a transaction that held 4.  A first connection that
#   finds no room waits a few seconds, then fails as with postgres_fdw;
#   statement_timeout and cancel end the wait with their usual errors, and
#   the wait leaves nothing behind.

use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

# A shard with room for 8 clients, all counted.
my $shard = PostgreSQL::Test::Cluster->new('shard');
$shard->init;
$shard->append_conf('postgresql.conf',
	"max_connections = 8\nsuperuser_reserved_connections = 0");
$shard->start;
$shard->safe_psql('postgres', join("\n", map {
	"CREATE TABLE t$_ (part int, id int);
	 INSERT INTO t$_ SELECT $_, g FROM generate_series(1, 1000) g;"
} 1 .. 4));

# A coordinator without async_fdw in shared_preload_libraries: no budget.
my $coord = PostgreSQL::Test::Cluster->new('coordinator');
$coord->init;
$coord->start;
my ($host, $port) = ($shard->host, $shard->port);
$coord->safe_psql('postgres', qq{
	CREATE EXTENSION async_fdw;
	CREATE SERVER s FOREIGN DATA WRAPPER async_fdw
	  OPTIONS (host '$host', port '$port', dbname 'postgres');
	CREATE USER MAPPING FOR CURRENT_USER SERVER s;
	CREATE TABLE p (part int, id int) PARTITION BY LIST (part);
} . join("\n", map {
	"CREATE FOREIGN TABLE p$_ PARTITION OF p FOR VALUES IN ($_) SERVER s
	   OPTIONS (schema_name 'public', table_name 't$_');"
} 1 .. 4));
is($coord->safe_psql('postgres',
	"SELECT held IS NULL FROM async_fdw_connection_budget() WHERE server_name = 's'"),
	't', 'not preloaded: no budget');

# The scan every session runs; a wrong result is a division by zero.
my $scan = 'SELECT 1 / (count(*) = 4000 AND sum(id) = 2002000)::int FROM p';

# poll_coord(sql): true once SQL returns t on the coordinator, within 10 s
# (a waiter that gave up early is not waited for long).
sub poll_coord
{
	my ($sql) = @_;
	for (1 .. 200)
	{
		return 1 if $coord->safe_psql('postgres', $sql) eq 't';
		usleep(50_000);
	}
	return 0;
}

# timed_scan(): a new session's scan; returns (stdout, stderr, seconds).
sub timed_scan
{
	my ($pre) = @_;
	my ($out, $err) = ('', '');
	my $start = time;
	$coord->psql('postgres', ($pre // '') . $scan, stdout => \$out, stderr => \$err,
		extra_params => [ '-v', 'VERBOSITY=verbose' ]);
	return ($out, $err, time - $start);
}

# 1. Two sessions scan in a loop, each holding 4 connections: the shard is
# full.  New sessions arriving meanwhile get their first connection: the
# looping sessions see that one waits, give their further connections
# back at the end of their transaction and share one until it got in.
my $script = $coord->basedir . '/scan.sql';
open my $fh, '>', $script or die $!;
print $fh "$scan;\n";
close $fh;
my ($out, $err) = ('', '');
my $h = IPC::Run::start(
	[ 'pgbench', '-n', '-h', $coord->host, '-p', $coord->port,
	  '-c', 2, '-j', 2, '-T', 8, '-f', $script, 'postgres' ],
	'>', \$out, '2>', \$err);
# Let both sessions open their 4 connections and loop for a while.
usleep(1_500_000);
for my $i (1 .. 4)
{
	my ($got, $gerr, $secs) = timed_scan();
	is($got, '1', "a new session's first query succeeds on the full shard ($i)")
	  or diag($gerr);
	note sprintf('new session %d: %.0f ms', $i, $secs * 1000);
	usleep(300_000);
}
$h->finish;
is($h->result(0), 0, 'the looping sessions ran without error')
  or diag($out . $err);
unlike($out . $err, qr/ERROR|aborted/i, 'none of their queries failed');
like($out, qr/number of transactions actually processed: (\d+)/,
	'they ran scans');
note $out =~ /(number of transactions actually processed: \d+)/ ? $1 : '';

# 2. Two sessions each hold 4 connections in an open transaction (their
# further connections kept long: idle_timeout of a minute): no place frees.
$coord->safe_psql('postgres', "ALTER SERVER s OPTIONS (ADD idle_timeout '60000')");
my @holders = map { $coord->background_psql('postgres') } 1 .. 2;
for my $holder (@holders)
{
	is($holder->query_safe("BEGIN; $scan"), '1', 'a holder scans in an open transaction');
}

# statement_timeout ends the wait with its own error, not a refusal.
my ($got, $gerr, $secs) = timed_scan("SET statement_timeout = '1500ms';\n");
like($gerr, qr/ERROR:  57014: canceling statement due to statement timeout/,
	'statement_timeout ends the wait for a first connection with 57014');
cmp_ok($secs, '>=', 1.4, sprintf('after waiting that long (%.2f s)', $secs));

# Without a place for a few seconds, the query fails as with postgres_fdw.
($got, $gerr, $secs) = timed_scan();
like($gerr, qr/ERROR:  08001: could not connect to server "s"/,
	'no place for a few seconds: the first connection fails');
like($gerr, qr/too many clients/, "with the server's message");
cmp_ok($secs, '>=', 3, sprintf('after waiting a few seconds (%.2f s)', $secs));
cmp_ok($secs, '<', 20, 'and not much longer');

# Cancel ends the wait with its usual error.
my $waiter = $coord->background_psql('postgres', on_error_stop => 0);
$waiter->query_safe('\set VERBOSITY verbose');
my $wpid = $waiter->query_safe('SELECT pg_backend_pid()');
$waiter->query_until(qr/started/, "\\echo started\n$scan;\n");
# The waiter announces itself with a session lock (advisory, objsubid 175).
ok(poll_coord(
	"SELECT count(*) = 1 FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 175 AND pid = $wpid AND granted"),
	'a waiting first connection holds the lock that tells others');
$coord->safe_psql('postgres', "SELECT pg_cancel_backend($wpid)");
$waiter->{stderr} = '';
$waiter->query('SELECT 1');
like($waiter->{stderr}, qr/ERROR:  57014: canceling statement due to user request/,
	'a cancel ends the wait with 57014');
is($coord->safe_psql('postgres',
	"SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 175"),
	'0', 'the cancelled wait left no lock behind');

# 3. A waiter, then a holder commits: at the end of its transaction it
# sees the waiter and closes its 3 further connections (their idle
# timeout would have kept them a minute), and the waiter gets in.
$waiter->{stderr} = '';
my $start = time;
$waiter->query_until(qr/started/, "\\echo started\n$scan;\n");
ok(poll_coord(
	"SELECT count(*) = 1 FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 175 AND pid = $wpid"),
	'the waiter waits');
$holders[0]->query_safe('COMMIT');
is($waiter->query('SELECT 1'), "1\n1", 'the waiter got a place and its rows');
is($waiter->{stderr}, '', 'without error');
cmp_ok(time - $start, '<', 3,
	sprintf('before its wait ran out (%.2f s)', time - $start));
is($holders[1]->query_safe("SELECT count(*) FROM async_fdw_get_connections() WHERE server_name = 's'"),
	'4', 'the other holder, still in its transaction, keeps its 4');
$holders[1]->query_safe('COMMIT');
is($coord->safe_psql('postgres',
	"SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 175"),
	'0', 'no lock is left');
$_->quit for (@holders, $waiter);

done_testing();
