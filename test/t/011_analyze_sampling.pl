# test/t/011_analyze_sampling.pl
#   ANALYZE of a foreign table has the remote server sample its rows (the
#   analyze_sampling option, as postgres_fdw 16's) when the remote
#   relation's size is known and larger than the sample: auto is
#   TABLESAMPLE BERNOULLI for a table, random() for a view; system,
#   bernoulli and random as asked; off reads every row.  The remote
#   statements are read from the shard's log; the statistics must come out
#   of every method, and the row estimate is the remote one.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $shard = PostgreSQL::Test::Cluster->new('shard');
$shard->init;
$shard->append_conf('postgresql.conf',
	"autovacuum = off\nlog_statement = 'all'\nlog_line_prefix = '%a|'");
$shard->start;
$shard->safe_psql('postgres', q{
	CREATE TABLE big AS SELECT g AS id, g % 97 AS k, md5(g::text) AS t
	  FROM generate_series(1, 100000) g;
	CREATE VIEW big_v AS SELECT * FROM big;
	CREATE TABLE small AS SELECT g AS id, g % 7 AS k, 'x' AS t FROM generate_series(1, 100) g;
	CREATE TABLE fresh AS SELECT g AS id, g % 5 AS k, 'y' AS t FROM generate_series(1, 50000) g;
	ANALYZE big;
	ANALYZE small;
	CREATE TABLE parted (id int, k int, t text) PARTITION BY RANGE (id);
	CREATE TABLE parted1 PARTITION OF parted FOR VALUES FROM (1) TO (50001);
	CREATE TABLE parted2 PARTITION OF parted FOR VALUES FROM (50001) TO (100001);
	INSERT INTO parted SELECT * FROM big;
	ANALYZE parted;
	CREATE EXTENSION postgres_fdw;
	CREATE SERVER self FOREIGN DATA WRAPPER postgres_fdw OPTIONS (dbname 'postgres');
	CREATE USER MAPPING FOR CURRENT_USER SERVER self;
	CREATE FOREIGN TABLE big_f (id int, k int, t text) SERVER self OPTIONS (table_name 'big');
	ANALYZE big_f;
});

my $coord = PostgreSQL::Test::Cluster->new('coordinator');
$coord->init;
# 300 x 10: ANALYZE asks for 3,000 rows.
$coord->append_conf('postgresql.conf', 'default_statistics_target = 10');
$coord->start;
my ($host, $port) = ($shard->host, $shard->port);
$coord->safe_psql('postgres', qq{
	CREATE EXTENSION async_fdw;
	CREATE SERVER s FOREIGN DATA WRAPPER async_fdw
	  OPTIONS (host '$host', port '$port', dbname 'postgres');
	CREATE USER MAPPING FOR CURRENT_USER SERVER s;
	CREATE FOREIGN TABLE f_big (id int, k int, t text) SERVER s OPTIONS (table_name 'big');
	CREATE FOREIGN TABLE f_view (id int, k int, t text) SERVER s OPTIONS (table_name 'big_v');
	CREATE FOREIGN TABLE f_small (id int, k int, t text) SERVER s OPTIONS (table_name 'small');
	CREATE FOREIGN TABLE f_fresh (id int, k int, t text) SERVER s OPTIONS (table_name 'fresh');
	CREATE FOREIGN TABLE f_parted (id int, k int, t text) SERVER s OPTIONS (table_name 'parted');
	CREATE FOREIGN TABLE f_remote_f (id int, k int, t text) SERVER s OPTIONS (table_name 'big_f');
});

# analyze: ANALYZE TABLE; returns the remote statement that read its rows,
# the local row estimate, and whether each column has statistics.
sub analyze
{
	my ($table) = @_;
	my $offset = -s $shard->logfile;
	$coord->safe_psql('postgres', "ANALYZE $table");
	my ($select) = map { /DECLARE c\d+ CURSOR FOR (.*)$/ ? $1 : () }
	  grep { /^async_fdw\|/ } split /\n/, slurp_file($shard->logfile, $offset);
	my $estimate = $coord->safe_psql('postgres',
		"SELECT reltuples::bigint FROM pg_class WHERE relname = '$table'");
	my $stats = $coord->safe_psql('postgres',
		"SELECT count(*) FROM pg_stats WHERE tablename = '$table'");
	return ($select // '', $estimate, $stats);
}

my ($sql, $estimate, $stats) = analyze('f_big');
like($sql, qr/FROM public\.big TABLESAMPLE BERNOULLI\(3(\.\d+)?\)$/,
	'auto, a table: TABLESAMPLE BERNOULLI of 3% (3,000 of 100,000 rows)');
is($estimate, '100000', 'auto: the row estimate is the remote one');
is($stats, '3', 'auto: every column has statistics');

$coord->safe_psql('postgres', "ALTER SERVER s OPTIONS (ADD analyze_sampling 'system')");
($sql, $estimate, $stats) = analyze('f_big');
like($sql, qr/TABLESAMPLE SYSTEM\(3(\.\d+)?\)$/, 'system, set on the server');
is("$estimate|$stats", '100000|3', 'system: estimate and statistics');

$coord->safe_psql('postgres', "ALTER FOREIGN TABLE f_big OPTIONS (ADD analyze_sampling 'random')");
($sql, $estimate, $stats) = analyze('f_big');
like($sql, qr/FROM public\.big WHERE pg_catalog\.random\(\) < 0\.0(3|29+)\d*$/,
	'random, set on the table over the server');
is("$estimate|$stats", '100000|3', 'random: estimate and statistics');

$coord->safe_psql('postgres', "ALTER FOREIGN TABLE f_big OPTIONS (SET analyze_sampling 'off')");
($sql, $estimate, $stats) = analyze('f_big');
is($sql, 'SELECT id, k, t FROM public.big', 'off: every row read');
is("$estimate|$stats", '100000|3', 'off: the rows counted, and statistics');

# A remote foreign table takes no TABLESAMPLE: random(), for system as for
# auto; a remote partitioned table does.
($sql, $estimate, $stats) = analyze('f_remote_f');
like($sql, qr/FROM public\.big_f WHERE pg_catalog\.random\(\) < 0\.0(3|29+)\d*$/,
	'a remote foreign table, with the server\'s system: random()');
is("$estimate|$stats", '100000|3', '... estimate and statistics');
$coord->safe_psql('postgres', "ALTER SERVER s OPTIONS (SET analyze_sampling 'auto')");
($sql) = analyze('f_remote_f');
like($sql, qr/WHERE pg_catalog\.random\(\) < 0\.0(3|29+)\d*$/,
	'a remote foreign table, auto: random()');
($sql, $estimate, $stats) = analyze('f_parted');
like($sql, qr/FROM public\.parted TABLESAMPLE BERNOULLI\(3(\.\d+)?\)$/,
	'a remote partitioned table, auto: TABLESAMPLE BERNOULLI');
is("$estimate|$stats", '100000|3', '... estimate and statistics');

# A view's size is not known: every row is read.
($sql, $estimate) = analyze('f_view');
is("$sql|$estimate", 'SELECT id, k, t FROM public.big_v|100000',
	'a view: every row, counted');

# No sampling of a relation smaller than the sample, or of unknown size.
($sql, $estimate) = analyze('f_small');
is("$sql|$estimate", 'SELECT id, k, t FROM public.small|100',
	'a table smaller than the sample: every row');
($sql, $estimate, $stats) = analyze('f_fresh');
is("$sql|$estimate|$stats", 'SELECT id, k, t FROM public.fresh|50000|3',
	'a table the shard never analyzed: every row, counted');

# A bad value: postgres_fdw's words and code (22023, as postgres_fdw 16
# and later give it).
my ($ret, $out, $err) = $coord->psql('postgres',
	"\\set VERBOSITY verbose\nALTER SERVER s OPTIONS (SET analyze_sampling 'sometimes')");
like($err, qr/ERROR:  22023: invalid value for option "analyze_sampling": "sometimes"/,
	'a bad value is refused');
like($err, qr/DETAIL:  The option takes off, auto, random, system or bernoulli\./,
	'... saying which values it takes');

done_testing();
