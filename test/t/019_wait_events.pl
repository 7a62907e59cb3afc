# test/t/019_wait_events.pl
#   What pg_stat_activity shows for a backend that waits on a remote server:
#   from PostgreSQL 17 on, a wait event of async_fdw's own per kind of wait
#   (a result, a remote commit's answer); before 17, the generic Extension.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

my $shard = PostgreSQL::Test::Cluster->new('shard');
$shard->init;
$shard->start;
# A view whose one row comes after 3 s; a table whose commit takes 3 s
# (a deferred constraint trigger that sleeps).
$shard->safe_psql('postgres', q{
	CREATE VIEW slow_row AS SELECT 1 AS id FROM pg_sleep(3);
	CREATE TABLE slow_commit (id int);
	CREATE FUNCTION sleep_at_commit() RETURNS trigger LANGUAGE plpgsql AS
	  'BEGIN PERFORM pg_sleep(3); RETURN NULL; END';
	CREATE CONSTRAINT TRIGGER sleep_at_commit AFTER INSERT ON slow_commit
	  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION sleep_at_commit();
});

my $coord = PostgreSQL::Test::Cluster->new('coordinator');
$coord->init;
$coord->start;
my ($host, $port) = ($shard->host, $shard->port);
$coord->safe_psql('postgres', qq{
	CREATE EXTENSION async_fdw;
	CREATE SERVER s FOREIGN DATA WRAPPER async_fdw
	  OPTIONS (host '$host', port '$port', dbname 'postgres');
	CREATE USER MAPPING FOR CURRENT_USER SERVER s;
	CREATE FOREIGN TABLE slow_row (id int) SERVER s OPTIONS (table_name 'slow_row');
	CREATE FOREIGN TABLE slow_commit (id int) SERVER s OPTIONS (table_name 'slow_commit');
});
my $v17 = $coord->safe_psql('postgres', 'SHOW server_version_num') >= 170000;

# wait_of(SQL): run SQL in a session of its own and return the wait event
# type and name its backend shows while SQL runs (sampled until one of
# async_fdw's appears, or the statement ends).
sub wait_of
{
	my ($sql, $tag) = @_;
	my $bg = $coord->background_psql('postgres');
	$bg->query_until(qr/started/, "\\echo started\n/* $tag */ $sql;\n");
	my $seen = '';
	for (1 .. 250)
	{
		$seen = $coord->safe_psql('postgres', qq{
			SELECT coalesce(wait_event_type, '') || '|' || coalesce(wait_event, '')
			  FROM pg_stat_activity
			 WHERE query LIKE '/* $tag */%' AND pid <> pg_backend_pid()});
		last if $seen =~ /^Extension\|/;
		usleep(20_000);
	}
	$bg->quit;
	return $seen;
}

my $result_wait = wait_of('SELECT * FROM slow_row', 'result');
my $commit_wait = wait_of('INSERT INTO slow_commit VALUES (1)', 'commit');
if ($v17)
{
	is($result_wait, 'Extension|AsyncFdwGetResult',
		'a scan waiting for its remote rows shows AsyncFdwGetResult');
	is($commit_wait, 'Extension|AsyncFdwCommit',
		'a commit waiting for the remote commit shows AsyncFdwCommit');
	# Each is registered under its name when first used, and listed.
	is( $coord->safe_psql('postgres', q{
			SELECT count(*) FROM pg_wait_events
			 WHERE type = 'Extension' AND name IN ('AsyncFdwCommit', 'AsyncFdwGetResult')}),
		'2', 'pg_wait_events lists the wait events used');
}
else
{
	is($result_wait, 'Extension|Extension',
		'before 17: a scan waiting for its remote rows shows the generic Extension');
	is($commit_wait, 'Extension|Extension',
		'before 17: a commit waiting for the remote commit shows the generic Extension');
}
is($shard->safe_psql('postgres', 'SELECT count(*) FROM slow_commit'), '1',
	'the slow commit committed');

done_testing();
