--
-- explain: EXPLAIN (ANALYZE, VERBOSE) shows, per foreign scan, how its
-- query was read (runs by mode, and what ended runs early), the rows and
-- bytes received, the round trips, the time waited (only with TIMING) and
-- whether its connection was shared
--
CREATE TABLE remote.ex (id int, grp int, v text);
INSERT INTO remote.ex SELECT g, g % 3, 'v' || g FROM generate_series(1, 100) g;
ANALYZE remote.ex;
CREATE FOREIGN TABLE ft_ex (id int, grp int, v text) SERVER loopback
  OPTIONS (schema_name 'remote', table_name 'ex');
CREATE FOREIGN TABLE ft_exc (id int, grp int, v text) SERVER loopback
  OPTIONS (schema_name 'remote', table_name 'ex', fetch_mode 'cursor', fetch_size '15');
CREATE TEMP TABLE ex_keys AS SELECT g AS k FROM generate_series(1, 5) g;
ANALYZE ex_keys;

-- Without ANALYZE, or without VERBOSE, nothing new is shown.
EXPLAIN (VERBOSE, COSTS OFF) SELECT sum(id), max(v) FROM (SELECT id, v FROM ft_exc OFFSET 0) s;
EXPLAIN (ANALYZE, BUFFERS OFF, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT sum(id), max(v) FROM (SELECT id, v FROM ft_exc OFFSET 0) s;

-- The lines of an EXPLAIN (ANALYZE, VERBOSE) that match a pattern, for
-- those whose other lines vary from run to run.
CREATE FUNCTION ex_lines(query text, pattern text) RETURNS SETOF text
LANGUAGE plpgsql AS $$
DECLARE
  line text;
BEGIN
  FOR line IN EXECUTE 'EXPLAIN (ANALYZE, BUFFERS OFF, VERBOSE, COSTS OFF, TIMING OFF, SUMMARY OFF) ' || query LOOP
    IF line ~ pattern THEN
      RETURN NEXT btrim(line);
    END IF;
  END LOOP;
END
$$;

-- A stream: the first of a table in the session is in text format (its
-- remote types are checked in the same message), the next in binary.
-- Bytes are those of the COPY data as received: text lines with their tabs
-- and newline; binary rows with their field counts and lengths, and the
-- binary header and trailer.
EXPLAIN (ANALYZE, BUFFERS OFF, VERBOSE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT sum(id), max(v) FROM (SELECT id, v FROM ft_ex OFFSET 0) s;
EXPLAIN (ANALYZE, BUFFERS OFF, VERBOSE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT sum(id), max(v) FROM (SELECT id, v FROM ft_ex OFFSET 0) s;
-- The bytes of the text stream: 9 + 90 * 2 + 1 * 3 characters of ids and
-- values, a tab and a newline per row.
SELECT sum(length(id::text) + length(v) + 2) FROM remote.ex;

-- A cursor of 15 rows a FETCH: the DECLARE with the first FETCH, then two
-- FETCHes per message (sent ahead), until a short batch: 4 round trips.
-- Bytes are those of the values received.
EXPLAIN (ANALYZE, BUFFERS OFF, VERBOSE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT sum(id), max(v) FROM (SELECT id, v FROM ft_exc OFFSET 0) s;
SELECT sum(length(id::text) + length(v)) FROM remote.ex;

SET enable_hashjoin = off;
SET enable_mergejoin = off;
SET enable_material = off;
SET enable_memoize = off;
-- Lookups of a nested loop: one EXECUTE of a prepared statement per
-- rescan, a round trip each.
EXPLAIN (ANALYZE, BUFFERS OFF, VERBOSE, COSTS OFF, TIMING OFF, SUMMARY OFF)
  SELECT k, v FROM ex_keys JOIN ft_exc ON id = k;
-- A lookup that returns more rows than fetch_size overflows the LIMIT of
-- its EXECUTE (16 rows received for nothing): that run and the later ones
-- use a cursor.
EXPLAIN (ANALYZE, BUFFERS OFF, VERBOSE, COSTS OFF, TIMING OFF, SUMMARY OFF)
  SELECT k, count(*) FROM ex_keys JOIN ft_exc ON grp = k - 1 GROUP BY k;
-- A stream rescanned before its end (a subplan stops at the first match)
-- is stopped, and the later runs use a cursor.  (How many rows had arrived
-- when it stopped varies.)
CREATE FOREIGN TABLE ft_exs (id int, grp int, v text) SERVER loopback
  OPTIONS (schema_name 'remote', table_name 'ex', fetch_mode 'stream', fetch_size '10');
SELECT ex_lines($$SELECT count(*) FROM ex_keys k
  WHERE EXISTS (SELECT 1 FROM ft_exs f WHERE f.id >= k.k + random() * 0)$$,
  'Remote Reads|Connection');
-- A scan rescanned with the same parameters (a subplan that stops at its
-- first row) reads its first batch again, though the next batches are
-- queued or on their way behind it: the query runs once, whatever the
-- rescans.  A rescan after the first batch runs the query again; every
-- rescan has the rows of the table (the sums are those of remote.ex).
SELECT ex_lines($$SELECT count(*) FROM generate_series(1, 400) g
  WHERE CASE WHEN g > 0 THEN EXISTS (SELECT 1 FROM ft_exc f WHERE g > 0) END$$,
  'Remote Reads');
SELECT ex_lines($$SELECT (SELECT sum(id) FROM (SELECT id FROM ft_exc LIMIT k * 10) s)
  FROM ex_keys$$, 'Remote Reads');
SELECT k, (SELECT sum(id) FROM (SELECT id FROM ft_exc LIMIT k * 10) s),
       (SELECT sum(id) FROM (SELECT id FROM remote.ex LIMIT k * 10) s)
  FROM ex_keys ORDER BY k;
RESET enable_hashjoin;
RESET enable_mergejoin;
RESET enable_material;
RESET enable_memoize;

-- Four partitions on one server that allows two connections: each pair
-- shares one, and the streams of a pair take turns.  (Their small queries
-- would go as one: combine.sql shows that; not here.)
SET async_fdw.combine_scans = off;
CALL afdw_test_server('loopback_ex', options => 'max_connections ''2''');
CREATE USER MAPPING FOR CURRENT_USER SERVER loopback_ex;
CREATE TABLE ex_parts (id int, grp int, v text) PARTITION BY HASH (id);
CREATE FOREIGN TABLE ex_part0 PARTITION OF ex_parts
  FOR VALUES WITH (MODULUS 4, REMAINDER 0) SERVER loopback_ex
  OPTIONS (schema_name 'remote', table_name 'ex', fetch_mode 'stream');
CREATE FOREIGN TABLE ex_part1 PARTITION OF ex_parts
  FOR VALUES WITH (MODULUS 4, REMAINDER 1) SERVER loopback_ex
  OPTIONS (schema_name 'remote', table_name 'ex', fetch_mode 'stream');
CREATE FOREIGN TABLE ex_part2 PARTITION OF ex_parts
  FOR VALUES WITH (MODULUS 4, REMAINDER 2) SERVER loopback_ex
  OPTIONS (schema_name 'remote', table_name 'ex', fetch_mode 'stream');
CREATE FOREIGN TABLE ex_part3 PARTITION OF ex_parts
  FOR VALUES WITH (MODULUS 4, REMAINDER 3) SERVER loopback_ex
  OPTIONS (schema_name 'remote', table_name 'ex', fetch_mode 'stream');
EXPLAIN (ANALYZE, BUFFERS OFF, VERBOSE, COSTS OFF, TIMING OFF, SUMMARY OFF)
  SELECT count(*), sum(id) FROM ex_parts;

-- A stream whose connection another query needs (a function's, here, on
-- a server of one connection) is read on into memory: it spilled.
CALL afdw_test_server('loopback_ex1', options => 'max_connections ''1''');
CREATE USER MAPPING FOR CURRENT_USER SERVER loopback_ex1;
CREATE FOREIGN TABLE ft_ex1 (id int, grp int, v text) SERVER loopback_ex1
  OPTIONS (schema_name 'remote', table_name 'ex', fetch_mode 'stream', fetch_size '10');
CREATE FOREIGN TABLE ft_ex1c (id int, grp int, v text) SERVER loopback_ex1
  OPTIONS (schema_name 'remote', table_name 'ex', fetch_mode 'cursor');
CREATE FUNCTION ex_count() RETURNS bigint LANGUAGE sql AS
  'SELECT count(*) FROM ft_ex1c';
EXPLAIN (ANALYZE, BUFFERS OFF, VERBOSE, COSTS OFF, TIMING OFF, SUMMARY OFF)
  SELECT count(*) FROM ft_ex1 WHERE id % 50 = 1 + ex_count() * 0;
DROP FUNCTION ex_count();
DROP SERVER loopback_ex1 CASCADE;

-- The other formats show each count as a number.
EXPLAIN (ANALYZE, BUFFERS OFF, VERBOSE, COSTS OFF, TIMING OFF, SUMMARY OFF, FORMAT JSON)
  SELECT sum(id), max(v) FROM (SELECT id, v FROM ft_exc OFFSET 0) s;

-- With TIMING on, the time waited for the remote rows: here most of the
-- remote query's sleep of 250 ms (the query starts at the scan's Begin, so
-- a busy machine's delay before the first wait is not counted: with a
-- 50 ms sleep it measured under 50 ms on a loaded machine).  Times vary:
-- the function checks them.
CREATE VIEW remote.ex_slow AS SELECT id FROM remote.ex, pg_sleep(0.25);
CREATE FOREIGN TABLE ft_ex_slow (id int) SERVER loopback
  OPTIONS (schema_name 'remote', table_name 'ex_slow');
CREATE FUNCTION ex_waits(query text, fmt text DEFAULT 'text')
RETURNS TABLE (scan text, wait_ms numeric) LANGUAGE plpgsql AS $$
DECLARE
  line text;
  plan json;
  current text;
BEGIN
  IF fmt = 'json' THEN
    EXECUTE 'EXPLAIN (ANALYZE, BUFFERS OFF, VERBOSE, FORMAT JSON) ' || query INTO plan;
    scan := plan->0->'Plan'->'Plans'->0->>'Relation Name';
    wait_ms := (plan->0->'Plan'->'Plans'->0->>'Remote Wait Time')::numeric;
    RETURN NEXT;
    RETURN;
  END IF;
  FOR line IN EXECUTE 'EXPLAIN (ANALYZE, BUFFERS OFF, VERBOSE) ' || query LOOP
    IF line ~ 'Foreign Scan on' THEN
      current := substring(line FROM 'Foreign Scan on ([a-z0-9_.]+)');
    ELSIF line ~ 'Remote Wait:' THEN
      scan := current;
      wait_ms := substring(line FROM 'Remote Wait: ([0-9.]+) ms$')::numeric;
      RETURN NEXT;
    END IF;
  END LOOP;
END
$$;
SELECT scan, wait_ms >= 50 AS waited FROM ex_waits('SELECT count(*) FROM (SELECT FROM ft_ex_slow OFFSET 0) s');
SELECT scan, wait_ms >= 50 AS waited FROM ex_waits('SELECT count(*) FROM (SELECT FROM ft_ex_slow OFFSET 0) s', 'json');
-- Under an asynchronous Append too, for each scan: those waiting for a
-- shared connection wait longer.
CREATE TABLE ex_slow_parts (id int) PARTITION BY HASH (id);
CREATE FOREIGN TABLE ex_slow_part0 PARTITION OF ex_slow_parts
  FOR VALUES WITH (MODULUS 4, REMAINDER 0) SERVER loopback_ex
  OPTIONS (schema_name 'remote', table_name 'ex_slow');
CREATE FOREIGN TABLE ex_slow_part1 PARTITION OF ex_slow_parts
  FOR VALUES WITH (MODULUS 4, REMAINDER 1) SERVER loopback_ex
  OPTIONS (schema_name 'remote', table_name 'ex_slow');
CREATE FOREIGN TABLE ex_slow_part2 PARTITION OF ex_slow_parts
  FOR VALUES WITH (MODULUS 4, REMAINDER 2) SERVER loopback_ex
  OPTIONS (schema_name 'remote', table_name 'ex_slow');
CREATE FOREIGN TABLE ex_slow_part3 PARTITION OF ex_slow_parts
  FOR VALUES WITH (MODULUS 4, REMAINDER 3) SERVER loopback_ex
  OPTIONS (schema_name 'remote', table_name 'ex_slow');
SELECT scan, wait_ms >= 40 AS waited FROM ex_waits('SELECT count(*) FROM (SELECT FROM ex_slow_parts OFFSET 0) s');
-- With TIMING off, no time is shown.
SELECT count(*) FROM ex_lines('SELECT count(*) FROM (SELECT FROM ex_slow_parts OFFSET 0) s', 'Remote Wait');
DROP TABLE ex_slow_parts;

DROP FUNCTION ex_waits(text, text);
DROP FUNCTION ex_lines(text, text);
DROP FOREIGN TABLE ft_ex_slow;
DROP VIEW remote.ex_slow;
RESET async_fdw.combine_scans;
DROP TABLE ex_parts;
DROP SERVER loopback_ex CASCADE;
DROP FOREIGN TABLE ft_ex, ft_exc, ft_exs;
DROP TABLE remote.ex;
