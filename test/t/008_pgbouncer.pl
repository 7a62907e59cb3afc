# test/t/008_pgbouncer.pl
#   async_fdw through a real pgbouncer (Debian's, with its default settings)
#   in transaction and session mode: the startup packet is accepted, the
#   session settings hold in every remote transaction, and 8 concurrent
#   sessions running scans, lookups, nested-loop lookups and transactions
#   with savepoints get the results a direct connection gets.

use strict;
use warnings;

use File::Path qw(make_path);
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $pgbouncer = '/usr/sbin/pgbouncer';
plan skip_all => "pgbouncer is not installed ($pgbouncer): apt-get install pgbouncer"
  unless -x $pgbouncer;

my $sessions = 8;
my $rounds = 6;

# The shard: four tables for the partitions of ld, a lookup table, and a
# view of the settings its session reads under.
my $shard = PostgreSQL::Test::Cluster->new('shard');
$shard->init;
$shard->append_conf('postgresql.conf', qq{
log_statement = 'all'
log_line_prefix = '%a|'
max_connections = 60
});
# Writes through two servers (pgbouncer's and the direct one) commit with
# two-phase commit (auto), through pgbouncer too.
$shard->append_conf('postgresql.conf', "max_prepared_transactions = 10\n");
$shard->start;
$shard->safe_psql('postgres', q{
	CREATE TABLE ld_1 (id int, v int, t text);
	CREATE TABLE ld_2 (id int, v int, t text);
	CREATE TABLE ld_3 (id int, v int, t text);
	CREATE TABLE ld_4 (id int, v int, t text);
	INSERT INTO ld_1 SELECT g, g % 97, 'row ' || g FROM generate_series(1, 2500) g;
	INSERT INTO ld_2 SELECT g, g % 89, 'row ' || g FROM generate_series(2501, 5000) g;
	INSERT INTO ld_3 SELECT g, g % 83, 'row ' || g FROM generate_series(5001, 7500) g;
	INSERT INTO ld_4 SELECT g, g % 79, 'row ' || g FROM generate_series(7501, 10000) g;
	CREATE TABLE lk (id int PRIMARY KEY, v int, ts timestamptz, f float8);
	INSERT INTO lk SELECT g, g * 7, timestamptz '2024-01-01 00:00 UTC' + g * interval '1 hour',
	  g / 3.0 FROM generate_series(1, 5000) g;
	CREATE VIEW settings_v AS
	  SELECT current_setting('search_path') AS sp, current_setting('TimeZone') AS tz,
	         current_setting('DateStyle') AS ds, current_setting('IntervalStyle') AS ist,
	         current_setting('extra_float_digits') AS efd, pg_backend_pid() AS pid;
	ANALYZE;
});
my $user = $shard->safe_psql('postgres', 'SELECT current_user');

# A pgbouncer before the shard: Debian's defaults but for the pool mode,
# the pool size and what a throwaway instance needs (its files, a port).
my @bouncers;
sub start_pgbouncer
{
	my ($name, $mode, $pool_size) = @_;
	my $dir = "${PostgreSQL::Test::Utils::tmp_check}/pgbouncer_$name";
	make_path($dir);
	my $port = PostgreSQL::Test::Cluster::get_free_port();
	my $host = $shard->host;
	my $shard_port = $shard->port;
	open(my $fh, '>', "$dir/userlist.txt") or die;
	print $fh qq{"$user" ""\n};
	close $fh;
	open($fh, '>', "$dir/pgbouncer.ini") or die;
	print $fh qq{[databases]
postgres = host=$host port=$shard_port dbname=postgres

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $port
unix_socket_dir =
auth_type = trust
auth_file = $dir/userlist.txt
pool_mode = $mode
logfile = $dir/pgbouncer.log
pidfile = $dir/pgbouncer.pid
};
	print $fh "default_pool_size = $pool_size\n" if defined $pool_size;
	close $fh;
	system($pgbouncer, '-d', "$dir/pgbouncer.ini") == 0
	  or die "could not start pgbouncer $name";
	# It listens once its pid file is written.
	for (1 .. 100)
	{
		last if -s "$dir/pgbouncer.pid";
		select(undef, undef, undef, 0.1);
	}
	push @bouncers, $dir;
	return $port;
}

END
{
	for my $dir (@bouncers)
	{
		next unless open(my $fh, '<', "$dir/pgbouncer.pid");
		my $pid = <$fh>;
		chomp $pid;
		kill 'TERM', $pid if $pid;
	}
}

# Transaction mode with a pool of 2 server sessions, so that consecutive
# transactions of one client really change sessions; session mode with
# pgbouncer's default pool size (20).
my $tx_port = start_pgbouncer('tx', 'transaction', 2);
my $sess_port = start_pgbouncer('sess', 'session');

my $coord = PostgreSQL::Test::Cluster->new('coordinator');
$coord->init;
$coord->start;
$coord->safe_psql('postgres', 'CREATE EXTENSION async_fdw');
$coord->safe_psql('postgres', q{
	CREATE TABLE keys (id int);
	INSERT INTO keys SELECT g * 37 % 4900 + 1 FROM generate_series(1, 10) g;
	ANALYZE keys;
});

# One server per way to the shard, each with the same tables: ld (four
# partitions), lk and the settings view.
my $shard_host = $shard->host;
my $shard_port = $shard->port;
my %servers = (
	direct => "host '$shard_host', port '$shard_port'",
	# auto: it finds pgbouncer by its refusal of the startup options
	tx => "host '127.0.0.1', port '$tx_port'",
	sess => "host '127.0.0.1', port '$sess_port', pooler 'session', max_connections '2'",
	txmax2 => "host '127.0.0.1', port '$tx_port', pooler 'transaction', max_connections '2'",
	txnone => "host '127.0.0.1', port '$tx_port', pooler 'none'");
for my $s (sort keys %servers)
{
	$coord->safe_psql('postgres', qq{
		CREATE SERVER s_$s FOREIGN DATA WRAPPER async_fdw
		  OPTIONS ($servers{$s}, dbname 'postgres', application_name 'afdw_$s');
		CREATE USER MAPPING FOR CURRENT_USER SERVER s_$s;
		CREATE TABLE ld_$s (id int, v int, t text) PARTITION BY RANGE (id);
		CREATE FOREIGN TABLE ld_${s}_1 PARTITION OF ld_$s FOR VALUES FROM (1) TO (2501)
		  SERVER s_$s OPTIONS (table_name 'ld_1');
		CREATE FOREIGN TABLE ld_${s}_2 PARTITION OF ld_$s FOR VALUES FROM (2501) TO (5001)
		  SERVER s_$s OPTIONS (table_name 'ld_2');
		CREATE FOREIGN TABLE ld_${s}_3 PARTITION OF ld_$s FOR VALUES FROM (5001) TO (7501)
		  SERVER s_$s OPTIONS (table_name 'ld_3');
		CREATE FOREIGN TABLE ld_${s}_4 PARTITION OF ld_$s FOR VALUES FROM (7501) TO (10001)
		  SERVER s_$s OPTIONS (table_name 'ld_4');
		CREATE FOREIGN TABLE lk_$s (id int, v int, ts timestamptz, f float8)
		  SERVER s_$s OPTIONS (table_name 'lk');
		CREATE FOREIGN TABLE settings_$s (sp text, tz text, ds text, ist text, efd text, pid int)
		  SERVER s_$s OPTIONS (table_name 'settings_v');
	});
}
# ANALYZE works through the poolers too.
$coord->safe_psql('postgres', 'ANALYZE lk_direct, lk_tx, lk_sess');
is($coord->safe_psql('postgres',
	"SELECT string_agg(relname || ':' || reltuples, ',' ORDER BY relname) FROM pg_class WHERE relname IN ('lk_direct', 'lk_tx', 'lk_sess')"),
	'lk_direct:5000,lk_sess:5000,lk_tx:5000', 'ANALYZE through the poolers');

# The nested loops below run parameterized scans of lk: lookups.
my $nestloop = q{SET enable_hashjoin = off; SET enable_mergejoin = off;
SET enable_material = off; SET enable_memoize = off;
};
like($coord->safe_psql('postgres', $nestloop
	. 'EXPLAIN (VERBOSE, COSTS OFF) SELECT count(*) FROM keys k JOIN lk_tx l ON l.id = k.id + 1'),
	qr/Nested Loop\n.*Seq Scan on public\.keys k\n(?s:.*)Remote SQL: SELECT id FROM public\.lk WHERE \(\((\(\$1::integer \+ 1\) = id|id = \(\$1::integer \+ 1\))\)\)/,
	'the nested loop runs lookups');

# The option is checked like the others.
my ($ret, $out, $err) = $coord->psql('postgres',
	q{CREATE SERVER bad FOREIGN DATA WRAPPER async_fdw OPTIONS (pooler 'statement')},
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like($err, qr/42601: invalid value for option "pooler": "statement"/,
	'a pooler other than auto, none, session or transaction is refused');
like($err, qr/The option takes auto, none, session or transaction\./,
	'the refusal says which values the option takes');

# With pooler none, the options travel in the startup packet as before,
# and pgbouncer refuses them.
($ret, $out, $err) = $coord->psql('postgres', 'SELECT count(*) FROM lk_txnone');
like($err, qr/could not connect to server "s_txnone".*unsupported startup parameter(: options| in options)/s,
	'pooler none sends the startup options, which pgbouncer refuses');

# With auto (the default) and with session, the connection is made, and
# the remote session reads under async_fdw's settings, as directly.
my $direct_settings = $coord->safe_psql('postgres',
	'SELECT sp, tz, ds, ist, efd FROM settings_direct');
like($direct_settings, qr/^pg_catalog\|UTC\|ISO, \w+\|postgres\|3$/,
	'the settings of a direct connection');
for my $s (qw(tx sess txmax2))
{
	is($coord->safe_psql('postgres', "SELECT sp, tz, ds, ist, efd FROM settings_$s"),
		$direct_settings, "through pgbouncer ($s), the remote session has the settings");
}

# Through the transaction pooler, no statement is prepared (the lookup's
# values go inline), and the settings go with the transaction's start.
my $log_offset = -s $shard->logfile;
$coord->safe_psql('postgres', $nestloop . q{
	SELECT count(*), sum(l.v) FROM keys k JOIN lk_tx l ON l.id = k.id;
	SELECT count(*), sum(l.v) FROM keys k JOIN lk_direct l ON l.id = k.id;
});
my $log = slurp_file($shard->logfile, $log_offset);
# (The planner puts the parameter first before PostgreSQL 16, the column
# first from 16 on.)
like($log, qr/^afdw_tx\|.*SELECT id, v FROM public\.lk WHERE \(\(('\d+'::integer = id|id = '\d+'::integer)\)\) LIMIT 101/m,
	'through the transaction pooler, a lookup goes with its values inline');
unlike($log, qr/^afdw_tx\|.*(PREPARE|EXECUTE|DEALLOCATE)/m,
	'no statement prepared through the transaction pooler');
like($log, qr/^afdw_tx\|.*START TRANSACTION ISOLATION LEVEL REPEATABLE READ; SET LOCAL search_path = pg_catalog; SET LOCAL TimeZone = 'UTC'; SET LOCAL DateStyle = ISO; SET LOCAL IntervalStyle = postgres; SET LOCAL extra_float_digits = 3; SAVEPOINT afdw_ra/m,
	'the settings go with the start of the remote transaction');
like($log, qr/^afdw_direct\|.*PREPARE afdw_s\d+ AS SELECT id, v FROM public\.lk/m,
	'a direct connection still prepares its lookups');
like($log, qr/^afdw_direct\|.*START TRANSACTION/m, 'the direct connection was used');
unlike($log, qr/^afdw_direct\|.*SET /m,
	'a direct connection sets nothing: its settings are in the startup packet');

# The workload of one session, against the tables of server S: each query
# prints one line.
sub workload
{
	my ($s, $round) = @_;
	my $k = 1 + ($round * 131) % 4900;
	return qq{
SELECT count(*), sum(v), min(t), max(t) FROM ld_$s;
SELECT count(*), sum(v) FROM ld_$s WHERE id % 7 = $round;
SELECT id, v, ts, f FROM lk_$s WHERE id = $k;
SELECT count(*), sum(l.v), max(l.ts), sum(l.f) FROM keys k JOIN lk_$s l ON l.id = k.id + $round;
BEGIN;
SELECT count(*), sum(v) FROM ld_$s WHERE id > $k;
SAVEPOINT a;
SELECT count(*) FROM lk_$s WHERE 1 / (id - id) = 1;
ROLLBACK TO SAVEPOINT a;
SELECT count(*), sum(l.v) FROM keys k JOIN lk_$s l ON l.id = k.id;
SAVEPOINT b;
SELECT id, v FROM lk_$s WHERE id = $k + 1;
RELEASE SAVEPOINT b;
SELECT sp, tz, ds, ist, efd FROM settings_$s;
COMMIT;
SELECT 'pid', pid, sp, tz, ds, ist, efd FROM settings_$s;
};
}

# Runs the workload against server S in $sessions concurrent sessions;
# returns per session the lines printed and the errors.
sub run_concurrently
{
	my ($s) = @_;
	my @runs;
	for my $i (1 .. $sessions)
	{
		my $script = $nestloop;
		$script .= workload($s, $i * 100 + $_) for 1 .. $rounds;
		my ($stdout, $stderr) = ('', '');
		my $h = IPC::Run::start(
			[ $coord->installed_command('psql'), '-XAtq', '-d', $coord->connstr('postgres'), '-f', '-' ],
			'<', \$script, '>', \$stdout, '2>', \$stderr);
		push @runs, [ $h, \$stdout, \$stderr ];
	}
	my @results;
	for my $r (@runs)
	{
		$r->[0]->finish;
		push @results, [ ${ $r->[1] }, ${ $r->[2] } ];
	}
	return @results;
}

for my $s (qw(tx sess))
{
	my @direct = run_concurrently('direct');
	$log_offset = -s $shard->logfile;
	my @pooled = run_concurrently($s);
	$log = slurp_file($shard->logfile, $log_offset);
	if ($s eq 'sess')
	{
		# A session pooler keeps the server session: the settings are
		# made once per connection, and lookups use prepared statements.
		like($log, qr/^afdw_sess\|.*statement: SET search_path = pg_catalog; SET TimeZone = 'UTC'; SET DateStyle = ISO; SET IntervalStyle = postgres; SET extra_float_digits = 3$/m,
			'through the session pooler, the settings are made once per connection');
		unlike($log, qr/^afdw_sess\|.*SET LOCAL/m, 'and not in each transaction');
		like($log, qr/^afdw_sess\|.*PREPARE afdw_s\d+ AS SELECT/m,
			'through the session pooler, lookups are prepared');
	}
	else
	{
		unlike($log, qr/^afdw_tx\|.*(PREPARE|EXECUTE|DEALLOCATE)/m,
			'8 sessions through the transaction pooler prepared nothing');
	}
	for my $i (0 .. $sessions - 1)
	{
		my ($dout, $derr) = @{ $direct[$i] };
		my ($pout, $perr) = @{ $pooled[$i] };
		my @errs = grep { /ERROR/ } split /\n/, $perr;
		is(scalar(grep { !/ERROR:  division by zero/ } @errs), 0,
			"$s session $i: no error but the division by zero")
		  or diag($perr);
		is(scalar(@errs), $rounds, "$s session $i: each savepoint's error came");
		# The last line of each round names the remote backend: the rest
		# must be the same as through the direct connection.
		my @dl = split /\n/, $dout;
		my @pl = split /\n/, $pout;
		s/^pid\|\d+\|// for @dl, @pl;
		is_deeply(\@pl, \@dl, "$s session $i: the same results as directly");
		is(scalar(grep { /^pg_catalog\|UTC\|ISO, \w+\|postgres\|3$/ } @pl), 2 * $rounds,
			"$s session $i: the settings held in every transaction");
	}
}

# One coordinator session whose next transaction finds another server
# session behind the same pgbouncer connection: the server sessions it
# used are ended between two transactions, as a transaction pooler may
# hand each transaction another one.  The settings still hold, and the
# lookups, which would have run a statement prepared in the lost session,
# still work.
my $a = $coord->background_psql('postgres', on_error_stop => 0);
$a->query_safe($nestloop);
my $lookups = 'SELECT count(*), sum(l.v) FROM keys k JOIN lk_tx l ON l.id = k.id';
my $expected = $coord->safe_psql('postgres', $nestloop . $lookups =~ s/lk_tx/lk_direct/r);
is($a->query_safe($lookups), $expected, 'lookups through pgbouncer');
my ($pid1) = split /\|/, $a->query_safe('SELECT pid, sp FROM settings_tx');
$shard->safe_psql('postgres', q{
	SELECT pg_terminate_backend(pid) FROM pg_stat_activity
	 WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()
	   AND application_name LIKE 'afdw%'});
$shard->poll_query_until('postgres', q{
	SELECT count(*) = 0 FROM pg_stat_activity
	 WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()
	   AND application_name LIKE 'afdw%'})
  or die 'the server sessions did not end';
# pgbouncer drops the server connections it sees closed.
sleep 1;
my $after = $a->query_safe('SELECT pid, sp, tz FROM settings_tx');
my ($pid2) = split /\|/, $after;
isnt($pid2, $pid1, 'the next transaction runs in another server session');
like($after, qr/\|pg_catalog\|UTC$/, 'the settings hold in the new server session');
is($a->query_safe($lookups), $expected,
	'lookups in the new server session, through the same async_fdw connection');
$a->quit;

# Snapshot sharing through the transaction pooler: the first connection
# exports, the second imports in its own server session, both held for
# the transaction.  The server says pooler 'transaction': no connection
# attempt is refused first.
my $bouncer_log = "$bouncers[0]/pgbouncer.log";
my $bouncer_offset = -s $bouncer_log;
$log_offset = -s $shard->logfile;
is($coord->safe_psql('postgres', q{
	BEGIN ISOLATION LEVEL REPEATABLE READ;
	SELECT count(*), sum(v) FROM ld_txmax2;
	SELECT count(*), sum(v) FROM ld_txmax2 WHERE id % 2 = 0;
	COMMIT;
}),
	$coord->safe_psql('postgres', q{
	SELECT count(*), sum(v) FROM ld_direct;
	SELECT count(*), sum(v) FROM ld_direct WHERE id % 2 = 0;
}),
	'two connections through the transaction pooler read the same data as directly');
$log = slurp_file($shard->logfile, $log_offset);
like($log, qr/pg_export_snapshot/, 'the first connection exports its snapshot');
like($log, qr/SET TRANSACTION SNAPSHOT '[^']+'; SET LOCAL search_path = pg_catalog/,
	'the second imports it, then takes the settings');
my $bouncer_lines = slurp_file($bouncer_log, $bouncer_offset);
like($bouncer_lines, qr/login attempt: db=postgres user=\Q$user\E/,
	'pgbouncer saw the connections');
unlike($bouncer_lines, qr/unsupported startup parameter/,
	'with pooler transaction, pgbouncer refused nothing');

# Writes through the poolers: single rows (the one sent with the COMMIT),
# a load streamed with COPY, COPY FROM, row-by-row UPDATE and DELETE, a
# transaction reading its own writes across a rolled-back savepoint; each
# way to the shard ends with the same rows as the direct one.
my $rows_file = $coord->basedir . '/wr_rows.txt';
open my $wfh, '>', $rows_file or die $!;
print $wfh "$_\t" . ($_ % 13) . "\tcopied\\ttab $_\n" for 5001 .. 5600;
close $wfh;
$coord->safe_psql('postgres', q{
	CREATE FUNCTION local_odd(int) RETURNS boolean LANGUAGE plpgsql AS
	  $$ BEGIN RETURN $1 % 2 = 1; END $$;
});
my %written;
for my $s (qw(direct tx sess))
{
	$shard->safe_psql('postgres', "CREATE TABLE wr_$s (id int PRIMARY KEY, v int, t text)");
	$coord->safe_psql('postgres', qq{
		CREATE FOREIGN TABLE wr_$s (id int, v int, t text)
		  SERVER s_$s OPTIONS (table_name 'wr_$s');
	});
	$written{$s} = $coord->safe_psql('postgres', qq{
		INSERT INTO wr_$s VALUES (1, 1, 'one');
		INSERT INTO wr_$s VALUES (2, 2, 'two');
		INSERT INTO wr_$s SELECT g, g % 7, 'load ' || g FROM generate_series(3, 3000) g;
		COPY wr_$s FROM '$rows_file';
		UPDATE wr_$s SET v = v + 100 WHERE local_odd(id) AND id < 200;
		DELETE FROM wr_$s WHERE local_odd(id) AND id > 5500;
		BEGIN;
		INSERT INTO wr_$s SELECT g, 0, 'tx' FROM generate_series(6001, 6500) g;
		SELECT count(*), sum(v) FROM wr_$s;
		SAVEPOINT s;
		UPDATE wr_$s SET v = -1 WHERE t = 'tx' AND local_odd(id);
		SELECT count(*), sum(v) FROM wr_$s;
		ROLLBACK TO SAVEPOINT s;
		SELECT count(*), sum(v) FROM wr_$s;
		COMMIT;
		SELECT count(*), sum(id), sum(v), max(t) FROM wr_$s;
	});
	is($shard->safe_psql('postgres', "SELECT count(*), sum(id), sum(v), max(t) FROM wr_$s"),
		$shard->safe_psql('postgres', 'SELECT count(*), sum(id), sum(v), max(t) FROM wr_direct'),
		"writes through $s: the shard holds the rows written directly");
}
is($written{tx}, $written{direct}, 'writes through the transaction pooler: the same results as directly');
is($written{sess}, $written{direct}, 'writes through the session pooler: the same results as directly');

done_testing();
