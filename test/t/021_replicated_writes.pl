# test/t/021_replicated_writes.pl
#   Writes to a replicated foreign table (option copies) over three real
#   shards: INSERT (one row, many, RETURNING, COPY), UPDATE and DELETE
#   sent whole, and TRUNCATE change every copy alike, in a two-phase
#   commit (PREPARE TRANSACTION in every shard's log); a write that fails
#   on one copy (a trigger there rejects the row), a rollback, copies that
#   differ (found by the count of changed rows, 40001), a copy on a server that
#   cannot prepare or whose two_phase_commit is off, and a change that
#   would go row by row without a key each fail the statement and change no
#   copy; with a key (column option key) a change row by row reaches every
#   copy, and a key that is not unique or is null fails the statement;
#   concurrent sessions updating the same rows (sent whole and row by row),
#   or inserting and deleting the same keys, neither deadlock nor leave the
#   copies apart (their serialization failures retried).

use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

my @shards;
for my $i (1 .. 3)
{
	my $node = PostgreSQL::Test::Cluster->new("rwshard$i");
	$node->init;
	$node->append_conf('postgresql.conf', qq{
max_prepared_transactions = 20
log_statement = 'all'
});
	$node->start;
	$node->safe_psql('postgres', q{
		CREATE TABLE dim (k int PRIMARY KEY, name text, v int DEFAULT 0);
	});
	push @shards, $node;
}
# The third copy refuses a name 'bad': a copy that cannot be written.
$shards[2]->safe_psql('postgres', q{
	CREATE FUNCTION reject_bad() RETURNS trigger LANGUAGE plpgsql AS $$
	BEGIN
		IF NEW.name = 'bad' THEN
			RAISE EXCEPTION 'copy 3 rejects name bad (key %)', NEW.k;
		END IF;
		RETURN NEW;
	END $$;
	CREATE TRIGGER dim_reject BEFORE INSERT OR UPDATE ON dim
	  FOR EACH ROW EXECUTE FUNCTION reject_bad();
});

my $noprep = PostgreSQL::Test::Cluster->new('rwnoprep');
$noprep->init;
$noprep->append_conf('postgresql.conf', "max_prepared_transactions = 0\n");
$noprep->start;
$noprep->safe_psql('postgres', 'CREATE TABLE dim (k int PRIMARY KEY, name text, v int DEFAULT 0)');

my $coord = PostgreSQL::Test::Cluster->new('rwcoord');
$coord->init;
$coord->start;
$coord->safe_psql('postgres', 'CREATE EXTENSION async_fdw');
for my $node (@shards, $noprep)
{
	my ($host, $port, $name) = ($node->host, $node->port, $node->name);
	$coord->safe_psql('postgres', qq{
		CREATE SERVER $name FOREIGN DATA WRAPPER async_fdw
		  OPTIONS (host '$host', port '$port', dbname 'postgres');
		CREATE USER MAPPING FOR CURRENT_USER SERVER $name;
	});
}
$coord->safe_psql('postgres', q{
	CREATE FOREIGN TABLE dim (k int, name text, v int) SERVER rwshard1
	  OPTIONS (table_name 'dim', copies 'rwshard2, rwshard3');
	CREATE FOREIGN TABLE dim_np (k int, name text, v int) SERVER rwshard1
	  OPTIONS (table_name 'dim', copies 'rwnoprep');
	CREATE FUNCTION local_upper(t text) RETURNS text LANGUAGE plpgsql
	  AS 'BEGIN RETURN upper(t); END';
	CREATE FUNCTION local_one() RETURNS int LANGUAGE plpgsql
	  AS 'BEGIN RETURN 1; END';
});

# copies(): each shard's rows of dim, one line a shard.
sub copies
{
	return join "\n", map {
		$_->safe_psql('postgres',
			q{SELECT coalesce(string_agg(k || ':' || name || ':' || v, ',' ORDER BY k), '') FROM dim})
	} @shards;
}

# same(WANT, CASE): every copy holds WANT.
sub same
{
	my ($want, $case) = @_;
	is(copies(), join("\n", ($want) x 3), "$case: every copy holds $want");
}

# fails(SQL, PATTERN, CASE): SQL fails with an error matching PATTERN.
sub fails
{
	my ($sql, $pattern, $case) = @_;
	my ($ret, $out, $err) = $coord->psql('postgres', "\\set VERBOSITY verbose\n$sql");
	isnt($ret, 0, "$case: fails");
	like($err, $pattern, "$case: with its error") or diag($err);
	return $err;
}

# prepares(): how many PREPARE TRANSACTION each shard's log shows so far.
sub prepares
{
	return join ',', map {
		my $n = () = slurp_file($_->logfile) =~ /PREPARE TRANSACTION/g;
		$n
	} @shards;
}

# 1. INSERT, one row and many, and RETURNING: every copy, in two phases.
my $before = prepares();
is($coord->safe_psql('postgres', q{INSERT INTO dim VALUES (1, 'one', 0)}), '',
	'an INSERT of one row');
is($coord->safe_psql('postgres',
	q{INSERT INTO dim SELECT g, 'row ' || g, 0 FROM generate_series(2, 4) g RETURNING k}),
	"2\n3\n4", 'an INSERT of three rows returns each row once');
same('1:one:0,2:row 2:0,3:row 3:0,4:row 4:0', 'INSERT');
my @b = split /,/, $before;
my @a = split /,/, prepares();
ok($a[$_] >= $b[$_] + 2, "INSERT: shard " . ($_ + 1) . " prepared both transactions")
  for 0 .. 2;
is(join(',', map { $_->safe_psql('postgres', 'SELECT count(*) FROM pg_prepared_xacts') } @shards),
	'0,0,0', 'INSERT: nothing left prepared');

# COPY into the table: every copy.
$coord->safe_psql('postgres', "COPY dim FROM STDIN;\n5\tfive\t0\n6\tsix\t0\n\\.\n");
same('1:one:0,2:row 2:0,3:row 3:0,4:row 4:0,5:five:0,6:six:0', 'COPY');

# 2. UPDATE and DELETE sent whole, with RETURNING.
is($coord->safe_psql('postgres', q{UPDATE dim SET v = v + 10 WHERE k <= 2 RETURNING k, v}),
	"1|10\n2|10", 'an UPDATE returns the changed rows once');
like($coord->safe_psql('postgres', q{EXPLAIN (VERBOSE, COSTS OFF) UPDATE dim SET v = 1 WHERE k = 1}),
	qr/Copies Written: rwshard1, rwshard2, rwshard3/, 'EXPLAIN VERBOSE names the copies written');
is($coord->safe_psql('postgres', q{DELETE FROM dim WHERE k = 6 RETURNING name}), 'six',
	'a DELETE returns the row once');
same('1:one:10,2:row 2:10,3:row 3:0,4:row 4:0,5:five:0', 'UPDATE and DELETE');

# 3. A write that fails on one copy fails the statement; no copy changes.
my $rows = '1:one:10,2:row 2:10,3:row 3:0,4:row 4:0,5:five:0';
my $err = fails(q{INSERT INTO dim VALUES (7, 'bad', 0)},
	qr/copy 3 rejects name bad \(key 7\)/, 'an INSERT the third copy rejects');
like($err, qr/write to the copy of foreign table "dim" on server "rwshard3"/,
	'the error names the copy');
same($rows, 'INSERT rejected by one copy');
fails(q{UPDATE dim SET name = 'bad' WHERE k = 3},
	qr/copy 3 rejects name bad \(key 3\)/, 'an UPDATE the third copy rejects');
same($rows, 'UPDATE rejected by one copy');
fails(q{BEGIN; INSERT INTO dim VALUES (8, 'eight', 0); UPDATE dim SET name = 'bad' WHERE k = 8; COMMIT},
	qr/copy 3 rejects/, 'a transaction whose second write one copy rejects');
same($rows, 'transaction rejected by one copy');
$coord->safe_psql('postgres', q{BEGIN; INSERT INTO dim VALUES (9, 'nine', 0); ROLLBACK});
same($rows, 'a rollback');

# 4. Copies that differ: a row only the second copy has.
$shards[1]->safe_psql('postgres', q{INSERT INTO dim VALUES (50, 'stray', 0)});
$err = fails(q{UPDATE dim SET v = 1 WHERE k >= 5},
	qr/40001: could not serialize access to replicated foreign table "dim": its copies changed different numbers of rows/,
	'an UPDATE over rows the copies differ in');
like($err, qr/The UPDATE changed 1 rows on server "rwshard1" and 2 on server "rwshard2"/,
	'the detail counts the rows of each');
fails(q{INSERT INTO dim VALUES (50, 'fifty', 0) ON CONFLICT DO NOTHING},
	qr/40001: could not serialize access to replicated foreign table "dim"/, 'an INSERT that one copy skips');
$shards[1]->safe_psql('postgres', q{DELETE FROM dim WHERE k = 50});
same($rows, 'copies that differ');

# 5. A change row by row without a key is refused, with a clear error.
$err = fails(q{UPDATE dim SET name = local_upper(name) WHERE k = 1},
	qr/0A000: cannot change replicated foreign table "dim" row by row/,
	'an UPDATE with a value computed locally');
like($err, qr/HINT:  Declare the columns of a key that is unique on every copy with the column option "key"/,
	'the hint names the option key');
fails(q{DELETE FROM dim WHERE local_upper(name) = 'ONE'},
	qr/0A000: cannot change replicated foreign table "dim" row by row/,
	'a DELETE with a condition computed locally');
same($rows, 'changes refused');

# 5b. With a key, a change row by row finds each row by it on every copy.
$coord->safe_psql('postgres', q{ALTER FOREIGN TABLE dim ALTER COLUMN k OPTIONS (ADD key 'true')});
is($coord->safe_psql('postgres', q{SELECT count(*) FROM async_fdw_check_copies('dim')}), '0',
	'async_fdw_check_copies finds the key unique on every copy (its primary key)');
like($coord->safe_psql('postgres',
	q{EXPLAIN (VERBOSE, COSTS OFF) UPDATE dim SET name = local_upper(name) WHERE k = 1}),
	qr/Remote SQL: UPDATE public\.dim SET name = \$1 WHERE k = \$2\n\s*Copies Written: rwshard1, rwshard2, rwshard3/,
	'a row by row UPDATE finds its row by the key, on every copy');
is($coord->safe_psql('postgres',
	q{UPDATE dim SET name = local_upper(name) WHERE k = 1 RETURNING k, name}),
	'1|ONE', 'an UPDATE row by row returns its row once');
same('1:ONE:10,2:row 2:10,3:row 3:0,4:row 4:0,5:five:0', 'UPDATE row by row');
$coord->safe_psql('postgres', q{UPDATE dim SET name = lower(local_upper(name)) WHERE k = 1});
is($coord->safe_psql('postgres',
	q{DELETE FROM dim WHERE local_upper(name) = 'FIVE' RETURNING k}),
	'5', 'a DELETE row by row returns its row once');
same('1:one:10,2:row 2:10,3:row 3:0,4:row 4:0', 'DELETE row by row');
$coord->safe_psql('postgres', q{INSERT INTO dim VALUES (5, 'five', 0)});
$coord->safe_psql('postgres', q{UPDATE dim SET k = k + 100 WHERE local_upper(name) = 'ROW 4'});
same('1:one:10,2:row 2:10,3:row 3:0,5:five:0,104:row 4:0', 'an UPDATE row by row of the key itself');
$coord->safe_psql('postgres', q{UPDATE dim SET k = k - 100 WHERE k = 104});
same($rows, 'the rows back');

# Through a partitioned table whose partition the replicated table is: its
# rows read from its own server, locked there first, and changed by the
# key on every copy.
$coord->safe_psql('postgres', q{
	CREATE TABLE pdim (k int, name text, v int) PARTITION BY RANGE (k);
	ALTER TABLE pdim ATTACH PARTITION dim FOR VALUES FROM (MINVALUE) TO (MAXVALUE);
});
is($coord->safe_psql('postgres',
	q{UPDATE pdim SET name = local_upper(name) WHERE k = 3 RETURNING k, name}),
	'3|ROW 3', 'an UPDATE row by row through a partitioned table');
like(slurp_file($shards[0]->logfile),
	qr/SELECT k, name, v FROM public\.dim WHERE \(\(k = 3\)\) FOR UPDATE/,
	'its rows are read and locked on the table\'s own server');
$coord->safe_psql('postgres', q{
	UPDATE pdim SET name = lower(local_upper(name)) WHERE k = 3;
	ALTER TABLE pdim DETACH PARTITION dim;
	DROP TABLE pdim;
});
same($rows, 'UPDATE row by row through a partitioned table');

# A copy that rejects the row, a row that one copy lacks: the statement
# fails, no copy changes.
fails(q{UPDATE dim SET name = lower(local_upper('bad')) WHERE k = 3},
	qr/copy 3 rejects name bad \(key 3\)/, 'an UPDATE row by row the third copy rejects');
same($rows, 'UPDATE row by row rejected by one copy');
$shards[1]->safe_psql('postgres', q{DELETE FROM dim WHERE k = 2});
fails(q{UPDATE dim SET name = local_upper(name) WHERE k = 2},
	qr/40001: could not serialize access to replicated foreign table "dim": its copies changed different numbers of rows/,
	'an UPDATE row by row of a row one copy lacks');
$shards[1]->safe_psql('postgres', q{INSERT INTO dim VALUES (2, 'row 2', 10)});
same($rows, 'UPDATE row by row of a row one copy lacks');

# A key that is not unique, a key that is null: the statement fails.
$coord->safe_psql('postgres', q{
	ALTER FOREIGN TABLE dim ALTER COLUMN k OPTIONS (DROP key);
	ALTER FOREIGN TABLE dim ALTER COLUMN v OPTIONS (ADD key 'true');
});
is($coord->safe_psql('postgres',
	q{SELECT string_agg(server_name || ': ' || problem, E'\n' ORDER BY server_name) FROM async_fdw_check_copies('dim')}),
	join("\n", map { "rwshard$_: no unique index of remote table public.dim on key (v)" } 1 .. 3),
	'async_fdw_check_copies reports a key no unique index proves');
fails(q{UPDATE dim SET name = local_upper(name) WHERE k = 1},
	qr/21000: the key of replicated foreign table "dim" found 2 rows to update for one row/,
	'a key that is not unique');
same($rows, 'a key that is not unique');
$coord->safe_psql('postgres', q{UPDATE dim SET v = NULL WHERE k = 3});
fails(q{DELETE FROM dim WHERE local_upper(name) = 'ROW 3'},
	qr/22004: key column "v" of replicated foreign table "dim" is null in a row to change/,
	'a key that is null');
$coord->safe_psql('postgres', q{
	UPDATE dim SET v = 0 WHERE k = 3;
	ALTER FOREIGN TABLE dim ALTER COLUMN v OPTIONS (DROP key);
	ALTER FOREIGN TABLE dim ALTER COLUMN k OPTIONS (ADD key 'true');
});
same($rows, 'a key that is null');

# 6. A copy on a server that cannot prepare, or whose two_phase_commit is
# off: the commit fails, nothing changes.
fails(q{INSERT INTO dim_np VALUES (10, 'ten', 0)},
	qr/55000: server "rwnoprep" cannot take part in a two-phase commit.*\n.*DETAIL:  The transaction changed replicated foreign table "dim_np", whose copies change together only by two-phase commit, and this server's max_prepared_transactions is 0/,
	'a copy that cannot prepare');
is($noprep->safe_psql('postgres', 'SELECT count(*) FROM dim'), '0',
	'nothing on the server that cannot prepare');
same($rows, 'copy that cannot prepare');
$coord->safe_psql('postgres', q{ALTER SERVER rwshard2 OPTIONS (ADD two_phase_commit 'off')});
fails(q{DELETE FROM dim WHERE k = 1},
	qr/server "rwshard2" cannot take part in a two-phase commit.*\n.*this server's two_phase_commit is off/,
	'a copy whose two_phase_commit is off');
$coord->safe_psql('postgres', q{ALTER SERVER rwshard2 OPTIONS (DROP two_phase_commit)});
same($rows, 'copy with two_phase_commit off');

# 7. Concurrent sessions changing the same rows, sent whole and (k = 4)
# row by row: each waits on the table's own server, no deadlock that no
# server sees (pgbench would wait for ever), the copies stay alike.  The remote transactions are REPEATABLE READ, as
# postgres_fdw's: a row changed meanwhile fails with 40001, retried.
my $script = $coord->basedir . '/bump.sql';
open my $fh, '>', $script or die $!;
print $fh "\\set k random(1, 3)\nBEGIN;\nUPDATE dim SET v = v + 1 WHERE k = :k;\n"
  . "UPDATE dim SET v = v + local_one() WHERE k = 4;\nUPDATE dim SET v = v + 1 WHERE k = 5;\nCOMMIT;\n";
close $fh;
my ($out, $perr) = ('', '');
my $h = IPC::Run::start(
	[ 'pgbench', '-n', '-h', $coord->host, '-p', $coord->port, '-c', 6, '-j', 2,
	  '-t', 20, '--max-tries', 1000, '-f', $script, 'postgres' ],
	'>', \$out, '2>', \$perr, IPC::Run::timeout(120));
$h->finish;
is($h->result(0), 0, 'six sessions updating the same rows: no error') or diag("$out$perr");
my ($done) = $out =~ /number of transactions actually processed: (\d+)/;
is($done, 120, 'each committed its 20 transactions (a serialization failure retried)')
  or diag($out);
my @c = split /\n/, copies();
is($c[1], $c[0], 'the second copy holds what the first does');
is($c[2], $c[0], 'the third copy holds what the first does');
is($coord->safe_psql('postgres', 'SELECT sum(v) - 20 FROM dim'), 3 * $done,
	'every transaction counted once (each adds 3)');
note $out =~ /(number of transactions retried: \d+)/ ? $1 : 'no retries';

# 7b. Concurrent sessions inserting and deleting the same few keys (a
# DELETE sent whole and one row by row, by the key): a row
# another transaction has just committed on one copy and not yet on the
# next may be seen by one of a statement's copies and not the other, which
# fails the statement with 40001 (retried) rather than a false report that
# the copies differ; at the end they are alike.
$script = $coord->basedir . '/churn.sql';
open $fh, '>', $script or die $!;
print $fh "\\set k random(100, 104)\n"
  . "INSERT INTO dim VALUES (:k, 'churn', 0) ON CONFLICT DO NOTHING;\n"
  . "\\set k random(100, 104)\n"
  . "DELETE FROM dim WHERE k = :k;\n"
  . "\\set k random(100, 104)\n"
  . "UPDATE dim SET v = v + 1 WHERE k = :k;\n"
  . "\\set k random(100, 104)\n"
  . "DELETE FROM dim WHERE k = :k AND local_one() = 1;\n";
close $fh;
($out, $perr) = ('', '');
$h = IPC::Run::start(
	[ 'pgbench', '-n', '-h', $coord->host, '-p', $coord->port, '-c', 6, '-j', 2,
	  '-t', 100, '--max-tries', 1000, '-f', $script, 'postgres' ],
	'>', \$out, '2>', \$perr);
# A wait that lasts is a deadlock across servers: show who waits for whom.
for my $i (1 .. 1200)
{
	last unless $h->pumpable;
	$h->pump_nb;
	usleep(100_000);
}
if ($h->pumpable)
{
	for my $n ($coord, @shards)
	{
		diag($n->name . ":\n" . $n->safe_psql('postgres', q{
			SELECT pid, state, wait_event_type, wait_event, backend_xid, left(query, 90)
			FROM pg_stat_activity
			WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()}));
		diag($n->safe_psql('postgres',
			q{SELECT pid, locktype, transactionid, mode FROM pg_locks WHERE NOT granted}));
	}
	$h->kill_kill;
}
$h->finish;
is($h->result(0), 0, 'six sessions inserting and deleting the same keys: no error')
  or diag("$out$perr");
($done) = $out =~ /number of transactions actually processed: (\d+)/;
is($done, 600, 'each ran its 100 transactions') or diag("$out$perr");
note $out =~ /(number of transactions retried: \d+)/ ? $1 : 'no retries';
@c = split /\n/, copies();
is($c[1], $c[0], 'churn: the second copy holds what the first does');
is($c[2], $c[0], 'churn: the third copy holds what the first does');

# 8. TRUNCATE empties every copy.
$coord->safe_psql('postgres', 'TRUNCATE dim');
same('', 'TRUNCATE');
is(join(',', map { $_->safe_psql('postgres', 'SELECT count(*) FROM pg_prepared_xacts') } @shards, $noprep),
	'0,0,0,0', 'nothing left prepared anywhere');

done_testing();
