--
-- planner: estimates from local statistics, the cost options, and
-- partition pruning over foreign partitions
--

-- Never analyzed: a modest default, then local statistics after ANALYZE.
CREATE TABLE remote.big (id int, grp int, pad text);
INSERT INTO remote.big SELECT g, g % 10, 'p' || g FROM generate_series(1, 5000) g;
ANALYZE remote.big;
CREATE FOREIGN TABLE ft_big (id int, grp int, pad text) SERVER loopback
  OPTIONS (schema_name 'remote', table_name 'big');
SELECT reltuples FROM pg_class WHERE relname = 'ft_big';
EXPLAIN SELECT * FROM ft_big;
ANALYZE ft_big;
SELECT reltuples FROM pg_class WHERE relname = 'ft_big';
EXPLAIN SELECT * FROM ft_big;
EXPLAIN SELECT * FROM ft_big WHERE grp = 3;
EXPLAIN SELECT * FROM ft_big WHERE id < 100;
SELECT attname, n_distinct FROM pg_stats WHERE tablename = 'ft_big' ORDER BY 1;
-- ANALYZE honours column_name and reads every row.
CREATE FOREIGN TABLE ft_big_renamed (ident int OPTIONS (column_name 'id'), grp int)
  SERVER loopback OPTIONS (schema_name 'remote', table_name 'big', fetch_size '1000');
ANALYZE ft_big_renamed;
SELECT reltuples FROM pg_class WHERE relname = 'ft_big_renamed';
SELECT attname, n_distinct FROM pg_stats WHERE tablename = 'ft_big_renamed' ORDER BY 1;

-- fdw_startup_cost and fdw_tuple_cost.
EXPLAIN SELECT * FROM ft_big WHERE id = 1;
ALTER SERVER loopback OPTIONS (ADD fdw_startup_cost '1000', ADD fdw_tuple_cost '1');
EXPLAIN SELECT * FROM ft_big WHERE id = 1;
EXPLAIN SELECT * FROM ft_big;
ALTER SERVER loopback OPTIONS (DROP fdw_startup_cost, DROP fdw_tuple_cost);

-- A partitioned table over foreign partitions on two servers.
CREATE TABLE remote.p1 (id int, v text);
CREATE TABLE remote.p2 (id int, v text);
CREATE TABLE remote.p3 (id int, v text);
INSERT INTO remote.p1 SELECT g, 'a' || g FROM generate_series(1, 100) g;
INSERT INTO remote.p2 SELECT g, 'b' || g FROM generate_series(101, 200) g;
INSERT INTO remote.p3 SELECT g, 'c' || g FROM generate_series(201, 300) g;
CREATE TABLE pt (id int, v text) PARTITION BY RANGE (id);
CREATE FOREIGN TABLE pt1 PARTITION OF pt FOR VALUES FROM (1) TO (101)
  SERVER loopback OPTIONS (schema_name 'remote', table_name 'p1');
CREATE FOREIGN TABLE pt2 PARTITION OF pt FOR VALUES FROM (101) TO (201)
  SERVER loopback2 OPTIONS (schema_name 'remote', table_name 'p2');
CREATE FOREIGN TABLE pt3 PARTITION OF pt FOR VALUES FROM (201) TO (301)
  SERVER loopback OPTIONS (schema_name 'remote', table_name 'p3');
SELECT count(*), sum(id), min(v), max(v) FROM pt;
SELECT count(*), sum(id), min(v), max(v) FROM
  (SELECT * FROM remote.p1 UNION ALL SELECT * FROM remote.p2 UNION ALL SELECT * FROM remote.p3) s;
SELECT tableoid::regclass, count(*) FROM pt GROUP BY 1 ORDER BY 1;
-- Pruned at plan time.
EXPLAIN (VERBOSE, COSTS OFF) SELECT * FROM pt WHERE id = 150;
SELECT * FROM pt WHERE id = 150;
EXPLAIN (VERBOSE, COSTS OFF) SELECT * FROM pt WHERE id > 180 AND id < 220;
SELECT count(*), min(id), max(id) FROM pt WHERE id > 180 AND id < 220;
-- Pruned at run time, with a generic plan.
SET plan_cache_mode = force_generic_plan;
PREPARE pt_q(int) AS SELECT * FROM pt WHERE id = $1;
EXPLAIN (ANALYZE, BUFFERS OFF, COSTS OFF, SUMMARY OFF, TIMING OFF) EXECUTE pt_q(250);
EXECUTE pt_q(250);
EXECUTE pt_q(50);
DEALLOCATE pt_q;
RESET plan_cache_mode;
-- Pruned at run time inside a nested loop: each partition is scanned once
-- although the Append is rescanned for each key.
ANALYZE pt;
CREATE TEMP TABLE keys (k int);
INSERT INTO keys VALUES (5), (295);
ANALYZE keys;
SET enable_hashjoin = off;
SET enable_mergejoin = off;
SET enable_material = off;
EXPLAIN (ANALYZE, BUFFERS OFF, COSTS OFF, SUMMARY OFF, TIMING OFF)
  SELECT * FROM keys, pt WHERE pt.id = keys.k;
SELECT * FROM keys, pt WHERE pt.id = keys.k ORDER BY 1;
RESET enable_hashjoin;
RESET enable_mergejoin;
RESET enable_material;

DROP TABLE pt, keys;
DROP TABLE remote.p1, remote.p2, remote.p3;
DROP FOREIGN TABLE ft_big, ft_big_renamed;
DROP TABLE remote.big;
