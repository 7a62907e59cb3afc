--
-- test/smith/coverage.sql: what the shards ran since pg_stat_statements was
-- last reset, by kind (run in database postgres by run.sh).  Constants
-- show as $n: "= ANY ($n" is a key filter or an IN list of constants,
-- "cardinality($n" the keys of a small foreign table.
--
SELECT d.datname AS shard,
	sum(s.calls) AS statements,
	coalesce(sum(s.calls) FILTER (WHERE s.query ~* '^\s*COPY\M.*\mTO STDOUT'), 0) AS copy_streams,
	coalesce(sum(s.calls) FILTER (WHERE s.query ~* '^\s*DECLARE\M'), 0) AS cursors,
	coalesce(sum(s.calls) FILTER (WHERE s.query ~* '^\s*FETCH\M'), 0) AS fetches,
	coalesce(sum(s.calls) FILTER (WHERE s.query ~ '= ANY \(\$'), 0) AS any_param,
	coalesce(sum(s.calls) FILTER (WHERE s.query ~ 'cardinality\(\$'), 0) AS small_table_keys,
	coalesce(sum(s.calls) FILTER (WHERE s.query ~* '^\s*(SELECT|DECLARE|COPY).*\mJOIN\M'), 0) AS joins,
	coalesce(sum(s.calls) FILTER (WHERE s.query ~* '^\s*(SELECT|DECLARE|COPY).*\mGROUP BY\M'), 0) AS grouped,
	coalesce(sum(s.calls) FILTER (WHERE s.query ~* '^\s*(UPDATE|DELETE|INSERT)\M'), 0) AS writes
FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
WHERE d.datname IN ('shard1', 'shard2')
GROUP BY d.datname ORDER BY d.datname;
