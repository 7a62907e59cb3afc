--
-- safety: defects of issue 10 (crashes, wrong rows, spurious errors), each
-- with the query that showed it
--

-- 1. An error while a batch with a grown line buffer is current: the buffer
-- lives in a context deleted before the scan's cleanup runs.
CREATE TABLE remote.huge (id int, t text);
INSERT INTO remote.huge VALUES (1, repeat('x', 9000000));
CREATE FOREIGN TABLE fhuge (id int, t int)
  SERVER loopback OPTIONS (schema_name 'remote', table_name 'huge');
SELECT id FROM fhuge;                   -- no t: fine
-- t is not an int: an error, not a crash (the message would hold 9 MB).
\set VERBOSITY sqlstate
SELECT * FROM fhuge;
SELECT * FROM fhuge;                    -- the same again, types known
ALTER FOREIGN TABLE fhuge OPTIONS (ADD fetch_mode 'cursor');
SELECT * FROM fhuge;
\set VERBOSITY default
-- The same, caught in a subtransaction.
CREATE FUNCTION afdw_try(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE q;
  RETURN 'ok';
EXCEPTION WHEN others THEN
  RETURN SQLSTATE || ': ' || left(SQLERRM, 60);
END
$$;
SELECT afdw_try('SELECT * FROM fhuge');
-- The backend is still there, and so is its pool.
SELECT count(*) FROM ft1;
DROP FOREIGN TABLE fhuge;
DROP TABLE remote.huge;

-- Objects for the rest: a table whose row 150 cannot be divided by, and a
-- table of five partitions on a server of at most four connections.
CREATE TABLE remote.n (id int PRIMARY KEY, v int);
INSERT INTO remote.n SELECT g, CASE WHEN g = 150 THEN 0 ELSE g END
  FROM generate_series(1, 300) g;
CALL afdw_test_server('loopback_s');
CREATE USER MAPPING FOR CURRENT_USER SERVER loopback_s;
CREATE FOREIGN TABLE n (id int, v int)
  SERVER loopback_s OPTIONS (schema_name 'remote', table_name 'n');
CREATE TABLE sp (id int, v int) PARTITION BY RANGE (id);
DO $$
BEGIN
  FOR i IN 1..5 LOOP
    EXECUTE format('CREATE TABLE remote.sp%s (id int, v int)', i);
    EXECUTE format('INSERT INTO remote.sp%s SELECT g, g %% 7 FROM generate_series(%s, %s) g',
                   i, (i - 1) * 1000 + 1, i * 1000);
    EXECUTE format('CREATE FOREIGN TABLE sp%s PARTITION OF sp FOR VALUES FROM (%s) TO (%s)
                    SERVER loopback_s OPTIONS (schema_name ''remote'', table_name ''sp%s'')',
                   i, (i - 1) * 1000 + 1, i * 1000 + 1, i);
  END LOOP;
END
$$;

-- 8. Rows asked for ahead of need: their errors surface only if they are
-- used.  Row 150 divides by zero; the first batch holds rows 1 to 100.
SELECT id FROM n WHERE 100 / v > 0 LIMIT 5;
SELECT EXISTS (SELECT 1 FROM n WHERE 100 / v > 0);
SELECT count(*) FROM (SELECT id FROM n WHERE 100 / v > 0 LIMIT 100) s;
-- The remote transaction is intact: the next statements of the block work.
BEGIN;
SELECT id FROM n WHERE 100 / v > 0 LIMIT 5;
SELECT count(*) FROM n;
SELECT count(*) FROM sp;
COMMIT;
-- Rows that are needed still fail, with the remote error.
SELECT count(*) FROM (SELECT id FROM n WHERE 100 / v > 0 LIMIT 200) s;
ALTER FOREIGN TABLE n OPTIONS (ADD fetch_mode 'stream', fetch_size '1000');
SELECT id FROM n WHERE 100 / v > 0 LIMIT 5;
SELECT count(*) FROM n WHERE 100 / v > 0;
ALTER FOREIGN TABLE n OPTIONS (DROP fetch_mode, DROP fetch_size);

-- 14. A scan started eagerly that the plan never runs: the inner side of a
-- hash join whose outer side is empty.  Its failure is not the query's.
SET enable_nestloop = off;
SET enable_mergejoin = off;
SELECT * FROM n a JOIN (SELECT id FROM n b WHERE 100 / (b.v - 5) > 0 LIMIT 200) b
  ON a.id = b.id WHERE a.id < 0;
RESET enable_nestloop;
RESET enable_mergejoin;
-- An InitPlan that is never evaluated: no row reaches the local condition.
SELECT count(*) FROM n
 WHERE id < 0 AND v > (SELECT max(v) FROM n WHERE 100 / (v - 5) > 0) + random() * 0;

-- 9. A failing first partition of a generic plan in cursor mode: the real
-- error, never "could not import the requested snapshot".
ALTER SERVER loopback_s OPTIONS (ADD fetch_mode 'cursor');
SET plan_cache_mode = force_generic_plan;
PREPARE sp_div(int) AS SELECT count(*) FROM sp WHERE 100 / (id - 1) > $1;
\set VERBOSITY terse
EXECUTE sp_div(-1);
EXECUTE sp_div(-1);
BEGIN;
EXECUTE sp_div(-1);
ROLLBACK;
\set VERBOSITY default
DEALLOCATE sp_div;
RESET plan_cache_mode;
ALTER SERVER loopback_s OPTIONS (DROP fetch_mode);

-- 7. Five partitions, four connections: every shape, in both modes.
SELECT count(*), sum(v) FROM sp;
SELECT count(*), sum(v) FROM sp WHERE id > (SELECT 0);
SET plan_cache_mode = force_generic_plan;
PREPARE sp_gt(int) AS SELECT count(*), sum(v) FROM sp WHERE id > $1;
EXECUTE sp_gt(0);
EXECUTE sp_gt(10);
SELECT count(*) FROM sp a JOIN sp b USING (id) WHERE a.id > (SELECT 100);
ALTER SERVER loopback_s OPTIONS (ADD fetch_mode 'cursor');
SELECT count(*), sum(v) FROM sp;
SELECT count(*), sum(v) FROM sp WHERE id > (SELECT 0);
EXECUTE sp_gt(0);
BEGIN;
DECLARE c CURSOR FOR SELECT id FROM sp WHERE id > (SELECT 4990) ORDER BY id;
FETCH 3 FROM c;
CLOSE c;
COMMIT;
SELECT count(*) FROM sp a JOIN sp b USING (id) WHERE a.id > (SELECT 100);
ALTER SERVER loopback_s OPTIONS (SET fetch_mode 'stream');
SELECT count(*), sum(v) FROM sp WHERE id > (SELECT 0);
EXECUTE sp_gt(0);
ALTER SERVER loopback_s OPTIONS (DROP fetch_mode);
DEALLOCATE sp_gt;
RESET plan_cache_mode;
-- A subplan run by the condition of each partition, itself an Append over
-- the same server: its scans take connections that the outer partitions
-- wait on (found by the differential test, test/t/005_differential.pl).
ALTER SERVER loopback_s OPTIONS (ADD max_connections '2');
SELECT count(*) FROM sp a WHERE a.id NOT IN (SELECT b.id FROM sp b WHERE b.id < 3000);
SELECT count(*) FROM sp a WHERE a.id NOT IN (SELECT b.id FROM sp b WHERE b.id < 3000);
ALTER SERVER loopback_s OPTIONS (ADD fetch_mode 'cursor', ADD fetch_size '7');
SELECT count(*) FROM sp a WHERE a.id NOT IN (SELECT b.id FROM sp b WHERE b.id < 3000);
ALTER SERVER loopback_s OPTIONS (SET fetch_mode 'stream', DROP fetch_size);
SELECT count(*) FROM sp a WHERE a.id NOT IN (SELECT b.id FROM sp b WHERE b.id < 3000);
ALTER SERVER loopback_s OPTIONS (DROP fetch_mode, DROP max_connections);

-- 10. A second connection joins a remote transaction whose first one
-- streams, or is inside a savepoint: each case in a fresh session, where
-- the pool has no connection yet.
CREATE FOREIGN TABLE sp_a (id int, v int)
  SERVER loopback_s OPTIONS (schema_name 'remote', table_name 'sp1');
CREATE FOREIGN TABLE sp_b (id int, v int)
  SERVER loopback_s OPTIONS (schema_name 'remote', table_name 'sp2');
\c
DO $$
DECLARE
  r record;
  n bigint;
  total bigint := 0;
BEGIN
  FOR r IN SELECT * FROM sp_a LOOP
    SELECT count(*) INTO n FROM sp_b WHERE id > r.id + 1000;
    total := total + n;
  END LOOP;
  RAISE NOTICE 'total %', total;
END
$$;
\c
DO $$
DECLARE
  n bigint;
BEGIN
  SELECT count(*) INTO n FROM sp_a;
  BEGIN
    SELECT count(*) INTO n FROM sp_b;
    RAISE NOTICE 'inner %', n;
    PERFORM 1 / 0;
  EXCEPTION WHEN division_by_zero THEN
    SELECT count(*) INTO n FROM sp_b WHERE id > 1500;
    RAISE NOTICE 'handler %', n;
  END;
END
$$;
-- A function called by a plain statement scans the server while that
-- statement's stream runs: the function shares the stream's connection,
-- whose rows are kept in memory meanwhile.
CREATE FUNCTION sp_b_after(x int) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
  n bigint;
BEGIN
  SELECT count(*) INTO n FROM sp_b WHERE id > x + 1000;
  RETURN n;
END
$$;
\c
SELECT sum(sp_b_after(id)), count(*) FROM sp_a;
\c
ALTER FOREIGN TABLE sp_a OPTIONS (ADD fetch_size '7');
SELECT sum(sp_b_after(id)), count(*), sum(v) FROM sp_a;
BEGIN;
SAVEPOINT s;
SELECT sum(sp_b_after(id)), count(*) FROM sp_a;
ROLLBACK TO SAVEPOINT s;
SELECT sum(sp_b_after(id)), count(*) FROM sp_a;
COMMIT;
ALTER FOREIGN TABLE sp_a OPTIONS (DROP fetch_size);

-- 17. A very large fetch_size, in stream mode too.
ALTER FOREIGN TABLE sp_a OPTIONS (ADD fetch_size '2000000000');
SELECT count(*), sum(v) FROM sp_a;
ALTER FOREIGN TABLE sp_a OPTIONS (ADD fetch_mode 'cursor');
SELECT count(*), sum(v) FROM sp_a;
ALTER FOREIGN TABLE sp_a OPTIONS (DROP fetch_size, DROP fetch_mode);

-- 19. An Append consumes each child's rows as they come: the rows of a fast
-- partition never wait behind a slow sibling's next packet.  The slow one,
-- first in the Append, sends its first row at once and its second only once
-- the fast partition's remote query has produced its last row, and a second
-- after that (each slow row fills the remote send buffer, so that it is
-- flushed at once); all 1000 fast rows come before the slow partition's
-- second row.  The fast query marks its last row on a sequence, reset before
-- each run, which the slow query waits to see, for 10 seconds at most: a
-- fixed pause failed now and then on a loaded machine, where opening the
-- fast partition's connection can take seconds.
CREATE SEQUENCE remote.fast_done;
CREATE FUNCTION remote.fast_row(i int) RETURNS int LANGUAGE plpgsql AS $$
BEGIN
  IF i = 1000 THEN
    PERFORM nextval('remote.fast_done');
  END IF;
  RETURN i;
END
$$;
CREATE FUNCTION remote.slow_row(i int) RETURNS int LANGUAGE plpgsql AS $$
BEGIN
  IF i = 2 THEN
    FOR k IN 1..200 LOOP
      EXIT WHEN (SELECT is_called FROM remote.fast_done);
      PERFORM pg_sleep(0.05);
    END LOOP;
    PERFORM pg_sleep(1);
  END IF;
  RETURN i;
END
$$;
CREATE VIEW remote.slow AS
  SELECT 'a'::text AS src, remote.slow_row(g) AS id, repeat('x', 9000) AS pad
    FROM generate_series(1, 3) g;
CREATE VIEW remote.fast AS
  SELECT 'b'::text AS src, remote.fast_row(g) AS id, 'y'::text AS pad
    FROM generate_series(1, 1000) g;
CREATE TABLE ps (src text, id int, pad text) PARTITION BY LIST (src);
CREATE FOREIGN TABLE ps_slow PARTITION OF ps FOR VALUES IN ('a')
  SERVER loopback OPTIONS (schema_name 'remote', table_name 'slow');
CREATE FOREIGN TABLE ps_fast PARTITION OF ps FOR VALUES IN ('b')
  SERVER loopback_s OPTIONS (schema_name 'remote', table_name 'fast');
CREATE VIEW ps_arrival AS
  WITH arrival AS (
    SELECT src, id, row_number() OVER () AS pos FROM (SELECT src, id FROM ps) s
  )
  SELECT count(*) FILTER (WHERE src = 'b') AS fast_rows,
         count(*) FILTER (WHERE src = 'a') AS slow_rows,
         max(pos) FILTER (WHERE src = 'b') <
           min(pos) FILTER (WHERE src = 'a' AND id >= 2) AS fast_first
    FROM arrival;
EXPLAIN (COSTS OFF) SELECT src, id FROM ps;
SELECT setval('remote.fast_done', 1, false) AS armed;
SELECT * FROM ps_arrival;
ALTER FOREIGN TABLE ps_slow OPTIONS (ADD fetch_mode 'cursor');
SELECT setval('remote.fast_done', 1, false) AS armed;
SELECT * FROM ps_arrival;
-- Read one by one, the slow partition comes first: what the test detects.
SET enable_async_append = off;
SELECT setval('remote.fast_done', 1, false) AS armed;
SELECT * FROM ps_arrival;
RESET enable_async_append;
