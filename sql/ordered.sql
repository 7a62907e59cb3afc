--
-- ordered: the ORDER BY and LIMIT of remote joins and remote aggregates
-- sent with them when the remote server sorts exactly as the local one
-- would.  Every ordered result is compared, in order, with the same query
-- on local tables holding the same rows.
--
CREATE TABLE remote.od1 (id int, a int, t text, c text);
CREATE TABLE remote.od2 (id int, b int, u text);
INSERT INTO remote.od1
  SELECT g, CASE WHEN g % 7 = 0 THEN NULL ELSE (g * 37) % 101 END,
         CASE WHEN g % 11 = 0 THEN NULL ELSE 'x' || ((g * 13) % 50) END,
         CASE g % 4 WHEN 0 THEN 'a' WHEN 1 THEN 'B' WHEN 2 THEN 'b' ELSE 'A' END
    FROM generate_series(1, 400) g;
INSERT INTO remote.od2
  SELECT g, CASE WHEN g % 9 = 0 THEN NULL ELSE g % 13 END, 'u' || (g % 17)
    FROM generate_series(200, 700, 2) g;
CREATE TABLE od1_local AS SELECT * FROM remote.od1;
CREATE TABLE od2_local AS SELECT * FROM remote.od2;
CREATE FOREIGN TABLE od1 (id int, a int, t text, c text COLLATE "C")
  SERVER loopback OPTIONS (schema_name 'remote', table_name 'od1');
CREATE FOREIGN TABLE od2 (id int, b int, u text)
  SERVER loopback OPTIONS (schema_name 'remote', table_name 'od2');
ANALYZE od1, od2;

-- 1. A join in the query's order, with its LIMIT and OFFSET: inner, left
-- (the nullable side's NULLs first or last), full.
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT od1.id, b, t FROM od1 JOIN od2 ON od1.id = od2.id ORDER BY t, od1.id LIMIT 10 OFFSET 5;
SELECT rows_in_order($$SELECT od1.id, b, t FROM od1 JOIN od2 ON od1.id = od2.id ORDER BY t, od1.id LIMIT 10 OFFSET 5$$,
               $$SELECT od1.id, b, t FROM od1_local od1 JOIN od2_local od2 ON od1.id = od2.id ORDER BY t, od1.id LIMIT 10 OFFSET 5$$);
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT od1.id, b FROM od1 LEFT JOIN od2 ON od1.id = od2.id ORDER BY b DESC, od1.id LIMIT 12;
SELECT rows_in_order($$SELECT od1.id, b FROM od1 LEFT JOIN od2 ON od1.id = od2.id ORDER BY b DESC, od1.id LIMIT 12$$,
               $$SELECT od1.id, b FROM od1_local od1 LEFT JOIN od2_local od2 ON od1.id = od2.id ORDER BY b DESC, od1.id LIMIT 12$$);
SELECT rows_in_order($$SELECT od1.id, b FROM od1 LEFT JOIN od2 ON od1.id = od2.id ORDER BY b NULLS FIRST, od1.id DESC LIMIT 30$$,
               $$SELECT od1.id, b FROM od1_local od1 LEFT JOIN od2_local od2 ON od1.id = od2.id ORDER BY b NULLS FIRST, od1.id DESC LIMIT 30$$);
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT od1.id, od2.id FROM od1 FULL JOIN od2 ON od1.id = od2.id ORDER BY od1.id, od2.id OFFSET 390 LIMIT 20;
SELECT rows_in_order($$SELECT od1.id, od2.id FROM od1 FULL JOIN od2 ON od1.id = od2.id ORDER BY od1.id, od2.id OFFSET 390 LIMIT 20$$,
               $$SELECT od1.id, od2.id FROM od1_local od1 FULL JOIN od2_local od2 ON od1.id = od2.id ORDER BY od1.id, od2.id OFFSET 390 LIMIT 20$$);
-- Whole, without a LIMIT, and in each fetch mode.
SELECT rows_in_order($$SELECT od1.id, a, b FROM od1 JOIN od2 ON od1.id = od2.id ORDER BY a DESC NULLS LAST, b, od1.id$$,
               $$SELECT od1.id, a, b FROM od1_local od1 JOIN od2_local od2 ON od1.id = od2.id ORDER BY a DESC NULLS LAST, b, od1.id$$);
ALTER FOREIGN TABLE od1 OPTIONS (ADD fetch_mode 'stream');
SELECT rows_in_order($$SELECT od1.id, a, b FROM od1 JOIN od2 ON od1.id = od2.id ORDER BY a DESC NULLS LAST, b, od1.id$$,
               $$SELECT od1.id, a, b FROM od1_local od1 JOIN od2_local od2 ON od1.id = od2.id ORDER BY a DESC NULLS LAST, b, od1.id$$);
ALTER FOREIGN TABLE od1 OPTIONS (SET fetch_mode 'cursor', ADD fetch_size '7');
SELECT rows_in_order($$SELECT od1.id, a, b FROM od1 JOIN od2 ON od1.id = od2.id ORDER BY a DESC NULLS LAST, b, od1.id LIMIT 40$$,
               $$SELECT od1.id, a, b FROM od1_local od1 JOIN od2_local od2 ON od1.id = od2.id ORDER BY a DESC NULLS LAST, b, od1.id LIMIT 40$$);
ALTER FOREIGN TABLE od1 OPTIONS (DROP fetch_mode, DROP fetch_size);
-- A LIMIT without an order goes too.
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT od1.id FROM od1 JOIN od2 ON od1.id = od2.id LIMIT 4;
SELECT count(*) FROM (SELECT od1.id FROM od1 JOIN od2 ON od1.id = od2.id LIMIT 4) s;

-- 2. Sorted locally: a column in a collation other than the default, an
-- expression, a semi-join's order by its inner side.  No remote LIMIT for
-- a join under a local join, or with WITH TIES.
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT od1.id, c FROM od1 JOIN od2 ON od1.id = od2.id ORDER BY c, od1.id LIMIT 5;
SELECT rows_in_order($$SELECT od1.id, c FROM od1 JOIN od2 ON od1.id = od2.id ORDER BY c, od1.id LIMIT 5$$,
               $$SELECT od1.id, c FROM od1_local od1 JOIN od2_local od2 ON od1.id = od2.id ORDER BY c COLLATE "C", od1.id LIMIT 5$$);
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT od1.id FROM od1 JOIN od2 ON od1.id = od2.id ORDER BY a + b, od1.id LIMIT 5;
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT od1.id, l.b FROM od1 JOIN od2 ON od1.id = od2.id JOIN od2_local l ON l.id = od1.id
  ORDER BY od1.id LIMIT 5;
SELECT rows_in_order($$SELECT od1.id, l.b FROM od1 JOIN od2 ON od1.id = od2.id JOIN od2_local l ON l.id = od1.id ORDER BY od1.id LIMIT 5$$,
               $$SELECT od1.id, l.b FROM od1_local od1 JOIN od2_local od2 ON od1.id = od2.id JOIN od2_local l ON l.id = od1.id ORDER BY od1.id LIMIT 5$$);
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT od1.id, b FROM od1 JOIN od2 ON od1.id = od2.id ORDER BY b FETCH FIRST 3 ROWS WITH TIES;
SELECT rows_in_order($$SELECT count(*) FROM (SELECT od1.id, b FROM od1 JOIN od2 ON od1.id = od2.id ORDER BY b FETCH FIRST 3 ROWS WITH TIES) s$$,
               $$SELECT count(*) FROM (SELECT od1.id, b FROM od1_local od1 JOIN od2_local od2 ON od1.id = od2.id ORDER BY b FETCH FIRST 3 ROWS WITH TIES) s$$);

-- 3. A remote aggregate in the query's order, with its LIMIT: by a
-- grouping column, by an aggregate.
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT a, count(*), sum(id) FROM od1 GROUP BY a ORDER BY a DESC LIMIT 5;
SELECT rows_in_order($$SELECT a, count(*), sum(id) FROM od1 GROUP BY a ORDER BY a DESC LIMIT 5$$,
               $$SELECT a, count(*), sum(id) FROM od1_local GROUP BY a ORDER BY a DESC LIMIT 5$$);
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT b, count(*) FROM od1 JOIN od2 ON od1.id = od2.id GROUP BY b ORDER BY count(*) DESC, b NULLS FIRST;
SELECT rows_in_order($$SELECT b, count(*) FROM od1 JOIN od2 ON od1.id = od2.id GROUP BY b ORDER BY count(*) DESC, b NULLS FIRST$$,
               $$SELECT b, count(*) FROM od1_local od1 JOIN od2_local od2 ON od1.id = od2.id GROUP BY b ORDER BY count(*) DESC, b NULLS FIRST$$);
SELECT rows_in_order($$SELECT a % 5, max(t), min(id) FROM od1 WHERE id > 30 GROUP BY a % 5 HAVING count(*) > 3 ORDER BY max(t), 1 LIMIT 3 OFFSET 1$$,
               $$SELECT a % 5, max(t), min(id) FROM od1_local WHERE id > 30 GROUP BY a % 5 HAVING count(*) > 3 ORDER BY max(t), 1 LIMIT 3 OFFSET 1$$);
-- Grouped by an expression, which other items and the ORDER BY use.
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT id / 100, sum(a) * (id / 100) FROM od1 GROUP BY id / 100 ORDER BY id / 100;
SELECT rows_in_order($$SELECT id / 100, sum(a) * (id / 100) FROM od1 GROUP BY id / 100 ORDER BY id / 100$$,
               $$SELECT id / 100, sum(a) * (id / 100) FROM od1_local GROUP BY id / 100 ORDER BY id / 100$$);
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT (id / 100) * (random() <= 1)::int, count(*) FROM od1 GROUP BY id / 100 HAVING min(id / 100) >= 0;
SELECT rows_same($$SELECT (id / 100) * (random() <= 1)::int, count(*) FROM od1 GROUP BY id / 100 HAVING min(id / 100) >= 0$$,
                 $$SELECT (id / 100) * (random() <= 1)::int, count(*) FROM od1_local GROUP BY id / 100 HAVING min(id / 100) >= 0$$);
-- GROUPING() keeps the aggregate local.
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT a, sum(id), grouping(a) FROM od1 WHERE a < 3 GROUP BY a ORDER BY 1;
SELECT a, sum(id), grouping(a) FROM od1 WHERE a < 3 GROUP BY a ORDER BY 1;
-- A volatile HAVING condition is checked locally on the groups, the
-- others remotely; no remote LIMIT then.
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT a, count(*) FROM od1 GROUP BY a
  HAVING (avg(id) / avg(id)) * random() <= 1 AND avg(id) < 200 ORDER BY a LIMIT 4;
SELECT rows_in_order($$SELECT a, count(*) FROM od1 GROUP BY a HAVING (avg(id) / avg(id)) * random() <= 1 AND avg(id) < 200 ORDER BY a LIMIT 4$$,
               $$SELECT a, count(*) FROM od1_local GROUP BY a HAVING (avg(id) / avg(id)) * random() <= 1 AND avg(id) < 200 ORDER BY a LIMIT 4$$);
-- Sorted locally: by an item computed locally, or followed by a DISTINCT.
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT a, sum(id) * (random() <= 1)::int AS s FROM od1 GROUP BY a ORDER BY s, a LIMIT 3;
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT DISTINCT count(*) FROM od1 GROUP BY a ORDER BY 1 LIMIT 3;
SELECT rows_in_order($$SELECT DISTINCT count(*) FROM od1 GROUP BY a ORDER BY 1 LIMIT 3$$,
               $$SELECT DISTINCT count(*) FROM od1_local GROUP BY a ORDER BY 1 LIMIT 3$$);

-- 4. A varchar column sorts remotely (it comes relabeled to text), alone
-- and in a join.
ALTER TABLE remote.od2 ADD COLUMN v varchar(8);
UPDATE remote.od2 SET v = CASE WHEN id % 5 = 0 THEN NULL ELSE 'v' || (id * 7) % 31 END;
CREATE TABLE od2v_local AS SELECT * FROM remote.od2;
ALTER FOREIGN TABLE od2 ADD COLUMN v varchar(8);
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT id, v FROM od2 ORDER BY v DESC NULLS LAST, id LIMIT 5 OFFSET 2;
SELECT rows_in_order($$SELECT id, v FROM od2 ORDER BY v DESC NULLS LAST, id LIMIT 5 OFFSET 2$$,
               $$SELECT id, v FROM od2v_local ORDER BY v DESC NULLS LAST, id LIMIT 5 OFFSET 2$$);
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT od1.id, v FROM od1 JOIN od2 ON od1.id = od2.id ORDER BY v, od1.id LIMIT 5;
SELECT rows_in_order($$SELECT od1.id, v FROM od1 JOIN od2 ON od1.id = od2.id ORDER BY v, od1.id$$,
               $$SELECT od1.id, v FROM od1_local od1 JOIN od2v_local od2 ON od1.id = od2.id ORDER BY v, od1.id$$);

-- 5. With use_remote_estimate, the orders a merge join could use: a
-- foreign table or a remote join sorted by the join column, merged with
-- a local table read through its index.
CREATE TABLE od_pk (id int PRIMARY KEY, w int);
INSERT INTO od_pk SELECT g, g % 3 FROM generate_series(1, 1000) g;
ANALYZE od_pk;
ALTER FOREIGN TABLE od1 OPTIONS (ADD use_remote_estimate 'true');
ALTER FOREIGN TABLE od2 OPTIONS (ADD use_remote_estimate 'true');
SET enable_hashjoin = off;
SET enable_nestloop = off;
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT od1.id, w FROM od1 JOIN od_pk ON od1.id = od_pk.id;
SELECT rows_same($$SELECT od1.id, w FROM od1 JOIN od_pk ON od1.id = od_pk.id$$,
                 $$SELECT od1.id, w FROM od1_local od1 JOIN od_pk ON od1.id = od_pk.id$$);
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT od1.id, b, w FROM od1 JOIN od2 ON od1.id = od2.id JOIN od_pk ON od2.id = od_pk.id;
SELECT rows_same($$SELECT od1.id, b, w FROM od1 JOIN od2 ON od1.id = od2.id JOIN od_pk ON od2.id = od_pk.id$$,
                 $$SELECT od1.id, b, w FROM od1_local od1 JOIN od2_local od2 ON od1.id = od2.id JOIN od_pk ON od2.id = od_pk.id$$);
RESET enable_hashjoin;
RESET enable_nestloop;
-- Without remote estimates, no such path: the sort is local.
ALTER FOREIGN TABLE od1 OPTIONS (DROP use_remote_estimate);
ALTER FOREIGN TABLE od2 OPTIONS (DROP use_remote_estimate);
SET enable_hashjoin = off;
SET enable_nestloop = off;
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT od1.id, w FROM od1 JOIN od_pk ON od1.id = od_pk.id;
RESET enable_hashjoin;
RESET enable_nestloop;

-- 6. Joins of partitions (partitionwise join): each pair joined remotely in
-- the query's order, with the query's LIMIT, under a Merge Append.
CREATE TABLE remote.odp1a AS SELECT id, a, t FROM remote.od1 WHERE id <= 300;
CREATE TABLE remote.odp1b AS SELECT id, a, t FROM remote.od1 WHERE id > 300;
CREATE TABLE remote.odp2a AS SELECT id, b FROM remote.od2 WHERE id <= 300;
CREATE TABLE remote.odp2b AS SELECT id, b FROM remote.od2 WHERE id > 300;
CREATE TABLE odp1 (id int, a int, t text) PARTITION BY RANGE (id);
CREATE FOREIGN TABLE odp1_a PARTITION OF odp1 FOR VALUES FROM (MINVALUE) TO (301)
  SERVER loopback OPTIONS (schema_name 'remote', table_name 'odp1a');
CREATE FOREIGN TABLE odp1_b PARTITION OF odp1 FOR VALUES FROM (301) TO (MAXVALUE)
  SERVER loopback2 OPTIONS (schema_name 'remote', table_name 'odp1b');
CREATE TABLE odp2 (id int, b int) PARTITION BY RANGE (id);
CREATE FOREIGN TABLE odp2_a PARTITION OF odp2 FOR VALUES FROM (MINVALUE) TO (301)
  SERVER loopback OPTIONS (schema_name 'remote', table_name 'odp2a');
CREATE FOREIGN TABLE odp2_b PARTITION OF odp2 FOR VALUES FROM (301) TO (MAXVALUE)
  SERVER loopback2 OPTIONS (schema_name 'remote', table_name 'odp2b');
ANALYZE odp1, odp2;
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT odp1.id, b FROM odp1 JOIN odp2 ON odp1.id = odp2.id ORDER BY odp1.id DESC LIMIT 6;
SELECT rows_in_order($$SELECT odp1.id, b FROM odp1 JOIN odp2 ON odp1.id = odp2.id ORDER BY odp1.id DESC LIMIT 6$$,
               $$SELECT od1.id, b FROM od1_local od1 JOIN od2_local od2 ON od1.id = od2.id ORDER BY od1.id DESC LIMIT 6$$);
SELECT rows_in_order($$SELECT odp1.id, b FROM odp1 JOIN odp2 ON odp1.id = odp2.id ORDER BY odp1.id LIMIT 8 OFFSET 60$$,
               $$SELECT od1.id, b FROM od1_local od1 JOIN od2_local od2 ON od1.id = od2.id ORDER BY od1.id LIMIT 8 OFFSET 60$$);
-- Ordered also by the columns of an outer join's nullable side (those of
-- a child join of partitions carry the child join; PostgreSQL 17 and 18
-- sorted such a join locally).
SET enable_partitionwise_join = on;
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT odp1.id, o2.b FROM odp1 LEFT JOIN (SELECT * FROM odp2 WHERE b < 5) o2
    ON odp1.id = o2.id WHERE odp1.id < 100 ORDER BY 1, 2;
SELECT rows_in_order($$SELECT odp1.id, o2.b FROM odp1 LEFT JOIN (SELECT * FROM odp2 WHERE b < 5) o2
    ON odp1.id = o2.id WHERE odp1.id < 100 ORDER BY 1, 2$$,
  $$SELECT od1.id, o2.b FROM od1_local od1 LEFT JOIN (SELECT * FROM od2_local WHERE b < 5) o2
    ON od1.id = o2.id WHERE od1.id < 100 ORDER BY 1, 2$$);
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT odp1.id, o2.b FROM odp1 LEFT JOIN (SELECT * FROM odp2 WHERE b < 5) o2
    ON odp1.id = o2.id ORDER BY 2, 1 LIMIT 10;
SELECT rows_in_order($$SELECT odp1.id, o2.b FROM odp1 LEFT JOIN (SELECT * FROM odp2 WHERE b < 5) o2
    ON odp1.id = o2.id ORDER BY 2, 1 LIMIT 10$$,
  $$SELECT od1.id, o2.b FROM od1_local od1 LEFT JOIN (SELECT * FROM od2_local WHERE b < 5) o2
    ON od1.id = o2.id ORDER BY 2, 1 LIMIT 10$$);
RESET enable_partitionwise_join;
DROP TABLE odp1, odp2, remote.odp1a, remote.odp1b, remote.odp2a, remote.odp2b;

DROP TABLE od_pk, od2v_local;
DROP FOREIGN TABLE od1, od2;
DROP TABLE od1_local, od2_local, remote.od1, remote.od2;
