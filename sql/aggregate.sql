--
-- aggregate: aggregates computed by the remote servers.  A foreign table's
-- aggregate is one remote SELECT with GROUP BY and HAVING; a partitioned
-- table with async_fdw partitions is aggregated partially by every shard
-- at once, and the coordinator combines the partial results.  Every result
-- is compared with the same query on local tables holding the same rows.
--
CREATE TABLE remote.ag1 (id int, g int, i2 int2, i4 int, i8 bigint, n numeric,
                         f float8, t text, b bool, d date);
INSERT INTO remote.ag1
  SELECT x, x % 5, CASE WHEN x % 9 = 0 THEN NULL ELSE (x % 300)::int2 END,
         CASE WHEN x % 7 = 0 THEN NULL ELSE x * 1000 END,
         CASE WHEN x % 11 = 0 THEN NULL ELSE 9223372036854775000 - x END,
         x * 0.25, x / 3.0, 't' || (x % 13), x % 3 = 0, DATE '2026-01-01' + x
    FROM generate_series(1, 400) x;
CREATE TABLE remote.ag2 (LIKE remote.ag1);
INSERT INTO remote.ag2
  SELECT x, x % 5, NULL, -x, 9223372036854775000 + (x % 800), x * 0.5, x, 'u' || (x % 4),
         x % 2 = 0, DATE '2025-01-01' + x
    FROM generate_series(401, 900) x;
CREATE TABLE remote.ag3 (LIKE remote.ag1);
CREATE TABLE remote.ag4 (LIKE remote.ag1);
INSERT INTO remote.ag4 VALUES (1500, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
CREATE TABLE ag_local AS
  SELECT * FROM remote.ag1 UNION ALL SELECT * FROM remote.ag2
  UNION ALL SELECT * FROM remote.ag3 UNION ALL SELECT * FROM remote.ag4;

CREATE FOREIGN TABLE ag1 (id int, g int, i2 int2, i4 int, i8 bigint, n numeric,
                          f float8, t text, b bool, d date)
  SERVER loopback OPTIONS (schema_name 'remote', table_name 'ag1');
CREATE TABLE ag (id int, g int, i2 int2, i4 int, i8 bigint, n numeric,
                 f float8, t text, b bool, d date) PARTITION BY RANGE (id);
CREATE FOREIGN TABLE ag_p1 PARTITION OF ag FOR VALUES FROM (1) TO (401)
  SERVER loopback OPTIONS (schema_name 'remote', table_name 'ag1');
CREATE FOREIGN TABLE ag_p2 PARTITION OF ag FOR VALUES FROM (401) TO (1001)
  SERVER loopback2 OPTIONS (schema_name 'remote', table_name 'ag2');
CREATE FOREIGN TABLE ag_p3 PARTITION OF ag FOR VALUES FROM (1001) TO (1401)
  SERVER loopback OPTIONS (schema_name 'remote', table_name 'ag3');
CREATE FOREIGN TABLE ag_p4 PARTITION OF ag FOR VALUES FROM (1401) TO (2001)
  SERVER loopback2 OPTIONS (schema_name 'remote', table_name 'ag4');
ANALYZE ag_p1, ag_p2, ag_p3, ag_p4, ag1;

-- 1. One foreign table: GROUP BY, HAVING, FILTER, DISTINCT and ORDER BY
-- inside aggregates, grouping by an expression.
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT g, count(*), sum(i4), avg(i2), min(t), max(d) FROM ag1 GROUP BY g HAVING count(*) > 10;
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT g % 2 AS h, count(DISTINCT t), string_agg(t, ',' ORDER BY t DESC, id) FILTER (WHERE id < 30),
         sum(i8) + 1 AS s
    FROM ag1 WHERE id > 3 GROUP BY g % 2;
SELECT rows_same($$SELECT g, count(*), sum(i4), avg(i2), min(t), max(d), bool_and(b), bit_or(i4) FROM ag1 GROUP BY g HAVING count(*) > 10$$,
               $$SELECT g, count(*), sum(i4), avg(i2), min(t), max(d), bool_and(b), bit_or(i4) FROM remote.ag1 GROUP BY g HAVING count(*) > 10$$);
SELECT rows_same($$SELECT g % 2 AS h, count(DISTINCT t), string_agg(t, ',' ORDER BY t DESC, id) FILTER (WHERE id < 30), sum(i8) + 1 AS s FROM ag1 WHERE id > 3 GROUP BY g % 2$$,
               $$SELECT g % 2 AS h, count(DISTINCT t), string_agg(t, ',' ORDER BY t DESC, id) FILTER (WHERE id < 30), sum(i8) + 1 AS s FROM remote.ag1 WHERE id > 3 GROUP BY g % 2$$);
SELECT rows_same($$SELECT count(*), sum(n), avg(f), max(i8) FROM ag1 WHERE id > 1000$$,
               $$SELECT count(*), sum(n), avg(f), max(i8) FROM remote.ag1 WHERE id > 1000$$);
SELECT rows_same($$SELECT t, array_agg(id ORDER BY id DESC NULLS FIRST) FROM ag1 WHERE id < 40 GROUP BY t$$,
               $$SELECT t, array_agg(id ORDER BY id DESC NULLS FIRST) FROM remote.ag1 WHERE id < 40 GROUP BY t$$);
-- An item computed locally from the aggregate sent.
EXPLAIN (VERBOSE, COSTS OFF) SELECT g, sum(i4) * random() * 0 FROM ag1 GROUP BY g;

-- 2. Shapes that stay local: a volatile function, a non-default
-- collation, a user-defined aggregate, a local condition.
EXPLAIN (COSTS OFF) SELECT sum(i4 * (random() < 2)::int) FROM ag1;
EXPLAIN (COSTS OFF) SELECT min(t COLLATE "C") FROM ag1;
EXPLAIN (COSTS OFF) SELECT g, count(*) FROM ag1 GROUP BY t COLLATE "C", g;
CREATE FUNCTION ag_add(int, int) RETURNS int LANGUAGE sql IMMUTABLE AS 'SELECT $1 + $2';
CREATE AGGREGATE ag_total(int) (SFUNC = ag_add, STYPE = int, INITCOND = '0');
EXPLAIN (COSTS OFF) SELECT ag_total(i4) FROM ag1 WHERE i4 IS NOT NULL;
SELECT ag_total(i4) = (SELECT sum(i4) FROM remote.ag1) FROM ag1 WHERE i4 IS NOT NULL;
CREATE FUNCTION ag_local_fn(int) RETURNS bool LANGUAGE plpgsql AS 'BEGIN RETURN $1 > 100; END';
EXPLAIN (COSTS OFF) SELECT count(*) FROM ag1 WHERE ag_local_fn(id);
SELECT rows_same($$SELECT min(t COLLATE "C"), count(*) FROM ag1 WHERE ag_local_fn(id)$$,
               $$SELECT min(t COLLATE "C"), count(*) FROM remote.ag1 WHERE ag_local_fn(id)$$);

-- 3. A partitioned table: one partial aggregate per partition, all sent
-- at once, finalized locally; with and without GROUP BY, NULLs, an empty
-- partition, bigint sums past the bigint range, avg's exact value.
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT count(*), count(i4), sum(i4), sum(i8), avg(i8), avg(i2), min(t), max(d) FROM ag;
EXPLAIN (COSTS OFF)
  SELECT t, count(*), sum(i8) FROM ag GROUP BY t HAVING sum(i2) IS NULL OR count(*) > 3;
SELECT rows_same($$SELECT count(*), count(i4), sum(i4), sum(i8), avg(i8), avg(i2), avg(i4), min(t), max(d), sum(i2) FROM ag$$,
               $$SELECT count(*), count(i4), sum(i4), sum(i8), avg(i8), avg(i2), avg(i4), min(t), max(d), sum(i2) FROM ag_local$$);
SELECT rows_same($$SELECT t, count(*), sum(i8), avg(i8), bool_or(b), every(b), bit_and(i2), bit_xor(id) FROM ag GROUP BY t HAVING sum(i2) IS NULL OR count(*) > 3$$,
               $$SELECT t, count(*), sum(i8), avg(i8), bool_or(b), every(b), bit_and(i2), bit_xor(id) FROM ag_local GROUP BY t HAVING sum(i2) IS NULL OR count(*) > 3$$);
SELECT rows_same($$SELECT g, i2 IS NULL AS nul, count(*) FILTER (WHERE id % 2 = 0), min(n), max(f), sum(i4) FROM ag WHERE id > 100 GROUP BY 1, 2$$,
               $$SELECT g, i2 IS NULL AS nul, count(*) FILTER (WHERE id % 2 = 0), min(n), max(f), sum(i4) FROM ag_local WHERE id > 100 GROUP BY 1, 2$$);
-- No row at all: one group of NULLs and zeros.
SELECT rows_same($$SELECT count(*), sum(i8), avg(i8), avg(i4), min(t) FROM ag WHERE id < 0$$,
               $$SELECT count(*), sum(i8), avg(i8), avg(i4), min(t) FROM ag_local WHERE id < 0$$);
SELECT count(*), sum(i8), avg(i8) FROM ag WHERE id < 0;
-- The partition key in GROUP BY, ORDER BY and LIMIT above.
SELECT rows_same($$SELECT id / 100 AS k, sum(i8) FROM ag GROUP BY 1 ORDER BY 2 DESC LIMIT 3$$,
               $$SELECT id / 100 AS k, sum(i8) FROM ag_local GROUP BY 1 ORDER BY 2 DESC LIMIT 3$$);

-- The remote SQL of each partition of query Q, its select list cut short.
CREATE FUNCTION ag_remote_sql(q text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
  line text;
BEGIN
  FOR line IN EXECUTE 'EXPLAIN (VERBOSE, COSTS OFF) ' || q LOOP
    CONTINUE WHEN line !~ 'Remote SQL: ';
    line := regexp_replace(line, '^.*Remote SQL: ', '');
    RETURN NEXT left(line, 60) || ' ... ' || substr(line, strpos(line, ' FROM '));
  END LOOP;
END $$;

-- Floating-point sums and averages: sum's state is its result, avg's the
-- float8 array {count, sum, 0} (float4 added in float8, as locally).
-- Quarters add exactly in any order; NaN, infinities, NULLs, an empty
-- partition and no row at all.
CREATE TABLE remote.agf1 (id int, g int, r float4, d float8);
CREATE TABLE remote.agf2 (LIKE remote.agf1);
CREATE TABLE remote.agf3 (LIKE remote.agf1);
INSERT INTO remote.agf1 SELECT x, x % 3, x / 4.0, x / 8.0 FROM generate_series(1, 300) x;
INSERT INTO remote.agf2 SELECT x, x % 3, CASE WHEN x % 5 = 0 THEN NULL ELSE -x / 4.0 END, x * 0.5
  FROM generate_series(301, 600) x;
INSERT INTO remote.agf2 VALUES (601, 1, 'NaN', 'Infinity'), (602, 2, '-Infinity', '-Infinity'),
  (603, 2, 'Infinity', 'NaN');
CREATE TABLE agf_local AS
  SELECT * FROM remote.agf1 UNION ALL SELECT * FROM remote.agf2 UNION ALL SELECT * FROM remote.agf3;
CREATE TABLE agf (id int, g int, r float4, d float8) PARTITION BY RANGE (id);
CREATE FOREIGN TABLE agf_p1 PARTITION OF agf FOR VALUES FROM (1) TO (301)
  SERVER loopback OPTIONS (schema_name 'remote', table_name 'agf1');
CREATE FOREIGN TABLE agf_p2 PARTITION OF agf FOR VALUES FROM (301) TO (1000)
  SERVER loopback2 OPTIONS (schema_name 'remote', table_name 'agf2');
CREATE FOREIGN TABLE agf_p3 PARTITION OF agf FOR VALUES FROM (1000) TO (2000)
  SERVER loopback OPTIONS (schema_name 'remote', table_name 'agf3');
ANALYZE agf_p1, agf_p2, agf_p3;
EXPLAIN (VERBOSE, COSTS OFF) SELECT g, sum(r), sum(d), avg(r), avg(d) FROM agf GROUP BY g;
SELECT rows_same($$SELECT g, sum(r), sum(d), avg(r), avg(d), count(r) FROM agf GROUP BY g$$,
               $$SELECT g, sum(r), sum(d), avg(r), avg(d), count(r) FROM agf_local GROUP BY g$$);
SELECT rows_same($$SELECT sum(r), avg(r) FILTER (WHERE g = 0), avg(d) FILTER (WHERE id < 300) FROM agf$$,
               $$SELECT sum(r), avg(r) FILTER (WHERE g = 0), avg(d) FILTER (WHERE id < 300) FROM agf_local$$);
SELECT sum(r), sum(d), avg(r), avg(d) FROM agf WHERE id > 5000;
SELECT rows_same($$SELECT g, avg(r) FROM agf WHERE id > 400 GROUP BY g$$,
               $$SELECT g, avg(r) FROM agf_local WHERE id > 400 GROUP BY g$$);
-- An infinite partial sum beside a finite one (NaN in the third item).
SELECT rows_same($$SELECT g, avg(d), avg(r) FROM agf WHERE id <> 603 GROUP BY g$$,
               $$SELECT g, avg(d), avg(r) FROM agf_local WHERE id <> 603 GROUP BY g$$);
-- The variance reads the third item: it stays local.
EXPLAIN (COSTS OFF) SELECT avg(d), variance(d) FROM agf;
-- Arguments that are not columns: computed once a row, in a subquery under
-- the grouping (see the numeric ones below); float4 added in float8.
SELECT ag_remote_sql($$SELECT g, avg(r * 2), avg(d + 1), sum(d * 4) FROM agf GROUP BY g$$);
SELECT rows_same($$SELECT g, avg(r * 2), avg(d + 1), sum(d * 4), avg(-r) FILTER (WHERE id > 2) FROM agf GROUP BY g$$,
               $$SELECT g, avg(r * 2), avg(d + 1), sum(d * 4), avg(-r) FILTER (WHERE id > 2) FROM agf_local GROUP BY g$$);
DROP TABLE agf, agf_local, remote.agf1, remote.agf2, remote.agf3;

-- numeric sums and averages: the state's serial form built remotely from
-- the count, the sum of the finite values and the counts of NaN and
-- infinities; values below 1 (negative weights), negative ones, mixed
-- scales, NaN, infinities, NULLs, FILTER, an empty partition, no row.
CREATE TABLE remote.agn1 (id int, g int, n numeric);
CREATE TABLE remote.agn2 (LIKE remote.agn1);
CREATE TABLE remote.agn3 (LIKE remote.agn1);
INSERT INTO remote.agn1
  SELECT x, x % 3, CASE WHEN x % 7 = 0 THEN -x * 1.25 ELSE x / 1000.0 END FROM generate_series(1, 300) x;
INSERT INTO remote.agn2
  SELECT x, x % 3, CASE WHEN x % 5 = 0 THEN NULL ELSE x * 0.000001 + 12345678901234567890 END
  FROM generate_series(301, 600) x;
INSERT INTO remote.agn2 VALUES (601, 1, 'NaN'), (602, 2, 'Infinity'), (603, 2, '-Infinity'),
  (604, 0, 'Infinity'), (605, 0, 0.00);
CREATE TABLE agn_local AS
  SELECT * FROM remote.agn1 UNION ALL SELECT * FROM remote.agn2 UNION ALL SELECT * FROM remote.agn3;
CREATE TABLE agn (id int, g int, n numeric) PARTITION BY RANGE (id);
CREATE FOREIGN TABLE agn_p1 PARTITION OF agn FOR VALUES FROM (1) TO (301)
  SERVER loopback OPTIONS (schema_name 'remote', table_name 'agn1');
CREATE FOREIGN TABLE agn_p2 PARTITION OF agn FOR VALUES FROM (301) TO (1000)
  SERVER loopback2 OPTIONS (schema_name 'remote', table_name 'agn2');
CREATE FOREIGN TABLE agn_p3 PARTITION OF agn FOR VALUES FROM (1000) TO (2000)
  SERVER loopback OPTIONS (schema_name 'remote', table_name 'agn3');
ANALYZE agn_p1, agn_p2, agn_p3;
EXPLAIN (COSTS OFF) SELECT g, sum(n), avg(n) FROM agn GROUP BY g;
SELECT g, sum(n), avg(n), count(n) FROM agn GROUP BY g ORDER BY g;
SELECT g, sum(n), avg(n), count(n) FROM agn_local GROUP BY g ORDER BY g;
SELECT rows_same($$SELECT g, sum(n), avg(n) FROM agn WHERE id < 601 OR id = 605 GROUP BY g$$,
               $$SELECT g, sum(n), avg(n) FROM agn_local WHERE id < 601 OR id = 605 GROUP BY g$$);
SELECT rows_same($$SELECT sum(n) FILTER (WHERE g = 1), avg(n * 2 - 1) FILTER (WHERE id % 2 = 0), avg(n) FROM agn WHERE id <> 601$$,
               $$SELECT sum(n) FILTER (WHERE g = 1), avg(n * 2 - 1) FILTER (WHERE id % 2 = 0), avg(n) FROM agn_local WHERE id <> 601$$);
SELECT rows_same($$SELECT g, avg(n), sum(n) FROM agn WHERE id BETWEEN 290 AND 310 GROUP BY g$$,
               $$SELECT g, avg(n), sum(n) FROM agn_local WHERE id BETWEEN 290 AND 310 GROUP BY g$$);
SELECT sum(n), avg(n) FROM agn WHERE id > 5000;
-- TPC-H Q1's shape: the state of a sum or avg reads its argument twice (a
-- count and a sum), so an argument that is not a column is computed once
-- a row in a subquery that the remote planner keeps (OFFSET 0), read by
-- the grouping above it; FILTER keeps its argument in the grouping (it is
-- evaluated only where the filter holds).  NaN, infinities, NULLs, a group
-- whose arguments are all NULL, bigint and int arguments, no row.
-- The state of a sum needs no count (1 or 0 for some input or none), unless
-- an avg of the same argument shares it locally: a sum of an expression
-- beside avgs of columns (TPC-H Q1) reads each argument once, as it is.
SELECT ag_remote_sql($$SELECT g, sum(n), sum(n * (1 - id / 1000.0)), avg(n), avg(id::int8), sum(id::int8 * 2), count(*) FROM agn GROUP BY g$$);
SELECT rows_same($$SELECT g, sum(n), sum(n * (1 - id / 1000.0)), avg(n), avg(id::int8), sum(id::int8 * 2), sum(id::int8), count(*) FROM agn GROUP BY g$$,
               $$SELECT g, sum(n), sum(n * (1 - id / 1000.0)), avg(n), avg(id::int8), sum(id::int8 * 2), sum(id::int8), count(*) FROM agn_local GROUP BY g$$);
SELECT ag_remote_sql($$SELECT g, sum(n), sum(n * (1 - id / 1000.0)), avg(n * (1 - id / 1000.0)),
  avg(n * 2) FILTER (WHERE id > 3), avg(id::int8 * 3), avg(id + g), count(*) FROM agn WHERE id <> 7 GROUP BY g$$);
SELECT rows_same($$SELECT g, n IS NULL AS nul, sum(n), sum(n * (1 - id / 1000.0)), avg(n * (1 - id / 1000.0)), sum(n * 2) FILTER (WHERE id > 3), avg(n + 1), avg(n - 1), avg(id::int8 * 3), sum(id::int8 * 3), avg(id + g), count(*) FROM agn WHERE id <> 7 GROUP BY 1, 2$$,
               $$SELECT g, n IS NULL AS nul, sum(n), sum(n * (1 - id / 1000.0)), avg(n * (1 - id / 1000.0)), sum(n * 2) FILTER (WHERE id > 3), avg(n + 1), avg(n - 1), avg(id::int8 * 3), sum(id::int8 * 3), avg(id + g), count(*) FROM agn_local WHERE id <> 7 GROUP BY 1, 2$$);
SELECT g, n IS NULL AS nul, sum(n * 2), avg(n - 1), count(n + 1), count(*) FROM agn GROUP BY 1, 2 ORDER BY 1, 2;
SELECT g, n IS NULL AS nul, sum(n * 2), avg(n - 1), count(n + 1), count(*) FROM agn_local GROUP BY 1, 2 ORDER BY 1, 2;
SELECT rows_same($$SELECT sum(n * 2), avg(n - 1), avg(id * 2) FROM agn WHERE id > 5000$$,
               $$SELECT sum(n * 2), avg(n - 1), avg(id * 2) FROM agn_local WHERE id > 5000$$);
-- HAVING stays above the partial aggregates; an argument grouped by too.
SELECT rows_same($$SELECT n * 2 AS m, sum(n * 2), avg(n * 2) FROM agn GROUP BY n * 2 HAVING sum(n * 2) > 100 OR count(*) > 1$$,
               $$SELECT n * 2 AS m, sum(n * 2), avg(n * 2) FROM agn_local GROUP BY n * 2 HAVING sum(n * 2) > 100 OR count(*) > 1$$);
-- A remote join grouped, and a semi-join: the join under the subquery.
SELECT ag_remote_sql($$SELECT a.g, sum(a.n * (1 - b.id / 1000.0)), avg(a.n + b.n) FROM agn a JOIN agn b ON a.id = b.id GROUP BY a.g$$);
SELECT rows_same($$SELECT a.g, sum(a.n * (1 - b.id / 1000.0)), avg(a.n + b.n), count(*) FROM agn a JOIN agn b ON a.id = b.id GROUP BY a.g$$,
               $$SELECT a.g, sum(a.n * (1 - b.id / 1000.0)), avg(a.n + b.n), count(*) FROM agn_local a JOIN agn_local b ON a.id = b.id GROUP BY a.g$$);
SELECT ag_remote_sql($$SELECT a.g, avg(a.n * 2) FROM agn a WHERE EXISTS (SELECT FROM agn b WHERE b.id = a.id AND b.g = 1) GROUP BY a.g$$);
SELECT rows_same($$SELECT a.g, avg(a.n * 2), sum(a.n - 1) FROM agn a WHERE EXISTS (SELECT FROM agn b WHERE b.id = a.id AND b.g = 1) GROUP BY a.g$$,
               $$SELECT a.g, avg(a.n * 2), sum(a.n - 1) FROM agn_local a WHERE EXISTS (SELECT FROM agn_local b WHERE b.id = a.id AND b.g = 1) GROUP BY a.g$$);
-- An error in the argument is still the remote's, naming the table.
SELECT avg(100 / (id - 451)) FROM agn;
DROP TABLE agn, agn_local, remote.agn1, remote.agn2, remote.agn3;
DROP FUNCTION ag_remote_sql(text);

-- 4. An aggregate without a partial form keeps the plan that pulls rows,
-- through the asynchronous Append; so does async_fdw.partitionwise_aggregate
-- off.  enable_partitionwise_aggregate on makes the same choice.
EXPLAIN (COSTS OFF) SELECT count(*), stddev(f) FROM ag;
EXPLAIN (COSTS OFF) SELECT count(DISTINCT t) FROM ag;
SELECT rows_same($$SELECT count(*), sum(n), count(DISTINCT t) FROM ag$$,
               $$SELECT count(*), sum(n), count(DISTINCT t) FROM ag_local$$);
SET async_fdw.partitionwise_aggregate = off;
EXPLAIN (COSTS OFF) SELECT count(*) FROM ag;
SET enable_partitionwise_aggregate = on;
EXPLAIN (COSTS OFF) SELECT g, count(*) FROM ag GROUP BY g;
RESET enable_partitionwise_aggregate;
RESET async_fdw.partitionwise_aggregate;

-- 5. A remote error in an aggregate names the table.
SELECT sum(100 / (id - 7)) FROM ag1;
SELECT sum(100 / (id - 450)) FROM ag;

-- 6. Each fetch mode, and a parameter sent with the aggregate.
ALTER FOREIGN TABLE ag1 OPTIONS (ADD fetch_mode 'cursor', ADD fetch_size '2');
SELECT rows_same($$SELECT g, count(*), sum(i8) FROM ag1 GROUP BY g$$,
               $$SELECT g, count(*), sum(i8) FROM remote.ag1 GROUP BY g$$);
ALTER FOREIGN TABLE ag1 OPTIONS (DROP fetch_mode, DROP fetch_size);
PREPARE ag_q(int) AS SELECT count(*), sum(i4) FROM ag WHERE id > $1;
EXPLAIN (VERBOSE, COSTS OFF) EXECUTE ag_q(10);
EXECUTE ag_q(10);
SELECT count(*), sum(i4) FROM ag_local WHERE id > 10;
SET plan_cache_mode = force_generic_plan;
EXPLAIN (VERBOSE, COSTS OFF) EXECUTE ag_q(10);
EXECUTE ag_q(10);
-- A condition on a parameter alone is checked above the scan: the
-- aggregate stays local (it was lost when sent, as in postgres_fdw before
-- 15.4).
PREPARE ag_g(int) AS SELECT count(*) FROM ag1 WHERE id < 50 AND 10 / ($1 % 4) > 0;
EXPLAIN (COSTS OFF) EXECUTE ag_g(8);
EXECUTE ag_g(8);
EXECUTE ag_g(3);
DEALLOCATE ag_g;
RESET plan_cache_mode;
DEALLOCATE ag_q;
SELECT x, (SELECT count(*) FROM ag1 WHERE g = x) FROM generate_series(0, 2) x;
