# test/t/018_get_connections.pl
#   async_fdw_get_connections(check_conn => true) on a connection whose
#   server ended the session while the local transaction still uses it:
#   closed is true while the entry is still listed (used_in_xact), NULL
#   without check_conn; false for a live one; the entry goes with the
#   transaction.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

my $shard = PostgreSQL::Test::Cluster->new('shard');
$shard->init;
$shard->start;
$shard->safe_psql('postgres', q{CREATE TABLE t AS SELECT g AS id FROM generate_series(1, 10) g});

my $coord = PostgreSQL::Test::Cluster->new('coordinator');
$coord->init;
$coord->start;
my ($host, $port) = ($shard->host, $shard->port);
$coord->safe_psql('postgres', qq{
	CREATE EXTENSION async_fdw;
	CREATE SERVER s FOREIGN DATA WRAPPER async_fdw
	  OPTIONS (host '$host', port '$port', dbname 'postgres');
	CREATE USER MAPPING FOR CURRENT_USER SERVER s;
	CREATE FOREIGN TABLE t (id int) SERVER s OPTIONS (table_name 't');
});

my $s = $coord->background_psql('postgres', on_error_stop => 0);
$s->query_safe('BEGIN');
is($s->query_safe('SELECT count(*) FROM t'), '10', 'the transaction reads through the connection');
my $pid = $s->query_safe('SELECT remote_backend_pid FROM async_fdw_get_connections()');
like($pid, qr/^\d+$/, 'one connection, its remote process');
is($s->query_safe(q{SELECT string_agg(concat_ws('|', server_name, used_in_xact, closed), ',')
	FROM async_fdw_get_connections(true)}),
	's|t|f', 'a live connection used by the transaction: used_in_xact, not closed');

# The server ends the session; wait until its process is gone.
$shard->safe_psql('postgres', "SELECT pg_terminate_backend($pid)");
my $gone = 0;
for (1 .. 500)
{
	$gone = $shard->safe_psql('postgres',
		"SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = $pid") eq 't';
	last if $gone;
	usleep(20_000);
}
ok($gone, 'the remote backend exited');

is($s->query_safe(q{SELECT string_agg(concat_ws('|', server_name, valid, used_in_xact,
	coalesce(closed::text, 'null'), remote_backend_pid), ',')
	FROM async_fdw_get_connections(check_conn => true)}),
	"s|t|t|true|$pid", 'check_conn: closed is true, the entry is still there');
is($s->query_safe(q{SELECT string_agg(coalesce(closed::text, 'null'), ',')
	FROM async_fdw_get_connections()}),
	'null', 'without check_conn: closed is NULL');

# The transaction cannot go on on it; once it is over the entry is gone.
$s->query('SELECT count(*) FROM t');
like($s->{stderr}, qr/lost connection to server "s"/, 'the transaction finds the connection lost');
# BackgroundPsql keeps a failed query's stderr; the next ones are clean.
$s->{stderr} = '';
$s->query_safe('ROLLBACK');
is($s->query_safe('SELECT count(*) FROM async_fdw_get_connections(true)'), '0',
	'after the transaction the closed connection is no longer listed');
is($s->query_safe('SELECT count(*) FROM t'), '10', 'a new connection opens when needed');
is($s->query_safe(q{SELECT string_agg(concat_ws('|', used_in_xact, closed), ',')
	FROM async_fdw_get_connections(true)}),
	'f|f', 'outside a transaction: not used, not closed');
$s->quit;

done_testing();
