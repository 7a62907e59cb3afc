# test/t/010_concurrent_connect.pl
#   The connections one query needs are opened at the same time: every
#   scan starts its handshake at executor start without waiting, and the
#   first fetch ends them all in one wait.  A listener that accepts
#   connections and never answers records, in order, each connection it
#   accepts and the first bytes (the startup packet) of each: all four
#   connections of a four-partition query must be there before the first
#   startup packet, where connections opened one after the other would
#   show one connection, its packet, then (after a timeout) nothing more.
#   With async_fdw preloaded all four send their startup packets; without,
#   the optional ones wait for the first connection of their pool.
#   The same listener checks that connect_timeout ends the wait for all of
#   them, that each is closed, and that the pool is left clean; then a
#   real shard checks that the concurrent handshakes give right results,
#   also when the server refuses some of them for lack of room, and that
#   a connection near its idle timeout is not used.

use strict;
use warnings;

use IO::Select;
use IO::Socket::INET;
use POSIX ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

# listen_silently: a child process that accepts connections on a loopback
# port and never answers, writing "accept N", "data N" (first bytes of
# connection N) and "close N" to LOG as they happen.  Returns (pid, port).
sub listen_silently
{
	my ($log) = @_;
	my $listener = IO::Socket::INET->new(
		LocalAddr => '127.0.0.1',
		LocalPort => 0,
		Listen => 16,
		ReuseAddr => 1,
		Blocking => 0) or die "listen: $!";
	my $port = $listener->sockport;
	my $pid = fork();
	die "fork: $!" unless defined $pid;
	if ($pid == 0)
	{
		# Killed by the test: die quietly, not through the signal handler
		# of PostgreSQL::Test::Utils (17 and later), whose exit would run
		# the test's END blocks and stop its servers.
		$SIG{TERM} = $SIG{INT} = 'DEFAULT';
		open(my $out, '>>', $log) or POSIX::_exit(1);
		$out->autoflush(1);
		my $sel = IO::Select->new($listener);
		my %id;
		my %seen;
		my $n = 0;
		while (1)
		{
			for my $s ($sel->can_read(1))
			{
				if ($s == $listener)
				{
					# Every connection waiting is taken before any data.
					while (my $c = $listener->accept)
					{
						$id{$c} = ++$n;
						$sel->add($c);
						print $out "accept $n\n";
					}
					next;
				}
				my $got = sysread($s, my $buf, 8192);
				my $k = $id{$s};
				if (!$got)
				{
					print $out "close $k\n";
					$sel->remove($s);
					# A later socket may get this one's address, which
					# names it in the hashes.
					delete $id{$s};
					close($s);
					next;
				}
				# By number: the address of a closed socket is reused.
				print $out "data $k\n" unless $seen{$k}++;
			}
		}
	}
	close($listener);
	return ($pid, $port);
}

my $coord = PostgreSQL::Test::Cluster->new('coordinator');
$coord->init;
$coord->start;

# 1. Four partitions on a server that never answers.
my $log = $coord->basedir . '/silent.log';
my ($silent_pid, $silent_port) = listen_silently($log);
$coord->safe_psql('postgres', qq{
	CREATE EXTENSION async_fdw;
	CREATE SERVER silent FOREIGN DATA WRAPPER async_fdw
	  OPTIONS (host '127.0.0.1', port '$silent_port', dbname 'postgres',
	           connect_timeout '2');
	CREATE USER MAPPING FOR CURRENT_USER SERVER silent;
	CREATE TABLE q (part int, id int) PARTITION BY LIST (part);
} . join("\n", map {
	"CREATE FOREIGN TABLE q$_ PARTITION OF q FOR VALUES IN ($_) SERVER silent
	   OPTIONS (table_name 't$_');"
} 1 .. 4));

# silent_run: query the four partitions, which fails after connect_timeout;
# returns the listener's events in order, once it saw every connection
# close.
sub silent_run
{
	my ($label) = @_;
	truncate($log, 0);
	my ($ret, $out, $err) = $coord->psql('postgres', q{
		SELECT count(*) FROM q;
		SELECT count(*) AS open_connections FROM async_fdw_get_connections();
	}, on_error_stop => 0);
	like($err, qr/could not connect to server "silent"/,
		"$label: a server that never answers: the query fails");
	like($err, qr/The connection attempt took longer than connect_timeout/,
		"$label: ... after connect_timeout");
	unlike($err, qr/CONTEXT:  scan of foreign table/,
		"$label: ... naming the server, not the table of the scan that fetched first");
	is($out, '0', "$label: ... and the pool holds no connection afterwards");
	my @events;
	for (1 .. 50)
	{
		@events = split /\n/, slurp_file($log);
		last if (grep { /^close/ } @events) >= 4;
		select(undef, undef, undef, 0.1);
	}
	is(scalar(grep { /^close/ } @events), 4,
		"$label: each connection was closed after the timeout");
	return @events;
}

# accepted_before_data: how many connections the listener had accepted
# when the first bytes arrived.
sub accepted_before_data
{
	my $n = 0;
	for my $e (@_)
	{
		last if $e =~ /^data/;
		$n++ if $e =~ /^accept/;
	}
	return $n;
}

# Not preloaded: the four TCP connections are made at once, but only the
# first connection's startup packet goes out; the optional ones wait for it
# (here for ever), so that a session's first connection comes before the
# optional ones of sessions starting at the same time.
my @events = silent_run('not preloaded');
is(accepted_before_data(@events), 4,
	'not preloaded: four connections made before the first startup packet')
  or diag(join(', ', @events));
is(scalar(grep { /^data/ } @events), 1,
	'not preloaded: only the first connection sent its startup packet')
  or diag(join(', ', @events));

# Preloaded (the budget keeps room for first connections): the four
# handshakes go on together.
$coord->append_conf('postgresql.conf', "shared_preload_libraries = 'async_fdw'");
$coord->restart;
@events = silent_run('preloaded');
is(accepted_before_data(@events), 4,
	'preloaded: four connections made before the first startup packet')
  or diag(join(', ', @events));
is(scalar(grep { /^data/ } @events), 4,
	'preloaded: each sent its startup packet without waiting for the others')
  or diag(join(', ', @events));
kill 'TERM', $silent_pid;
waitpid($silent_pid, 0);

# 2. A real shard, with room for the first connection and one more: the
# handshakes overlap, the server refuses two of them for lack of room, and
# the scans that wanted them share the open ones.
my $shard = PostgreSQL::Test::Cluster->new('shard');
$shard->init;
$shard->append_conf('postgresql.conf',
	"max_connections = 3\nsuperuser_reserved_connections = 0");
$shard->start;
$shard->safe_psql('postgres', join("\n", map {
	"CREATE TABLE t$_ (part int, id int);
	 INSERT INTO t$_ SELECT $_, g FROM generate_series(1, 1000) g;"
} 1 .. 4));
my ($host, $port) = ($shard->host, $shard->port);
$coord->safe_psql('postgres', qq{
	CREATE SERVER s FOREIGN DATA WRAPPER async_fdw
	  OPTIONS (host '$host', port '$port', dbname 'postgres');
	CREATE USER MAPPING FOR CURRENT_USER SERVER s;
	CREATE TABLE p (part int, id int) PARTITION BY LIST (part);
} . join("\n", map {
	"CREATE FOREIGN TABLE p$_ PARTITION OF p FOR VALUES IN ($_) SERVER s
	   OPTIONS (table_name 't$_');"
} 1 .. 4));

# One of the shard's three places is taken by a session of its own.
my $holder = $shard->background_psql('postgres');
$holder->query_safe('SELECT 1');

for my $mode ('stream', 'cursor')
{
	$coord->safe_psql('postgres',
		"ALTER SERVER s OPTIONS (" .
		($mode eq 'stream' ? 'ADD' : 'SET') . " fetch_mode '$mode')");
	is( $coord->safe_psql('postgres', q{
			SELECT count(*), sum(id), count(DISTINCT part) FROM p;
			SELECT count(*) <= 2 FROM async_fdw_get_connections();
		}),
		"4000|2002000|4\nt",
		"$mode: the query succeeds on the connections the shard had room for");
}

# Room again: the pool grows (the refusal window of one second is over).
$holder->quit;
sleep 2;
is( $coord->safe_psql('postgres', q{
		BEGIN;
		DECLARE c CURSOR FOR SELECT * FROM p;
		FETCH 1 FROM c;
		SELECT count(*) FROM async_fdw_get_connections();
		COMMIT;
	}) =~ /\n(\d+)$/ ? $1 : -1,
	3, 'with room, the four scans open the connections the shard allows');

# 3. A connection past the first is opened with the shard's
# idle_session_timeout; in the last quarter of that time the session does
# not use it (the shard might close it while a command is on its way), it
# opens another.  The first connection is kept and used.
# (Two connections, which the shard has room for: a refusal would have
# the session give its further connections back at once.)
$coord->safe_psql('postgres',
	"ALTER SERVER s OPTIONS (ADD idle_timeout '2000', ADD max_connections '2')");
my $s = $coord->background_psql('postgres');
my $pids = q{SELECT string_agg(slot || ':' || remote_backend_pid, ',' ORDER BY slot)
	FROM async_fdw_get_connections()};
$s->query_safe('SELECT count(*) FROM p');
my $before_pids = $s->query_safe($pids);
like($before_pids, qr/^0:\d+,1:\d+/, 'the query opened more than one connection');
select(undef, undef, undef, 1.6);
is($s->query_safe('SELECT count(*), sum(id) FROM p'), '4000|2002000',
	'a query after 1.6 s of the 2 s idle time');
my $after_pids = $s->query_safe($pids);
my ($first_before) = $before_pids =~ /^0:(\d+)/;
my ($first_after) = $after_pids =~ /^0:(\d+)/;
my ($second_before) = $before_pids =~ /,1:(\d+)/;
my ($second_after) = $after_pids =~ /,1:(\d+)/;
is($first_after, $first_before, '... used the first connection, kept for good');
isnt($second_after, $second_before,
	'... and opened the second again rather than use it so close to its end');
$s->quit;

done_testing();
