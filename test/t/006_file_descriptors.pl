# test/t/006_file_descriptors.pl
#   Each remote connection is counted against the backend's file
#   descriptors, as PostgreSQL counts its own: without one to spare, scans
#   share the connections open, and the query still succeeds.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $nparts = 40;

my $shard = PostgreSQL::Test::Cluster->new('shard');
$shard->init;
$shard->append_conf('postgresql.conf', "max_connections = 120");
$shard->start;
$shard->safe_psql('postgres', join("\n", map {
	"CREATE TABLE t$_ (part int, id int); INSERT INTO t$_ SELECT $_, g FROM generate_series(1, 100) g;
	 CREATE VIEW v$_ AS SELECT part, id, pg_backend_pid() AS pid FROM t$_;"
} 1 .. $nparts));

# A coordinator with few file descriptors: a backend may hold about a
# third of what is left after PostgreSQL's own, far fewer than 40.
my $coord = PostgreSQL::Test::Cluster->new('coordinator');
$coord->init;
$coord->append_conf('postgresql.conf', "max_files_per_process = 64");
$coord->start;
my ($host, $port) = ($shard->host, $shard->port);
$coord->safe_psql('postgres', qq{
	CREATE EXTENSION async_fdw;
	CREATE SERVER s FOREIGN DATA WRAPPER async_fdw
	  OPTIONS (host '$host', port '$port', dbname 'postgres', max_connections '256');
	CREATE USER MAPPING FOR CURRENT_USER SERVER s;
	CREATE TABLE p (part int, id int, pid int) PARTITION BY LIST (part);
} . join("\n", map {
	"CREATE FOREIGN TABLE p$_ PARTITION OF p FOR VALUES IN ($_) SERVER s
	   OPTIONS (schema_name 'public', table_name 'v$_');"
} 1 .. $nparts));

is( $coord->safe_psql('postgres', 'SELECT count(id), sum(id) FROM p'),
	($nparts * 100) . '|' . ($nparts * 5050),
	'a query over 40 partitions on one server succeeds');

# Each remote row names the session that read it: fewer sessions than
# partitions.
my $sessions = $coord->safe_psql('postgres', 'SELECT count(DISTINCT pid) FROM p');
cmp_ok($sessions, '>=', 1, 'the backend connected');
cmp_ok($sessions, '<', $nparts, "it shared connections ($sessions for $nparts partitions)");

# Again, in one transaction, with streams and with cursors.
is( $coord->safe_psql('postgres', q{
		BEGIN;
		SELECT count(id) FROM p;
		SELECT count(*) FROM (SELECT id FROM p LIMIT 3000) s;
		COMMIT;
	}),
	($nparts * 100) . "\n3000",
	'streams and cursors in a transaction block');

$coord->stop;
$shard->stop;
done_testing();
