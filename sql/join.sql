--
-- join: joins computed by the remote server.  Two foreign tables on the
-- same server and user mapping join there (inner, left, right, full);
-- co-located partitioned tables join partition by partition, every server
-- at once.  Every result is compared with the same query on local tables
-- holding the same rows.
--
CREATE TABLE remote.jt1 (id int, a int, t text);
CREATE TABLE remote.jt2 (id int, b int, u text);
INSERT INTO remote.jt1 SELECT x, x % 10, CASE WHEN x % 7 = 0 THEN NULL ELSE 't' || x END
  FROM generate_series(1, 300) x;
INSERT INTO remote.jt2 SELECT x, x % 4, 'u' || (x % 9) FROM generate_series(150, 450, 2) x;
CREATE FOREIGN TABLE jt1 (id int, a int, t text) SERVER loopback
  OPTIONS (schema_name 'remote', table_name 'jt1');
CREATE FOREIGN TABLE jt2 (id int, b int, u text) SERVER loopback
  OPTIONS (schema_name 'remote', table_name 'jt2');
CREATE FOREIGN TABLE jt2_other (id int, b int, u text) SERVER loopback2
  OPTIONS (schema_name 'remote', table_name 'jt2');
ANALYZE jt1, jt2, jt2_other;

-- 1. Inner, left, right and full joins, each side's conditions where
-- they keep their meaning.
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT jt1.id, t, u FROM jt1 JOIN jt2 ON jt1.id = jt2.id WHERE a < 5 AND b > 0;
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT jt1.id, t, u FROM jt1 LEFT JOIN jt2 ON jt1.id = jt2.id AND b = 1 WHERE a < 5;
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT x.id, t, u FROM jt1 x RIGHT JOIN jt2 y ON x.id = y.id AND a = 2 WHERE b > 1;
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT jt1.id, jt2.id FROM jt1 FULL JOIN jt2 ON jt1.id = jt2.id;
SELECT rows_same($$SELECT jt1.id, t, u FROM jt1 JOIN jt2 ON jt1.id = jt2.id WHERE a < 5 AND b > 0$$,
               $$SELECT jt1.id, t, u FROM remote.jt1 JOIN remote.jt2 ON jt1.id = jt2.id WHERE a < 5 AND b > 0$$);
SELECT rows_same($$SELECT jt1.id, t, u FROM jt1 LEFT JOIN jt2 ON jt1.id = jt2.id AND b = 1 WHERE a < 5$$,
               $$SELECT jt1.id, t, u FROM remote.jt1 LEFT JOIN remote.jt2 ON jt1.id = jt2.id AND b = 1 WHERE a < 5$$);
SELECT rows_same($$SELECT x.id, t, u FROM jt1 x RIGHT JOIN jt2 y ON x.id = y.id AND a = 2 WHERE b > 1$$,
               $$SELECT x.id, t, u FROM remote.jt1 x RIGHT JOIN remote.jt2 y ON x.id = y.id AND a = 2 WHERE b > 1$$);
SELECT rows_same($$SELECT jt1.id, jt2.id, t IS NULL FROM jt1 FULL JOIN jt2 ON jt1.id = jt2.id$$,
               $$SELECT jt1.id, jt2.id, t IS NULL FROM remote.jt1 FULL JOIN remote.jt2 ON jt1.id = jt2.id$$);
-- The query's target computed locally from the joined columns.
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT jt1.id, row(jt2.id, jt2.u), t || u FROM jt1 JOIN jt2 ON jt1.id = jt2.id WHERE a = 1;
SELECT rows_same($$SELECT jt1.id, row(jt2.id, jt2.u), t || u FROM jt1 JOIN jt2 ON jt1.id = jt2.id WHERE a = 1$$,
               $$SELECT jt1.id, row(jt2.id, jt2.u), t || u FROM remote.jt1 JOIN remote.jt2 ON jt1.id = jt2.id WHERE a = 1$$);
-- A full join reads a table with conditions through a subquery that
-- applies them first; one of its sides, two, under an aggregate.
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT jt1.id, jt2.id FROM jt1 FULL JOIN (SELECT * FROM jt2 WHERE b = 1) jt2 ON jt1.id = jt2.id;
SELECT rows_same($$SELECT jt1.id, jt2.id FROM jt1 FULL JOIN (SELECT * FROM jt2 WHERE b = 1) jt2 ON jt1.id = jt2.id$$,
               $$SELECT jt1.id, jt2.id FROM remote.jt1 FULL JOIN (SELECT * FROM remote.jt2 WHERE b = 1) jt2 ON jt1.id = jt2.id$$);
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT x.id, x.t, y.u FROM (SELECT * FROM jt1 WHERE a < 3 AND id > 140) x
    FULL JOIN (SELECT * FROM jt2 WHERE b = 1) y ON x.id = y.id ORDER BY x.id, y.id;
SELECT rows_same($$SELECT x.id, x.t, y.u FROM (SELECT * FROM jt1 WHERE a < 3 AND id > 140) x FULL JOIN (SELECT * FROM jt2 WHERE b = 1) y ON x.id = y.id$$,
               $$SELECT x.id, x.t, y.u FROM (SELECT * FROM remote.jt1 WHERE a < 3 AND id > 140) x FULL JOIN (SELECT * FROM remote.jt2 WHERE b = 1) y ON x.id = y.id$$);
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT count(*), sum(x.id), avg(y.id) FROM (SELECT * FROM jt1 WHERE a < 3) x
    FULL JOIN (SELECT * FROM jt2 WHERE b = 1) y ON x.id = y.id;
SELECT rows_same($$SELECT count(*), sum(x.id), avg(y.id) FROM (SELECT * FROM jt1 WHERE a < 3) x FULL JOIN (SELECT * FROM jt2 WHERE b = 1) y ON x.id = y.id$$,
               $$SELECT count(*), sum(x.id), avg(y.id) FROM (SELECT * FROM remote.jt1 WHERE a < 3) x FULL JOIN (SELECT * FROM remote.jt2 WHERE b = 1) y ON x.id = y.id$$);
-- A join with conditions as a full join's side: a subquery (join_shapes.sql).
EXPLAIN (COSTS OFF)
  SELECT x.id, z.id FROM (jt1 x JOIN jt2 y ON x.id = y.id AND x.a < 3) FULL JOIN jt1 z ON x.id = z.id;
SELECT rows_same($$SELECT x.id, z.id FROM (jt1 x JOIN jt2 y ON x.id = y.id AND x.a < 3) FULL JOIN jt1 z ON x.id = z.id$$,
               $$SELECT x.id, z.id FROM (remote.jt1 x JOIN remote.jt2 y ON x.id = y.id AND x.a < 3) FULL JOIN remote.jt1 z ON x.id = z.id$$);
-- Three tables.
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT x.id, y.u, z.t FROM jt1 x JOIN jt2 y ON x.id = y.id LEFT JOIN jt1 z ON z.id = y.id + 1
   WHERE x.a = 3;
SELECT rows_same($$SELECT x.id, y.u, z.t FROM jt1 x JOIN jt2 y ON x.id = y.id LEFT JOIN jt1 z ON z.id = y.id + 1 WHERE x.a = 3$$,
               $$SELECT x.id, y.u, z.t FROM remote.jt1 x JOIN remote.jt2 y ON x.id = y.id LEFT JOIN remote.jt1 z ON z.id = y.id + 1 WHERE x.a = 3$$);

-- Semi- and anti-joins: EXISTS and NOT EXISTS of the inner side.
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT id, t FROM jt1 WHERE a < 3 AND EXISTS (SELECT 1 FROM jt2 WHERE jt2.id = jt1.id AND b = 2);
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT id, t FROM jt1 WHERE NOT EXISTS (SELECT 1 FROM jt2 WHERE jt2.id = jt1.id) AND a = 1;
SELECT rows_same($$SELECT id, t FROM jt1 WHERE a < 3 AND EXISTS (SELECT 1 FROM jt2 WHERE jt2.id = jt1.id AND b = 2)$$,
               $$SELECT id, t FROM remote.jt1 WHERE a < 3 AND EXISTS (SELECT 1 FROM remote.jt2 WHERE jt2.id = jt1.id AND b = 2)$$);
SELECT rows_same($$SELECT id, t FROM jt1 WHERE NOT EXISTS (SELECT 1 FROM jt2 WHERE jt2.id = jt1.id) AND a = 1$$,
               $$SELECT id, t FROM remote.jt1 WHERE NOT EXISTS (SELECT 1 FROM remote.jt2 WHERE jt2.id = jt1.id) AND a = 1$$);
SELECT rows_same($$SELECT x.id FROM jt1 x JOIN jt2 y ON x.id = y.id WHERE NOT EXISTS (SELECT 1 FROM jt1 z WHERE z.id = y.id + 2)$$,
               $$SELECT x.id FROM remote.jt1 x JOIN remote.jt2 y ON x.id = y.id WHERE NOT EXISTS (SELECT 1 FROM remote.jt1 z WHERE z.id = y.id + 2)$$);
-- A generic plan sends the parameter with the join.
SET plan_cache_mode = force_generic_plan;
PREPARE jt_q(int) AS SELECT jt1.id, u FROM jt1 JOIN jt2 ON jt1.id = jt2.id WHERE a = $1 ORDER BY 1;
EXPLAIN (VERBOSE, COSTS OFF) EXECUTE jt_q(4);
EXECUTE jt_q(4);
SELECT jt1.id, u FROM remote.jt1 JOIN remote.jt2 ON jt1.id = jt2.id WHERE a = 4 ORDER BY 1;
DEALLOCATE jt_q;
-- A condition on a parameter alone is checked once above the join: the
-- join stays local before PostgreSQL 17, and is sent from 17 on, under
-- the gating Result (join_1.out).
PREPARE jt_g(int) AS SELECT count(*) FROM jt1 JOIN jt2 ON jt1.id = jt2.id WHERE 10 / ($1 % 4) > 0;
EXPLAIN (COSTS OFF) EXECUTE jt_g(8);
EXECUTE jt_g(8);
EXECUTE jt_g(3);
DEALLOCATE jt_g;
RESET plan_cache_mode;

-- 2. Done locally: a join with another server.  A condition that cannot be
-- sent filters the joined rows locally (more in join_shapes.sql); under row
-- locks the remote join locks, and a local join under it rechecks rows
-- (join_rowmarks.sql).
EXPLAIN (COSTS OFF) SELECT jt1.id FROM jt1 JOIN jt2_other o ON jt1.id = o.id;
CREATE FUNCTION jt_local(int) RETURNS bool LANGUAGE plpgsql AS 'BEGIN RETURN $1 % 2 = 0; END';
EXPLAIN (COSTS OFF) SELECT jt1.id FROM jt1 JOIN jt2 ON jt1.id = jt2.id AND jt_local(jt1.a + jt2.b);
SELECT rows_same($$SELECT jt1.id FROM jt1 JOIN jt2 ON jt1.id = jt2.id AND jt_local(jt1.a + jt2.b)$$,
               $$SELECT jt1.id FROM remote.jt1 JOIN remote.jt2 ON jt1.id = jt2.id AND jt_local(jt1.a + jt2.b)$$);
EXPLAIN (COSTS OFF) SELECT jt1.id FROM jt1 JOIN jt2 ON jt1.id = jt2.id FOR UPDATE;

-- 3. A remote error names the remote query.
SELECT count(*) FROM jt1 JOIN jt2 ON jt1.id = jt2.id WHERE 10 / (jt2.b - 2) > 0;

-- 4. Co-located partitioned tables: each pair of partitions joins on its
-- server, all at once, without any planner setting.
CREATE TABLE remote.jp1a AS SELECT * FROM remote.jt1 WHERE id <= 200;
CREATE TABLE remote.jp1b AS SELECT * FROM remote.jt1 WHERE id > 200;
CREATE TABLE remote.jp2a AS SELECT * FROM remote.jt2 WHERE id <= 200;
CREATE TABLE remote.jp2b AS SELECT * FROM remote.jt2 WHERE id > 200;
CREATE TABLE jp1 (id int, a int, t text) PARTITION BY RANGE (id);
CREATE FOREIGN TABLE jp1_a PARTITION OF jp1 FOR VALUES FROM (MINVALUE) TO (201)
  SERVER loopback OPTIONS (schema_name 'remote', table_name 'jp1a');
CREATE FOREIGN TABLE jp1_b PARTITION OF jp1 FOR VALUES FROM (201) TO (MAXVALUE)
  SERVER loopback2 OPTIONS (schema_name 'remote', table_name 'jp1b');
CREATE TABLE jp2 (id int, b int, u text) PARTITION BY RANGE (id);
CREATE FOREIGN TABLE jp2_a PARTITION OF jp2 FOR VALUES FROM (MINVALUE) TO (201)
  SERVER loopback OPTIONS (schema_name 'remote', table_name 'jp2a');
CREATE FOREIGN TABLE jp2_b PARTITION OF jp2 FOR VALUES FROM (201) TO (MAXVALUE)
  SERVER loopback2 OPTIONS (schema_name 'remote', table_name 'jp2b');
ANALYZE jp1_a, jp1_b, jp2_a, jp2_b;
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT jp1.id, t, u FROM jp1 JOIN jp2 ON jp1.id = jp2.id WHERE b <> 2;
SELECT rows_same($$SELECT jp1.id, t, u FROM jp1 JOIN jp2 ON jp1.id = jp2.id WHERE b <> 2$$,
               $$SELECT jt1.id, t, u FROM remote.jt1 JOIN remote.jt2 ON jt1.id = jt2.id WHERE b <> 2$$);
SELECT rows_same($$SELECT jp1.id, jp2.id FROM jp1 LEFT JOIN jp2 ON jp1.id = jp2.id$$,
               $$SELECT jt1.id, jt2.id FROM remote.jt1 LEFT JOIN remote.jt2 ON jt1.id = jt2.id$$);
-- Each partition's target is the query's, computed locally from the
-- joined columns (a stable cast would read the remote TimeZone).
SET timezone = 'Asia/Kolkata';
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT jp1.id, (now() - interval '1 day')::date = current_date - 1 AS d, row(t, u)
    FROM jp1 JOIN jp2 ON jp1.id = jp2.id WHERE b = 2;
RESET timezone;
-- Aggregates over a remote join: whole for two tables, partial for each
-- pair of partitions.
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT b, count(*), max(t) FROM jt1 JOIN jt2 ON jt1.id = jt2.id GROUP BY b;
SELECT rows_same($$SELECT b, count(*), max(t) FROM jt1 JOIN jt2 ON jt1.id = jt2.id GROUP BY b$$,
               $$SELECT b, count(*), max(t) FROM remote.jt1 JOIN remote.jt2 ON jt1.id = jt2.id GROUP BY b$$);
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT count(*), sum(a) FROM jp1 JOIN jp2 ON jp1.id = jp2.id;
SELECT rows_same($$SELECT count(*), sum(a), avg(b) FROM jp1 JOIN jp2 ON jp1.id = jp2.id WHERE u <> 'u1'$$,
               $$SELECT count(*), sum(a), avg(b) FROM remote.jt1 JOIN remote.jt2 ON jt1.id = jt2.id WHERE u <> 'u1'$$);
SELECT rows_same($$SELECT u, count(*) FROM jp1 LEFT JOIN jp2 ON jp1.id = jp2.id GROUP BY u$$,
               $$SELECT u, count(*) FROM remote.jt1 LEFT JOIN remote.jt2 ON jt1.id = jt2.id GROUP BY u$$);
SELECT rows_same($$SELECT count(*) FROM jp1 WHERE EXISTS (SELECT 1 FROM jp2 WHERE jp2.id = jp1.id)$$,
               $$SELECT count(*) FROM remote.jt1 WHERE EXISTS (SELECT 1 FROM remote.jt2 WHERE jt2.id = jt1.id)$$);
SET async_fdw.partitionwise_join = off;
EXPLAIN (COSTS OFF) SELECT jp1.id FROM jp1 JOIN jp2 ON jp1.id = jp2.id;
RESET async_fdw.partitionwise_join;
