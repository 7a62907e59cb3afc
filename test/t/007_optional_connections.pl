# test/t/007_optional_connections.pl
#   A backend's first connection to a server is required, every further
#   one optional: when the server refuses one for lack of room ("too many
#   clients", SQLSTATE 53300), the scans that wanted it share the open
#   connection and the query succeeds, in every fetch mode.  The first
#   connection refused fails the query with the error postgres_fdw gives.
#   A query's connections are asked for together (the place the server has
#   may go to any of them); after a refusal the backend does not ask the
#   server again for a second, and it opens more once the server has room.  Between
#   transactions a session keeps idle_connections (one) per server; the
#   server closes the others once they have been idle for idle_timeout.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use Time::HiRes qw(time usleep);

# A shard with room for 6 clients, all counted (none kept for superusers).
my $shard = PostgreSQL::Test::Cluster->new('shard');
$shard->init;
$shard->append_conf('postgresql.conf',
	"max_connections = 6\nsuperuser_reserved_connections = 0");
$shard->start;
$shard->safe_psql('postgres', join("\n", map {
	"CREATE TABLE t$_ (part int, id int);
	 INSERT INTO t$_ SELECT $_, g FROM generate_series(1, 1000) g;
	 CREATE VIEW v$_ AS SELECT part, id, pg_backend_pid() AS pid FROM t$_;"
} 1 .. 4));

# Four partitions on the shard through one server: up to four connections.
my $coord = PostgreSQL::Test::Cluster->new('coordinator');
$coord->init;
$coord->start;
my ($host, $port) = ($shard->host, $shard->port);
$coord->safe_psql('postgres', qq{
	CREATE EXTENSION async_fdw;
	CREATE EXTENSION postgres_fdw;
	CREATE SERVER s FOREIGN DATA WRAPPER async_fdw
	  OPTIONS (host '$host', port '$port', dbname 'postgres');
	CREATE USER MAPPING FOR CURRENT_USER SERVER s;
	CREATE SERVER pg FOREIGN DATA WRAPPER postgres_fdw
	  OPTIONS (host '$host', port '$port', dbname 'postgres');
	CREATE USER MAPPING FOR CURRENT_USER SERVER pg;
	CREATE FOREIGN TABLE pg1 (part int, id int, pid int) SERVER pg
	  OPTIONS (schema_name 'public', table_name 'v1');
	CREATE TABLE p (part int, id int, pid int) PARTITION BY LIST (part);
} . join("\n", map {
	"CREATE FOREIGN TABLE p$_ PARTITION OF p FOR VALUES IN ($_) SERVER s
	   OPTIONS (schema_name 'public', table_name 'v$_');"
} 1 .. 4));

# The rows, and how many remote connections served them.
my $query = 'SELECT count(*), sum(id), count(DISTINCT pid) FROM p';

# Clients that hold N of the shard's places.
my @holders;
sub hold
{
	my ($n) = @_;
	push @holders, $shard->background_psql('postgres') for 1 .. $n;
	return;
}
sub release
{
	my ($n) = @_;
	(pop @holders)->quit for 1 .. $n;
	return;
}

# How many refusals the shard has logged so far.
sub refusals
{
	my $log = slurp_file($shard->logfile);
	my $n = () = $log =~ /sorry, too many clients already/g;
	return $n;
}

# 1. No room at all: the first connection of a session is required, and
# the query fails as with postgres_fdw (08001, the server's message).
hold(6);
my $session = $coord->background_psql('postgres', on_error_stop => 0);
$session->query("SELECT count(*) FROM p");
my $afdw_err = $session->{stderr};
$session->{stderr} = '';
$session->query("SELECT count(*) FROM pg1");
my $pg_err = $session->{stderr};
$session->{stderr} = '';
like($afdw_err, qr/ERROR:  could not connect to server "s"\n.*DETAIL:  connection to server .* failed: FATAL:  sorry, too many clients already/,
	'no room for the first connection: a clear error');
unlike($afdw_err, qr/53300|LOCATION/,
	'the detail is the server message as libpq gives it by default');
(my $pg_detail = $pg_err) =~ s/.*DETAIL:  //s;
(my $afdw_detail = $afdw_err) =~ s/.*DETAIL:  //s;
is($afdw_detail, $pg_detail, 'the same detail as postgres_fdw');
my $verbose_err;
$coord->psql('postgres', "\\set VERBOSITY verbose\nSELECT count(*) FROM p",
	stderr => \$verbose_err, on_error_stop => 0);
like($verbose_err, qr/ERROR:  08001: could not connect to server "s"/,
	'SQLSTATE 08001, as postgres_fdw');

# 2. Room for one client: one connection serves the four partitions.
release(1);
# (The refusals above are let age past the second in which the pool does
# not ask the shard again.)
usleep(1_100_000);
my $before = refusals();
is($session->query_safe($query), '4000|2002000|1',
	'room for one connection: every row, through one connection');
is(refusals() - $before, 3,
	'the shard refused the three further connections, asked for together');
$before = refusals();
is($session->query_safe($query), '4000|2002000|1',
	'the next query shares the same connection');
is(refusals() - $before, 0,
	'... without asking the shard again within a second of its refusal');

# The same with cursors, in a transaction block.  (The tables, not the
# server, get the option: a change of the server would close the
# connection, and its place on the shard might not be free at once.)
$session->query_safe(join(';', map { "ALTER FOREIGN TABLE p$_ OPTIONS (ADD fetch_mode 'cursor')" } 1 .. 4));
is($session->query_safe("BEGIN; $query; COMMIT"), '4000|2002000|1',
	'cursors in a transaction block: every row, through one connection');
$session->query_safe(join(';', map { "ALTER FOREIGN TABLE p$_ OPTIONS (DROP fetch_mode)" } 1 .. 4));

# 3. Room again: once the refusal is a second old, the pool grows back
# (to three: the fourth is refused again and shares).
release(2);
my $deadline = time + 60;
my $got = '';
while (time < $deadline)
{
	$got = $session->query_safe($query);
	last if $got eq '4000|2002000|3';
	usleep(200_000);
}
is($got, '4000|2002000|3', 'with room for two more, the pool opens them');

# 4. Between transactions a session keeps one connection per server (the
# server option idle_connections); the shard itself closes the others once
# they have been idle for idle_timeout (1 s by default), so that a session
# running queries back to back keeps them, and an idle one gives their
# places back.  With idle_timeout 0 they close at the end of the
# transaction; with idle_connections 4 all four stay.  (One holder stays:
# room for four connections and the checks.)
release(2);
my $afdw_sessions = "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'async_fdw'";
my $one_afdw_session = "SELECT count(*) = 1 FROM pg_stat_activity WHERE application_name = 'async_fdw'";
my $pids = 'SELECT string_agg(DISTINCT pid::text, \',\' ORDER BY pid::text) FROM p';
$deadline = time + 60;
while (time < $deadline)
{
	$got = $session->query_safe($query);
	last if $got eq '4000|2002000|4';
	usleep(200_000);
}
is($got, '4000|2002000|4', 'with room for all, four connections');
ok($shard->poll_query_until('postgres', $one_afdw_session),
	'idle for idle_timeout, the connections past the first are closed by the shard');
like(slurp_file($shard->logfile), qr/terminating connection due to idle-session timeout/,
	'the shard closed them for their idle-session timeout');
$session->query_safe("ALTER SERVER s OPTIONS (ADD idle_timeout '600000')");
my $first = $session->query_safe($pids);
is(scalar(split /,/, $first), 4, 'four connections again');
is($session->query_safe($pids), $first,
	'the next query, a moment later, uses the same four connections');
is($session->query_safe("BEGIN; $query"), '4000|2002000|4',
	'in a transaction block, four connections');
$session->query_safe('COMMIT');
$session->query_safe("ALTER SERVER s OPTIONS (SET idle_timeout '0')");
is($session->query_safe($query), '4000|2002000|4', 'idle_timeout 0: four connections');
ok($shard->poll_query_until('postgres', $one_afdw_session),
	'idle_timeout 0: after the transaction, one stays open');
$session->query_safe("ALTER SERVER s OPTIONS (ADD idle_connections '4', DROP idle_timeout)");
is($session->query_safe($query), '4000|2002000|4',
	'idle_connections 4: four connections');
is($shard->safe_psql('postgres', $afdw_sessions), '4',
	'idle_connections 4: the four stay open between transactions');
$session->query_safe("ALTER SERVER s OPTIONS (DROP idle_connections)");
$session->quit;
release(scalar @holders);
ok($shard->poll_query_until('postgres', "SELECT ($afdw_sessions) = 0"),
	'the session gone, its connections are closed');

# 5. A session that a full shard refused a further connection gives its
# other further connections back at the end of the transaction, for the
# first connections of other sessions.  Four connections, then the shard
# cuts one of them and fills up (three holders): the next query asks for a
# connection again, is refused, and shares.
$session = $coord->background_psql('postgres', on_error_stop => 0);
is($session->query_safe($query), '4000|2002000|4', 'four connections again');
$shard->safe_psql('postgres', "SELECT pg_terminate_backend(max(pid)) FROM pg_stat_activity WHERE application_name = 'async_fdw'");
ok($shard->poll_query_until('postgres', "SELECT ($afdw_sessions) = 3"),
	'one of them cut by the shard');
hold(3);
is($session->query_safe($query), '4000|2002000|3',
	'the shard full: three connections serve the query');
is($shard->safe_psql('postgres', $afdw_sessions), '1',
	'refused, the session gave back its further connections at once');
release(3);

# 6. A session's first connection refused for lack of room is asked for
# again for a moment before the query fails: a place freed meanwhile
# serves it.
$session->quit;
ok($shard->poll_query_until('postgres', "SELECT ($afdw_sessions) = 0"),
	'the session gone, its connections are closed');
hold(6);
my $before_retry = refusals();
my ($retry_out, $retry_err) = ('', '');
my $retry = IPC::Run::start(
	[ 'psql', '-XAtq', '-d', $coord->connstr('postgres'), '-c', $query ],
	'>', \$retry_out, '2>', \$retry_err);
my $seen = 0;
for (1 .. 200)
{
	if (refusals() > $before_retry) { $seen = 1; last; }
	usleep(5_000);
}
ok($seen, 'the first connection was refused');
release(1);
$retry->finish;
is($retry_out, "4000|2002000|1\n", 'asked for again, it got the place freed meanwhile')
  or diag($retry_err);
release(scalar @holders);

# No backend died, and no assertion failed.
unlike(slurp_file($coord->logfile), qr/terminated by signal|TRAP:/, 'no backend crashed');

$coord->stop;
$shard->stop;
done_testing();
