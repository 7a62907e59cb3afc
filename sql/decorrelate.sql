--
-- decorrelate: a condition comparing with a correlated aggregate subquery
-- over async_fdw tables is planned as a join with the aggregate grouped by
-- the correlation's columns (async_fdw.decorrelate_subqueries), and a hash
-- join sends either side's keys into the grouped remote query.  The shapes
-- of TPC-H's Q17 and Q20.  Every result is compared with local tables.
--
CREATE TABLE remote.dc_item1 (okey int, line int, pkey int, skey int, big bigint,
  qty numeric, price numeric);
CREATE TABLE remote.dc_item2 (LIKE remote.dc_item1);
INSERT INTO remote.dc_item1
  SELECT o, l, abs(hashint4(o * 3 + l)) % 480 + 1, abs(hashint4(o * 5 + l + 100000)) % 4 + 1,
         abs(hashint4(o * 3 + l)) % 480 + 1,
         (o + l) % 50 + 1, o % 97 + l
    FROM generate_series(1, 6000) o, generate_series(1, 2) l;
INSERT INTO remote.dc_item2
  SELECT o, l, abs(hashint4(o * 3 + l)) % 480 + 1, abs(hashint4(o * 5 + l + 100000)) % 4 + 1,
         abs(hashint4(o * 3 + l)) % 480 + 1,
         (o + l) % 50 + 1, o % 97 + l
    FROM generate_series(6001, 12000) o, generate_series(1, 2) l;
-- Items with no part and no supplier: a null key joins no group.
INSERT INTO remote.dc_item1 VALUES (1, 3, NULL, NULL, NULL, 1, 1), (2, 3, NULL, NULL, NULL, 2, 2);
CREATE TABLE remote.dc_part (pkey int, brand text);
-- Parts 481-500 have no items; one part has no key.
INSERT INTO remote.dc_part SELECT g, 'B' || g % 20 FROM generate_series(1, 500) g;
INSERT INTO remote.dc_part VALUES (NULL, 'B3'), (NULL, 'B5');
CREATE TABLE remote.dc_ps (pkey int, skey int, avail int);
INSERT INTO remote.dc_ps SELECT p, s, (p * 13 + s * 7) % 90 FROM generate_series(1, 500) p,
  generate_series(1, 4) s;
INSERT INTO remote.dc_ps VALUES (NULL, 1, 80), (5, NULL, 80);
ANALYZE remote.dc_item1, remote.dc_item2, remote.dc_part, remote.dc_ps;

CREATE TABLE dc_item (okey int, line int, pkey int, skey int, big bigint,
  qty numeric, price numeric) PARTITION BY RANGE (okey);
CREATE FOREIGN TABLE dc_item_p1 PARTITION OF dc_item FOR VALUES FROM (1) TO (6001)
  SERVER loopback OPTIONS (schema_name 'remote', table_name 'dc_item1');
CREATE FOREIGN TABLE dc_item_p2 PARTITION OF dc_item FOR VALUES FROM (6001) TO (12001)
  SERVER loopback2 OPTIONS (schema_name 'remote', table_name 'dc_item2');
CREATE FOREIGN TABLE dc_part (pkey int, brand text)
  SERVER loopback OPTIONS (schema_name 'remote', table_name 'dc_part');
CREATE FOREIGN TABLE dc_ps (pkey int, skey int, avail int)
  SERVER loopback2 OPTIONS (schema_name 'remote', table_name 'dc_ps');
ANALYZE dc_item, dc_part, dc_ps;
-- The same rows in local tables.
CREATE TABLE dc_item_loc AS SELECT * FROM dc_item;
CREATE TABLE dc_part_loc AS SELECT * FROM dc_part;
CREATE TABLE dc_ps_loc AS SELECT * FROM dc_ps;
CREATE INDEX ON dc_item_loc (pkey, skey);
ANALYZE dc_item_loc, dc_part_loc, dc_ps_loc;
CREATE FUNCTION dc_same(q text) RETURNS boolean LANGUAGE sql AS $$
  SELECT rows_in_order(q, replace(replace(replace(q, 'dc_item', 'dc_item_loc'),
                                          'dc_part', 'dc_part_loc'),
                                  'dc_ps', 'dc_ps_loc'))
$$;
-- A plan, its InitPlans named alike on every version.
CREATE FUNCTION dc_plan(q text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
  l text;
BEGIN
  FOR l IN EXECUTE 'EXPLAIN (COSTS OFF) ' || q LOOP
    RETURN NEXT regexp_replace(l, 'InitPlan ([0-9]+).*', 'InitPlan \1');
  END LOOP;
END
$$;
-- The key collectors, and what the grouped remote queries received.
CREATE FUNCTION dc_keys(q text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
  l text;
  grouped boolean := false;
BEGIN
  FOR l IN EXECUTE 'EXPLAIN (ANALYZE, VERBOSE, COSTS OFF, TIMING OFF, SUMMARY OFF) ' || q LOOP
    IF l ~ 'Foreign Scan' THEN
      grouped := false;
    ELSIF l ~ 'Relations: ' THEN
      grouped := true;
      RETURN NEXT btrim(l);
    ELSIF l ~ 'Keys:' OR (grouped AND l ~ 'Keys Sent|Remote Received') THEN
      RETURN NEXT btrim(regexp_replace(l, ', [0-9]+ bytes', ''));
    END IF;
  END LOOP;
END
$$;

-- Q17's shape: the correlated avg runs once, grouped by part, on the keys
-- of the parts the query reads (a hash join's inner side).
\set q17 'SELECT p.brand, sum(i.price) FROM dc_item i JOIN dc_part p ON p.pkey = i.pkey WHERE p.brand IN (''B3'', ''B7'') AND i.qty < (SELECT 0.5 * avg(qty) FROM dc_item WHERE pkey = p.pkey) GROUP BY p.brand ORDER BY 1'
SELECT * FROM dc_plan(:'q17');
SELECT * FROM dc_keys(:'q17');
SELECT dc_same(:'q17');

-- Q20's shape: two correlated columns, an IN above.  The aggregate takes
-- the keys of the hash join's other side: from the outer side through a
-- collector over it where the aggregate is hashed (15 and 17), from the
-- Hash where it is the outer side (18).
\set q20 'SELECT ps.skey, count(*) FROM dc_ps ps WHERE ps.pkey IN (SELECT pkey FROM dc_part WHERE brand = ''B5'') AND ps.avail > (SELECT 0.5 * sum(qty) FROM dc_item WHERE pkey = ps.pkey AND skey = ps.skey AND line = 1) GROUP BY 1 ORDER BY 1'
SELECT * FROM dc_plan(:'q20');
SELECT * FROM dc_keys(:'q20');
SELECT dc_same(:'q20');

-- Keys the other way without a subquery: the large side is hashed (the
-- function's estimate is high), and the join reads its first outer row
-- before building the hash table; the collector over the outer side reads
-- ahead when the partitions' scans ask, and must not hand the join a row
-- that reading ahead overwrote (one of 2,046 was lost so).
CREATE FUNCTION dc_fn() RETURNS SETOF int LANGUAGE sql ROWS 100000
  AS 'SELECT g * 7 FROM generate_series(1, 40) g';
\set qback 'SELECT count(*), sum(i.qty) FROM dc_fn() k(pkey) JOIN dc_item i ON i.pkey = k.pkey'
SELECT * FROM dc_plan(:'qback');
SELECT * FROM dc_keys(:'qback');
SELECT dc_same(:'qback');

-- Keys into remote joins: each partition's join of items and orders is
-- one remote query (partitionwise), joined locally to the few parts of a
-- brand, whose keys go into the remote joins' WHERE clauses.
CREATE TABLE remote.dc_ord1 (okey int, odate date);
CREATE TABLE remote.dc_ord2 (okey int, odate date);
INSERT INTO remote.dc_ord1 SELECT o, date '2020-01-01' + o % 700 FROM generate_series(1, 6000) o;
INSERT INTO remote.dc_ord2 SELECT o, date '2020-01-01' + o % 700 FROM generate_series(6001, 12000) o;
ANALYZE remote.dc_ord1, remote.dc_ord2;
CREATE TABLE dc_ord (okey int, odate date) PARTITION BY RANGE (okey);
CREATE FOREIGN TABLE dc_ord_p1 PARTITION OF dc_ord FOR VALUES FROM (1) TO (6001)
  SERVER loopback OPTIONS (schema_name 'remote', table_name 'dc_ord1');
CREATE FOREIGN TABLE dc_ord_p2 PARTITION OF dc_ord FOR VALUES FROM (6001) TO (12001)
  SERVER loopback2 OPTIONS (schema_name 'remote', table_name 'dc_ord2');
ANALYZE dc_ord;
CREATE TABLE dc_ord_loc AS SELECT * FROM dc_ord;
ANALYZE dc_ord_loc;
\set qjoin 'SELECT extract(year FROM o.odate) AS y, count(*), sum(i.price) FROM dc_item i JOIN dc_ord o ON o.okey = i.okey JOIN dc_part p ON p.pkey = i.pkey WHERE p.brand = ''B7'' GROUP BY 1 ORDER BY 1'
SELECT * FROM dc_plan(:'qjoin');
SELECT * FROM dc_keys(:'qjoin');
SELECT rows_in_order(:'qjoin', replace(replace(replace(:'qjoin', 'dc_item', 'dc_item_loc'),
                                               'dc_part', 'dc_part_loc'),
                                       'dc_ord', 'dc_ord_loc'));

-- A LIMIT sent with a remote join (each partition's first rows under a
-- Merge Append) takes no keys: they would make it return other rows.
\set qlimit 'SELECT s.okey, s.pkey FROM (SELECT i.okey, i.line, i.pkey FROM dc_item i JOIN dc_ord o ON o.okey = i.okey ORDER BY i.okey, i.line LIMIT 400) s JOIN dc_part p ON p.pkey = s.pkey WHERE p.brand = ''B7'' ORDER BY 1, 2'
SELECT rows_in_order(:'qlimit', replace(replace(replace(:'qlimit', 'dc_item', 'dc_item_loc'),
                                                'dc_part', 'dc_part_loc'),
                                        'dc_ord', 'dc_ord_loc'));

-- The subquery on the left of the comparison, its value an integer times
-- the aggregate; parts without items and the part without a key have no
-- group, as their subquery is null.
\set qleft 'SELECT p.pkey, p.brand FROM dc_part p WHERE (SELECT 2 * max(qty) FROM dc_item WHERE pkey = p.pkey) >= 100 AND p.brand < ''B12'' ORDER BY 1'
SELECT * FROM dc_plan(:'qleft');
SELECT dc_same(:'qleft');
SELECT count(*) FROM dc_part p WHERE (SELECT max(qty) FROM dc_item WHERE pkey = p.pkey) IS NULL;

-- Under every fetch mode.
ALTER SERVER loopback OPTIONS (ADD fetch_mode 'cursor');
ALTER SERVER loopback2 OPTIONS (ADD fetch_mode 'cursor');
SELECT dc_same(:'q17'), dc_same(:'q20'), dc_same(:'qleft');
ALTER SERVER loopback OPTIONS (SET fetch_mode 'stream');
ALTER SERVER loopback2 OPTIONS (SET fetch_mode 'stream');
SELECT dc_same(:'q17'), dc_same(:'q20'), dc_same(:'qleft');
ALTER SERVER loopback OPTIONS (DROP fetch_mode);
ALTER SERVER loopback2 OPTIONS (DROP fetch_mode);

-- Without the setting, the subplans come back, with the same rows.
SET async_fdw.decorrelate_subqueries = off;
SELECT * FROM dc_plan(:'q17');
SELECT dc_same(:'q17'), dc_same(:'q20');
RESET async_fdw.decorrelate_subqueries;

-- Stay subplans: count is 0, not null, over no rows (parts 481-500 pass);
-- a cross-type equality (bigint = int), which is not the grouping's; an
-- outer column in the value; a subquery over local tables only.
\set qcount 'SELECT p.pkey FROM dc_part p WHERE 3 > (SELECT count(*) FROM dc_item WHERE pkey = p.pkey) ORDER BY 1'
SELECT * FROM dc_plan(:'qcount');
SELECT dc_same(:'qcount');
\set qcross 'SELECT p.pkey FROM dc_part p WHERE p.brand = ''B3'' AND 40 < (SELECT max(qty) FROM dc_item WHERE big = p.pkey) ORDER BY 1'
SELECT * FROM dc_plan(:'qcross');
SELECT dc_same(:'qcross');
\set qouter 'SELECT p.pkey FROM dc_part p WHERE p.brand = ''B3'' AND 100 < (SELECT max(qty) + p.pkey FROM dc_item WHERE pkey = p.pkey) ORDER BY 1'
SELECT * FROM dc_plan(:'qouter');
SELECT dc_same(:'qouter');
EXPLAIN (COSTS OFF) SELECT p.pkey FROM dc_part_loc p
  WHERE 40 < (SELECT max(qty) FROM dc_item_loc WHERE pkey = p.pkey);

-- Rows locked: the level is left alone (a grouped subquery cannot be
-- locked).
BEGIN;
EXPLAIN (COSTS OFF) SELECT p.pkey FROM dc_part p
  WHERE p.brand = 'B3' AND (SELECT max(qty) FROM dc_item WHERE pkey = p.pkey) > 45 FOR UPDATE;
SELECT p.pkey FROM dc_part p
  WHERE p.brand = 'B3' AND (SELECT max(qty) FROM dc_item WHERE pkey = p.pkey) > 45
  ORDER BY 1 FOR UPDATE;
COMMIT;

-- Rescans: the decorrelated level is itself a subplan, run per outer row.
\set qrescan 'SELECT o.x, (SELECT count(*) FROM dc_item i WHERE i.pkey = o.x AND i.qty < (SELECT avg(qty) FROM dc_item WHERE pkey = i.pkey)) FROM generate_series(1, 6) o(x) ORDER BY 1'
SELECT count(*) FILTER (WHERE l ~ 'SubPlan') AS subplans,
       bool_or(l ~ 'GroupAggregate|HashAggregate') AS grouped
  FROM dc_plan(:'qrescan') l;
SELECT dc_same(:'qrescan');

-- A generic plan: parameters in the subquery's own conditions and value.
PREPARE dc_g(text, numeric) AS
  SELECT p.brand, count(*), sum(i.price) FROM dc_item i JOIN dc_part p ON p.pkey = i.pkey
  WHERE p.brand IN ($1, 'B19')
    AND i.qty < (SELECT $2 * avg(qty) FROM dc_item WHERE pkey = p.pkey AND qty > $2)
  GROUP BY 1;
PREPARE dc_g_loc(text, numeric) AS
  SELECT p.brand, count(*), sum(i.price) FROM dc_item_loc i JOIN dc_part_loc p ON p.pkey = i.pkey
  WHERE p.brand IN ($1, 'B19')
    AND i.qty < (SELECT $2 * avg(qty) FROM dc_item_loc WHERE pkey = p.pkey AND qty > $2)
  GROUP BY 1;
SET plan_cache_mode = force_generic_plan;
SELECT * FROM dc_plan('EXECUTE dc_g(''B3'', 1.5)');
CREATE TEMP TABLE dc_r1 AS EXECUTE dc_g('B3', 1.5);
CREATE TEMP TABLE dc_r2 AS EXECUTE dc_g_loc('B3', 1.5);
CREATE TEMP TABLE dc_r3 AS EXECUTE dc_g('B11', 0.8);
CREATE TEMP TABLE dc_r4 AS EXECUTE dc_g_loc('B11', 0.8);
SELECT (SELECT sum(count) FROM dc_r1) AS b3, (SELECT sum(count) FROM dc_r3) AS b11;
SELECT rows_in_order('SELECT * FROM dc_r1 ORDER BY 1', 'SELECT * FROM dc_r2 ORDER BY 1'),
       rows_in_order('SELECT * FROM dc_r3 ORDER BY 1', 'SELECT * FROM dc_r4 ORDER BY 1');
RESET plan_cache_mode;
DEALLOCATE dc_g;
DEALLOCATE dc_g_loc;

DROP TABLE dc_r1, dc_r2, dc_r3, dc_r4;
DROP FUNCTION dc_same(text), dc_keys(text), dc_plan(text), dc_fn();
DROP TABLE dc_item, dc_item_loc, dc_part_loc, dc_ps_loc, dc_ord, dc_ord_loc;
DROP FOREIGN TABLE dc_part, dc_ps;
DROP TABLE remote.dc_item1, remote.dc_item2, remote.dc_part, remote.dc_ps,
  remote.dc_ord1, remote.dc_ord2;
