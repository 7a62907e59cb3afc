--
-- final_limit: the LIMIT and OFFSET of a query sent in the remote query in
-- place of the local Limit node, when they are all that is left to do
-- after a foreign table's scan, a remote join or a remote aggregate; sort
-- keys that are constants of a UNION ALL branch; ORDER BY ... USING an
-- operator of a listed extension.  Rows are compared with the same query
-- on local tables holding the same rows.
--
CREATE TABLE remote.fl1 (a int, b int, c text);
CREATE TABLE remote.fl2 (a int, b int, c text);
INSERT INTO remote.fl1
  SELECT g, g % 13, CASE WHEN g % 9 = 0 THEN NULL ELSE to_char(g, 'FM0000') END
    FROM generate_series(1, 300) g;
INSERT INTO remote.fl2
  SELECT g, g % 7, to_char(g, 'FM0000') FROM generate_series(150, 500) g;
CREATE TABLE fl1_local AS SELECT * FROM remote.fl1;
CREATE TABLE fl2_local AS SELECT * FROM remote.fl2;
CREATE FOREIGN TABLE fl1 (a int, b int, c text)
  SERVER loopback OPTIONS (schema_name 'remote', table_name 'fl1');
CREATE FOREIGN TABLE fl2 (a int, b int, c text)
  SERVER loopback2 OPTIONS (schema_name 'remote', table_name 'fl2');
ANALYZE fl1, fl2;
CREATE TABLE fl_result (a int, b int, c text);

-- 1. A UNION branch with ORDER BY and LIMIT: the branch's remote query has
-- the LIMIT, no Limit node is above its scan, and both branches run
-- asynchronously under the Append.
EXPLAIN (VERBOSE, COSTS OFF)
(SELECT a, b, 'AAA' || c FROM fl1 ORDER BY a LIMIT 10)
UNION ALL
(SELECT a, b, 'AAA' || c FROM fl2 WHERE b < 2);
SELECT rows_same($$(SELECT a, b, 'AAA' || c FROM fl1 ORDER BY a LIMIT 10) UNION ALL (SELECT a, b, 'AAA' || c FROM fl2 WHERE b < 2)$$,
                 $$(SELECT a, b, 'AAA' || c FROM fl1_local ORDER BY a LIMIT 10) UNION ALL (SELECT a, b, 'AAA' || c FROM fl2_local WHERE b < 2)$$);
EXPLAIN (VERBOSE, COSTS OFF)
INSERT INTO fl_result
(SELECT a, b, 'AAA' || c FROM fl1 ORDER BY a DESC LIMIT 10 OFFSET 3)
UNION
(SELECT a, b, 'AAA' || c FROM fl2 ORDER BY a LIMIT 5);
INSERT INTO fl_result
(SELECT a, b, 'AAA' || c FROM fl1 ORDER BY a DESC LIMIT 10 OFFSET 3)
UNION
(SELECT a, b, 'AAA' || c FROM fl2 ORDER BY a LIMIT 5);
SELECT rows_same($$SELECT * FROM fl_result$$,
                 $$(SELECT a, b, 'AAA' || c FROM fl1_local ORDER BY a DESC LIMIT 10 OFFSET 3) UNION (SELECT a, b, 'AAA' || c FROM fl2_local ORDER BY a LIMIT 5)$$);
SELECT count(*) FROM fl_result;

-- 2. LIMIT 0, LIMIT NULL, LIMIT ALL, OFFSET alone, a LIMIT with an OFFSET
-- past the rows: the remote query has them as written.
EXPLAIN (VERBOSE, COSTS OFF) SELECT a FROM fl1 ORDER BY a LIMIT 0;
SELECT count(*) FROM (SELECT a FROM fl1 ORDER BY a LIMIT 0) s;
EXPLAIN (VERBOSE, COSTS OFF) SELECT a, c FROM fl1 ORDER BY c NULLS FIRST, a LIMIT NULL OFFSET 290;
SELECT rows_in_order($$SELECT a, c FROM fl1 ORDER BY c NULLS FIRST, a LIMIT NULL OFFSET 290$$,
                     $$SELECT a, c FROM fl1_local ORDER BY c NULLS FIRST, a LIMIT NULL OFFSET 290$$);
EXPLAIN (VERBOSE, COSTS OFF) SELECT a FROM fl1 ORDER BY a DESC OFFSET 295;
SELECT rows_in_order($$SELECT a FROM fl1 ORDER BY a DESC OFFSET 295$$,
                     $$SELECT a FROM fl1_local ORDER BY a DESC OFFSET 295$$);
SELECT rows_in_order($$SELECT a FROM fl1 ORDER BY a LIMIT ALL OFFSET 297$$,
                     $$SELECT a FROM fl1_local ORDER BY a LIMIT ALL OFFSET 297$$);
SELECT count(*) FROM (SELECT a FROM fl1 ORDER BY a LIMIT 5 OFFSET 1000) s;
-- Without an ORDER BY: as many rows, all of the table's.
EXPLAIN (VERBOSE, COSTS OFF) SELECT a FROM fl1 WHERE b = 3 LIMIT 4;
SELECT count(*), bool_and(a % 13 = 3) FROM (SELECT a FROM fl1 WHERE b = 3 LIMIT 4) s;
-- In each fetch mode, and across batches.
ALTER FOREIGN TABLE fl1 OPTIONS (ADD fetch_mode 'stream');
SELECT rows_in_order($$SELECT a, c FROM fl1 ORDER BY c DESC, a LIMIT 40 OFFSET 7$$,
                     $$SELECT a, c FROM fl1_local ORDER BY c DESC, a LIMIT 40 OFFSET 7$$);
ALTER FOREIGN TABLE fl1 OPTIONS (SET fetch_mode 'cursor', ADD fetch_size '6');
SELECT rows_in_order($$SELECT a, c FROM fl1 ORDER BY c DESC, a LIMIT 40 OFFSET 7$$,
                     $$SELECT a, c FROM fl1_local ORDER BY c DESC, a LIMIT 40 OFFSET 7$$);
ALTER FOREIGN TABLE fl1 OPTIONS (DROP fetch_mode, DROP fetch_size);

-- 3. Parameters of a generic plan: the LIMIT and OFFSET are sent as
-- values, next to a condition's; the statement is not prepared remotely
-- (its LIMIT would be a second one).
PREPARE fl_par(int, bigint, bigint) AS
  SELECT a, b FROM fl1 WHERE a > $1 ORDER BY b, a LIMIT $2 OFFSET $3;
SET plan_cache_mode = force_generic_plan;
EXPLAIN (VERBOSE, COSTS OFF) EXECUTE fl_par(10, 5, 2);
EXECUTE fl_par(10, 5, 2);
SELECT a, b FROM fl1_local WHERE a > 10 ORDER BY b, a LIMIT 5 OFFSET 2;
EXECUTE fl_par(250, 3, 0);
SELECT a, b FROM fl1_local WHERE a > 250 ORDER BY b, a LIMIT 3 OFFSET 0;
EXECUTE fl_par(250, NULL, 45);
SELECT a, b FROM fl1_local WHERE a > 250 ORDER BY b, a LIMIT NULL OFFSET 45;
EXECUTE fl_par(0, 0, 0);
RESET plan_cache_mode;
DEALLOCATE fl_par;

-- A correlated subquery's scan, rerun with each outer row's value: run as
-- a statement prepared with its own LIMIT when that keeps it within
-- fetch_size rows, as a cursor otherwise; the rows are the same.
CREATE VIEW remote.fl1_q AS SELECT f.*, current_query() AS q FROM remote.fl1 f;
CREATE FOREIGN TABLE fl1_q (a int, b int, c text, q text)
  SERVER loopback OPTIONS (schema_name 'remote', table_name 'fl1_q', fetch_size '5');
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT k, (SELECT q FROM fl1_q WHERE b = k ORDER BY a DESC LIMIT 1 OFFSET 2) FROM generate_series(1, 3) k;
SELECT k, (SELECT a FROM fl1_q WHERE b = k ORDER BY a DESC LIMIT 1 OFFSET 2),
       (SELECT regexp_replace(regexp_replace(q, '^.*?(PREPARE|EXECUTE|DECLARE)', '\1'), 'afdw_s\d+', 'afdw_sN', 'g')
          FROM fl1_q WHERE b = k ORDER BY a DESC LIMIT 1 OFFSET 2) AS remote_query
  FROM generate_series(1, 3) k ORDER BY k;
SELECT k, (SELECT a FROM fl1_local WHERE b = k ORDER BY a DESC LIMIT 1 OFFSET 2)
  FROM generate_series(1, 3) k ORDER BY k;
SELECT k, (SELECT sum(a) FROM (SELECT a FROM fl1_q WHERE b = k ORDER BY a LIMIT 12) s),
       (SELECT bool_and(q LIKE '%DECLARE%') FROM (SELECT q FROM fl1_q WHERE b = k ORDER BY a LIMIT 12) s) AS cursor
  FROM generate_series(1, 3) k ORDER BY k;
SELECT k, (SELECT sum(a) FROM (SELECT a FROM fl1_local WHERE b = k ORDER BY a LIMIT 12) s)
  FROM generate_series(1, 3) k ORDER BY k;
DROP FOREIGN TABLE fl1_q;
DROP VIEW remote.fl1_q;

-- 4. A remote join and a remote aggregate as UNION branches: sent whole,
-- with their ORDER BY and LIMIT, asynchronous too.
EXPLAIN (VERBOSE, COSTS OFF)
(SELECT x.a, y.b FROM fl1 x JOIN fl1 y ON x.a = y.b + 100 ORDER BY x.a LIMIT 3)
UNION ALL
(SELECT b, count(*)::int FROM fl2 GROUP BY b ORDER BY b DESC LIMIT 2 OFFSET 1);
SELECT rows_same($$(SELECT x.a, y.b FROM fl1 x JOIN fl1 y ON x.a = y.b + 100 ORDER BY x.a LIMIT 3) UNION ALL (SELECT b, count(*)::int FROM fl2 GROUP BY b ORDER BY b DESC LIMIT 2 OFFSET 1)$$,
                 $$(SELECT x.a, y.b FROM fl1_local x JOIN fl1_local y ON x.a = y.b + 100 ORDER BY x.a LIMIT 3) UNION ALL (SELECT b, count(*)::int FROM fl2_local GROUP BY b ORDER BY b DESC LIMIT 2 OFFSET 1)$$);

-- 5. The Limit node stays: WITH TIES (the ties past the limit count), a
-- condition checked locally, a set-returning function in the select list,
-- a LIMIT computed by a subquery or by a volatile function, a negative
-- LIMIT (refused locally).  Row locks do not keep it: the remote query
-- locks the rows (join_rowmarks.sql).  A LIMIT expression the remote
-- can compute is sent.
EXPLAIN (VERBOSE, COSTS OFF) SELECT a, b FROM fl1 ORDER BY b FETCH FIRST 3 ROWS WITH TIES;
SELECT rows_same($$SELECT a, b FROM fl1 ORDER BY b FETCH FIRST 3 ROWS WITH TIES$$,
                 $$SELECT a, b FROM fl1_local ORDER BY b FETCH FIRST 3 ROWS WITH TIES$$);
EXPLAIN (VERBOSE, COSTS OFF) SELECT a FROM fl1 WHERE a::text || 'x' = c || random()::text ORDER BY a LIMIT 2;
EXPLAIN (VERBOSE, COSTS OFF) SELECT a FROM fl1 ORDER BY a LIMIT 2 FOR UPDATE;
EXPLAIN (VERBOSE, COSTS OFF) SELECT a, generate_series(1, 2) FROM fl1 ORDER BY a LIMIT 3;
EXPLAIN (VERBOSE, COSTS OFF) SELECT a FROM fl1 ORDER BY a LIMIT (SELECT 2);
EXPLAIN (VERBOSE, COSTS OFF) SELECT a FROM fl1 ORDER BY a LIMIT (random() * 0)::int + 2;
EXPLAIN (VERBOSE, COSTS OFF) SELECT a FROM fl1 ORDER BY a LIMIT 1 + 1 OFFSET abs(-3);
SELECT a FROM fl1 ORDER BY a LIMIT 1 + 1 OFFSET abs(-3);
SELECT a FROM fl1 ORDER BY a LIMIT -1;

-- 6. Sort keys that are constants of a UNION ALL branch are not sent (1
-- AS type, not ORDER BY 1, which names a column); the others are, and a
-- Merge Append merges the branches.
EXPLAIN (VERBOSE, COSTS OFF)
SELECT * FROM (SELECT 1 AS type, a FROM fl1 UNION ALL SELECT 2 AS type, a FROM fl2) s
 ORDER BY type, a;
SELECT rows_in_order($$SELECT * FROM (SELECT 1 AS type, a FROM fl1 UNION ALL SELECT 2 AS type, a FROM fl2) s ORDER BY type, a$$,
                     $$SELECT * FROM (SELECT 1 AS type, a FROM fl1_local UNION ALL SELECT 2 AS type, a FROM fl2_local) s ORDER BY type, a$$);
EXPLAIN (VERBOSE, COSTS OFF)
SELECT * FROM (SELECT 1 AS type, a FROM fl1 UNION ALL SELECT 2 AS type, a FROM fl2) s
 ORDER BY type;
SELECT rows_in_order($$SELECT * FROM (SELECT 1 AS type, a FROM fl1 UNION ALL SELECT 2 AS type, a FROM fl2) s ORDER BY a DESC, type LIMIT 20$$,
                     $$SELECT * FROM (SELECT 1 AS type, a FROM fl1_local UNION ALL SELECT 2 AS type, a FROM fl2_local) s ORDER BY a DESC, type LIMIT 20$$);

-- 7. ORDER BY ... USING an operator of an operator family: sent with
-- USING when the family and the operator belong to an extension the
-- server's extensions option lists, sorted locally otherwise.
CREATE EXTENSION IF NOT EXISTS citext;
CREATE FUNCTION fl_lt(int, int) RETURNS boolean LANGUAGE sql IMMUTABLE AS 'SELECT $1 < $2';
CREATE FUNCTION fl_gt(int, int) RETURNS boolean LANGUAGE sql IMMUTABLE AS 'SELECT $1 > $2';
CREATE FUNCTION fl_cmp(int, int) RETURNS int LANGUAGE sql IMMUTABLE AS 'SELECT btint4cmp($1, $2)';
CREATE OPERATOR public.<% (LEFTARG = int, RIGHTARG = int, FUNCTION = fl_lt);
CREATE OPERATOR public.>% (LEFTARG = int, RIGHTARG = int, FUNCTION = fl_gt);
CREATE OPERATOR FAMILY fl_family USING btree;
CREATE OPERATOR CLASS fl_class FOR TYPE int USING btree FAMILY fl_family AS
  OPERATOR 1 public.<%, OPERATOR 3 =, OPERATOR 5 public.>%, FUNCTION 1 fl_cmp(int, int);
ALTER SERVER loopback2 OPTIONS (ADD extensions 'citext');
-- Not in the extension: sorted locally.
EXPLAIN (VERBOSE, COSTS OFF) SELECT a FROM fl2 ORDER BY a USING OPERATOR(public.<%) LIMIT 3;
ALTER EXTENSION citext ADD OPERATOR FAMILY fl_family USING btree;
ALTER EXTENSION citext ADD OPERATOR CLASS fl_class USING btree;
ALTER EXTENSION citext ADD OPERATOR public.<%(int, int);
ALTER EXTENSION citext ADD OPERATOR public.>%(int, int);
ALTER EXTENSION citext ADD FUNCTION fl_lt(int, int);
ALTER EXTENSION citext ADD FUNCTION fl_gt(int, int);
ALTER EXTENSION citext ADD FUNCTION fl_cmp(int, int);
EXPLAIN (VERBOSE, COSTS OFF) SELECT a FROM fl2 ORDER BY a USING OPERATOR(public.<%) LIMIT 3;
SELECT rows_in_order($$SELECT a FROM fl2 ORDER BY a USING OPERATOR(public.<%) LIMIT 3$$,
                     $$SELECT a FROM fl2_local ORDER BY a LIMIT 3$$);
EXPLAIN (VERBOSE, COSTS OFF) SELECT a, b FROM fl2 ORDER BY b USING OPERATOR(public.>%) NULLS LAST, a;
SELECT rows_in_order($$SELECT a, b FROM fl2 ORDER BY b USING OPERATOR(public.>%) NULLS LAST, a$$,
                     $$SELECT a, b FROM fl2_local ORDER BY b DESC NULLS LAST, a$$);
-- A stream's wrapper sorts the same way (the first stream checks the
-- remote types, the second is binary); by a cursor too.
ALTER FOREIGN TABLE fl2 OPTIONS (ADD fetch_mode 'stream');
SELECT rows_in_order($$SELECT a, b FROM fl2 ORDER BY b USING OPERATOR(public.>%), a DESC$$,
                     $$SELECT a, b FROM fl2_local ORDER BY b DESC, a DESC$$);
SELECT rows_in_order($$SELECT a, b FROM fl2 ORDER BY b USING OPERATOR(public.>%), a DESC$$,
                     $$SELECT a, b FROM fl2_local ORDER BY b DESC, a DESC$$);
ALTER FOREIGN TABLE fl2 OPTIONS (SET fetch_mode 'cursor');
SELECT rows_in_order($$SELECT a, b FROM fl2 ORDER BY b USING OPERATOR(public.>%), a DESC$$,
                     $$SELECT a, b FROM fl2_local ORDER BY b DESC, a DESC$$);
ALTER FOREIGN TABLE fl2 OPTIONS (DROP fetch_mode);
ALTER SERVER loopback2 OPTIONS (DROP extensions);
-- No longer listed: sorted locally.
EXPLAIN (VERBOSE, COSTS OFF) SELECT a FROM fl2 ORDER BY a USING OPERATOR(public.<%) LIMIT 3;

-- 8. A cross join whose remote path lost to a local join before the
-- LIMIT was known (its remote sort and transfer of every row cost more):
-- with the LIMIT and OFFSET sent, the remote join returns the ten rows.
-- The same without ORDER BY.
CREATE TABLE remote.fl3 (a int PRIMARY KEY, b int);
INSERT INTO remote.fl3 SELECT g, g % 10 FROM generate_series(1, 1000) g;
CREATE TABLE fl3_local AS SELECT * FROM remote.fl3;
CREATE FOREIGN TABLE fl3 (a int, b int)
  SERVER loopback OPTIONS (schema_name 'remote', table_name 'fl3');
ANALYZE fl3;
EXPLAIN (VERBOSE, COSTS OFF)
SELECT x.a, y.a FROM fl3 x CROSS JOIN fl3 y ORDER BY x.a, y.a OFFSET 100 LIMIT 10;
SELECT rows_in_order($$SELECT x.a, y.a FROM fl3 x CROSS JOIN fl3 y ORDER BY x.a, y.a OFFSET 100 LIMIT 10$$,
                     $$SELECT x.a, y.a FROM fl3_local x CROSS JOIN fl3_local y ORDER BY x.a, y.a OFFSET 100 LIMIT 10$$);
EXPLAIN (VERBOSE, COSTS OFF)
SELECT x.a, y.b FROM fl3 x CROSS JOIN fl3 y LIMIT 4;
SELECT count(*) FROM (SELECT x.a, y.b FROM fl3 x CROSS JOIN fl3 y LIMIT 4) s;
DROP FOREIGN TABLE fl3;
DROP TABLE fl3_local, remote.fl3;

-- 9. A scan that carries the query's LIMIT (a subplan in the select list
-- keeps the LIMIT from the final stage) and runs as one command: a LIMIT
-- above fetch_size + 1 is not given a second one (it was: "syntax error
-- at or near LIMIT", found by 005_differential.pl), one within it runs as
-- it is.  The partitioned table is pruned to one partition.
CREATE TABLE remote.fl4a (id int, k int);
INSERT INTO remote.fl4a SELECT g, g % 13 FROM generate_series(1, 300) g;
CREATE TABLE remote.fl4b (id int, k int, s text);
INSERT INTO remote.fl4b SELECT g, g % 10, 'abc' || g FROM generate_series(1, 60) g;
CREATE TABLE fl4 (id int, k int) PARTITION BY RANGE (id);
CREATE FOREIGN TABLE fl4_1 PARTITION OF fl4 FOR VALUES FROM (1) TO (301)
  SERVER loopback OPTIONS (schema_name 'remote', table_name 'fl4a', fetch_size '7');
CREATE FOREIGN TABLE fl4_2 PARTITION OF fl4 FOR VALUES FROM (301) TO (601)
  SERVER loopback2 OPTIONS (schema_name 'remote', table_name 'fl4a');
CREATE FOREIGN TABLE fl4b (id int, k int, s text)
  SERVER loopback2 OPTIONS (schema_name 'remote', table_name 'fl4b');
ANALYZE fl4, fl4b;
SELECT a.id, (SELECT string_agg(b.s, ',' ORDER BY b.id) FROM fl4b b WHERE b.k = a.k)
  FROM fl4 a WHERE a.id < 3 ORDER BY a.id LIMIT 30;
SELECT a.id, (SELECT string_agg(b.s, ',' ORDER BY b.id) FROM fl4b b WHERE b.k = a.k)
  FROM fl4 a WHERE a.id < 3 ORDER BY a.id LIMIT 5;
SELECT a.id, (SELECT string_agg(b.s, ',' ORDER BY b.id) FROM remote.fl4b b WHERE b.k = a.k)
  FROM remote.fl4a a WHERE a.id < 3 ORDER BY a.id LIMIT 30;
DROP TABLE fl4;
DROP FOREIGN TABLE fl4b;
DROP TABLE remote.fl4a, remote.fl4b;

DROP EXTENSION citext CASCADE;
DROP FOREIGN TABLE fl1, fl2;
DROP TABLE fl1_local, fl2_local, fl_result, remote.fl1, remote.fl2;
