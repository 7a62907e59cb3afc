--
-- params: remote joins and aggregates whose query holds a parameter, every
-- kind of Param (an InitPlan's output, an outer query level's column, a
-- PL/pgSQL variable, a generic plan's $n) in the select list, the WHERE,
-- GROUP BY and HAVING, under an ORDER BY or a LIMIT, in every fetch mode,
-- as partial aggregates under an Append, and in cursors.  A Param is never
-- an item of the remote select list (the planner would make it read the
-- scan's own output): it is computed locally, or sent as a value.  Every
-- result is compared with the same query on the remote tables themselves.
--
CREATE TABLE remote.pa1 (c1 int, c2 int, c3 text);
INSERT INTO remote.pa1 SELECT g, g % 10, 'x' || (g % 4) FROM generate_series(1, 100) g;
CREATE TABLE remote.pa2 (c1 int, c2 int, c3 text);
INSERT INTO remote.pa2 SELECT g, g % 7, 'y' || (g % 3) FROM generate_series(1, 80) g;
CREATE TABLE remote.pa_empty (LIKE remote.pa1);
CREATE TABLE remote.pp1 (a int, b int);
INSERT INTO remote.pp1 SELECT g, g % 4 FROM generate_series(1, 500) g;
CREATE TABLE remote.pp2 (LIKE remote.pp1);
INSERT INTO remote.pp2 SELECT g, g % 4 FROM generate_series(501, 1000) g;
CREATE FOREIGN TABLE pa1 (c1 int, c2 int, c3 text)
  SERVER loopback OPTIONS (schema_name 'remote', table_name 'pa1');
CREATE FOREIGN TABLE pa2 (c1 int, c2 int, c3 text)
  SERVER loopback OPTIONS (schema_name 'remote', table_name 'pa2');
CREATE FOREIGN TABLE pa_empty (c1 int, c2 int, c3 text)
  SERVER loopback OPTIONS (schema_name 'remote', table_name 'pa_empty');
CREATE TABLE pp (a int, b int) PARTITION BY RANGE (a);
CREATE FOREIGN TABLE pp1 PARTITION OF pp FOR VALUES FROM (1) TO (501)
  SERVER loopback OPTIONS (schema_name 'remote', table_name 'pp1');
CREATE FOREIGN TABLE pp2 PARTITION OF pp FOR VALUES FROM (501) TO (1001)
  SERVER loopback2 OPTIONS (schema_name 'remote', table_name 'pp2');
CREATE TABLE remote.pp_local AS SELECT * FROM remote.pp1 UNION ALL SELECT * FROM remote.pp2;
CREATE TABLE pa_outer (x int);
INSERT INTO pa_outer VALUES (1), (2), (3), (NULL);
ANALYZE pa1, pa2, pa_empty, pp1, pp2, pa_outer;

-- 1. An InitPlan's output in the select list, GROUP BY and HAVING of a
-- remote aggregate.  Alone in the select list it is computed locally;
-- grouped by, it is sent as a value (GROUP BY $1), which still makes no
-- group of no rows.
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT exists(SELECT 1 FROM pg_enum), sum(c1) FROM pa1;
SELECT exists(SELECT 1 FROM pg_enum), sum(c1) FROM pa1;
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT exists(SELECT 1 FROM pg_enum), sum(c1) FROM pa1 GROUP BY 1;
SELECT exists(SELECT 1 FROM pg_enum), sum(c1) FROM pa1 GROUP BY 1;
SELECT exists(SELECT 1 FROM pg_enum), sum(c1) FROM pa_empty GROUP BY 1;
SELECT exists(SELECT 1 FROM pg_enum), sum(c1) FROM pa_empty;
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT (SELECT 2) AS k, c2, sum(c1 * (SELECT 2)) FROM pa1
   GROUP BY 1, 2 HAVING sum(c1) > (SELECT 470) ORDER BY 2 LIMIT 3;
SELECT (SELECT 2) AS k, c2, sum(c1 * (SELECT 2)) FROM pa1
 GROUP BY 1, 2 HAVING sum(c1) > (SELECT 470) ORDER BY 2 LIMIT 3;
-- A grouping column fixed by a parameter (or a constant): the local plan,
-- a GroupAggregate whose input is sorted already, costs as much.
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT c2, count(*), sum(c1) FROM pa1 WHERE c2 = (SELECT 3) GROUP BY c2;
SELECT c2, count(*), sum(c1) FROM pa1 WHERE c2 = (SELECT 3) GROUP BY c2;
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT c2 + 1, count(*) FROM pa1 WHERE c2 = 3 GROUP BY c2 + 1;
-- The same on a remote join.
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT (SELECT 'k'::text), b.c2, count(*), sum(a.c1 + (SELECT 1))
    FROM pa1 a JOIN pa2 b ON a.c1 = b.c1 WHERE b.c3 <> (SELECT 'y0'::text)
   GROUP BY 1, 2 ORDER BY 2;
SELECT rows_same(
  $$SELECT (SELECT 'k'::text), b.c2, count(*), sum(a.c1 + (SELECT 1)) FROM pa1 a JOIN pa2 b ON a.c1 = b.c1 WHERE b.c3 <> (SELECT 'y0'::text) GROUP BY 1, 2$$,
  $$SELECT (SELECT 'k'::text), b.c2, count(*), sum(a.c1 + (SELECT 1)) FROM remote.pa1 a JOIN remote.pa2 b ON a.c1 = b.c1 WHERE b.c3 <> (SELECT 'y0'::text) GROUP BY 1, 2$$);

-- 2. A column of an outer query level (a correlated subquery): a new value,
-- and a new remote query, for every outer row.
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT x, (SELECT sum(c1 + o.x) FROM pa1) FROM pa_outer o;
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT x, (SELECT sum(c1) FROM pa1 GROUP BY o.x) FROM pa_outer o;
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT x, (SELECT count(*) FROM pa1 HAVING sum(c1) > o.x * 2000) FROM pa_outer o;
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT x, (SELECT o.x + sum(a.c1) FROM pa1 a JOIN pa2 b ON a.c1 = b.c1
              WHERE b.c2 <> o.x GROUP BY o.x, b.c2 ORDER BY b.c2 LIMIT 1) FROM pa_outer o;
CREATE TABLE pa_shapes (n int, q text);
INSERT INTO pa_shapes VALUES
  (1, $$SELECT exists(SELECT 1 FROM pg_enum), sum(c1) FROM pa1$$),
  (2, $$SELECT exists(SELECT 1 FROM pg_enum), sum(c1) FROM pa1 GROUP BY 1$$),
  (3, $$SELECT exists(SELECT 1 FROM pg_enum), c3, sum(c1) FROM pa_empty GROUP BY 1, 2$$),
  (4, $$SELECT (SELECT 2) AS k, c2, sum(c1 * (SELECT 2)) FROM pa1 GROUP BY 1, 2 HAVING sum(c1) > (SELECT 470) ORDER BY 2 LIMIT 3$$),
  (5, $$SELECT x, (SELECT sum(c1 + o.x) FROM pa1) FROM pa_outer o$$),
  (6, $$SELECT x, (SELECT sum(c1) FROM pa1 GROUP BY o.x) FROM pa_outer o$$),
  (7, $$SELECT x, (SELECT o.x FROM pa1 GROUP BY o.x) FROM pa_outer o$$),
  (8, $$SELECT x, (SELECT count(*) FROM pa1 HAVING sum(c1) > o.x * 2000) FROM pa_outer o$$),
  (9, $$SELECT x, (SELECT o.x + sum(a.c1) FROM pa1 a JOIN pa2 b ON a.c1 = b.c1 WHERE b.c2 <> o.x GROUP BY o.x, b.c2 ORDER BY b.c2 LIMIT 1) FROM pa_outer o$$),
  (10, $$SELECT x, (SELECT array_agg(a.c1 ORDER BY a.c1) FROM pa1 a JOIN pa2 b ON a.c1 = b.c1 WHERE b.c2 = o.x AND a.c2 = o.x) FROM pa_outer o$$),
  (11, $$SELECT x, (SELECT max(a.c3 || o.x) FROM pa1 a JOIN pa2 b ON a.c1 = b.c1 GROUP BY a.c2 + o.x ORDER BY 1 DESC LIMIT 1 OFFSET 1) FROM pa_outer o$$),
  (12, $$SELECT c1, (SELECT o.c2 FROM pa2 GROUP BY o.c2) FROM pa1 o WHERE c1 < 4$$),
  (13, $$SELECT c2, sum(c1), (SELECT 1) FROM pa1 GROUP BY c2 ORDER BY 2 DESC LIMIT 4 OFFSET 1$$),
  (14, $$SELECT x, (SELECT count(*) FROM pa1 GROUP BY c2 HAVING c2 = o.x) FROM pa_outer o$$);
-- The same queries on the remote tables themselves.
CREATE FUNCTION pa_local(q text) RETURNS text LANGUAGE sql AS $$
  SELECT replace(replace(replace(q, 'pa1', 'remote.pa1'), 'pa2', 'remote.pa2'),
                 'pa_empty', 'remote.pa_empty')
$$;
SELECT n FROM pa_shapes WHERE NOT rows_same(q, pa_local(q)) ORDER BY n;
SELECT x, (SELECT sum(c1) FROM pa1 GROUP BY o.x) FROM pa_outer o ORDER BY x;
SELECT x, (SELECT count(*) FROM pa1 HAVING sum(c1) > o.x * 2000) FROM pa_outer o ORDER BY x;

-- 3. PL/pgSQL variables, past the fifth call (when the function's plan may
-- become generic, its variables then Params).
CREATE FUNCTION pa_f(k int, loc bool) RETURNS TABLE (g int, s bigint, c bigint)
LANGUAGE plpgsql AS $$
BEGIN
  IF loc THEN
    RETURN QUERY SELECT k, sum(c1 + k), count(*) FROM remote.pa1 WHERE c2 < k
                  GROUP BY 1 HAVING sum(c1) > k ORDER BY 2 LIMIT k;
  ELSE
    RETURN QUERY SELECT k, sum(c1 + k), count(*) FROM pa1 WHERE c2 < k
                  GROUP BY 1 HAVING sum(c1) > k ORDER BY 2 LIMIT k;
  END IF;
END
$$;
CREATE FUNCTION pa_fj(k int, loc bool) RETURNS TABLE (g int, s bigint)
LANGUAGE plpgsql AS $$
BEGIN
  IF loc THEN
    RETURN QUERY SELECT k, sum(a.c1 + k) FROM remote.pa1 a JOIN remote.pa2 b ON a.c1 = b.c1
                  GROUP BY b.c2, k HAVING sum(a.c1) > k * 100 ORDER BY 2 LIMIT k OFFSET k / 2;
  ELSE
    RETURN QUERY SELECT k, sum(a.c1 + k) FROM pa1 a JOIN pa2 b ON a.c1 = b.c1
                  GROUP BY b.c2, k HAVING sum(a.c1) > k * 100 ORDER BY 2 LIMIT k OFFSET k / 2;
  END IF;
END
$$;
SELECT k, rows_same(format('SELECT * FROM pa_f(%L, false)', k), format('SELECT * FROM pa_f(%L, true)', k)),
       rows_same(format('SELECT * FROM pa_fj(%L, false)', k), format('SELECT * FROM pa_fj(%L, true)', k))
  FROM (VALUES (3), (3), (3), (3), (3), (3), (3), (0), (4), (NULL)) v(k);
SELECT * FROM pa_f(3, false);
SELECT * FROM pa_fj(3, false);

-- 4. A generic plan's $n.
SET plan_cache_mode = force_generic_plan;
PREPARE pa_q1(int, int) AS
  SELECT $1, sum(c1 + $1), count(*) FROM pa1 WHERE c2 < $1
   GROUP BY 1 HAVING sum(c1) > $2 ORDER BY 2 LIMIT $1;
EXPLAIN (VERBOSE, COSTS OFF) EXECUTE pa_q1(3, 10);
EXECUTE pa_q1(3, 10);
EXECUTE pa_q1(0, 10);
EXECUTE pa_q1(5, 100000);
PREPARE pa_q2(int) AS
  SELECT b.c2, sum(a.c1 + $1), $1 FROM pa1 a JOIN pa2 b ON a.c1 = b.c1
   GROUP BY b.c2 ORDER BY b.c2 LIMIT $1 OFFSET $1;
EXPLAIN (VERBOSE, COSTS OFF) EXECUTE pa_q2(2);
EXECUTE pa_q2(2);
PREPARE pa_q3(int) AS
  SELECT a.c1, $1 FROM pa1 a JOIN pa2 b ON a.c1 = b.c1 WHERE b.c2 = $1 ORDER BY a.c1 LIMIT $1;
EXPLAIN (VERBOSE, COSTS OFF) EXECUTE pa_q3(2);
EXECUTE pa_q3(2);
PREPARE pa_q4(text) AS SELECT $1, count(*) FROM pa1 GROUP BY $1;
EXPLAIN (VERBOSE, COSTS OFF) EXECUTE pa_q4('it''s');
EXECUTE pa_q4('it''s');
EXECUTE pa_q4(NULL);
RESET plan_cache_mode;

-- 5. Partial aggregates of partitions under an Append.  (The planner hook
-- turns partitionwise aggregation on only for aggregates and GROUP BY
-- items without a subquery, decided before planning, when a subquery could
-- still become a SubPlan that is computed locally.)
SET enable_partitionwise_aggregate = on;
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT exists(SELECT 1 FROM pg_enum), b, sum(a) FROM pp
   GROUP BY 1, 2 HAVING sum(a) > (SELECT 10) ORDER BY 2;
SELECT exists(SELECT 1 FROM pg_enum), b, sum(a) FROM pp
 GROUP BY 1, 2 HAVING sum(a) > (SELECT 10) ORDER BY 2;
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT x, (SELECT sum(a + o.x) FROM pp) FROM pa_outer o;
INSERT INTO pa_shapes VALUES
  (20, $$SELECT exists(SELECT 1 FROM pg_enum), b, sum(a) FROM pp GROUP BY 1, 2 HAVING sum(a) > (SELECT 10)$$),
  (21, $$SELECT x, (SELECT sum(a + o.x) FROM pp) FROM pa_outer o$$),
  (22, $$SELECT x, (SELECT sum(a) FROM pp GROUP BY o.x) FROM pa_outer o$$),
  (23, $$SELECT x, (SELECT count(*) FROM pp WHERE b = o.x GROUP BY o.x, b) FROM pa_outer o$$);
CREATE OR REPLACE FUNCTION pa_local(q text) RETURNS text LANGUAGE sql AS $$
  SELECT replace(replace(replace(replace(q, 'pa1', 'remote.pa1'), 'pa2', 'remote.pa2'),
                 'pa_empty', 'remote.pa_empty'), 'FROM pp', 'FROM remote.pp_local')
$$;
SELECT n FROM pa_shapes WHERE NOT rows_same(q, pa_local(q)) ORDER BY n;
RESET enable_partitionwise_aggregate;
SELECT n FROM pa_shapes WHERE NOT rows_same(q, pa_local(q)) ORDER BY n;
SET plan_cache_mode = force_generic_plan;
PREPARE pa_q5(int) AS
  SELECT $1, b, sum(a + $1) FROM pp GROUP BY 1, 2 HAVING count(*) > $1 ORDER BY 2;
EXPLAIN (VERBOSE, COSTS OFF) EXECUTE pa_q5(3);
EXECUTE pa_q5(3);
RESET plan_cache_mode;

-- 6. Every fetch mode, and small batches.
ALTER SERVER loopback OPTIONS (ADD fetch_mode 'cursor');
ALTER SERVER loopback2 OPTIONS (ADD fetch_mode 'cursor');
SELECT n FROM pa_shapes WHERE NOT rows_same(q, pa_local(q)) ORDER BY n;
ALTER SERVER loopback OPTIONS (SET fetch_mode 'stream', ADD fetch_size '3');
ALTER SERVER loopback2 OPTIONS (SET fetch_mode 'stream', ADD fetch_size '3');
SELECT n FROM pa_shapes WHERE NOT rows_same(q, pa_local(q)) ORDER BY n;
ALTER SERVER loopback OPTIONS (SET fetch_mode 'cursor');
ALTER SERVER loopback2 OPTIONS (SET fetch_mode 'cursor');
SELECT n FROM pa_shapes WHERE NOT rows_same(q, pa_local(q)) ORDER BY n;
SELECT k, rows_same(format('SELECT * FROM pa_f(%L, false)', k), format('SELECT * FROM pa_f(%L, true)', k)),
       rows_same(format('SELECT * FROM pa_fj(%L, false)', k), format('SELECT * FROM pa_fj(%L, true)', k))
  FROM (VALUES (3), (0), (4)) v(k);
ALTER SERVER loopback OPTIONS (DROP fetch_mode, DROP fetch_size);
ALTER SERVER loopback2 OPTIONS (DROP fetch_mode, DROP fetch_size);

-- 7. Cursors: forward, backward, rescanned.
BEGIN;
DECLARE pa_c1 SCROLL CURSOR FOR
  SELECT x, (SELECT sum(c1) FROM pa1 GROUP BY o.x) FROM pa_outer o ORDER BY x;
FETCH 2 pa_c1;
FETCH BACKWARD 1 pa_c1;
FETCH ALL pa_c1;
FETCH BACKWARD ALL pa_c1;
DECLARE pa_c2 SCROLL CURSOR FOR
  SELECT exists(SELECT 1 FROM pg_enum), c2, sum(c1) FROM pa1 GROUP BY 1, 2 ORDER BY 2;
FETCH 3 pa_c2;
FETCH BACKWARD 2 pa_c2;
MOVE LAST IN pa_c2;
FETCH BACKWARD 2 pa_c2;
DECLARE pa_c3 CURSOR FOR
  SELECT (SELECT 7), b.c2, count(*) FROM pa1 a JOIN pa2 b ON a.c1 = b.c1 GROUP BY 1, 2 ORDER BY 2;
FETCH 2 pa_c3;
CLOSE pa_c3;
DECLARE pa_c4 SCROLL CURSOR FOR
  SELECT x, (SELECT count(*) FROM pp WHERE b = o.x GROUP BY o.x, b) FROM pa_outer o ORDER BY x;
FETCH ALL pa_c4;
FETCH BACKWARD 2 pa_c4;
FETCH ABSOLUTE 1 pa_c4;
COMMIT;

DROP FUNCTION pa_f(int, bool), pa_fj(int, bool), pa_local(text);
DROP TABLE pa_shapes, pa_outer, pp, remote.pp_local;
DROP FOREIGN TABLE pa1, pa2, pa_empty;
DEALLOCATE ALL;
