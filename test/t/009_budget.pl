# test/t/009_budget.pl
#   The connection budget: with shared_preload_libraries = 'async_fdw', all
#   backends of the coordinator together hold at most max_shared_connections
#   connections to a server.  16 sessions scanning 4 partitions on a shard
#   with room for 12 clients all succeed and never exceed the budget; a
#   required connection waits for room (wait event Extension), and cancel
#   and statement_timeout end the wait; an idle connection gives its place
#   back when another backend waits (once its remote backend has exited),
#   or by time when the remote server closes it; async_fdw_connection_budget() shows the figures.  Without
#   preloading the function shows no figures and optional connections are
#   still shared when the shard refuses them.

use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

# A shard with room for 12 clients, all counted (and locks for the many
# temporary tables of 3b).
my $shard = PostgreSQL::Test::Cluster->new('shard');
$shard->init;
$shard->append_conf('postgresql.conf',
	"max_connections = 12\nsuperuser_reserved_connections = 0\n"
	  . "max_locks_per_transaction = 1024");
$shard->start;
$shard->safe_psql('postgres', join("\n", map {
	"CREATE TABLE t$_ (part int, id int);
	 INSERT INTO t$_ SELECT $_, g FROM generate_series(1, 1000) g;"
} 1 .. 4));

my $coord = PostgreSQL::Test::Cluster->new('coordinator');
$coord->init;
$coord->append_conf('postgresql.conf', "shared_preload_libraries = 'async_fdw'");
$coord->start;
my ($host, $port) = ($shard->host, $shard->port);
$coord->safe_psql('postgres', qq{
	CREATE EXTENSION async_fdw;
	CREATE SERVER s FOREIGN DATA WRAPPER async_fdw
	  OPTIONS (host '$host', port '$port', dbname 'postgres',
	           max_shared_connections '10');
	CREATE USER MAPPING FOR CURRENT_USER SERVER s;
	CREATE SERVER other FOREIGN DATA WRAPPER async_fdw
	  OPTIONS (host '$host', port '$port', dbname 'postgres');
	CREATE TABLE p (part int, id int) PARTITION BY LIST (part);
} . join("\n", map {
	"CREATE FOREIGN TABLE p$_ PARTITION OF p FOR VALUES IN ($_) SERVER s
	   OPTIONS (schema_name 'public', table_name 't$_');"
} 1 .. 4));

my $budget_sql = 'SELECT server_name, budget, held, idle_expiring, waiting
	FROM async_fdw_connection_budget() ORDER BY 1';
my $held_sql = "SELECT held FROM async_fdw_connection_budget() WHERE server_name = 's'";
my $none_held = "SELECT held = 0 FROM async_fdw_connection_budget() WHERE server_name = 's'";
# The coordinator's connections on the shard, by their application_name
# (a sampling session of an earlier moment may still be exiting).
my $afdw_on_shard = "SELECT count(*) FROM pg_stat_activity
	WHERE backend_type = 'client backend' AND application_name = 'async_fdw'";

# The default budget is the coordinator's max_connections (100 here).
is($coord->safe_psql('postgres', $budget_sql), "other|100|0|0|0\ns|10|0|0|0",
	'the function shows each server: budget, nothing held, nobody waiting');

# pgbench_run(clients, seconds, sample_shard): run the scan over and over in
# CLIENTS sessions; while it runs, sample the budget's figures and, if
# SAMPLE_SHARD, the shard's async_fdw connections.  Returns (exit code, output, max on shard, max held,
# max waiting).
sub pgbench_run
{
	my ($clients, $seconds, $sample_shard) = @_;
	my $script = $coord->basedir . '/scan.sql';
	# A wrong result is a division by zero: an error like the others.
	open my $fh, '>', $script or die $!;
	print $fh "SELECT 1 / (count(*) = 4000 AND sum(id) = 2002000)::int FROM p;\n";
	close $fh;
	# One sampling session on the shard for the whole run, opened before
	# the scans start: new ones each time would compete for its places.
	my $sampler = $sample_shard ? $shard->background_psql('postgres') : undef;
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start(
		[ 'pgbench', '-n', '-h', $coord->host, '-p', $coord->port,
		  '-c', $clients, '-j', 4, '-T', $seconds, '-f', $script, 'postgres' ],
		'>', \$out, '2>', \$err);
	my ($max_shard, $max_held, $max_waiting) = (0, 0, 0);
	while ($h->pumpable)
	{
		$h->pump_nb;
		if ($sampler)
		{
			my $n = $sampler->query_safe($afdw_on_shard);
			$max_shard = $n if $n > $max_shard;
		}
		my ($held, $waiting) = split /\|/, $coord->safe_psql('postgres',
			"SELECT coalesce(held, 0), coalesce(waiting, 0) FROM async_fdw_connection_budget() WHERE server_name = 's'");
		$max_held = $held if $held > $max_held;
		$max_waiting = $waiting if $waiting > $max_waiting;
		usleep(20_000);
	}
	$h->finish;
	$sampler->quit if $sampler;
	return ($h->result(0), $out . $err, $max_shard, $max_held, $max_waiting);
}

# 1. 16 sessions, 4 partitions each, a budget of 10 on a shard with room
# for 12 (one taken by the sampling above): no query fails, the budget is
# kept, and the sessions did compete for it.
my ($rc, $out, $max_shard, $max_held, $max_waiting) = pgbench_run(16, 5, 1);
is($rc, 0, '16 sessions under a budget of 10: pgbench ends without error')
  or diag($out);
like($out, qr/number of transactions actually processed: (\d+)/,
	'pgbench ran the scans');
my ($done) = $out =~ /number of transactions actually processed: (\d+)/;
cmp_ok($done // 0, '>', 16, 'every session ran scans repeatedly');
unlike($out, qr/ERROR|too many clients|aborted/i, 'no query failed');
cmp_ok($max_held, '<=', 10, "the budget's count never exceeds it (max $max_held)");
cmp_ok($max_held, '>=', 8, 'the sessions used the budget');
cmp_ok($max_shard, '<=', 10,
	"the shard never saw more async_fdw connections than the budget (max $max_shard)");
note "max shard connections $max_shard, max held $max_held, max waiting $max_waiting, "
  . "$done scans, " . ($out =~ /(tps = [\d.]+)/ ? $1 : '');

# Every backend that exits gives its units back.
ok($coord->poll_query_until('postgres', $none_held),
	'once the sessions are gone, nothing is held');

# 2. Cancel and statement_timeout while waiting for room: a budget of 1,
# taken by a transaction of another session.
$coord->safe_psql('postgres', "ALTER SERVER s OPTIONS (SET max_shared_connections '1')");
my $holder = $coord->background_psql('postgres');
my $waiter = $coord->background_psql('postgres', on_error_stop => 0);
$waiter->query_safe('\set VERBOSITY verbose');
my $wpid = $waiter->query_safe('SELECT pg_backend_pid()');
is($holder->query_safe('BEGIN; SELECT count(*) FROM p1'), '1000',
	'the holder scans in an open transaction');
is($coord->safe_psql('postgres', $budget_sql), "other|100|0|0|0\ns|1|1|0|0",
	'the function shows the one connection held');

$waiter->query_until(qr/started/, "\\echo started\nSELECT count(*) FROM p2;\n");
# PostgreSQL 17 and later name the wait (019_wait_events.pl shows the others).
my $budget_wait = $coord->safe_psql('postgres', 'SHOW server_version_num') >= 170000
  ? 'AsyncFdwConnectionBudget' : 'Extension';
ok($coord->poll_query_until('postgres',
	"SELECT wait_event_type = 'Extension' AND wait_event = '$budget_wait' FROM pg_stat_activity WHERE pid = $wpid"),
	"a required connection waits for room, with wait event $budget_wait");
ok($coord->poll_query_until('postgres',
	"SELECT waiting = 1 FROM async_fdw_connection_budget() WHERE server_name = 's'"),
	'the function counts the waiter');
$coord->safe_psql('postgres', "SELECT pg_cancel_backend($wpid)");
$waiter->{stderr} = '';
$waiter->query('SELECT 1');
like($waiter->{stderr}, qr/ERROR:  57014: canceling statement due to user request/,
	'a cancel ends the wait with 57014');
is($coord->safe_psql('postgres',
	"SELECT waiting FROM async_fdw_connection_budget() WHERE server_name = 's'"), '0',
	'the cancelled waiter no longer counts');

$waiter->{stderr} = '';
my $start = time;
$waiter->query("SET statement_timeout = '300ms'; SELECT count(*) FROM p2");
like($waiter->{stderr}, qr/ERROR:  57014: canceling statement due to statement timeout/,
	'statement_timeout ends the wait with 57014');
cmp_ok(time - $start, '<', 10, 'promptly');
$waiter->query('RESET statement_timeout');
$waiter->{stderr} = '';
is($coord->safe_psql('postgres',
	"SELECT waiting FROM async_fdw_connection_budget() WHERE server_name = 's'"), '0',
	'the timed-out waiter no longer counts');

# 3. Idle give-back.  The holder commits and keeps its connection idle
# (idle_connections 1), still counted: a query of the waiter waits.  At
# the end of the holder's next transaction on the server, seeing the
# waiter, it closes its idle connection, and the waiter gets its place.
$holder->query_safe('COMMIT');
is($coord->safe_psql('postgres', $held_sql), '1',
	'the kept idle connection still counts');
$waiter->{stderr} = '';
$waiter->query_until(qr/started/, "\\echo started\nSELECT count(*) FROM p2;\n");
ok($coord->poll_query_until('postgres',
	"SELECT waiting = 1 FROM async_fdw_connection_budget() WHERE server_name = 's'"),
	'the waiter waits for the idle connection');
is($holder->query_safe('SELECT count(*) FROM p3'), '1000',
	'the holder runs another transaction on its idle connection');
is($holder->query_safe("SELECT count(*) FROM async_fdw_get_connections() WHERE server_name = 's'"),
	'0', 'at its end, with a waiter, the holder closed its idle connection');
is($waiter->query('SELECT 1'), "1000\n1", 'the waiter got the place and its rows');
is($waiter->{stderr}, '', 'without error');
is($coord->safe_psql('postgres', $budget_sql), "other|100|0|0|0\ns|1|1|0|0",
	'the function: the waiter holds the one place, nobody waits');
$holder->quit;
$waiter->quit;
ok($coord->poll_query_until('postgres', $none_held),
	'sessions that exit give their places back');

# 3b. A unit given back stands for a place the shard has freed: the
# holder's remote session made many temporary tables, so its backend takes
# a while to exit (it drops them while still counted on the shard).  The
# holder's closing of its idle connection waits for that exit, and the
# waiter's own remote session, once it has the place, finds no other
# client on the shard.
$shard->safe_psql('postgres', q{
	CREATE FUNCTION slow_exit() RETURNS int LANGUAGE plpgsql AS $$
	BEGIN
	  FOR i IN 1 .. 1500 LOOP
	    EXECUTE format('CREATE TEMP TABLE IF NOT EXISTS slow_exit_%s (a int)', i);
	  END LOOP;
	  RETURN 1;
	END $$;
	CREATE VIEW slow AS SELECT slow_exit() AS one;
	CREATE VIEW others AS SELECT count(*)::int AS n FROM pg_stat_activity
	  WHERE backend_type = 'client backend' AND application_name = 'async_fdw'
	    AND pid <> pg_backend_pid();
});
$coord->safe_psql('postgres', q{
	CREATE FOREIGN TABLE slow (one int) SERVER s OPTIONS (table_name 'slow');
	CREATE FOREIGN TABLE others (n int) SERVER s OPTIONS (table_name 'others');
});
ok($coord->poll_query_until('postgres', $none_held), 'nothing held before 3b');
ok($shard->poll_query_until('postgres', "SELECT ($afdw_on_shard) = 0"),
	'no coordinator session on the shard before 3b');
$holder = $coord->background_psql('postgres');
$waiter = $coord->background_psql('postgres', on_error_stop => 0);
is($holder->query_safe('SELECT one FROM slow'), '1',
	"the holder's remote session makes its temporary tables");
$waiter->{stderr} = '';
$waiter->query_until(qr/started/, "\\echo started\nSELECT n FROM others;\n");
ok($coord->poll_query_until('postgres',
	"SELECT waiting = 1 FROM async_fdw_connection_budget() WHERE server_name = 's'"),
	'the waiter waits for the idle connection with a slow exit');
is($holder->query_safe('SELECT count(*) FROM p3'), '1000',
	'the holder runs another transaction, and closes its idle connection');
is($waiter->query('SELECT 1'), "0\n1",
	"the waiter's remote session finds no other client on the shard: the holder's had exited");
is($waiter->{stderr}, '', 'without error');
$holder->quit;
$waiter->quit;
ok($coord->poll_query_until('postgres', $none_held),
	'sessions that exit give their places back (3b)');

# 4. Idle connections past the first carry the remote idle_timeout: they
# count until the shard has closed them, then no longer.
$coord->safe_psql('postgres', "ALTER SERVER s OPTIONS (SET max_shared_connections '10', ADD idle_timeout '1500')");
my $session = $coord->background_psql('postgres');
my $got = $session->query_safe("SELECT count(*) FROM p; $budget_sql");
is($got, "4000\nother|100|0|0|0\ns|10|4|3|0",
	'after a scan, four held, three of them idle ones that expire');
ok($coord->poll_query_until('postgres',
	"SELECT held = 1 AND idle_expiring = 0 FROM async_fdw_connection_budget() WHERE server_name = 's'"),
	'once the remote timeout has passed, only the kept one counts');
ok($shard->poll_query_until('postgres', "SELECT ($afdw_on_shard) = 1"),
	'and the shard has closed the others');
is($session->query_safe('SELECT count(*) FROM p'), '4000',
	'the session scans again, reopening them');
$session->quit;
ok($coord->poll_query_until('postgres', $none_held), 'then exits: nothing held');

# 4b. The budget of a server that counts nothing goes: 1,500 servers made,
# used once (their connection refused) and dropped leave the shared memory
# as it was (the table of budgets holds 1,024), and no server went without
# a budget for want of room.
my $free_sql = 'SELECT size FROM pg_shmem_allocations WHERE name IS NULL';
# churn(first, last): servers first..last made, used and dropped, each in a
# transaction of its own.
my $churn = sub {
	my ($first, $last) = @_;
	$coord->safe_psql('postgres', qq{
DO \$\$
BEGIN
  FOR i IN $first..$last LOOP
    EXECUTE format('CREATE SERVER churn%s FOREIGN DATA WRAPPER async_fdw OPTIONS (host %L, port %L, dbname %L)',
                   i, '127.0.0.1', '1', 'postgres');
    EXECUTE format('CREATE USER MAPPING FOR CURRENT_USER SERVER churn%s', i);
    EXECUTE format('CREATE FOREIGN TABLE churn%s (a int) SERVER churn%s', i, i);
    BEGIN
      EXECUTE format('SELECT count(*) FROM churn%s', i);
    EXCEPTION WHEN sqlclient_unable_to_establish_sqlconnection THEN
      NULL;
    END;
    EXECUTE format('DROP SERVER churn%s CASCADE', i);
    COMMIT;
  END LOOP;
END
\$\$;
});
};
$churn->(1, 20);
my $free_before = $coord->safe_psql('postgres', $free_sql);
my $log_at = -s $coord->logfile;
$churn->(21, 1520);
is($coord->safe_psql('postgres', $free_sql), $free_before,
	'1,500 servers made, used and dropped: the free shared memory is as it was');
unlike(slurp_file($coord->logfile, $log_at), qr/has no connection budget/,
	'and every one had a budget');

# 5. Without preloading: no figures, and optional connections are shared
# when the shard refuses them (6 sessions want 24 connections; 11 places).
$coord->append_conf('postgresql.conf', "shared_preload_libraries = ''");
$coord->restart;
is($coord->safe_psql('postgres', $budget_sql), "other|100|||\ns|10|||",
	'not preloaded: the budget is shown, the shared figures are NULL');
my $refusals = sub {
	my $n = () = slurp_file($shard->logfile) =~ /sorry, too many clients already/g;
	return $n;
};
my $refused_before = $refusals->();
($rc, $out) = pgbench_run(6, 3, 0);
is($rc, 0, 'not preloaded: 6 sessions on the shard, pgbench ends without error')
  or diag($out);
unlike($out, qr/ERROR|aborted/i, 'not preloaded: no query failed');
cmp_ok($refusals->() - $refused_before, '>', 0,
	'not preloaded: the shard refused connections, and their scans shared');

done_testing();
