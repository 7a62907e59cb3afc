# test/t/030_stalled_remote.pl
#   Waits for a remote server that stops answering (its backends are
#   stopped with SIGSTOP): the wait for the answer to a COMMIT that was
#   not waited for yields to statement_timeout and to a query cancel, and
#   the cleanup of an abort (of the transaction or of a savepoint) waits
#   one deadline for all its connections together (not one per connection
#   in a row), or less when cancelled; a transaction whose savepoint
#   rollback was cut short does not commit.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my $remote = PostgreSQL::Test::Cluster->new('stalled');
$remote->init;
$remote->start;
$remote->safe_psql('postgres',
	'CREATE TABLE t (id int); INSERT INTO t SELECT generate_series(1, 100)');

# Four servers on the same remote cluster: four connections, four
# remote backends.
my $coord = PostgreSQL::Test::Cluster->new('coordinator');
$coord->init;
$coord->start;
$coord->safe_psql('postgres', 'CREATE EXTENSION async_fdw');
my ($host, $port) = ($remote->host, $remote->port);
for my $i (1 .. 4)
{
	$coord->safe_psql('postgres', qq{
		CREATE SERVER s$i FOREIGN DATA WRAPPER async_fdw
		  OPTIONS (host '$host', port '$port', dbname 'postgres');
		CREATE USER MAPPING FOR CURRENT_USER SERVER s$i;
		CREATE FOREIGN TABLE f$i (id int) SERVER s$i OPTIONS (table_name 't');
	});
}
my $all4 = 'SELECT (SELECT count(*) FROM f1) + (SELECT count(*) FROM f2) + '
  . '(SELECT count(*) FROM f3) + (SELECT count(*) FROM f4)';

# The remote backends of async_fdw, stopped or resumed.
sub remote_pids
{
	my $out = $remote->safe_psql('postgres',
		"SELECT pid FROM pg_stat_activity WHERE application_name = 'async_fdw'");
	return split /\n/, $out;
}
my @stopped;
sub stop_remote
{
	@stopped = remote_pids();
	kill 'STOP', @stopped;
	return scalar @stopped;
}
sub resume_remote
{
	kill 'CONT', @stopped;
	@stopped = ();
}

my $session = $coord->background_psql('postgres', on_error_stop => 0);
my $pid = $session->query_safe('SELECT pg_backend_pid()');
my ($start, $elapsed);

# 1. The answer to a COMMIT that was not waited for: statement_timeout.
$session->query_safe("BEGIN; SELECT count(*) FROM f1");
is(stop_remote(), 1, 'one remote backend to stop');
$session->query_safe('COMMIT');
$session->{stderr} = '';
$start = time;
$session->query("SET statement_timeout = '1s'; SELECT count(*) FROM f1");
$elapsed = time - $start;
like($session->{stderr}, qr/canceling statement due to statement timeout/,
	'statement_timeout ends the wait for the answer to an earlier COMMIT');
# It used to wait 30 s for the answer, ignoring the timeout.
cmp_ok($elapsed, '<', 10, 'the timeout takes effect without waiting for the remote server');
resume_remote();
$session->{stderr} = '';
is($session->query_safe('RESET statement_timeout; SELECT count(*) FROM f1'),
	'100', 'the server is usable again afterwards');

# 2. The same wait, cancelled from another session.
$session->query_safe("BEGIN; SELECT count(*) FROM f1");
stop_remote();
$session->query_safe('COMMIT');
$session->query_until(qr/started/, "\\echo started\nSELECT count(*) FROM f1;\n");
$coord->poll_query_until('postgres',
	"SELECT wait_event_type = 'Extension' FROM pg_stat_activity WHERE pid = $pid");
$start = time;
$coord->safe_psql('postgres', "SELECT pg_cancel_backend($pid)");
$session->{stderr} = '';
$session->query('SELECT 1');
$elapsed = time - $start;
like($session->{stderr}, qr/canceling statement due to user request/,
	'a query cancel ends the wait for the answer to an earlier COMMIT');
cmp_ok($elapsed, '<', 10, 'the cancel takes effect without waiting for the remote server');
resume_remote();
$session->{stderr} = '';
is($session->query_safe('SELECT count(*) FROM f1'), '100',
	'the server is usable after the cancel');

# 3. A rollback with four stalled connections waits one deadline (30 s)
# for all of them, not one per connection in a row (120 s).
$session->query_safe("BEGIN; $all4");
is(stop_remote(), 4, 'four remote backends to stop');
$start = time;
$session->query('ROLLBACK');
$elapsed = time - $start;
cmp_ok($elapsed, '<', 60,
	'the rollback waits for its four stalled connections within one deadline');
resume_remote();
$session->{stderr} = '';
is($session->query_safe($all4), '400',
	'fresh connections work after the rollback');

# A transaction ended with END_SQL while its four connections are
# stalled, cancelled from another session once the backend waits on them:
# the cleanup gives up.  BEGIN_SQL opens the transaction and uses the four
# connections.
sub cancel_cleanup
{
	my ($begin_sql, $end_sql, $what) = @_;

	$session->query_safe("$begin_sql; $all4");
	stop_remote();
	$session->query_until(qr/started/, "\\echo started\n$end_sql;\n");
	$coord->poll_query_until('postgres',
		"SELECT wait_event_type = 'Extension' FROM pg_stat_activity WHERE pid = $pid");
	$start = time;
	$coord->safe_psql('postgres', "SELECT pg_cancel_backend($pid)");
	$session->query('SELECT 1');
	$elapsed = time - $start;
	cmp_ok($elapsed, '<', 10,
		"a query cancel cuts the cleanup of $what with stalled connections short");
	resume_remote();
	$session->{stderr} = '';
	return;
}

# 4. The same rollback, cancelled from another session: the cleanup
# gives up, and the connections are dropped.  (statement_timeout does not
# run while a transaction ends.)
cancel_cleanup('BEGIN', 'ROLLBACK', 'a rollback');
is($session->query_safe($all4), '400',
	'fresh connections work after the cut cleanup');

# 5. The rollback of a savepoint with four stalled connections, cancelled
# from another session.
cancel_cleanup('BEGIN; SAVEPOINT a', 'ROLLBACK TO a', 'a savepoint rollback');
$session->query("$all4");
like($session->{stderr}, qr/lost connection to server/,
	'the connections that could not be cleaned up are not used again in the transaction');
$session->query('ROLLBACK');
$session->{stderr} = '';
is($session->query_safe($all4), '400',
	'fresh connections work after the transaction');

# 6. A savepoint whose write is sent to a stalled server, cancelled twice:
# the rollback of the savepoint's remote work is cut short, and the write
# may still run once the server resumes.  The COMMIT then fails (08000)
# rather than commit it: neither the savepoint's write nor the one before
# the savepoint stays.  (Before, the COMMIT succeeded with both.)
$remote->safe_psql('postgres',
	'CREATE TABLE w (id int PRIMARY KEY, v int); INSERT INTO w VALUES (1, 0), (2, 0)');
$coord->safe_psql('postgres',
	"CREATE FOREIGN TABLE fw (id int, v int) SERVER s1 OPTIONS (table_name 'w')");
$session->query_safe('BEGIN; UPDATE fw SET v = v + 1 WHERE id = 1; SAVEPOINT sp');
stop_remote();
$session->query_until(qr/started/, "\\echo started\nUPDATE fw SET v = v + 500 WHERE id = 2;\n");
$coord->poll_query_until('postgres',
	"SELECT wait_event_type = 'Extension' FROM pg_stat_activity WHERE pid = $pid");
$coord->safe_psql('postgres', "SELECT pg_cancel_backend($pid)");
# The second cancel cuts the wait for the first one's remote cancel.
$coord->poll_query_until('postgres',
	"SELECT wait_event_type = 'Extension' FROM pg_stat_activity WHERE pid = $pid");
$coord->safe_psql('postgres', "SELECT pg_cancel_backend($pid)");
$session->query('SELECT 1');
resume_remote();
$session->{stderr} = '';
$session->query('ROLLBACK TO SAVEPOINT sp');
$session->query('COMMIT');
like($session->{stderr}, qr/lost connection to server "s1"/,
	'the COMMIT after a savepoint rollback cut short fails');
$session->{stderr} = '';
is($remote->safe_psql('postgres', q{SELECT string_agg(id || ':' || v, ',' ORDER BY id) FROM w}),
	'1:0,2:0', 'and nothing of the transaction stays on the remote server');
is($session->query_safe('SELECT count(*) FROM fw'), '2', 'the session goes on');

$session->quit;
done_testing();
