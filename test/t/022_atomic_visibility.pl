# test/t/022_atomic_visibility.pl
#   Reads never see half of a transaction that committed on several
#   shards (the commit fence, async_fdw.atomic_visibility).  Accounts whose
#   total never changes are spread over 2 and 4 shards (and over 4
#   partitions on 2 shards); pgbench clients move money between shards in
#   transactions (two-phase commit) while readers add up the total: one
#   statement over every shard, and a REPEATABLE READ transaction that
#   reads one half of the shards and then the other (its second statement
#   is checked, and may fail with 40001, which pgbench retries).  Another
#   client moves money within one shard at the same time.  With the fence
#   no read is wrong, the final total is right and nothing stays prepared;
#   with the setting off, the same run finds wrong totals.
#
#   AFDW_VIS_SECONDS (default 4) sets each run's length; the long form of
#   this test is test/bench/atomic_visibility.sh.

use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

my $seconds = $ENV{AFDW_VIS_SECONDS} // 4;

my @shards;
for my $i (1 .. 4)
{
	my $node = PostgreSQL::Test::Cluster->new("visshard$i");
	$node->init;
	$node->append_conf('postgresql.conf', "max_prepared_transactions = 40\n");
	$node->start;
	push @shards, $node;
}

my $coord = PostgreSQL::Test::Cluster->new('viscoord');
$coord->init;
$coord->append_conf('postgresql.conf', "shared_preload_libraries = 'async_fdw'\n");
$coord->start;
$coord->safe_psql('postgres', q{
	CREATE EXTENSION async_fdw;
	CREATE TABLE wrong (layout text, reader text, total bigint);
});
for my $i (1 .. 4)
{
	my ($host, $port) = ($shards[ $i - 1 ]->host, $shards[ $i - 1 ]->port);
	$coord->safe_psql('postgres', qq{
		CREATE SERVER vis$i FOREIGN DATA WRAPPER async_fdw
		  OPTIONS (host '$host', port '$port', dbname 'postgres');
		CREATE USER MAPPING FOR CURRENT_USER SERVER vis$i;
	});
}

# make_layout(name, [shard of each partition], ids per partition): 200
# accounts of 1000, ids split evenly over the partitions in order.
sub make_layout
{
	my ($name, $where) = @_;
	my $parts = scalar @$where;
	my $per = 200 / $parts;
	$coord->safe_psql('postgres',
		"CREATE TABLE $name (id int, bal int) PARTITION BY RANGE (id)");
	for my $p (0 .. $parts - 1)
	{
		my ($lo, $hi) = ($p * $per + 1, ($p + 1) * $per);
		my $shard = $where->[$p];
		$shards[ $shard - 1 ]->safe_psql('postgres', qq{
			CREATE TABLE ${name}_$p (id int PRIMARY KEY, bal int);
			INSERT INTO ${name}_$p SELECT g, 1000 FROM generate_series($lo, $hi) g;
		});
		$coord->safe_psql('postgres', qq{
			CREATE FOREIGN TABLE ${name}_$p PARTITION OF $name
			  FOR VALUES FROM ($lo) TO (@{[ $hi + 1 ]}) SERVER vis$shard
			  OPTIONS (table_name '${name}_$p');
		});
	}
}
make_layout('two', [ 1, 2 ]);
make_layout('four', [ 1, 2, 3, 4 ]);
make_layout('twoparts', [ 1, 1, 2, 2 ]);

my $dir = $coord->basedir;

# write_script(name, text): a pgbench script file.
sub write_script
{
	my ($name, $text) = @_;
	open my $fh, '>', "$dir/$name" or die $!;
	print $fh $text;
	close $fh;
	return "$dir/$name";
}

# start_pgbench(script, clients, extra options): a pgbench run of $seconds.
sub start_pgbench
{
	my ($script, $clients, @extra) = @_;
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start(
		[ 'pgbench', '-n', '-h', $coord->host, '-p', $coord->port,
		  '-c', $clients, '-T', $seconds, '--max-tries', 1000,
		  @extra, '-f', $script, 'postgres' ],
		'>', \$out, '2>', \$err);
	return { h => $h, out => \$out, err => \$err };
}

# processed(run): the transactions a finished pgbench run processed.
sub processed
{
	my ($run) = @_;
	my ($n) = ${ $run->{out} } =~ /number of transactions actually processed: (\d+)/;
	return $n // 0;
}

# run_layout(layout, first half's ids, setting): transfers across the
# halves, a transfer within the first shard, and the two readers, all at
# once; returns (statement reads, RR reads, wrong statement reads, wrong
# RR reads, transfers).
sub run_layout
{
	my ($layout, $half, $setting) = @_;
	$coord->safe_psql('postgres', 'TRUNCATE wrong');
	my $opts = "-c async_fdw.atomic_visibility=$setting";
	local $ENV{PGOPTIONS} = $opts;
	my $transfer = write_script("transfer_$layout.sql", qq{
\\set a random(1, $half)
\\set b random($half + 1, 200)
BEGIN;
UPDATE $layout SET bal = bal - 1 WHERE id = :a;
UPDATE $layout SET bal = bal + 1 WHERE id = :b;
COMMIT;
});
	my $local = write_script("local_$layout.sql", qq{
\\set a random(1, 10)
\\set b random(11, 20)
BEGIN;
UPDATE $layout SET bal = bal - 1 WHERE id = :a;
UPDATE $layout SET bal = bal + 1 WHERE id = :b;
COMMIT;
});
	my $stmt = write_script("stmt_$layout.sql", qq{
SELECT sum(bal) AS total FROM $layout \\gset
\\if :total != 200000
INSERT INTO wrong VALUES ('$layout', 'statement', :total);
\\endif
});
	my $rr = write_script("rr_$layout.sql", qq{
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT sum(bal) AS low FROM $layout WHERE id <= $half \\gset
SELECT sum(bal) AS high FROM $layout WHERE id > $half \\gset
COMMIT;
\\if :low + :high != 200000
INSERT INTO wrong VALUES ('$layout', 'repeatable read', :low + :high);
\\endif
});
	my @runs = (
		start_pgbench($transfer, 4, '-j', 2),
		start_pgbench($local, 1),
		start_pgbench($stmt, 1),
		start_pgbench($rr, 1));
	for my $run (@runs)
	{
		$run->{h}->finish;
		is($run->{h}->result(0), 0, "$layout ($setting): pgbench ends without error")
		  or diag(${ $run->{out} } . ${ $run->{err} });
	}
	my ($ws, $wr) = split /\|/, $coord->safe_psql('postgres',
		"SELECT count(*) FILTER (WHERE reader = 'statement'),
		        count(*) FILTER (WHERE reader = 'repeatable read') FROM wrong");
	return (processed($runs[2]), processed($runs[3]), $ws, $wr, processed($runs[0]));
}

# after_run(layout): the total is right everywhere, nothing stays prepared.
sub after_run
{
	my ($layout, $setting) = @_;
	is($coord->safe_psql('postgres', "SELECT sum(bal) FROM $layout"), '200000',
		"$layout ($setting): the final total is right");
	my $prepared = 0;
	for my $s (@shards)
	{
		ok($s->poll_query_until('postgres', 'SELECT count(*) = 0 FROM pg_prepared_xacts'),
			"$layout ($setting): nothing stays prepared on " . $s->name);
	}
}

for my $case ([ 'two', 100 ], [ 'four', 100 ], [ 'twoparts', 100 ])
{
	my ($layout, $half) = @$case;
	my ($ns, $nr, $ws, $wr, $nt) = run_layout($layout, $half, 'on');
	note "$layout, fence on: $nt transfers, $ns statement reads ($ws wrong), "
	  . "$nr repeatable read reads ($wr wrong)";
	cmp_ok($ns, '>', 0, "$layout: the statement reader read");
	cmp_ok($nr, '>', 0, "$layout: the repeatable read reader read");
	cmp_ok($nt, '>', 0, "$layout: transfers committed");
	is($ws, '0', "$layout: no statement read saw part of a transfer");
	is($wr, '0', "$layout: no repeatable read transaction saw part of a transfer");
	after_run($layout, 'on');
}

# The same without the fence finds the anomaly the fence removes (a
# reader's snapshots of the two shards taken at different moments).
my ($ns, $nr, $ws, $wr, $nt) = run_layout('two', 100, 'off');
note "two, fence off: $nt transfers, $ns statement reads ($ws wrong), "
  . "$nr repeatable read reads ($wr wrong)";
cmp_ok($ws + $wr, '>', 0, 'without the fence, reads see part of a transfer');
after_run('two', 'off');

# The fence's waits.  A committer paused between its local commit and its
# COMMIT PREPAREDs (the developer setting) holds the fence: a read of both
# shards waits for it (wait event AsyncFdwCommitFence from 17), one second
# at most, then takes its snapshots without it and checks them: the paused
# transfer has reached no shard, so the read succeeds, without it.  A read
# of one shard does not wait.
my $wait_name = $coord->safe_psql('postgres', 'SHOW server_version_num') >= 170000
  ? 'AsyncFdwCommitFence' : 'Extension';
$coord->safe_psql('postgres', 'UPDATE two SET bal = 1000');
my $log_at = -s $coord->logfile;
my $committer = $coord->background_psql('postgres');
$committer->query_safe(
	"SET async_fdw.debug_two_phase_pause = 'before_commit_prepared'");
$committer->query_until(qr/started/, q{\echo started
BEGIN;
UPDATE two SET bal = bal - 5 WHERE id = 1;
UPDATE two SET bal = bal + 5 WHERE id = 101;
COMMIT;
});
ok($coord->wait_for_log(qr/pausing two-phase commit \(before_commit_prepared\)/, $log_at),
	'a transfer pauses before its COMMIT PREPAREDs, holding the fence');
my $reader = $coord->background_psql('postgres', on_error_stop => 0);
my $rpid = $reader->query_safe('SELECT pg_backend_pid()');
$reader->{stderr} = '';
$reader->query_until(qr/started/, "\\echo started\nSELECT sum(bal) FROM two;\n");
ok($coord->poll_query_until('postgres',
	"SELECT wait_event = '$wait_name' FROM pg_stat_activity WHERE pid = $rpid"),
	"a read of both shards waits for the fence ($wait_name)");
is($coord->safe_psql('postgres', 'SELECT sum(bal) FROM two WHERE id <= 100'), '100000',
	'a read of one shard does not wait, and does not see the transfer yet');
is($reader->query('SELECT 1'), "200000\n1",
	'after a second the read goes on without the fence, checked, and sees none of the transfer');
is($reader->{stderr}, '', 'without error');
$coord->reload;
$committer->query_safe('SELECT 1');
is($reader->query_safe('SELECT sum(bal), sum(bal) FILTER (WHERE id <= 100) FROM two'),
	'200000|99995', 'once the transfer has committed everywhere, a read sees all of it');
$committer->quit;

# A reader lets the fence go as soon as its servers have taken their
# snapshots, not when its queries end: a transfer during a slow read of
# both shards does not wait for the read, and the read, not checked, sees
# none of it.
for my $i (1 .. 2)
{
	$shards[ $i - 1 ]->safe_psql('postgres',
		"CREATE VIEW slow_$i AS SELECT id, bal FROM two_@{[ $i - 1 ]} WHERE pg_sleep(0.015) IS NOT NULL");
}
$coord->safe_psql('postgres', q{
	CREATE TABLE slow (id int, bal int) PARTITION BY RANGE (id);
	CREATE FOREIGN TABLE slow_1 PARTITION OF slow FOR VALUES FROM (1) TO (101)
	  SERVER vis1 OPTIONS (table_name 'slow_1');
	CREATE FOREIGN TABLE slow_2 PARTITION OF slow FOR VALUES FROM (101) TO (201)
	  SERVER vis2 OPTIONS (table_name 'slow_2');
});
my $slow = $coord->background_psql('postgres', on_error_stop => 0);
$slow->{stderr} = '';
$slow->query_until(qr/started/, "\\echo started\nSELECT sum(bal) FROM slow;\n");
usleep(50_000);
$coord->safe_psql('postgres', q{
	BEGIN;
	UPDATE two SET bal = bal - 3 WHERE id = 3;
	UPDATE two SET bal = bal + 3 WHERE id = 103;
	COMMIT;
});
is($slow->query('SELECT 1'), "200000\n1",
	'a transfer during a slow read of both shards commits; the read sees none of it');
is($slow->{stderr}, '', 'the slow read was not checked: it had let the fence go');
$slow->quit;

# A reader holds the fence until every server has taken its snapshot, one
# second at most: with its backend on shard 2 stopped, a transfer waits at
# its commit for that second, then commits; the reader, once the shard
# answers, finds that a commit on several of its servers came between its
# snapshots and fails with 40001.
my $held = $coord->background_psql('postgres', on_error_stop => 0);
$held->query_safe('SELECT sum(bal) FROM two');
my $remote_pid = $held->query_safe(
	"SELECT remote_backend_pid FROM async_fdw_get_connections() WHERE server_name = 'vis2' ORDER BY slot LIMIT 1");
kill 'STOP', $remote_pid;
my $hpid = $held->query_safe('SELECT pg_backend_pid()');
$held->{stderr} = '';
$held->query_until(qr/started/, "\\echo started\nSELECT sum(bal) FROM two;\n");
ok($coord->poll_query_until('postgres',
	"SELECT wait_event = '@{[ $wait_name eq 'Extension' ? 'Extension' : 'AsyncFdwGetResult' ]}' FROM pg_stat_activity WHERE pid = $hpid"),
	"a read waits for a stopped shard's snapshot, holding the fence");
$coord->safe_psql('postgres', q{
	BEGIN;
	UPDATE two SET bal = bal - 7 WHERE id = 2;
	UPDATE two SET bal = bal + 7 WHERE id = 102;
	COMMIT;
});
is($coord->safe_psql('postgres', 'SELECT bal FROM two WHERE id IN (2, 102) ORDER BY id'),
	"993\n1007", 'a transfer commits once the slow reader has let the fence go');
kill 'CONT', $remote_pid;
$held->query('SELECT 1');
like($held->{stderr}, qr/could not serialize access due to a concurrent commit on several servers/,
	'the slow reader, checked, fails with a serialization failure');
$held->{stderr} = '';
is($held->query_safe('SELECT sum(bal) FROM two'), '200000', 'and succeeds when retried');
$held->quit;
# What says whether commits are fenced: async_fdw_get_connections'
# commit_fence, and EXPLAIN VERBOSE of a write over several servers, which
# names the fence only when it is not used.
is($coord->safe_psql('postgres', q{
	SELECT count(*) FROM two;
	SELECT string_agg(DISTINCT commit_fence, ',') FROM async_fdw_get_connections();
}), "200\non", 'commit_fence is on when preloaded');
is($coord->safe_psql('postgres', q{
	SET async_fdw.atomic_visibility = off;
	SELECT count(*) FROM two;
	SELECT string_agg(DISTINCT commit_fence, ',') FROM async_fdw_get_connections();
}), "200\nturned off", 'and turned off with the setting off');
my $explain = q{EXPLAIN (VERBOSE, COSTS OFF) UPDATE two SET bal = bal WHERE id IN (1, 101)};
unlike($coord->safe_psql('postgres', $explain), qr/Commit Fence/,
	'EXPLAIN VERBOSE of a write over two shards says nothing of the fence when it is used');
my $off_plan = $coord->safe_psql('postgres', "SET async_fdw.atomic_visibility = off; $explain");
is(scalar(() = $off_plan =~ /Commit Fence: turned off/g), 1,
	'and names it, once, when it is turned off');

# A REPEATABLE READ transaction whose first statement writes on one shard
# takes the other shard's snapshot with it, under the fence
# (async_fdw.snapshot_scope partitioned_tables, the default): a transfer
# that commits after that statement is not in its view of the other shard,
# and its write there goes through.  With servers_read the other shard's
# snapshot is taken by the second write, after the transfer: checked, it
# fails with 40001.
my $rr = $coord->background_psql('postgres', on_error_stop => 0);
for my $scope ('partitioned_tables', 'servers_read')
{
	my $before = $coord->safe_psql('postgres', 'SELECT bal FROM two WHERE id = 105');
	$rr->query_safe("SET async_fdw.snapshot_scope = $scope");
	$rr->query_safe('BEGIN ISOLATION LEVEL REPEATABLE READ');
	$rr->query_safe('UPDATE two SET bal = bal - 1 WHERE id = 4');
	$coord->safe_psql('postgres', q{
		BEGIN;
		UPDATE two SET bal = bal - 2 WHERE id = 5;
		UPDATE two SET bal = bal + 2 WHERE id = 105;
		COMMIT;
	});
	$rr->{stderr} = '';
	my $out = $rr->query('UPDATE two SET bal = bal + 1 WHERE id = 104');
	if ($scope eq 'partitioned_tables')
	{
		is($rr->{stderr}, '', 'RR, first statement a write: its write on the other shard goes through');
		is($rr->query_safe('SELECT bal FROM two WHERE id = 105'), $before,
			'and its view of that shard has none of the transfer committed after its first statement');
		$rr->query_safe('COMMIT');
	}
	else
	{
		like($rr->{stderr}, qr/could not serialize access due to a concurrent commit on several servers/,
			'RR with snapshot_scope servers_read: the later write is checked and fails with 40001');
		$rr->query('ROLLBACK');
	}
}
$rr->quit;
is($coord->safe_psql('postgres', 'SELECT sum(bal) FROM two'), '200000',
	'the total is right after the REPEATABLE READ writes');

# A function's statements are not the client's statement, though the
# statement that calls the function is its own transaction: the first one,
# reading shard 1, notes the fence's floor; a transfer between the shards
# commits (in another session); the second statement reads both shards,
# shard 1 in the remote transaction of the first, shard 2 anew: checked, it
# fails with 40001 rather than see the transfer on one shard only (before,
# it returned a total off by the transfer).
my ($h1, $p1) = ($coord->host, $coord->port);
$coord->safe_psql('postgres', qq{
	CREATE EXTENSION dblink;
	CREATE FUNCTION read_around_transfer() RETURNS bigint LANGUAGE plpgsql AS \$\$
	DECLARE
	  low bigint;
	BEGIN
	  SELECT sum(bal) INTO low FROM two WHERE id <= 100;
	  PERFORM dblink_exec('host=$h1 port=$p1 dbname=postgres',
	    'BEGIN; UPDATE two SET bal = bal - 9 WHERE id = 8; UPDATE two SET bal = bal + 9 WHERE id = 108; COMMIT');
	  RETURN (SELECT sum(bal) FROM two);
	END
	\$\$;
});
my ($frc, $fout, $ferr) = $coord->psql('postgres', 'SELECT read_around_transfer()');
like($ferr, qr/could not serialize access due to a concurrent commit on several servers/,
	'a function reading one shard, then both after a transfer between them, fails with 40001');
is($coord->safe_psql('postgres', 'SELECT sum(bal), bal FROM two WHERE id IN (8) GROUP BY bal'),
	'991|991', 'the transfer committed (in its own session)');
is($coord->safe_psql('postgres', 'SELECT sum(bal) FROM two'), '200000',
	'and a read of both shards sees all of it');

# A cancel that reaches a committer while it waits for its COMMIT
# PREPAREDs does not let it leave the fence before they have answered:
# with shard 2's backend stopped after shard 1 committed, a read of both
# shards waits its second, then, checked, fails with 40001, rather than see
# the transfer on shard 1 only (before, the cancel ended the committer's
# waits at once, it left the fence, and the read saw part of the transfer).
my $victim = $coord->background_psql('postgres', on_error_stop => 0);
$victim->query_safe("SET async_fdw.application_name = 'fence_victim'");
$victim->query_safe("SET async_fdw.debug_two_phase_pause = 'before_commit_prepared'");
my $vpid = $victim->query_safe('SELECT pg_backend_pid()');
$log_at = -s $coord->logfile;
$victim->query_until(qr/started/, q{\echo started
BEGIN;
UPDATE two SET bal = bal - 10 WHERE id = 9;
UPDATE two SET bal = bal + 10 WHERE id = 109;
COMMIT;
});
ok($coord->wait_for_log(qr/pausing two-phase commit \(before_commit_prepared\)/, $log_at),
	'a transfer pauses before its COMMIT PREPAREDs');
my @vremote = split /\n/, $shards[1]->safe_psql('postgres',
	"SELECT pid FROM pg_stat_activity WHERE application_name = 'fence_victim'");
kill 'STOP', @vremote;
$coord->safe_psql('postgres', "SELECT pg_cancel_backend($vpid)");
ok($shards[0]->poll_query_until('postgres', 'SELECT bal = 990 FROM two_0 WHERE id = 9'),
	'the cancel ends the pause; shard 1 commits');
my ($vrc, $vout, $verr) = $coord->psql('postgres', 'SELECT sum(bal) FROM two');
like($verr, qr/could not serialize access due to a concurrent commit on several servers/,
	'a read of both shards while shard 2 has not answered fails with 40001');
kill 'CONT', @vremote;
$victim->query('SELECT 1');
$victim->quit;
is($coord->safe_psql('postgres', 'SELECT sum(bal), (SELECT bal FROM two WHERE id = 109) FROM two'),
	'200000|1010', 'once shard 2 answers, a read sees the whole transfer');
ok($shards[1]->poll_query_until('postgres', 'SELECT count(*) = 0 FROM pg_prepared_xacts'),
	'and nothing stays prepared');

for my $s (@shards)
{
	ok($s->poll_query_until('postgres', 'SELECT count(*) = 0 FROM pg_prepared_xacts'),
		'nothing stays prepared on ' . $s->name);
}

done_testing();
