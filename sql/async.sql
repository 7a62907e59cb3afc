--
-- async: foreign partitions scanned concurrently under an Append, over a
-- pool of connections per server, all seeing one snapshot
--
CREATE SCHEMA shard;
-- Each remote table reports the remote session that read it and the
-- snapshot it read with.
CREATE FUNCTION shard.session() RETURNS int LANGUAGE sql VOLATILE
  AS 'SELECT pg_backend_pid()';
CREATE FUNCTION shard.snap() RETURNS text LANGUAGE sql VOLATILE
  AS 'SELECT pg_current_snapshot()::text';
DO $$
BEGIN
  FOR i IN 1..8 LOOP
    EXECUTE format('CREATE TABLE shard.p%s (a int, b text)', i);
    EXECUTE format('INSERT INTO shard.p%s SELECT g, md5(g::text) FROM generate_series(%s, %s) g',
                   i, (i - 1) * 1000 + 1, i * 1000);
    EXECUTE format('CREATE VIEW shard.v%s AS SELECT a, b, shard.session() AS pid, shard.snap() AS snap FROM shard.p%s',
                   i, i);
  END LOOP;
END
$$;

-- Four partitions on one server, four on another.
CREATE TABLE apt (a int, b text, pid int, snap text) PARTITION BY RANGE (a);
DO $$
BEGIN
  FOR i IN 1..8 LOOP
    EXECUTE format('CREATE FOREIGN TABLE apt%s PARTITION OF apt FOR VALUES FROM (%s) TO (%s)
                    SERVER %s OPTIONS (schema_name ''shard'', table_name ''v%s'')',
                   i, (i - 1) * 1000 + 1, i * 1000 + 1,
                   CASE WHEN i <= 4 THEN 'loopback' ELSE 'loopback2' END, i);
  END LOOP;
END
$$;
CREATE VIEW all_rows AS
  SELECT * FROM shard.p1 UNION ALL SELECT * FROM shard.p2 UNION ALL
  SELECT * FROM shard.p3 UNION ALL SELECT * FROM shard.p4 UNION ALL
  SELECT * FROM shard.p5 UNION ALL SELECT * FROM shard.p6 UNION ALL
  SELECT * FROM shard.p7 UNION ALL SELECT * FROM shard.p8;

-- The Append runs the scans asynchronously (async_capable is on by
-- default).
EXPLAIN (VERBOSE, COSTS OFF) SELECT a, b FROM apt WHERE a % 100 = 0;
SELECT count(*), sum(a), min(b), max(b) FROM apt;
SELECT count(*), sum(a), min(b), max(b) FROM all_rows;
-- Every row once, whatever order they arrive in.
SELECT count(*) FROM ((SELECT a, b FROM apt EXCEPT ALL SELECT * FROM all_rows)
                UNION ALL (SELECT * FROM all_rows EXCEPT ALL SELECT a, b FROM apt)) d;

-- Each concurrent scan of a server has a connection of its own, and all of
-- a server's connections share one snapshot.  The checks of this section
-- (include/apt_block.sql) run in each fetch mode, streams first, and every
-- round inserts rows of its own; EXPLAIN shows the mode of a full scan and
-- of a scan under a LIMIT.  pg_regress feeds this file to psql on standard
-- input, so the block is found from the test directory it names.
\getenv abs_srcdir PG_ABS_SRCDIR
\set apt_block :abs_srcdir '/sql/include/apt_block.sql'
CREATE EXTENSION IF NOT EXISTS dblink;
SELECT dblink_connect('writer', afdw_test_conninfo());
ALTER SERVER loopback OPTIONS (ADD fetch_mode 'stream');
ALTER SERVER loopback2 OPTIONS (ADD fetch_mode 'stream');
\set round 500
\i :apt_block

-- The same with cursors.
ALTER SERVER loopback OPTIONS (SET fetch_mode 'cursor');
ALTER SERVER loopback2 OPTIONS (SET fetch_mode 'cursor');
\set round 600
\i :apt_block

-- The same in auto mode, where scans under a LIMIT use a cursor and the
-- others stream.
ALTER SERVER loopback OPTIONS (DROP fetch_mode);
ALTER SERVER loopback2 OPTIONS (DROP fetch_mode);
\set round 700
\i :apt_block
SELECT dblink_disconnect('writer');

-- async_capable off, on the server or the table, and enable_async_append
-- off give synchronous plans with the same rows.
ALTER SERVER loopback OPTIONS (ADD async_capable 'false');
EXPLAIN (COSTS OFF) SELECT a FROM apt;
SELECT count(*), sum(a), min(b), max(b) FROM apt;
ALTER SERVER loopback OPTIONS (DROP async_capable);
ALTER FOREIGN TABLE apt2 OPTIONS (ADD async_capable 'false');
EXPLAIN (COSTS OFF) SELECT a FROM apt WHERE a <= 4000;
ALTER FOREIGN TABLE apt2 OPTIONS (DROP async_capable);
SET enable_async_append = off;
EXPLAIN (COSTS OFF) SELECT a FROM apt;
SELECT count(*), sum(a), min(b), max(b) FROM apt;
RESET enable_async_append;

-- A synchronous plan reads its children one after the other, but the
-- first fetch sends the queries of all of them, so every remote session
-- is at work when the first row comes back.
-- (The remote sessions need a moment to read what was sent: wait up to ten
-- seconds for them.)
CREATE FUNCTION sessions_at_work(want int) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
  n bigint;
BEGIN
  FOR i IN 1..1000 LOOP
    PERFORM pg_stat_clear_snapshot();
    SELECT count(*) INTO n FROM pg_stat_activity
     WHERE application_name = 'async_fdw'
       AND (query LIKE '%DECLARE%' OR query LIKE '%FETCH%');
    EXIT WHEN n >= want;
    PERFORM pg_sleep(0.01);
  END LOOP;
  RETURN n;
END
$$;
SET enable_async_append = off;
-- (OFFSET 0 keeps the LIMIT local: each partition's whole query runs.)
SELECT a, sessions_at_work(8) AS started FROM (SELECT a FROM apt OFFSET 0) o LIMIT 1;
RESET enable_async_append;
DROP FUNCTION sessions_at_work(int);
-- Sorted output.
SELECT a FROM apt ORDER BY a LIMIT 3;
SELECT a FROM apt ORDER BY a DESC LIMIT 3;

-- LIMIT stops early; a cursor reads part, the rest is abandoned.  (OFFSET 0
-- keeps the LIMIT local; sent, each partition would return 10 rows at most.)
SELECT count(*) FROM (SELECT a FROM (SELECT a FROM apt OFFSET 0) o LIMIT 10) s;
SELECT count(*) FROM (SELECT a FROM (SELECT a FROM apt OFFSET 0) o LIMIT 4500) s;
SELECT count(*) FROM (SELECT a FROM apt LIMIT 10) s;
BEGIN;
DECLARE c CURSOR FOR SELECT a, b FROM apt;
MOVE 5 IN c;
MOVE 3000 IN c;
CLOSE c;
DECLARE d CURSOR FOR SELECT a, b FROM apt;
MOVE 10 IN d;
MOVE ALL IN d;
CLOSE d;
SELECT count(*) FROM apt;
COMMIT;

-- The Append rescanned inside a nested loop, with run-time pruning and
-- changing parameters.
CREATE TEMP TABLE probe (k int);
INSERT INTO probe VALUES (1), (1500), (4000), (4001), (7999), (9000);
ANALYZE probe;
SET enable_hashjoin = off;
SET enable_mergejoin = off;
SET enable_material = off;
SET enable_memoize = off;
EXPLAIN (COSTS OFF) SELECT p.k, t.b FROM probe p JOIN apt t ON t.a = p.k;
SELECT p.k, t.b FROM probe p JOIN apt t ON t.a = p.k ORDER BY 1;
SELECT p.k, t.b FROM probe p JOIN all_rows t ON t.a = p.k ORDER BY 1;
-- No parameter: the whole Append again for each outer row.
SELECT p.k, count(*) FROM probe p, apt t WHERE t.a % 1000 = 1 GROUP BY p.k ORDER BY 1;
RESET enable_hashjoin;
RESET enable_mergejoin;
RESET enable_material;
RESET enable_memoize;

-- Prepared statements with changing parameters, generic plan.
SET plan_cache_mode = force_generic_plan;
PREPARE q(int, int) AS SELECT count(*), sum(a) FROM apt WHERE a BETWEEN $1 AND $2;
EXECUTE q(1, 8000);
EXECUTE q(990, 1010);
EXECUTE q(3999, 6002);
DEALLOCATE q;
RESET plan_cache_mode;

-- Sixty-four partitions on one server that allows two connections:
-- slower, never an error or a deadlock.
CREATE TABLE many (a int, b int) PARTITION BY LIST (b);
DO $$
BEGIN
  CREATE TABLE shard.many_src (a int, b int);
  INSERT INTO shard.many_src SELECT g, g % 64 FROM generate_series(1, 6400) g;
  FOR i IN 0..63 LOOP
    EXECUTE format('CREATE VIEW shard.many%s AS SELECT * FROM shard.many_src WHERE b = %s', i, i);
    EXECUTE format('CREATE FOREIGN TABLE many%s PARTITION OF many FOR VALUES IN (%s)
                    SERVER loopback OPTIONS (schema_name ''shard'', table_name ''many%s'', fetch_size ''7'')',
                   i, i, i);
  END LOOP;
END
$$;
ALTER SERVER loopback OPTIONS (ADD max_connections '2');
SELECT count(*), sum(a), count(DISTINCT b) FROM many;
SELECT b, count(*) FROM many WHERE b IN (0, 31, 63) GROUP BY b ORDER BY b;
ALTER SERVER loopback OPTIONS (DROP max_connections);
SELECT count(*), sum(a), count(DISTINCT b) FROM many;

-- A server's scans run at once even when the first one's command takes
-- long before its first row (an aggregate, a sort): the snapshot that
-- connection exports comes back at once, not with the command's rows, so
-- the others import it and start.  Each of two partitions on one server
-- waits two seconds there; their remote statements overlap, each starting
-- before the other ends (one after the other before the export came back
-- at once).
CREATE VIEW shard.slow1 AS SELECT 1 AS part, statement_timestamp() AS started,
  (SELECT clock_timestamp() FROM pg_sleep(2)) AS ended;
CREATE VIEW shard.slow2 AS SELECT 2 AS part, statement_timestamp() AS started,
  (SELECT clock_timestamp() FROM pg_sleep(2)) AS ended;
CREATE TABLE slowpt (part int, started timestamptz, ended timestamptz)
  PARTITION BY LIST (part);
CREATE FOREIGN TABLE slowpt1 PARTITION OF slowpt FOR VALUES IN (1)
  SERVER loopback OPTIONS (schema_name 'shard', table_name 'slow1');
CREATE FOREIGN TABLE slowpt2 PARTITION OF slowpt FOR VALUES IN (2)
  SERVER loopback OPTIONS (schema_name 'shard', table_name 'slow2');
SELECT count(*), max(started) < min(ended) AS overlapped FROM slowpt;
DROP TABLE slowpt;

-- An error in one partition ends the whole query; every connection stays
-- usable.
CREATE FUNCTION shard.fail_on(a int) RETURNS int LANGUAGE plpgsql AS $$
BEGIN
  IF a = 2345 THEN RAISE EXCEPTION 'row % is broken', a; END IF;
  RETURN a;
END
$$;
CREATE VIEW shard.broken AS SELECT shard.fail_on(a) AS a FROM shard.p3;
CREATE TABLE bpt (a int) PARTITION BY RANGE (a);
CREATE FOREIGN TABLE bpt1 PARTITION OF bpt FOR VALUES FROM (1) TO (1001)
  SERVER loopback OPTIONS (schema_name 'shard', table_name 'p1');
CREATE FOREIGN TABLE bpt3 PARTITION OF bpt FOR VALUES FROM (2001) TO (3001)
  SERVER loopback OPTIONS (schema_name 'shard', table_name 'broken');
CREATE FOREIGN TABLE bpt5 PARTITION OF bpt FOR VALUES FROM (4001) TO (5001)
  SERVER loopback2 OPTIONS (schema_name 'shard', table_name 'p5');
SELECT count(*) FROM bpt;
SELECT count(*) FROM apt;
SELECT count(*) FROM afdw_remote_states() s WHERE s <> 'idle';

DROP TABLE bpt, many, apt, probe;
DROP VIEW all_rows;
SET client_min_messages = warning;
DROP SCHEMA shard CASCADE;
RESET client_min_messages;
DROP EXTENSION dblink;
