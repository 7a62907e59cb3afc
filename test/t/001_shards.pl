# test/t/001_shards.pl
#   async_fdw against real separate servers: a partitioned table over two
#   shards, what travels on the wire, and a shard that goes down.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

# Two shards and a coordinator.
my @shards;
for my $i (1 .. 2)
{
	my $node = PostgreSQL::Test::Cluster->new("shard$i");
	$node->init;
	$node->append_conf('postgresql.conf', "log_statement = 'all'\nlog_line_prefix = '%a|'\n");
	$node->start;
	$node->safe_psql('postgres', qq{
		CREATE TABLE items (id int, shard int, label text);
		INSERT INTO items SELECT g, $i, 'item ' || g
		  FROM generate_series(($i - 1) * 1000 + 1, $i * 1000) g;
	});
	push @shards, $node;
}

my $coord = PostgreSQL::Test::Cluster->new('coordinator');
$coord->init;
$coord->start;
$coord->safe_psql('postgres', 'CREATE EXTENSION async_fdw');
$coord->safe_psql('postgres',
	'CREATE TABLE items (id int, shard int, label text) PARTITION BY RANGE (id)');
for my $i (1 .. 2)
{
	my $node = $shards[ $i - 1 ];
	my $host = $node->host;
	my $port = $node->port;
	my $lo = ($i - 1) * 1000 + 1;
	my $hi = $i * 1000 + 1;
	$coord->safe_psql('postgres', qq{
		CREATE SERVER shard$i FOREIGN DATA WRAPPER async_fdw
		  OPTIONS (host '$host', port '$port', dbname 'postgres');
		CREATE USER MAPPING FOR CURRENT_USER SERVER shard$i;
		CREATE FOREIGN TABLE items_$i PARTITION OF items
		  FOR VALUES FROM ($lo) TO ($hi)
		  SERVER shard$i OPTIONS (table_name 'items');
	});
}

# The same rows as the shards hold, whole and filtered.
is( $coord->safe_psql('postgres',
		'SELECT count(*), sum(id), min(label), max(label) FROM items'),
	'2000|2001000|item 1|item 999',
	'a scan over two shards returns every row');
is( $coord->safe_psql('postgres',
		'SELECT shard, count(*) FROM items WHERE id % 10 = 0 GROUP BY shard ORDER BY shard'),
	"1|100\n2|100",
	'filtered scans agree with the shards');
is( $coord->safe_psql('postgres', 'SELECT label FROM items WHERE id = 1500'),
	'item 1500', 'a partition-pruned lookup');

# What a query sends: the settings travel in the startup packet, so the
# remote log shows no SET.  A statement that is its own transaction and
# reads one scan per server sends the transaction's start, its query and
# the COMMIT in one message: a scan read to the end streams with COPY; a
# scan under a LIMIT within fetch_size runs as a query bounded by it.  A
# scan that may stop early past fetch_size rows uses a cursor: the start,
# DECLARE (of the query with its LIMIT) and the first FETCH in one message,
# within a savepoint, then COMMIT, which closes the cursor too.
# The answer to that COMMIT is not waited for: the remote sessions are let
# settle before and after the query, so that the log holds all of it.
sub settle
{
	my ($node) = @_;
	$node->poll_query_until('postgres', q{
		SELECT count(*) = 0 FROM pg_stat_activity
		 WHERE application_name = 'async_fdw' AND state <> 'idle'})
	  or die "the remote sessions did not settle";
}

sub remote_statements
{
	my ($node, $query) = @_;
	settle($node);
	my $log_offset = -s $node->logfile;
	$coord->safe_psql('postgres', $query);
	settle($node);
	my $log = slurp_file($node->logfile, $log_offset);
	return [ map { /statement: (.*)$/ ? $1 : () }
		  grep { /^async_fdw\|/ } split /\n/, $log ];
}
is_deeply(
	remote_statements($shards[0], 'SELECT count(*) FROM items_1 WHERE id < 10'),
	[
		'START TRANSACTION ISOLATION LEVEL REPEATABLE READ; '
		  . 'COPY (SELECT count(*) FROM public.items WHERE ((id < 10))) TO STDOUT; '
		  . 'COMMIT TRANSACTION'
	],
	'the remote statements of a streamed scan');
is_deeply(
	remote_statements($shards[0], 'SELECT id FROM items_1 WHERE id < 10 LIMIT 2'),
	[
		'START TRANSACTION ISOLATION LEVEL REPEATABLE READ; '
		  . 'SELECT id FROM public.items WHERE ((id < 10)) LIMIT 2::bigint; '
		  . 'COMMIT TRANSACTION'
	],
	'the remote statements of a scan under a small LIMIT');
my $cursor_statements =
  remote_statements($shards[0], 'SELECT id FROM items_1 WHERE id < 900 LIMIT 500');
is_deeply(
	[ $cursor_statements->[0], $cursor_statements->[-1] ],
	[
		'START TRANSACTION ISOLATION LEVEL REPEATABLE READ; '
		  . 'SAVEPOINT afdw_ra; '
		  . 'DECLARE c1 CURSOR FOR SELECT id FROM public.items WHERE ((id < 900)) LIMIT 500::bigint; '
		  . 'FETCH 100 FROM c1',
		'COMMIT TRANSACTION'
	],
	'the first and last remote statements of a scan under a LIMIT past fetch_size');

# A transaction block: the first connection exports its snapshot (no
# export is possible after a savepoint) in the same message as its first
# command, a savepoint rides with the next command, and COMMIT ends it.
# Each scan's command runs in the savepoint afdw_ra, released with the
# connection's next command (or ended by COMMIT).
is_deeply(
	remote_statements($shards[0], q{
		BEGIN;
		SELECT count(*) FROM items_1 WHERE id < 10;
		SAVEPOINT a;
		SELECT count(*) FROM items_1 WHERE id < 5;
		RELEASE SAVEPOINT a;
		COMMIT;
	}),
	[
		'START TRANSACTION ISOLATION LEVEL REPEATABLE READ; '
		  . 'SELECT pg_catalog.pg_export_snapshot(); '
		  . "SELECT pg_catalog.repeat(' ', 8200); "
		  . 'SAVEPOINT afdw_ra; '
		  . 'COPY (SELECT count(*) FROM public.items WHERE ((id < 10))) TO STDOUT',
		'RELEASE SAVEPOINT afdw_ra; SAVEPOINT s2; SAVEPOINT afdw_ra; '
		  . 'COPY (SELECT count(*) FROM public.items WHERE ((id < 5))) TO STDOUT',
		'RELEASE SAVEPOINT afdw_ra; RELEASE SAVEPOINT s2',
		'COMMIT TRANSACTION'
	],
	'the remote statements of a transaction block with a savepoint');

# Two streams of one shard in a transaction block need two connections:
# the second one waits for the snapshot that the first exports ahead of
# its COPY (with a row wider than the shard's output buffer, which makes
# the shard send the export's result at once), then imports it in its
# own first message.  Each sends one message before COMMIT.  (The
# subqueries keep the two scans apart: a join of two tables of one
# server is otherwise sent as one remote join.)
my $pair = remote_statements($shards[0], q{
	BEGIN;
	SELECT count(*) FROM (SELECT id FROM items_1 OFFSET 0) a JOIN (SELECT id FROM items_1 OFFSET 0) b USING (id);
	COMMIT;
});
is(scalar(@$pair), 4, 'two connections, one message each and a COMMIT each');
like($pair->[0],
	qr/^START TRANSACTION ISOLATION LEVEL REPEATABLE READ; SELECT pg_catalog\.pg_export_snapshot\(\); SELECT pg_catalog\.repeat\(' ', 8200\); SAVEPOINT afdw_ra; COPY \(SELECT id FROM public\.items\) TO STDOUT(; .*)?$/,
	'the first connection exports with its first command');
like(join("\n", @$pair),
	qr/^START TRANSACTION ISOLATION LEVEL REPEATABLE READ; SET TRANSACTION SNAPSHOT '[0-9A-F-]+'; SAVEPOINT afdw_ra; COPY \(SELECT id FROM public\.items\) TO STDOUT(; .*)?$/m,
	'the second imports it with its first command');
is( $coord->safe_psql('postgres', q{
		BEGIN;
		SELECT count(*) FROM (SELECT id FROM items_1 OFFSET 0) a JOIN (SELECT id FROM items_1 OFFSET 0) b USING (id);
		COMMIT;
	}),
	'1000', 'the join of the two streams');

# A nested loop with the foreign table inside: one message per rescan.  The
# first prepares the statement in the remote session, every rescan executes
# it, and so does the next query of the session.  (The planner puts the
# parameter first before PostgreSQL 16, the column first from 16 on.)
my $param_cond = $coord->safe_psql('postgres', 'SHOW server_version_num') >= 160000
  ? '(id = $1::integer)' : '($1::integer = id)';
is_deeply(
	remote_statements($shards[0], q{
		SET enable_hashjoin = off; SET enable_mergejoin = off;
		SET enable_material = off; SET enable_memoize = off;
		SELECT count(*) FROM (VALUES (1), (2)) v(k) JOIN items_1 ON id = k;
		SELECT count(*) FROM (VALUES (3), (4)) v(k) JOIN items_1 ON id = k;
	}),
	[
		'START TRANSACTION ISOLATION LEVEL REPEATABLE READ; SAVEPOINT afdw_ra; '
		  . "PREPARE afdw_s1 AS SELECT id FROM public.items WHERE ($param_cond) LIMIT 101; "
		  . "EXECUTE afdw_s1('1')",
		"RELEASE SAVEPOINT afdw_ra; SAVEPOINT afdw_ra; EXECUTE afdw_s1('2')",
		'COMMIT TRANSACTION',
		"START TRANSACTION ISOLATION LEVEL REPEATABLE READ; SAVEPOINT afdw_ra; "
		  . "EXECUTE afdw_s1('3')",
		"RELEASE SAVEPOINT afdw_ra; SAVEPOINT afdw_ra; EXECUTE afdw_s1('4')",
		'COMMIT TRANSACTION'
	],
	'the remote statements of a parameterized rescan');

# An export that fails (the remote user may not call pg_export_snapshot):
# the query that needed it fails with the remote error, alone or with a
# second connection waiting for the snapshot, and the connections stay
# usable for what needs no export.
$shards[1]->safe_psql('postgres', q{
	CREATE ROLE reader LOGIN;
	GRANT SELECT ON items TO reader;
	REVOKE EXECUTE ON FUNCTION pg_catalog.pg_export_snapshot() FROM PUBLIC;
});
$coord->safe_psql('postgres', q{
	CREATE ROLE alice LOGIN;
	GRANT SELECT ON items_2 TO alice;
	CREATE USER MAPPING FOR alice SERVER shard2
	  OPTIONS (user 'reader', password_required 'false');
});
my ($xret, $xout, $xerr) = $coord->psql('postgres', q{
	SET ROLE alice;
	BEGIN;
	SELECT count(*) FROM items_2;
	ROLLBACK;
	SELECT count(*) FROM items_2;
}, on_error_stop => 0);
like($xerr, qr/permission denied for function pg_export_snapshot/,
	'a failed export fails the query with the remote error');
is($xout, '1000', 'the connection is usable after the rollback');
my $alice = $coord->background_psql('postgres', on_error_stop => 0);
$alice->query_safe('SET ROLE alice');
$alice->query('BEGIN');
$alice->query('SELECT count(*) FROM (SELECT id FROM items_2 OFFSET 0) a JOIN (SELECT id FROM items_2 OFFSET 0) b USING (id)');
like($alice->{stderr},
	qr/could not export the snapshot of server "shard2"\nDETAIL:  The export failed on the connection that opened the remote transaction: permission denied for function pg_export_snapshot\n/,
	'a connection waiting for a failed export fails with its error');
$alice->{stderr} = '';
$alice->query_safe('ROLLBACK');
# (The session has two connections to shard2 now: every query exports.)
$shards[1]->safe_psql('postgres',
	'GRANT EXECUTE ON FUNCTION pg_catalog.pg_export_snapshot() TO PUBLIC');
is( $alice->query_safe(q{
		BEGIN;
		SELECT count(*) FROM (SELECT id FROM items_2 OFFSET 0) a JOIN (SELECT id FROM items_2 OFFSET 0) b USING (id);
		COMMIT;
	}),
	'1000', 'both connections are usable after the rollback');
$alice->quit;
$coord->safe_psql('postgres', 'DROP USER MAPPING FOR alice SERVER shard2');

# A shard that is down: a clear error naming the server, and the other
# shard's connection still works in the same session.
$shards[1]->stop('fast');
my ($ret, $stdout, $stderr) = $coord->psql('postgres', q{
	SELECT count(*) FROM items_1;
	SELECT count(*) FROM items;
	SELECT count(*) FROM items_1;
}, on_error_stop => 0);
like($stderr, qr/could not connect to server "shard2"|lost connection to server "shard2"/,
	'the error names the server that is down');
like($stdout, qr/^1000\n1000$/m, 'the other shard stays usable in the same session');

# When the shard is back, the next query reconnects.
$shards[1]->start;
($ret, $stdout, $stderr) = $coord->psql('postgres', q{
	SELECT count(*) FROM items_2;
});
is($stdout, '1000', 'a restarted shard is usable again');

# A shard restarted under a kept connection: the next transaction
# reconnects without an error.
my $session = $coord->background_psql('postgres');
is($session->query_safe('SELECT count(*) FROM items_2'), '1000', 'first use');
$shards[1]->restart;
is($session->query_safe('SELECT count(*) FROM items_2'), '1000',
	'a connection broken between transactions is replaced');
$session->quit;

# No remote transaction stays open on any shard.
for my $node (@shards)
{
	# (COMMIT of a read-only transaction is not waited for: allow it a moment.)
	ok( $node->poll_query_until('postgres',
			"SELECT count(*) = 0 FROM pg_stat_activity WHERE application_name = 'async_fdw' AND state <> 'idle'"),
		'no remote transaction left open on ' . $node->name);
}

# A single-user backend (no postmaster) reads the shards too: its scans
# run one after the other, since an asynchronous Append cannot wait there.
$coord->stop('fast');
my $single_out;
my $single_err;
IPC::Run::run(
	[
		'postgres', '--single', '-F', '-c', 'exit_on_error=true',
		'-D', $coord->data_dir, 'postgres'
	],
	'<' => \"SELECT count(*) AS n, sum(id) AS s FROM items\n",
	'>' => \$single_out,
	'2>' => \$single_err);
like($single_out, qr/n = "2000".*s = "2001000"/s,
	'a single-user backend scans both shards');
unlike($single_err, qr/ERROR/, 'without an error in single-user mode');

done_testing();
