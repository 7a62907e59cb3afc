--
-- hashkeys: a hash join whose outer side scans a large foreign table on
-- its join key collects the keys of its inner side (a "Custom Scan
-- (AsyncFdwKeys)" under the Hash), and the scan's remote query takes them:
--   column = ANY ($n)
-- The inner side here is a grouped IN subquery (TPC-H Q18's shape), a
-- local table, a foreign table with too many keys.  The thresholds are
-- lowered so that small tables show it (async_fdw.key_filter_min_rows
-- 1000 rows, key_filter_max_keys 3, so at most 30 keys are sent).  Every
-- result is compared with local tables.
--
CREATE TABLE remote.hk_orders (o_id int PRIMARY KEY, o_cust int, o_total int);
INSERT INTO remote.hk_orders
  SELECT i, i % 50, i * 3 FROM generate_series(1, 2000) i;
CREATE TABLE remote.hk_items (i_order int, i_line int, i_qty int,
                              PRIMARY KEY (i_order, i_line));
INSERT INTO remote.hk_items
  SELECT o, l, CASE WHEN o % 97 = 0 THEN 60 ELSE l END
  FROM generate_series(1, 2000) o, generate_series(1, 4) l;
ANALYZE remote.hk_orders, remote.hk_items;
-- both tables as two partitions on two servers, split by order
CREATE VIEW remote.hk_orders_lo AS SELECT * FROM remote.hk_orders WHERE o_id <= 1000;
CREATE VIEW remote.hk_orders_hi AS SELECT * FROM remote.hk_orders WHERE o_id > 1000;
CREATE VIEW remote.hk_items_lo AS SELECT * FROM remote.hk_items WHERE i_order <= 1000;
CREATE VIEW remote.hk_items_hi AS SELECT * FROM remote.hk_items WHERE i_order > 1000;
CREATE TABLE hk_orders (o_id int, o_cust int, o_total int) PARTITION BY RANGE (o_id);
CREATE FOREIGN TABLE hk_orders1 PARTITION OF hk_orders FOR VALUES FROM (1) TO (1001)
  SERVER loopback OPTIONS (schema_name 'remote', table_name 'hk_orders_lo');
CREATE FOREIGN TABLE hk_orders2 PARTITION OF hk_orders FOR VALUES FROM (1001) TO (MAXVALUE)
  SERVER loopback2 OPTIONS (schema_name 'remote', table_name 'hk_orders_hi');
CREATE TABLE hk_items (i_order int, i_line int, i_qty int) PARTITION BY RANGE (i_order);
CREATE FOREIGN TABLE hk_items1 PARTITION OF hk_items FOR VALUES FROM (1) TO (1001)
  SERVER loopback OPTIONS (schema_name 'remote', table_name 'hk_items_lo');
CREATE FOREIGN TABLE hk_items2 PARTITION OF hk_items FOR VALUES FROM (1001) TO (MAXVALUE)
  SERVER loopback2 OPTIONS (schema_name 'remote', table_name 'hk_items_hi');
-- a small local table, and a foreign one with many keys
CREATE TABLE hk_pick (o_id int, note text);
INSERT INTO hk_pick VALUES (5, 'a'), (500, 'b'), (1500, 'c'), (NULL, 'd'), (5, 'e');
CREATE FOREIGN TABLE hk_custs (c_id int, c_name text)
  SERVER loopback OPTIONS (schema_name 'remote', table_name 'hk_custs');
CREATE TABLE remote.hk_custs (c_id int, c_name text);
INSERT INTO remote.hk_custs SELECT i, 'c' || i FROM generate_series(0, 49) i;
ANALYZE hk_orders, hk_items, hk_pick, hk_custs, remote.hk_custs;

-- The key collectors and remote queries of a statement.
CREATE FUNCTION hk_plan(q text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
  l text;
BEGIN
  FOR l IN EXECUTE 'EXPLAIN (VERBOSE, COSTS OFF) ' || q LOOP
    IF l ~ 'AsyncFdwKeys|Keys:|Remote SQL|Hash .*Join' THEN
      RETURN NEXT btrim(regexp_replace(l, '->  ', ''));
    END IF;
  END LOOP;
END
$$;
-- What the collectors found and the scans of table T received and sent.
CREATE FUNCTION hk_run(q text, t text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
  l text;
  mine boolean := false;
BEGIN
  FOR l IN EXECUTE 'EXPLAIN (ANALYZE, VERBOSE, COSTS OFF, TIMING OFF, SUMMARY OFF) ' || q LOOP
    IF l ~ 'Foreign Scan' THEN
      mine := l ~ ('Foreign Scan on public\.' || t || '[0-9]* ');
      IF mine THEN
        RETURN NEXT btrim(regexp_replace(l, '.*Foreign Scan on public\.(\S+).*actual (rows=[0-9]+).*', '\1 \2'));
      END IF;
    ELSIF l ~ 'Keys:' THEN
      RETURN NEXT btrim(l);
    ELSIF mine AND l ~ 'Keys Sent' THEN
      RETURN NEXT btrim(l);
    END IF;
  END LOOP;
END
$$;

SET async_fdw.key_filter_min_rows = 1000;
SET async_fdw.key_filter_max_keys = 3;

-- Q18's shape: the orders of large quantities, their items and totals.
-- Both partitioned tables take the subquery's keys; the items' scans take
-- those of the orders joined to them.
\set q18 'SELECT o.o_id, o.o_total, sum(i.i_qty) FROM hk_orders o, hk_items i WHERE o.o_id IN (SELECT i_order FROM hk_items GROUP BY i_order HAVING sum(i_qty) > 200) AND o.o_id = i.i_order GROUP BY o.o_id, o.o_total ORDER BY o.o_id'
\set q18_local 'SELECT o.o_id, o.o_total, sum(i.i_qty) FROM remote.hk_orders o, remote.hk_items i WHERE o.o_id IN (SELECT i_order FROM remote.hk_items GROUP BY i_order HAVING sum(i_qty) > 200) AND o.o_id = i.i_order GROUP BY o.o_id, o.o_total ORDER BY o.o_id'
SET enable_mergejoin = off;
SET enable_nestloop = off;
-- (First without remote joins per partition: they come below.)
SET async_fdw.partitionwise_join = off;
SELECT * FROM hk_plan(:'q18');
SELECT * FROM hk_run(:'q18', 'hk_items');
SELECT * FROM hk_run(:'q18', 'hk_orders');
:q18;
SELECT rows_in_order(:'q18', :'q18_local');
-- A remote join per partition takes the keys too, on whichever of its
-- joined columns the hash join above compares (orders' key, or items'),
-- both equal in its rows.
-- (The remote aliases' numbers vary by version: r stands for them.)
SET async_fdw.partitionwise_join = on;
SELECT regexp_replace(p, '\mr[0-9]+\M', 'r', 'g') AS hk_plan FROM hk_plan(:'q18') p;
SELECT * FROM hk_run(:'q18', 'hk_orders');
SELECT rows_in_order(:'q18', :'q18_local');
\set q18i 'SELECT i.i_order, o.o_total, sum(i.i_qty) FROM hk_orders o, hk_items i WHERE i.i_order IN (SELECT i_order FROM hk_items GROUP BY i_order HAVING sum(i_qty) > 200) AND o.o_id = i.i_order GROUP BY i.i_order, o.o_total ORDER BY 1'
SELECT regexp_replace(p, '\mr[0-9]+\M', 'r', 'g') AS hk_plan FROM hk_plan(:'q18i') p;
SELECT rows_in_order(:'q18i', replace(replace(:'q18i', 'hk_orders', 'remote.hk_orders'), 'hk_items', 'remote.hk_items'));
SET async_fdw.partitionwise_join = off;

-- A local table's keys; its NULL joins nothing, its repeated key is sent
-- once.
\set qpick 'SELECT p.note, o.o_total FROM hk_orders o JOIN hk_pick p ON o.o_id = p.o_id'
SELECT * FROM hk_plan(:'qpick');
SELECT * FROM hk_run(:'qpick', 'hk_orders');
SELECT rows_same(:'qpick', 'SELECT p.note, o.o_total FROM remote.hk_orders o JOIN hk_pick p ON o.o_id = p.o_id');
-- No key: the join does not read its outer side.
DELETE FROM hk_pick WHERE o_id IS NOT NULL;
SELECT * FROM hk_run(:'qpick', 'hk_orders');
INSERT INTO hk_pick VALUES (5, 'a'), (500, 'b'), (1500, 'c'), (5, 'e');

-- A table estimated at more rows than an array holds keys (50 customers
-- > 30) gives none: its scans do not wait for it.
\set qcust 'SELECT c.c_name, count(*) FROM hk_orders o JOIN hk_custs c ON o.o_cust = c.c_id GROUP BY c.c_name'
SELECT * FROM hk_plan(:'qcust');
-- Estimated at fewer (a third), it has more keys all the same: the
-- collector gives up, and the scans run their queries without keys.
\set qcust 'SELECT c.c_name, count(*) FROM hk_orders o JOIN hk_custs c ON o.o_cust = c.c_id WHERE c.c_id + 0 < 100 GROUP BY c.c_name'
SELECT * FROM hk_run(:'qcust', 'hk_orders');
SELECT rows_same(:'qcust', 'SELECT c.c_name, count(*) FROM remote.hk_orders o JOIN remote.hk_custs c ON o.o_cust = c.c_id WHERE c.c_id + 0 < 100 GROUP BY c.c_name');
-- ... and within the limit they are sent.
\set qcust5 'SELECT c.c_name, count(*) FROM hk_orders o JOIN hk_custs c ON o.o_cust = c.c_id WHERE c.c_id < 5 GROUP BY c.c_name'
SELECT * FROM hk_run(:'qcust5', 'hk_orders');
SELECT rows_same(:'qcust5', 'SELECT c.c_name, count(*) FROM remote.hk_orders o JOIN remote.hk_custs c ON o.o_cust = c.c_id WHERE c.c_id < 5 GROUP BY c.c_name');

-- Wide keys: past 1 MB of keys (counted uncompressed: these are stored
-- compressed) a column gives up, as past its count; within it they are
-- sent.
CREATE TABLE remote.hk_tags (tag text, n int);
INSERT INTO remote.hk_tags SELECT 'tag' || i, i FROM generate_series(1, 2000) i;
INSERT INTO remote.hk_tags SELECT repeat('w', 300000) || k, k FROM generate_series(1, 4) k;
CREATE FOREIGN TABLE hk_tags (tag text, n int)
  SERVER loopback OPTIONS (schema_name 'remote', table_name 'hk_tags');
CREATE TABLE hk_wide (tag text);
INSERT INTO hk_wide SELECT repeat('w', 300000) || k FROM generate_series(1, 4) k;
INSERT INTO hk_wide VALUES ('tag7');
ANALYZE hk_tags, remote.hk_tags, hk_wide;
SELECT sum(pg_column_size(tag)) < 100000 AS compressed,
       sum(octet_length(tag)) > 1024 * 1024 AS over_1mb FROM hk_wide;
\set qwide 'SELECT t.n, length(t.tag) FROM hk_tags t JOIN hk_wide w ON t.tag = w.tag'
SELECT * FROM hk_run(:'qwide', 'hk_tags');
SELECT rows_same(:'qwide', 'SELECT t.n, length(t.tag) FROM remote.hk_tags t JOIN hk_wide w ON t.tag = w.tag');
DELETE FROM hk_wide WHERE tag LIKE '%w4';
SELECT * FROM hk_run(:'qwide', 'hk_tags');
SELECT rows_same(:'qwide', 'SELECT t.n, length(t.tag) FROM remote.hk_tags t JOIN hk_wide w ON t.tag = w.tag');

-- A foreign inner side, costlier than the outer side's start: the join
-- reads an outer row first, and the collector reads its input ahead for
-- the scans (keeping the rows for the Hash) ...
CREATE TABLE remote.hk_many (o_id int, n int);
INSERT INTO remote.hk_many SELECT (i % 4) * 100 + 5, i FROM generate_series(1, 400) i;
CREATE FOREIGN TABLE hk_many (o_id int, n int)
  SERVER loopback2 OPTIONS (schema_name 'remote', table_name 'hk_many');
ANALYZE hk_many, remote.hk_many;
-- (Conditions the planner cannot estimate keep the table's estimate
-- within an array's 30 keys.)
\set qmany 'SELECT o.o_id, o.o_total FROM hk_orders o WHERE EXISTS (SELECT 1 FROM hk_many m WHERE m.o_id = o.o_id AND m.n > o.o_cust AND m.n + 0 < 200 AND m.n * 1 > 0 AND m.n - 0 > 0)'
SELECT * FROM hk_run(:'qmany', 'hk_orders');
SELECT rows_same(:'qmany', 'SELECT o.o_id, o.o_total FROM remote.hk_orders o WHERE EXISTS (SELECT 1 FROM remote.hk_many m WHERE m.o_id = o.o_id AND m.n > o.o_cust AND m.n + 0 < 200 AND m.n * 1 > 0 AND m.n - 0 > 0)');
-- ... but no further than ten rows a key (300 here): past them, the scans
-- run without keys, and the Hash reads the rest.
\set qmany 'SELECT o.o_id, o.o_total FROM hk_orders o WHERE EXISTS (SELECT 1 FROM hk_many m WHERE m.o_id = o.o_id AND m.n > o.o_cust AND m.n + 0 > 0 AND m.n * 1 > 0 AND m.n - 0 > 0)'
SELECT * FROM hk_run(:'qmany', 'hk_orders');
SELECT rows_same(:'qmany', 'SELECT o.o_id, o.o_total FROM remote.hk_orders o WHERE EXISTS (SELECT 1 FROM remote.hk_many m WHERE m.o_id = o.o_id AND m.n > o.o_cust AND m.n + 0 > 0 AND m.n * 1 > 0 AND m.n - 0 > 0)');

-- Joins whose outer rows need no inner match take no keys: a left join
-- keeping the large table, an anti-join.
SELECT * FROM hk_plan('SELECT o.o_id, p.note FROM hk_orders o LEFT JOIN hk_pick p ON o.o_id = p.o_id');
SELECT * FROM hk_plan('SELECT o.o_id FROM hk_orders o WHERE NOT EXISTS (SELECT 1 FROM hk_pick p WHERE p.o_id = o.o_id)');
SELECT rows_same('SELECT o.o_id, p.note FROM hk_orders o LEFT JOIN hk_pick p ON o.o_id = p.o_id',
                 'SELECT o.o_id, p.note FROM remote.hk_orders o LEFT JOIN hk_pick p ON o.o_id = p.o_id');
SELECT rows_same('SELECT o.o_id FROM hk_orders o WHERE NOT EXISTS (SELECT 1 FROM hk_pick p WHERE p.o_id = o.o_id)',
                 'SELECT o.o_id FROM remote.hk_orders o WHERE NOT EXISTS (SELECT 1 FROM hk_pick p WHERE p.o_id = o.o_id)');
-- A right join keeping the small table does: the large table's rows
-- without a match are dropped.
\set qright 'SELECT p.note, o.o_total FROM hk_pick p LEFT JOIN hk_orders o ON o.o_id = p.o_id'
SELECT * FROM hk_plan(:'qright');
SELECT rows_same(:'qright', 'SELECT p.note, o.o_total FROM hk_pick p LEFT JOIN remote.hk_orders o ON o.o_id = p.o_id');
-- Through an outer join on the outer side, from its preserved side.
\set qouter 'SELECT o.o_total, c.c_name, p.note FROM hk_orders o LEFT JOIN hk_custs c ON o.o_cust = c.c_id JOIN hk_pick p ON p.o_id = o.o_id'
SELECT * FROM hk_plan(:'qouter');
SELECT rows_same(:'qouter', 'SELECT o.o_total, c.c_name, p.note FROM remote.hk_orders o LEFT JOIN remote.hk_custs c ON o.o_cust = c.c_id JOIN hk_pick p ON p.o_id = o.o_id');

-- A subplan run for each row rescans the join: the keys are asked for
-- again (the inner side is read once).
\set qsub 'SELECT g, (SELECT count(*) FROM hk_orders o JOIN hk_pick p ON o.o_id = p.o_id WHERE o.o_id <> g) FROM generate_series(0, 1500, 500) g'
SELECT * FROM hk_plan(:'qsub');
:qsub;
SELECT rows_same(:'qsub', 'SELECT g, (SELECT count(*) FROM remote.hk_orders o JOIN hk_pick p ON o.o_id = p.o_id WHERE o.o_id <> g) FROM generate_series(0, 1500, 500) g');

-- A cursor read in parts, a prepared statement's generic plan, one
-- connection for all the scans of a server.
BEGIN;
DECLARE hk_c CURSOR FOR SELECT o.o_id, o.o_total FROM hk_orders o JOIN hk_pick p ON o.o_id = p.o_id ORDER BY 1;
FETCH 2 FROM hk_c;
FETCH ALL FROM hk_c;
COMMIT;
PREPARE hk_p(int) AS SELECT count(*), sum(o.o_total) FROM hk_orders o JOIN hk_pick p ON o.o_id = p.o_id WHERE o.o_id <> $1;
SET plan_cache_mode = force_generic_plan;
EXPLAIN (COSTS OFF) EXECUTE hk_p(0);
EXECUTE hk_p(0);
EXECUTE hk_p(500);
RESET plan_cache_mode;
DEALLOCATE hk_p;
ALTER SERVER loopback OPTIONS (ADD max_connections '1');
SELECT rows_in_order(:'q18', :'q18_local');
ALTER SERVER loopback OPTIONS (DROP max_connections);

-- A remote error on the inner side, read ahead for the outer side's
-- scan, is the statement's error; the session goes on.
CREATE FOREIGN TABLE hk_bad (o_id int, note text)
  SERVER loopback2 OPTIONS (schema_name 'remote', table_name 'hk_missing');
SELECT count(*) FROM hk_orders o JOIN hk_bad b ON o.o_id = b.o_id;
DROP FOREIGN TABLE hk_bad;
SELECT count(*) FROM hk_orders o JOIN hk_pick p ON o.o_id = p.o_id;

-- An anti-join (or semi-join) only asks whether a row has a match: the
-- scans under its Hash send SELECT DISTINCT when their statistics expect
-- the rows to repeat (the orders' customers, 50 values in 1,000 rows a
-- partition), and the same rows come out.
\set qanti 'SELECT i.i_order, i.i_line FROM hk_items i WHERE NOT EXISTS (SELECT 1 FROM hk_orders o WHERE o.o_cust = i.i_qty)'
SELECT * FROM hk_plan(:'qanti');
SELECT * FROM hk_run(:'qanti', 'hk_orders');
SELECT rows_same(:'qanti', 'SELECT i.i_order, i.i_line FROM remote.hk_items i WHERE NOT EXISTS (SELECT 1 FROM remote.hk_orders o WHERE o.o_cust = i.i_qty)');
-- Not where the rows do not repeat (the orders' own keys), nor where a
-- volatile condition is checked on each row, locally (the scan's) or by
-- the join (hash joins all).
SET enable_nestloop = off;
SET enable_mergejoin = off;
SELECT * FROM hk_plan('SELECT i.i_order FROM hk_items i WHERE NOT EXISTS (SELECT 1 FROM hk_orders o WHERE o.o_id = i.i_qty)');
SELECT * FROM hk_plan('SELECT i.i_order FROM hk_items i LEFT JOIN (SELECT * FROM hk_orders WHERE o_cust + random() >= 0) o ON o.o_cust = i.i_qty WHERE o.o_cust IS NULL');
\set qvolatile 'SELECT i.i_order, i.i_line FROM hk_items i LEFT JOIN hk_orders o ON o.o_cust = i.i_qty AND o.o_cust + i.i_line * random() >= 0 WHERE o.o_cust IS NULL'
SELECT * FROM hk_plan(:'qvolatile');
SELECT rows_same(:'qvolatile', 'SELECT i.i_order, i.i_line FROM remote.hk_items i WHERE NOT EXISTS (SELECT 1 FROM remote.hk_orders o WHERE o.o_cust = i.i_qty)');
RESET enable_nestloop;
RESET enable_mergejoin;

-- The first query of a session, which loads async_fdw while it is
-- planned, gets the keys too.
\c
SET async_fdw.key_filter_min_rows = 1000;
SET async_fdw.key_filter_max_keys = 3;
SET enable_mergejoin = off;
SET enable_nestloop = off;
EXPLAIN (COSTS OFF) SELECT p.note, o.o_total FROM hk_orders o JOIN hk_pick p ON o.o_id = p.o_id;

-- Turned off with key_filter_min_rows.
SET async_fdw.key_filter_min_rows = -1;
SELECT * FROM hk_plan('SELECT p.note, o.o_total FROM hk_orders o JOIN hk_pick p ON o.o_id = p.o_id');

-- Cleanup
RESET async_fdw.key_filter_min_rows;
RESET async_fdw.key_filter_max_keys;
RESET enable_mergejoin;
RESET enable_nestloop;
RESET async_fdw.partitionwise_join;
DROP FUNCTION hk_plan(text);
DROP FUNCTION hk_run(text, text);
DROP TABLE hk_orders, hk_items, hk_pick, hk_wide;
DROP FOREIGN TABLE hk_custs, hk_many, hk_tags;
DROP VIEW remote.hk_orders_lo, remote.hk_orders_hi, remote.hk_items_lo, remote.hk_items_hi;
DROP TABLE remote.hk_orders, remote.hk_items, remote.hk_custs, remote.hk_many, remote.hk_tags;
