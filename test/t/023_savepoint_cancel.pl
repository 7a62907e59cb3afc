# test/t/023_savepoint_cancel.pl
#   The rollback of a local savepoint while a command that opens a remote
#   transaction and its savepoints is still running: the statements sent
#   ahead of a scan's query in one message (START TRANSACTION, the
#   snapshot's export, SAVEPOINT sN, SAVEPOINT afdw_ra) are not cancelled
#   before they have answered.  Cancelled among them, they left the remote
#   savepoint untaken, its ROLLBACK TO SAVEPOINT failed, and the next
#   statement on that server failed with "lost connection" (08000) where
#   postgres_fdw and a single server go on.
#
# The remote server is the fake one (test/t/FakePg.pm, scenario
# slow_savepoint): it holds SAVEPOINT sN for 2 s, fails it if a cancel comes
# meanwhile, and fails a ROLLBACK TO a savepoint it did not take, as a real
# server does.  The statement fails on a local partition while the foreign
# partition's command is held there.

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use FakePg;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $fake_log = "$PostgreSQL::Test::Utils::tmp_check/fake_pg_023.log";
unlink $fake_log;
my $coord = PostgreSQL::Test::Cluster->new('coordinator');
$coord->init;
$coord->start;
my ($major) = $coord->safe_psql('postgres', 'SHOW server_version_num') =~ /^(\d+)\d{4}$/;
my $fake = FakePg->new(log => $fake_log, server_version => "$major.4");
my $fake_port = $fake->port;

# The fake serves (1, one), (2, two), (3, three); the local partition holds
# the row on which the statement's condition divides by zero.
$coord->safe_psql('postgres', qq{
	CREATE EXTENSION async_fdw;
	CREATE SERVER slow FOREIGN DATA WRAPPER async_fdw
	  OPTIONS (host '127.0.0.1', port '$fake_port', dbname 'slow_savepoint');
	CREATE USER MAPPING FOR CURRENT_USER SERVER slow;
	CREATE TABLE p (id int, v text) PARTITION BY LIST (id);
	CREATE FOREIGN TABLE p_remote PARTITION OF p FOR VALUES IN (1, 2, 3)
	  SERVER slow OPTIONS (table_name 't');
	CREATE TABLE p_local PARTITION OF p FOR VALUES IN (0);
	INSERT INTO p_local VALUES (0, 'zero');
});

# check_rollback LABEL SQL ROWS WHAT SEEN: run SQL, a transaction whose
# statement fails on the local partition and is rolled back to its
# savepoint, then reads ROWS (WHAT says which); the fake's log shows no
# cancel among the statements ahead of the scan's query, and a line
# matching SEEN (the command that was held or opened).
sub check_rollback
{
	my ($label, $sql, $rows, $what, $seen) = @_;
	my ($ret, $out, $err) = $coord->psql('postgres', $sql, on_error_stop => 0);

	like($err, qr/ERROR:  division by zero/,
		"$label: the statement fails on the local partition");
	unlike($err, qr/lost connection|savepoint .* does not exist/,
		"$label: the remote savepoint is there to roll back to");
	is($out, $rows, "$label: after the rollback, the transaction reads $what");
	my @log = split /\n/, slurp_file($fake_log);
	ok(!grep({ /cancel: SAVEPOINT s2 not taken/ } @log),
		"$label: no cancel cut the statements ahead of the scan's query");
	ok(grep({ $_ =~ $seen } @log),
		"$label: the remote command was held at, or opened with, its savepoint")
	  or diag(join("\n", @log));
	unlink $fake_log;
	return;
}

# In each fetch mode: the foreign partition's command goes first (an
# asynchronous scan), and is held at its SAVEPOINT s2 when the local
# partition fails the statement.
for my $mode (qw(stream cursor auto))
{
	my $op = $mode eq 'stream' ? 'ADD' : 'SET';

	$coord->safe_psql('postgres',
		"ALTER FOREIGN TABLE p_remote OPTIONS ($op fetch_mode '$mode')");
	check_rollback($mode, q{
		BEGIN;
		SAVEPOINT s1;
		SELECT * FROM p WHERE 10 / id > 0;
		ROLLBACK TO SAVEPOINT s1;
		SELECT id, v FROM p ORDER BY id;
		COMMIT;
	}, "0|zero\n1|one\n2|two\n3|three", 'both partitions',
		qr/holding SAVEPOINT s2/);
}

# Preloaded, a REPEATABLE READ transaction takes the snapshots of every
# server of a partitioned table it reads together, under the commit fence:
# a server whose partitions the statement does not scan gets a command that
# only opens its remote transaction (START TRANSACTION, the export, SAVEPOINT
# s2), sent without waiting for its answer.  The statement reads a partition
# on a second server (the fake's well-behaved scenario: its rows are those
# of every scenario, whatever the partition's bounds say), and fails on the
# local partition meanwhile.
$coord->append_conf('postgresql.conf', "shared_preload_libraries = 'async_fdw'\n");
$coord->restart;
$coord->safe_psql('postgres', qq{
	CREATE SERVER good FOREIGN DATA WRAPPER async_fdw
	  OPTIONS (host '127.0.0.1', port '$fake_port', dbname 'good');
	CREATE USER MAPPING FOR CURRENT_USER SERVER good;
	CREATE FOREIGN TABLE p_good PARTITION OF p FOR VALUES IN (4, 5, 6)
	  SERVER good OPTIONS (table_name 't');
});
check_rollback('opened only', q{
	BEGIN ISOLATION LEVEL REPEATABLE READ;
	SAVEPOINT s1;
	SELECT * FROM p WHERE id IN (0, 4) AND 10 / id > 0;
	ROLLBACK TO SAVEPOINT s1;
	SELECT id, v FROM p_remote ORDER BY id;
	COMMIT;
}, "1|one\n2|two\n3|three", 'the server opened',
	qr/query: START TRANSACTION [^;]*; .*SAVEPOINT s2$/);

$fake->stop;
$coord->stop;
done_testing();
