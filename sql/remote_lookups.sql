--
-- remote_lookups: a join the shards can make whole goes to them whole, not
-- as a local nested loop that sends a remote query per row of its outer
-- side (async_fdw.prefer_remote_joins).  The shape of TPC-H's Q21: an
-- anti-join and a semi-join with conditions besides their keys, which
-- PostgreSQL estimates at one row and which return hundreds, and a column
-- of the semi-join's inner side kept for a join above (orders joined on
-- l2's key, equal to l1's).  Every result is compared with local tables.
--
CREATE TABLE remote.rl_ord1 (okey int PRIMARY KEY, status char(1));
CREATE TABLE remote.rl_ord2 (okey int PRIMARY KEY, status char(1));
CREATE TABLE remote.rl_item1 (okey int, line int, supp int, late boolean,
  PRIMARY KEY (okey, line));
CREATE TABLE remote.rl_item2 (okey int, line int, supp int, late boolean,
  PRIMARY KEY (okey, line));
INSERT INTO remote.rl_ord1
  SELECT g, CASE WHEN g % 3 = 0 THEN 'O' ELSE 'F' END FROM generate_series(1, 10000) g;
INSERT INTO remote.rl_ord2
  SELECT g, CASE WHEN g % 3 = 0 THEN 'O' ELSE 'F' END FROM generate_series(10001, 20000) g;
INSERT INTO remote.rl_item1
  SELECT o, l, (o * 7 + l * 13) % 40, (o + l) % 3 = 0
    FROM generate_series(1, 10000) o, generate_series(1, 1 + o % 5) l;
INSERT INTO remote.rl_item2
  SELECT o, l, (o * 7 + l * 13) % 40, (o + l) % 3 = 0
    FROM generate_series(10001, 20000) o, generate_series(1, 1 + o % 5) l;
-- A null key and a null supplier: no match, and <> is not true.
INSERT INTO remote.rl_item1 VALUES (1, 9, NULL, true);
ANALYZE remote.rl_ord1, remote.rl_ord2, remote.rl_item1, remote.rl_item2;

-- Partitioned on the order key, one partition of each on each server.
CREATE TABLE rl_ord (okey int, status char(1)) PARTITION BY RANGE (okey);
CREATE FOREIGN TABLE rl_ord_p1 PARTITION OF rl_ord FOR VALUES FROM (1) TO (10001)
  SERVER loopback OPTIONS (schema_name 'remote', table_name 'rl_ord1');
CREATE FOREIGN TABLE rl_ord_p2 PARTITION OF rl_ord FOR VALUES FROM (10001) TO (20001)
  SERVER loopback2 OPTIONS (schema_name 'remote', table_name 'rl_ord2');
CREATE TABLE rl_item (okey int, line int, supp int, late boolean)
  PARTITION BY RANGE (okey);
CREATE FOREIGN TABLE rl_item_p1 PARTITION OF rl_item FOR VALUES FROM (1) TO (10001)
  SERVER loopback OPTIONS (schema_name 'remote', table_name 'rl_item1');
CREATE FOREIGN TABLE rl_item_p2 PARTITION OF rl_item FOR VALUES FROM (10001) TO (20001)
  SERVER loopback2 OPTIONS (schema_name 'remote', table_name 'rl_item2');
ANALYZE rl_ord, rl_item;
-- The same rows in local tables.
CREATE TABLE rl_ord_loc AS SELECT * FROM rl_ord;
CREATE TABLE rl_item_loc AS SELECT * FROM rl_item;
CREATE INDEX ON rl_item_loc (okey);
CREATE INDEX ON rl_ord_loc (okey);
ANALYZE rl_ord_loc, rl_item_loc;
CREATE FUNCTION rl_same(q text) RETURNS boolean LANGUAGE sql AS $$
  SELECT rows_in_order(q, replace(replace(q, 'rl_ord', 'rl_ord_loc'),
                                  'rl_item', 'rl_item_loc'))
$$;

-- Q21's shape: each partition's whole join, its EXISTS and NOT EXISTS
-- inside, one remote query per partition.
\set q21 'SELECT l1.supp, count(*) FROM rl_item l1 JOIN rl_ord o ON o.okey = l1.okey WHERE o.status = ''F'' AND l1.late AND EXISTS (SELECT 1 FROM rl_item l2 WHERE l2.okey = l1.okey AND l2.supp <> l1.supp) AND NOT EXISTS (SELECT 1 FROM rl_item l3 WHERE l3.okey = l1.okey AND l3.supp <> l1.supp AND l3.late) GROUP BY l1.supp ORDER BY 2 DESC, 1 LIMIT 10'
EXPLAIN (COSTS OFF) :q21;
SELECT rl_same(:'q21');
-- Without the setting, the nested loops that look rows up come back.
SET async_fdw.prefer_remote_joins = off;
EXPLAIN (COSTS OFF) :q21;
RESET async_fdw.prefer_remote_joins;

-- One partition (pruned to one server): a join of foreign tables.
EXPLAIN (VERBOSE, COSTS OFF)
SELECT l1.okey, l1.line FROM rl_item l1 JOIN rl_ord o ON o.okey = l1.okey
 WHERE l1.okey < 200 AND o.status = 'F'
   AND EXISTS (SELECT 1 FROM rl_item l2 WHERE l2.okey = l1.okey AND l2.supp <> l1.supp)
 ORDER BY 1, 2;
SELECT rl_same($$SELECT l1.okey, l1.line FROM rl_item l1 JOIN rl_ord o ON o.okey = l1.okey
 WHERE l1.okey < 200 AND o.status = 'F'
   AND EXISTS (SELECT 1 FROM rl_item l2 WHERE l2.okey = l1.okey AND l2.supp <> l1.supp)
 ORDER BY 1, 2$$);

-- The semi-join's inner column is returned as the equal outer one only
-- where both have one type: here l2.k is bigint, l1.okey int, and the
-- join stays right.
CREATE TABLE remote.rl_wide (k bigint, supp int);
INSERT INTO remote.rl_wide SELECT okey, supp FROM remote.rl_item1;
CREATE FOREIGN TABLE rl_wide (k bigint, supp int) SERVER loopback
  OPTIONS (schema_name 'remote', table_name 'rl_wide');
CREATE TABLE rl_wide_loc AS SELECT * FROM remote.rl_wide;
CREATE INDEX ON rl_wide_loc (k);
CREATE INDEX ON remote.rl_wide (k);
SELECT rows_in_order(
  $$SELECT l1.okey, l1.line FROM rl_item_p1 l1 JOIN rl_ord_p1 o ON o.okey = l1.okey
     WHERE EXISTS (SELECT 1 FROM rl_wide w WHERE w.k = l1.okey AND w.supp <> l1.supp)
       AND o.status = 'O' ORDER BY 1, 2$$,
  $$SELECT l1.okey, l1.line FROM rl_item_loc l1 JOIN rl_ord_loc o ON o.okey = l1.okey
     WHERE EXISTS (SELECT 1 FROM rl_wide_loc w WHERE w.k = l1.okey AND w.supp <> l1.supp)
       AND o.status = 'O' AND l1.okey <= 10000 ORDER BY 1, 2$$);

-- A nested loop driven by a local table keeps its lookups where they are
-- cheaper: a local key, a remote query (the join of the two foreign tables
-- alone would read all their rows); the plan is the same without the
-- setting.
CREATE TABLE rl_keys (okey int);
INSERT INTO rl_keys VALUES (10);
ANALYZE rl_keys;
EXPLAIN (COSTS OFF)
SELECT k.okey, l.line FROM rl_keys k JOIN rl_item_p1 l ON l.okey = k.okey
  JOIN rl_ord_p1 o ON o.okey = l.okey ORDER BY 1, 2;
SET async_fdw.prefer_remote_joins = off;
EXPLAIN (COSTS OFF)
SELECT k.okey, l.line FROM rl_keys k JOIN rl_item_p1 l ON l.okey = k.okey
  JOIN rl_ord_p1 o ON o.okey = l.okey ORDER BY 1, 2;
RESET async_fdw.prefer_remote_joins;
SELECT k.okey, l.line FROM rl_keys k JOIN rl_item_p1 l ON l.okey = k.okey
  JOIN rl_ord_p1 o ON o.okey = l.okey ORDER BY 1, 2;

DROP FUNCTION rl_same(text);
DROP TABLE rl_ord, rl_item, rl_ord_loc, rl_item_loc, rl_keys, rl_wide_loc;
DROP FOREIGN TABLE rl_wide;
DROP TABLE remote.rl_ord1, remote.rl_ord2, remote.rl_item1, remote.rl_item2,
  remote.rl_wide;
