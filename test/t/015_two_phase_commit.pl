# test/t/015_two_phase_commit.pl
#   Two-phase commit across four real shards and the coordinator's own
#   table, with real crashes (pg_ctl stop -m immediate): the coordinator
#   killed after the remote PREPAREs (before and after its local commit), a
#   shard killed between its PREPARE and its COMMIT PREPARED, a deferred
#   constraint failing at PREPARE, a server that cannot prepare (an error
#   under on, postgres_fdw's commit under auto), when auto
#   and on use PREPARE (read in the shards' logs), and the local PREPARE
#   TRANSACTION refused.  After each case every server agrees with the
#   coordinator, no row is lost or doubled, nothing stays prepared and the
#   records table is empty.  The moments of the crashes come from the
#   developer setting async_fdw.debug_two_phase_pause (a pause of up to
#   30 s that a reload ends), as does a recovery that runs while a
#   transaction commits (its records must survive it); a cancel or a
#   termination in the pause is served at once.

use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my @shards;
for my $i (1 .. 4)
{
	my $node = PostgreSQL::Test::Cluster->new("tpshard$i");
	$node->init;
	$node->append_conf('postgresql.conf', qq{
max_prepared_transactions = 10
log_statement = 'all'
log_line_prefix = '%a|'
});
	$node->start;
	$node->safe_psql('postgres', q{
		CREATE TABLE items (a int PRIMARY KEY, b int);
		-- Fires at COMMIT or PREPARE: rejects a negative b.
		CREATE FUNCTION reject_negative() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF NEW.b < 0 THEN
				RAISE EXCEPTION 'b must not be negative (key %)', NEW.a;
			END IF;
			RETURN NULL;
		END $$;
	});
	push @shards, $node;
}
# Only shard 3 checks at commit.
$shards[2]->safe_psql('postgres', q{
	CREATE CONSTRAINT TRIGGER items_nonneg AFTER INSERT OR UPDATE ON items
	  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION reject_negative();
});

# A server that cannot prepare (named to come last: the recovery's debug
# pause stops at the first server).
my $noprep = PostgreSQL::Test::Cluster->new('tpnoprep');
$noprep->init;
$noprep->append_conf('postgresql.conf', "max_prepared_transactions = 0\n");
$noprep->start;
$noprep->safe_psql('postgres', 'CREATE TABLE items (a int PRIMARY KEY, b int)');

my $coord = PostgreSQL::Test::Cluster->new('tpcoord');
$coord->init;
# Local PREPARE TRANSACTION must fail for async_fdw's reason, not this one.
$coord->append_conf('postgresql.conf', "max_prepared_transactions = 10\n");
$coord->start;
$coord->safe_psql('postgres', q{
	CREATE EXTENSION async_fdw;
	CREATE TABLE ledger (a int PRIMARY KEY, note text);
	CREATE TABLE items (a int, b int) PARTITION BY HASH (a);
});
for my $i (1 .. 4)
{
	my ($host, $port, $r) = ($shards[ $i - 1 ]->host, $shards[ $i - 1 ]->port, $i - 1);
	$coord->safe_psql('postgres', qq{
		CREATE SERVER shard$i FOREIGN DATA WRAPPER async_fdw
		  OPTIONS (host '$host', port '$port', dbname 'postgres');
		CREATE USER MAPPING FOR CURRENT_USER SERVER shard$i;
		CREATE FOREIGN TABLE items_$i PARTITION OF items
		  FOR VALUES WITH (MODULUS 4, REMAINDER $r)
		  SERVER shard$i OPTIONS (table_name 'items');
	});
}
{
	my ($host, $port) = ($noprep->host, $noprep->port);
	$coord->safe_psql('postgres', qq{
		CREATE SERVER without2pc FOREIGN DATA WRAPPER async_fdw
		  OPTIONS (host '$host', port '$port', dbname 'postgres');
		CREATE USER MAPPING FOR CURRENT_USER SERVER without2pc;
		CREATE FOREIGN TABLE np_items (a int, b int)
		  SERVER without2pc OPTIONS (table_name 'items');
	});
}

# What every server must hold: key => b of items, keys of ledger.
my %items;
my %ledger;

# keys_on(SHARD, N, FROM): N keys above FROM that go to shard SHARD (1-4).
sub keys_on
{
	my ($shard, $n, $from) = @_;
	my $r = $shard - 1;
	return split /\n/, $coord->safe_psql('postgres', qq{
		SELECT g FROM generate_series($from + 1, $from + 1000) g
		WHERE satisfies_hash_partition('items'::regclass, 4, $r, g)
		ORDER BY g LIMIT $n});
}

# shard_of(KEY): the shard (1-4) that holds KEY (below 1000).
my %shard_of = map { split /\|/ } split /\n/, $coord->safe_psql('postgres', q{
	SELECT g, r + 1 FROM generate_series(1, 1000) g, generate_series(0, 3) r
	WHERE satisfies_hash_partition('items'::regclass, 4, r, g)});
sub shard_of
{
	my ($key) = @_;
	return $shard_of{$key} // die "no shard for $key";
}

# check_agree(CASE): nothing is left in doubt (recovery has nothing to do
# and deletes the records of the transactions that completed), every server
# agrees with what was committed, nothing is prepared anywhere, the
# records are gone.
sub check_agree
{
	my ($case) = @_;
	is(recover('false'), '', "$case: nothing in doubt");
	for my $node (@shards, $noprep, $coord)
	{
		is($node->safe_psql('postgres', 'SELECT count(*) FROM pg_prepared_xacts'), '0',
			"$case: nothing prepared on " . $node->name);
	}
	is($coord->safe_psql('postgres', 'SELECT count(*) FROM async_fdw_prepared_xacts'), '0',
		"$case: the records table is empty");
	my $want = join ',', map { "$_:$items{$_}" } sort { $a <=> $b } keys %items;
	is($coord->safe_psql('postgres',
		q{SELECT coalesce(string_agg(a || ':' || b, ',' ORDER BY a), '') FROM items}),
		$want, "$case: the coordinator reads every committed row once");
	my @held;
	for my $s (1 .. 4)
	{
		my @rows = grep { $_ ne '' } split /\n/,
		  $shards[ $s - 1 ]->safe_psql('postgres', q{SELECT a || ':' || b FROM items});
		push @held, @rows;
		my @stray = grep { shard_of((split /:/)[0]) != $s } @rows;
		is("@stray", '', "$case: shard$s holds only its own keys");
	}
	is(join(',', sort { (split /:/, $a)[0] <=> (split /:/, $b)[0] } @held), $want,
		"$case: the shards hold every committed row once, and no other");
	is($coord->safe_psql('postgres',
		q{SELECT coalesce(string_agg(a::text, ',' ORDER BY a), '') FROM ledger}),
		join(',', sort { $a <=> $b } keys %ledger),
		"$case: the local table holds its committed rows");
}

# start_xact(PAUSE, SQL...): run the statements in one psql session in the
# background, under the debug pause PAUSE.
sub start_xact
{
	my ($pause, @sql) = @_;
	my %h = (out => '', err => '');
	my @cmd = ('psql', '-X', '-v', 'ON_ERROR_STOP=1', '-d', $coord->connstr('postgres'),
		'-c', "SET async_fdw.debug_two_phase_pause = $pause");
	push @cmd, map { ('-c', $_) } @sql;
	$h{run} = IPC::Run::start(\@cmd, '>', \$h{out}, '2>', \$h{err});
	return \%h;
}

# paused_xact(PAUSE, S1, S2, FROM, VALUE[, LEDGER]): start a transaction
# writing VALUE under two keys above FROM of each of shards S1 and S2 (and
# with LEDGER, the ledger row VALUE), under the debug pause PAUSE, and wait
# until it pauses there: its run (start_xact) and its keys.
sub paused_xact
{
	my ($pause, $s1, $s2, $from, $value, $ledger) = @_;
	my @keys = (keys_on($s1, 2, $from), keys_on($s2, 2, $from));
	my $at = -s $coord->logfile;
	my $x = start_xact($pause,
		'BEGIN',
		'INSERT INTO items VALUES ' . join(', ', map { "($_, $value)" } @keys),
		(defined $ledger ? ("INSERT INTO ledger VALUES ($value, '$ledger')") : ()),
		'COMMIT');
	$coord->wait_for_log(qr/pausing two-phase commit \($pause\)/, $at);
	return ($x, @keys);
}

# every_shard_prepared(N): wait until each shard shows N prepared transactions.
sub every_shard_prepared
{
	my ($n) = @_;
	for my $node (@shards)
	{
		$node->poll_query_until('postgres',
			"SELECT count(*) = $n FROM pg_prepared_xacts WHERE gid LIKE 'afdw\\_%'")
		  or die 'timed out waiting for the prepared transaction on ' . $node->name;
	}
}

sub recover
{
	my ($dry) = @_;
	return $coord->safe_psql('postgres', qq{
		SELECT server_name || '|' || local_state || '|' || action
		FROM async_fdw_recover_prepared_transactions($dry) ORDER BY server_name});
}

my $four_shards = join "\n", map { "shard$_|%s|%s" } 1 .. 4;

# (a) The coordinator killed after its local commit, before the COMMIT
# PREPAREDs: recovery commits on every shard.
{
	my $x = start_xact('before_commit_prepared',
		'BEGIN',
		'INSERT INTO items SELECT g, 1 FROM generate_series(101, 140) g',
		"INSERT INTO ledger VALUES (1, 'a')",
		'COMMIT');
	every_shard_prepared(1);
	$coord->poll_query_until('postgres',
		'SELECT count(*) = 4 FROM async_fdw_prepared_xacts')
	  or die 'timed out waiting for the records';
	$coord->stop('immediate');
	$x->{run}->finish;
	$coord->start;
	is(recover('true'), sprintf($four_shards, ('committed', 'would commit') x 4),
		'(a) the dry run would commit on every shard');
	is($_->safe_psql('postgres', 'SELECT count(*) FROM pg_prepared_xacts'), '1',
		'(a) the dry run left ' . $_->name . "'s prepared transaction") for @shards;
	is(recover('false'), sprintf($four_shards, ('committed', 'committed') x 4),
		'(a) recovery committed on every shard');
	$items{$_} = 1 for 101 .. 140;
	$ledger{1} = 1;
	check_agree('(a) coordinator killed before COMMIT PREPARED');
}

# (b) The coordinator killed after the PREPAREs, before its local commit:
# recovery rolls back on every shard, and the local row is gone too.
{
	my $x = start_xact('after_prepare',
		'BEGIN',
		'INSERT INTO items SELECT g, 2 FROM generate_series(201, 240) g',
		"INSERT INTO ledger VALUES (2, 'b')",
		'COMMIT');
	every_shard_prepared(1);
	$coord->stop('immediate');
	$x->{run}->finish;
	$coord->start;
	is(recover('true'), sprintf($four_shards, ('aborted', 'would roll back') x 4),
		'(b) the dry run would roll back on every shard');
	is(recover('false'), sprintf($four_shards, ('aborted', 'rolled back') x 4),
		'(b) recovery rolled back on every shard');
	check_agree('(b) coordinator killed before its local commit');
}

# (c) A shard killed between its PREPARE and its COMMIT PREPARED: the
# COMMIT succeeds with a warning for that shard, its prepared transaction
# survives the restart, and recovery commits it.
{
	my $x = start_xact('before_commit_prepared',
		'BEGIN',
		'INSERT INTO items SELECT g, 3 FROM generate_series(301, 340) g',
		"INSERT INTO ledger VALUES (3, 'c')",
		'COMMIT');
	every_shard_prepared(1);
	$shards[1]->stop('immediate');
	$shards[1]->start;
	ok($x->{run}->finish, '(c) the COMMIT succeeds');
	like($x->{err}, qr/WARNING:  could not commit prepared transaction "afdw_\w+" on server "shard2"/,
		'(c) with a warning naming the restarted shard');
	unlike($x->{err}, qr/server "shard[134]"/, '(c) and no other');
	is($shards[1]->safe_psql('postgres', 'SELECT count(*) FROM pg_prepared_xacts'), '1',
		'(c) the prepared transaction survived the restart of shard2');
	is($_->safe_psql('postgres', 'SELECT count(*) FROM pg_prepared_xacts'), '0',
		'(c) ' . $_->name . ' committed') for @shards[ 0, 2, 3 ];
	is(recover('false'), 'shard2|committed|committed', '(c) recovery commits it');
	$items{$_} = 3 for 301 .. 340;
	$ledger{3} = 1;
	check_agree('(c) shard killed before COMMIT PREPARED');
}

# (d) A deferred constraint fails on shard 3 at PREPARE: the COMMIT fails
# with its error, and no server keeps anything.
{
	my @log_at = map { -s $_->logfile } @shards;
	my ($rc, $out, $err) = $coord->psql('postgres', q{
		BEGIN;
		INSERT INTO items SELECT g, -1 FROM generate_series(401, 440) g;
		INSERT INTO ledger VALUES (4, 'd');
		COMMIT;
	});
	isnt($rc, 0, '(d) the COMMIT fails');
	like($err, qr/ERROR:  b must not be negative \(key \d+\)/, '(d) with the remote error');
	for my $s (1, 2, 4)
	{
		like(slurp_file($shards[ $s - 1 ]->logfile, $log_at[ $s - 1 ]),
			qr/PREPARE TRANSACTION 'afdw_.*ROLLBACK PREPARED 'afdw_/s,
			"(d) shard$s prepared, then rolled back");
	}
	check_agree('(d) deferred constraint failing at PREPARE');
}

# (e) Four shards and the coordinator's table in one transaction: every
# shard prepares and commits it.
{
	my @log_at = map { -s $_->logfile } @shards;
	$coord->safe_psql('postgres', q{
		BEGIN;
		INSERT INTO items SELECT g, 5 FROM generate_series(501, 540) g;
		UPDATE items SET b = 50 WHERE a BETWEEN 101 AND 120;
		DELETE FROM items WHERE a BETWEEN 121 AND 130;
		INSERT INTO ledger VALUES (5, 'e');
		COMMIT;
	});
	for my $s (1 .. 4)
	{
		like(slurp_file($shards[ $s - 1 ]->logfile, $log_at[ $s - 1 ]),
			qr/PREPARE TRANSACTION '(afdw_\w+)'.*COMMIT PREPARED '\1'/s,
			"(e) shard$s prepared, then committed");
	}
	$items{$_} = 5 for 501 .. 540;
	$items{$_} = 50 for 101 .. 120;
	delete $items{$_} for 121 .. 130;
	$ledger{5} = 1;
	check_agree('(e) four shards and a local table');
}

# (f) A server whose max_prepared_transactions is 0.  Under on (the
# setting, or the server option over a session's auto) a transaction that
# writes to it and to a shard fails clearly and leaves nothing anywhere;
# under auto (the default) it commits as postgres_fdw commits, and a LOG
# line says so once per backend, not once per transaction; under off it
# commits too.
{
	my ($k1, $k2, $k3) = keys_on(1, 3, 600);
	my $xact = sub {
		my ($k) = @_;
		return qq{BEGIN; INSERT INTO items VALUES ($k, 6); INSERT INTO np_items VALUES ($k, 6); COMMIT;};
	};
	my ($rc, $out, $err) = $coord->psql('postgres',
		'SET async_fdw.two_phase_commit = on; ' . $xact->($k1));
	isnt($rc, 0, '(f) on: the transaction fails on the server that cannot prepare');
	like($err, qr/ERROR:  server "without2pc" cannot take part in a two-phase commit/,
		'(f) on: the error names the server');
	like($err, qr/DETAIL:  .*max_prepared_transactions is 0/, '(f) on: and the setting');
	like($err, qr/HINT:  .*two_phase_commit/, '(f) on: and hints at two_phase_commit');
	is($noprep->safe_psql('postgres', 'SELECT count(*) FROM items'), '0',
		'(f) on: noprep kept nothing');
	check_agree('(f) on, a server that cannot prepare');

	$coord->safe_psql('postgres',
		q{ALTER SERVER without2pc OPTIONS (ADD two_phase_commit 'on')});
	($rc, $out, $err) = $coord->psql('postgres', $xact->($k1));
	like($err, qr/ERROR:  server "without2pc" cannot take part in a two-phase commit/,
		'(f) the server option on overrides the session auto');
	$coord->safe_psql('postgres',
		q{ALTER SERVER without2pc OPTIONS (DROP two_phase_commit)});
	is($noprep->safe_psql('postgres', 'SELECT count(*) FROM items'), '0',
		'(f) server option on: noprep kept nothing');
	check_agree('(f) server option on');

	my $logpos = -s $coord->logfile;
	$coord->safe_psql('postgres', $xact->($k1) . $xact->($k2));
	$items{$_} = 6 for $k1, $k2;
	is($noprep->safe_psql('postgres', q{SELECT string_agg(a || ':' || b, ',' ORDER BY a) FROM items}),
		"$k1:6,$k2:6", '(f) auto: both transactions committed on noprep');
	my $logged = () = slurp_file($coord->logfile, $logpos) =~
	  /LOG:  server "without2pc" cannot take part in a two-phase commit: transactions that write to it commit without one/g;
	is($logged, 1, '(f) auto: the fallback is logged once per backend');
	check_agree('(f) auto, a server that cannot prepare');

	$coord->safe_psql('postgres', 'SET async_fdw.two_phase_commit = off; ' . $xact->($k3));
	$items{$k3} = 6;
	is($noprep->safe_psql('postgres', 'SELECT count(*) FROM items'), '3',
		'(f) off: noprep has the row');
	check_agree('(f) two_phase_commit off');
}

# (g) When auto and on prepare, as the shards' logs show.
{
	my @k1 = keys_on(1, 4, 700);
	my ($k2) = keys_on(2, 1, 700);
	my $prepares = sub {
		my ($s, $from) = @_;
		my $log = slurp_file($shards[ $s - 1 ]->logfile, $from);
		return scalar(() = $log =~ /PREPARE TRANSACTION 'afdw_/g);
	};
	my @cases = (
		[ 'auto', "INSERT INTO items VALUES ($k1[0], 7)", 0, 0,
			'auto: one shard only commits without PREPARE' ],
		[ 'auto', "INSERT INTO items VALUES ($k1[1], 7), ($k2, 7)", 1, 1,
			'auto: two shards prepare' ],
		[ 'auto', "INSERT INTO items VALUES ($k1[2], 7); INSERT INTO ledger VALUES (7, 'g')", 1, 0,
			'auto: one shard and a local table prepare' ],
		[ 'on', "INSERT INTO items VALUES ($k1[3], 7)", 1, 0,
			'on: one shard prepares' ]);
	for my $c (@cases)
	{
		my ($mode, $sql, $want1, $want2, $name) = @$c;
		my @at = map { -s $_->logfile } @shards[ 0, 1 ];
		$coord->safe_psql('postgres',
			"SET async_fdw.two_phase_commit = $mode; BEGIN; $sql; COMMIT;");
		is($prepares->(1, $at[0]) . ',' . $prepares->(2, $at[1]), "$want1,$want2", "(g) $name");
	}
	$items{$_} = 7 for @k1, $k2;
	$ledger{7} = 1;
	check_agree('(g) auto and on');
}

# (i) Recovery runs while a transaction commits: it listed shard1's
# prepared transactions before the transaction prepared there, so it must
# keep the transaction's record, which a failed COMMIT PREPARED on shard1
# (killed meanwhile) leaves to the next recovery.
{
	my $at = -s $coord->logfile;
	my $r = start_xact('recovery_after_listing',
		'SELECT * FROM async_fdw_recover_prepared_transactions()');
	$coord->wait_for_log(qr/pausing two-phase commit \(recovery_after_listing\)/, $at);
	my @k1 = keys_on(1, 2, 900);
	my @k2 = keys_on(2, 2, 900);
	my $x = start_xact('before_commit_prepared',
		'BEGIN',
		"INSERT INTO items VALUES ($k1[0], 9), ($k1[1], 9), ($k2[0], 9), ($k2[1], 9)",
		'COMMIT');
	$coord->poll_query_until('postgres',
		'SELECT count(*) = 2 FROM async_fdw_prepared_xacts')
	  or die 'timed out waiting for the records';
	$shards[0]->stop('immediate');
	$shards[0]->start;
	ok($r->{run}->finish, '(i) the concurrent recovery ends');
	is($coord->safe_psql('postgres', q{
		SELECT count(*) FROM async_fdw_prepared_xacts
		WHERE server_id = (SELECT oid FROM pg_foreign_server WHERE srvname = 'shard1')}),
		'1', '(i) it kept the record of the transaction it had not seen prepared');
	ok($x->{run}->finish, '(i) the COMMIT succeeds');
	like($x->{err}, qr/WARNING:  could not commit prepared transaction "afdw_\w+" on server "shard1"/,
		'(i) with a warning for shard1');
	is(recover('false'), 'shard1|committed|committed', '(i) the next recovery commits it');
	$items{$_} = 9 for @k1, @k2;
	check_agree('(i) recovery during a commit');
}

# (j) Recovery finishes a transaction between its local commit and its own
# COMMIT PREPAREDs (the backend paused there): the backend's COMMIT then
# finds nothing to commit, which is no failure: no warning.
{
	my ($x, @k) = paused_xact('before_commit_prepared', 1, 3, 950, 10);
	is(recover('false'), "shard1|committed|committed\nshard3|committed|committed",
		'(j) recovery commits the transaction whose backend has not yet');
	# A reload wakes the backend from its pause.
	$coord->safe_psql('postgres', 'SELECT pg_reload_conf()');
	ok($x->{run}->finish, '(j) the COMMIT succeeds');
	unlike($x->{err}, qr/WARNING/, '(j) without a warning');
	$items{$_} = 10 for @k;
	check_agree('(j) recovery before the COMMIT PREPAREDs');
}

# (k) The reverse: recovery lists a transaction whose backend then commits
# it before recovery acts (each woken from its pause by its own signal):
# recovery reports it as finished by its session, no failure, and keeps no
# record of it.
{
	my ($x, @k) = paused_xact('before_commit_prepared', 1, 2, 970, 11);
	my $at = -s $coord->logfile;
	my $r = start_xact('recovery_after_listing',
		q{SELECT server_name || '|' || local_state || '|' || action
		  FROM async_fdw_recover_prepared_transactions() ORDER BY server_name});
	$coord->wait_for_log(qr/pausing two-phase commit \(recovery_after_listing\)/, $at);
	my $pid_of = sub {
		my ($like) = @_;
		return $coord->safe_psql('postgres',
			"SELECT pid FROM pg_stat_activity WHERE state = 'active' AND pid <> pg_backend_pid() AND query LIKE '$like'");
	};
	kill 'HUP', $pid_of->('COMMIT');
	ok($x->{run}->finish, '(k) the COMMIT succeeds');
	unlike($x->{err}, qr/WARNING/, '(k) without a warning');
	kill 'HUP', $pid_of->('%async_fdw_recover_prepared_transactions%');
	ok($r->{run}->finish, '(k) the recovery ends');
	like($r->{out}, qr/^\s*shard1\|committed\|finished by its session$/m,
		'(k) recovery reports the transaction finished by its session');
	unlike($r->{out}, qr/failed/, '(k) and no failure');
	$items{$_} = 11 for @k;
	check_agree('(k) the session commits after the recovery listed it');
}

# (l) The pause serves interrupts.  After the PREPAREs, before the local
# commit, a cancel fails the COMMIT at once, and the abort rolls back every
# prepared transaction: nothing is written anywhere.  (A pause that only
# slept woke from the signal and committed.)
{
	my ($x) = paused_xact('after_prepare', 1, 4, 160, 12, 'l');
	my $t0 = time;
	$coord->safe_psql('postgres', q{
		SELECT pg_cancel_backend(pid) FROM pg_stat_activity
		WHERE state = 'active' AND pid <> pg_backend_pid() AND query = 'COMMIT'});
	ok(!$x->{run}->finish, '(l) a cancel in the pause after the PREPAREs fails the COMMIT');
	cmp_ok(time - $t0, '<', 15, '(l) at once, not at the end of the 30 s pause');
	like($x->{err}, qr/ERROR:  canceling statement due to user request/,
		'(l) with the cancel\'s error');
	check_agree('(l) a cancel in the pause after the PREPAREs');
}

# (m) After the local commit no error may be raised: a termination only
# ends the pause, and the backend exits once the commit is over; the
# transaction stays committed (what the backend could not finish, recovery
# does).
{
	my ($x, @k) = paused_xact('before_commit_prepared', 2, 3, 180, 13, 'm');
	my $pid = $coord->safe_psql('postgres', q{
		SELECT pid FROM pg_stat_activity
		WHERE state = 'active' AND pid <> pg_backend_pid() AND query = 'COMMIT'});
	my $t0 = time;
	$coord->safe_psql('postgres', "SELECT pg_terminate_backend($pid)");
	$x->{run}->finish;
	ok($coord->poll_query_until('postgres',
			"SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = $pid"),
		'(m) a termination in the pause after the local commit ends the backend');
	cmp_ok(time - $t0, '<', 15, '(m) at once, not at the end of the 30 s pause');
	unlike(recover('false'), qr/failed/, '(m) recovery finishes what is left');
	$items{$_} = 13 for @k;
	$ledger{13} = 1;
	check_agree('(m) a termination in the pause after the local commit');
}

# (h) PREPARE TRANSACTION of a local transaction that used async_fdw still
# fails clearly, and leaves nothing anywhere.
{
	my ($rc, $out, $err) = $coord->psql('postgres', q{
		BEGIN;
		INSERT INTO items SELECT g, 8 FROM generate_series(801, 840) g;
		INSERT INTO ledger VALUES (8, 'h');
		PREPARE TRANSACTION 'local';
	});
	like($err, qr/ERROR:  cannot prepare a transaction that has used async_fdw foreign tables/,
		'(h) local PREPARE TRANSACTION fails clearly');
	check_agree('(h) local PREPARE TRANSACTION');
}

done_testing();
