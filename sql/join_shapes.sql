--
-- join_shapes: remote joins of the shapes postgres_fdw sends too: a full
-- join whose side is a join with conditions (a subquery with a column
-- list), a cross join under ORDER BY and LIMIT, a join with conditions
-- that cannot be sent (checked locally on the joined rows), three-table
-- outer joins under LIMIT.  Every result is compared with the same query
-- on the remote tables.
--
CREATE TABLE remote.js1 (id int, a int, t text);
CREATE TABLE remote.js2 (id int, b int, u text);
CREATE TABLE remote.js3 (id int, c int, w text);
INSERT INTO remote.js1 SELECT x, x % 10, CASE WHEN x % 7 = 0 THEN NULL ELSE 't' || x END
  FROM generate_series(1, 60) x;
INSERT INTO remote.js2 SELECT x, x % 4, 'u' || (x % 9) FROM generate_series(30, 90, 2) x;
INSERT INTO remote.js3 SELECT x, x % 3, 'w' || x FROM generate_series(45, 120, 3) x;
CREATE FOREIGN TABLE js1 (id int, a int, t text) SERVER loopback
  OPTIONS (schema_name 'remote', table_name 'js1');
CREATE FOREIGN TABLE js2 (id int, b int, u text) SERVER loopback
  OPTIONS (schema_name 'remote', table_name 'js2');
CREATE FOREIGN TABLE js3 (id int, c int, w text) SERVER loopback
  OPTIONS (schema_name 'remote', table_name 'js3');
ANALYZE remote.js1, remote.js2, remote.js3;
ANALYZE js1, js2, js3;
-- A function the remote server is not sent (not immutable).
CREATE FUNCTION js_local(int) RETURNS bool LANGUAGE plpgsql AS 'BEGIN RETURN $1 % 3 <> 0; END';

-- 1. A full join whose side is a join with conditions: that side is a
-- subquery s<n>(c1, ...), its columns named so above it.  A left join
-- filtered by WHERE as a side, rows null-extended on both sides.
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT x.id, ss.a, ss.b FROM (SELECT id FROM js1 WHERE id BETWEEN 20 AND 50) x
    FULL JOIN (SELECT y.id, z.id FROM js2 y LEFT JOIN js3 z ON y.id = z.id WHERE y.id BETWEEN 40 AND 70) ss(a, b)
    ON x.id = ss.a ORDER BY x.id, ss.a, ss.b;
SELECT rows_in_order($$SELECT x.id, ss.a, ss.b FROM (SELECT id FROM js1 WHERE id BETWEEN 20 AND 50) x FULL JOIN (SELECT y.id, z.id FROM js2 y LEFT JOIN js3 z ON y.id = z.id WHERE y.id BETWEEN 40 AND 70) ss(a, b) ON x.id = ss.a ORDER BY x.id, ss.a, ss.b$$,
                     $$SELECT x.id, ss.a, ss.b FROM (SELECT id FROM remote.js1 WHERE id BETWEEN 20 AND 50) x FULL JOIN (SELECT y.id, z.id FROM remote.js2 y LEFT JOIN remote.js3 z ON y.id = z.id WHERE y.id BETWEEN 40 AND 70) ss(a, b) ON x.id = ss.a ORDER BY x.id, ss.a, ss.b$$);
-- Nested: a full join of two filtered tables, filtered by WHERE, as the
-- side of another full join (a subquery in a subquery), more columns.
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT x.id, x.t, ss.* FROM (SELECT * FROM js1 WHERE a < 5) x
    FULL JOIN (SELECT y.id, y.u, z.id, z.w FROM (SELECT * FROM js2 WHERE b <> 1) y
               FULL JOIN (SELECT * FROM js3 WHERE c <> 2) z ON y.id = z.id
               WHERE y.u IS NULL OR z.w IS NULL OR y.id > 60) ss(yid, u, zid, w)
    ON x.id = ss.yid OR x.id = ss.zid;
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT x.id, x.t, ss.* FROM (SELECT * FROM js1 WHERE a < 5) x
    FULL JOIN (SELECT y.id, y.u, z.id, z.w FROM (SELECT * FROM js2 WHERE b <> 1) y
               FULL JOIN (SELECT * FROM js3 WHERE c <> 2) z ON y.id = z.id
               WHERE y.u IS NULL OR z.w IS NULL OR y.id > 60) ss(yid, u, zid, w)
    ON x.id = ss.yid;
SELECT rows_same($$SELECT x.id, x.t, ss.* FROM (SELECT * FROM js1 WHERE a < 5) x FULL JOIN (SELECT y.id, y.u, z.id, z.w FROM (SELECT * FROM js2 WHERE b <> 1) y FULL JOIN (SELECT * FROM js3 WHERE c <> 2) z ON y.id = z.id WHERE y.u IS NULL OR z.w IS NULL OR y.id > 60) ss(yid, u, zid, w) ON x.id = ss.yid$$,
                 $$SELECT x.id, x.t, ss.* FROM (SELECT * FROM remote.js1 WHERE a < 5) x FULL JOIN (SELECT y.id, y.u, z.id, z.w FROM (SELECT * FROM remote.js2 WHERE b <> 1) y FULL JOIN (SELECT * FROM remote.js3 WHERE c <> 2) z ON y.id = z.id WHERE y.u IS NULL OR z.w IS NULL OR y.id > 60) ss(yid, u, zid, w) ON x.id = ss.yid$$);
-- An inner join with conditions as a full join's side, under ORDER BY and
-- LIMIT, and under an aggregate; both sides joins.
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT x.id, y.id, z.id FROM js1 x JOIN js2 y ON x.id = y.id + 1 AND x.id BETWEEN 30 AND 50
    FULL JOIN js3 z ON y.id = z.id ORDER BY x.id, y.id, z.id LIMIT 10;
SELECT rows_in_order($$SELECT x.id, y.id, z.id FROM js1 x JOIN js2 y ON x.id = y.id + 1 AND x.id BETWEEN 30 AND 50 FULL JOIN js3 z ON y.id = z.id ORDER BY x.id, y.id, z.id LIMIT 10$$,
                     $$SELECT x.id, y.id, z.id FROM remote.js1 x JOIN remote.js2 y ON x.id = y.id + 1 AND x.id BETWEEN 30 AND 50 FULL JOIN remote.js3 z ON y.id = z.id ORDER BY x.id, y.id, z.id LIMIT 10$$);
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT count(*), count(x.id), count(z.id), sum(p.id) FROM (js1 x JOIN js2 y ON x.id = y.id AND x.a < 8)
    FULL JOIN (js3 z LEFT JOIN js1 p ON z.id = p.id) ON y.id = z.id AND p.t IS NOT NULL;
SELECT rows_same($$SELECT count(*), count(x.id), count(z.id), sum(p.id) FROM (js1 x JOIN js2 y ON x.id = y.id AND x.a < 8) FULL JOIN (js3 z LEFT JOIN js1 p ON z.id = p.id) ON y.id = z.id AND p.t IS NOT NULL$$,
                 $$SELECT count(*), count(x.id), count(z.id), sum(p.id) FROM (remote.js1 x JOIN remote.js2 y ON x.id = y.id AND x.a < 8) FULL JOIN (remote.js3 z LEFT JOIN remote.js1 p ON z.id = p.id) ON y.id = z.id AND p.t IS NOT NULL$$);
SELECT rows_same($$SELECT x.id, y.u, z.w, p.t FROM (js1 x JOIN js2 y ON x.id = y.id AND x.a < 8) FULL JOIN (js3 z LEFT JOIN js1 p ON z.id = p.id) ON y.id = z.id WHERE p.t IS NOT NULL OR x.id IS NULL$$,
                 $$SELECT x.id, y.u, z.w, p.t FROM (remote.js1 x JOIN remote.js2 y ON x.id = y.id AND x.a < 8) FULL JOIN (remote.js3 z LEFT JOIN remote.js1 p ON z.id = p.id) ON y.id = z.id WHERE p.t IS NOT NULL OR x.id IS NULL$$);

-- 2. A cross join, under ORDER BY and LIMIT: ON (TRUE).
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT x.id, y.id FROM js1 x CROSS JOIN js2 y ORDER BY x.id, y.id OFFSET 50 LIMIT 10;
SELECT rows_in_order($$SELECT x.id, y.id FROM js1 x CROSS JOIN js2 y ORDER BY x.id, y.id OFFSET 50 LIMIT 10$$,
                     $$SELECT x.id, y.id FROM remote.js1 x CROSS JOIN remote.js2 y ORDER BY x.id, y.id OFFSET 50 LIMIT 10$$);

-- 3. Conditions that cannot be sent, checked locally on the joined rows
-- (Filter on the Foreign Scan, their columns fetched): an inner join's,
-- a WHERE on the result of a left and of a full join.  No LIMIT is sent
-- past them; no aggregate is computed remotely over them.
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT x.id, y.id FROM js1 x JOIN js2 y ON x.id = y.id WHERE js_local(x.a + y.b) ORDER BY x.t, x.id;
SELECT rows_in_order($$SELECT x.id, y.id FROM js1 x JOIN js2 y ON x.id = y.id WHERE js_local(x.a + y.b) ORDER BY x.t, x.id$$,
                     $$SELECT x.id, y.id FROM remote.js1 x JOIN remote.js2 y ON x.id = y.id WHERE js_local(x.a + y.b) ORDER BY x.t, x.id$$);
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT x.id, y.u FROM js1 x LEFT JOIN js2 y ON x.id = y.id WHERE js_local(coalesce(y.b, x.a)) ORDER BY x.id LIMIT 12;
SELECT rows_in_order($$SELECT x.id, y.u FROM js1 x LEFT JOIN js2 y ON x.id = y.id WHERE js_local(coalesce(y.b, x.a)) ORDER BY x.id LIMIT 12$$,
                     $$SELECT x.id, y.u FROM remote.js1 x LEFT JOIN remote.js2 y ON x.id = y.id WHERE js_local(coalesce(y.b, x.a)) ORDER BY x.id LIMIT 12$$);
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT x.id, y.id, x.t FROM js1 x FULL JOIN js2 y ON x.id = y.id WHERE js_local(x.id) OFFSET 5 LIMIT 10;
SELECT rows_same($$SELECT x.id, y.id, x.t FROM js1 x FULL JOIN js2 y ON x.id = y.id WHERE js_local(x.id)$$,
                 $$SELECT x.id, y.id, x.t FROM remote.js1 x FULL JOIN remote.js2 y ON x.id = y.id WHERE js_local(x.id)$$);
SELECT rows_same($$SELECT x.id, y.id FROM js1 x FULL JOIN js2 y ON x.id = y.id WHERE js_local(coalesce(x.id, y.id)) OR y.id IS NULL$$,
                 $$SELECT x.id, y.id FROM remote.js1 x FULL JOIN remote.js2 y ON x.id = y.id WHERE js_local(coalesce(x.id, y.id)) OR y.id IS NULL$$);
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT sum(x.id), count(y.id) FROM js1 x JOIN js2 y ON x.id = y.id WHERE js_local(x.id * y.b);
SELECT rows_same($$SELECT sum(x.id), count(y.id) FROM js1 x JOIN js2 y ON x.id = y.id WHERE js_local(x.id * y.b)$$,
                 $$SELECT sum(x.id), count(y.id) FROM remote.js1 x JOIN remote.js2 y ON x.id = y.id WHERE js_local(x.id * y.b)$$);
-- The condition of the last join of three: checked on its rows.
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT x.id, z.w FROM js1 x JOIN js2 y ON x.id = y.id AND js_local(x.a + y.b) JOIN js3 z ON z.id = y.id;
SELECT rows_same($$SELECT x.id, z.w FROM js1 x JOIN js2 y ON x.id = y.id AND js_local(x.a + y.b) JOIN js3 z ON z.id = y.id$$,
                 $$SELECT x.id, z.w FROM remote.js1 x JOIN remote.js2 y ON x.id = y.id AND js_local(x.a + y.b) JOIN remote.js3 z ON z.id = y.id$$);
-- A join with a local condition is no side of a bigger remote join: the
-- condition must filter it before the full join.
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT x.id, z.w FROM (js1 x JOIN js2 y ON x.id = y.id AND js_local(x.a + y.b)) FULL JOIN js3 z ON z.id = y.id;
SELECT rows_same($$SELECT x.id, z.w FROM (js1 x JOIN js2 y ON x.id = y.id AND js_local(x.a + y.b)) FULL JOIN js3 z ON z.id = y.id$$,
                 $$SELECT x.id, z.w FROM (remote.js1 x JOIN remote.js2 y ON x.id = y.id AND js_local(x.a + y.b)) FULL JOIN remote.js3 z ON z.id = y.id$$);
-- An outer join's ON condition decides which rows are null-extended: it
-- cannot be checked afterwards, the join is done locally.
EXPLAIN (COSTS OFF)
  SELECT x.id, y.id FROM js1 x LEFT JOIN js2 y ON x.id = y.id AND js_local(y.b + x.a);
SELECT rows_same($$SELECT x.id, y.id FROM js1 x LEFT JOIN js2 y ON x.id = y.id AND js_local(y.b + x.a)$$,
                 $$SELECT x.id, y.id FROM remote.js1 x LEFT JOIN remote.js2 y ON x.id = y.id AND js_local(y.b + x.a)$$);

-- 4. Three tables in outer joins under OFFSET and LIMIT, two of them big
-- and estimated remotely: a remote join's first row comes once its sides
-- have started, so the remote join with its LIMIT is cheapest.
CREATE TABLE remote.jsb (id int PRIMARY KEY, v int, s text);
INSERT INTO remote.jsb SELECT x, x % 10, 's' || x FROM generate_series(1, 1000) x;
ANALYZE remote.jsb;
CREATE FOREIGN TABLE jsb (id int, v int, s text) SERVER loopback
  OPTIONS (schema_name 'remote', table_name 'jsb', use_remote_estimate 'true');
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT x.id, y.v, z.w FROM jsb x LEFT JOIN jsb y ON x.id = y.id LEFT JOIN js3 z ON y.id = z.id OFFSET 10 LIMIT 10;
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT x.id, y.v, z.w FROM jsb x RIGHT JOIN jsb y ON x.id = y.id LEFT JOIN js3 z ON y.id = z.id OFFSET 10 LIMIT 10;
SELECT rows_same($$SELECT count(*) FROM (SELECT x.id, y.v, z.w FROM jsb x LEFT JOIN jsb y ON x.id = y.id LEFT JOIN js3 z ON y.id = z.id OFFSET 10 LIMIT 10) q$$,
                 $$SELECT 10$$);
SELECT rows_in_order($$SELECT x.id, y.v, z.w FROM jsb x LEFT JOIN jsb y ON x.id = y.id LEFT JOIN js3 z ON y.id = z.id ORDER BY x.id OFFSET 40 LIMIT 10$$,
                     $$SELECT x.id, y.v, z.w FROM remote.jsb x LEFT JOIN remote.jsb y ON x.id = y.id LEFT JOIN remote.js3 z ON y.id = z.id ORDER BY x.id OFFSET 40 LIMIT 10$$);

-- 5. A constant in the nullable side's target (a placeholder, computed at
-- the join above it): the join under it is sent, the constant computed on
-- its rows; a join of three, where it would be computed inside, is not.
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT z.id, q.* FROM js3 z LEFT JOIN
    (SELECT 13, x.id, y.id FROM js1 x RIGHT JOIN js2 y ON x.id = y.id WHERE x.id = 40) q(a, b, c)
    ON z.id = q.b WHERE z.id BETWEEN 30 AND 60;
SELECT rows_same($$SELECT z.id, q.* FROM js3 z LEFT JOIN (SELECT 13, x.id, y.id FROM js1 x RIGHT JOIN js2 y ON x.id = y.id WHERE x.id = 40) q(a, b, c) ON z.id = q.b WHERE z.id BETWEEN 30 AND 60$$,
                 $$SELECT z.id, q.* FROM remote.js3 z LEFT JOIN (SELECT 13, x.id, y.id FROM remote.js1 x RIGHT JOIN remote.js2 y ON x.id = y.id WHERE x.id = 40) q(a, b, c) ON z.id = q.b WHERE z.id BETWEEN 30 AND 60$$);
-- One computed at a table (not null where the outer join finds no row):
-- no remote join holding that table and another.
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT y.id, q.* FROM js2 y LEFT JOIN (SELECT coalesce(x.t, 'none'), x.id FROM js1 x) q(a, b) ON y.id = q.b;
SELECT rows_same($$SELECT y.id, q.* FROM js2 y LEFT JOIN (SELECT coalesce(x.t, 'none'), x.id FROM js1 x) q(a, b) ON y.id = q.b$$,
                 $$SELECT y.id, q.* FROM remote.js2 y LEFT JOIN (SELECT coalesce(x.t, 'none'), x.id FROM remote.js1 x) q(a, b) ON y.id = q.b$$);

DROP FUNCTION js_local(int);
DROP FOREIGN TABLE js1, js2, js3, jsb;
DROP TABLE remote.js1, remote.js2, remote.js3, remote.jsb;
