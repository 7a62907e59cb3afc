--
-- scan: remote SELECT of only the needed columns, batches of fetch_size,
-- names from schema_name / table_name / column_name, rescans
--
CREATE TABLE remote."Mixed Case" ("Id" int, "the value" text, unused text);
INSERT INTO remote."Mixed Case"
  SELECT g, 'value ' || g, repeat('x', 100) FROM generate_series(1, 250) g;
CREATE FOREIGN TABLE ft_named (
  id int OPTIONS (column_name 'Id'),
  val text OPTIONS (column_name 'the value'),
  unused text)
  SERVER loopback OPTIONS (schema_name 'remote', table_name 'Mixed Case');

-- Only the columns the query needs travel, under their remote names.
EXPLAIN (VERBOSE, COSTS OFF) SELECT id, val FROM ft_named;
EXPLAIN (VERBOSE, COSTS OFF) SELECT val FROM ft_named WHERE id = 7;
EXPLAIN (VERBOSE, COSTS OFF) SELECT count(*) FROM ft_named;
EXPLAIN (VERBOSE, COSTS OFF) SELECT t FROM ft_named t WHERE id = 1;
SELECT val FROM ft_named WHERE id = 7;
SELECT count(*), sum(id), min(val), max(val) FROM ft_named;
SELECT count(*), sum("Id"), min("the value"), max("the value") FROM remote."Mixed Case";
SELECT t FROM ft_named t WHERE id = 1;

-- Without schema_name and table_name the local names are used.
CREATE SCHEMA same_name;
CREATE TABLE same_name.tab (a int);
INSERT INTO same_name.tab VALUES (1), (2);
CREATE FOREIGN TABLE same_name.ftab (a int) SERVER loopback OPTIONS (table_name 'tab');
EXPLAIN (VERBOSE, COSTS OFF) SELECT * FROM same_name.ftab;
SELECT * FROM same_name.ftab ORDER BY a;
DROP SCHEMA same_name CASCADE;

-- Batches: fetch_size from the table, else the server, else 100.
SELECT count(*), sum(id) FROM ft_named;
ALTER FOREIGN TABLE ft_named OPTIONS (ADD fetch_size '7');
SELECT count(*), sum(id) FROM ft_named;
ALTER FOREIGN TABLE ft_named OPTIONS (SET fetch_size '250');
SELECT count(*), sum(id) FROM ft_named;
ALTER FOREIGN TABLE ft_named OPTIONS (SET fetch_size '251');
SELECT count(*), sum(id) FROM ft_named;
ALTER FOREIGN TABLE ft_named OPTIONS (DROP fetch_size);
ALTER SERVER loopback OPTIONS (ADD fetch_size '1');
SELECT count(*), sum(id) FROM ft_named;
ALTER SERVER loopback OPTIONS (DROP fetch_size);

-- The batch size shows in the remote FETCH commands.
CREATE FUNCTION remote.report_query() RETURNS text LANGUAGE sql AS $$
  SELECT query FROM pg_stat_activity WHERE pid = pg_backend_pid()
$$;
CREATE VIEW remote.current_query AS SELECT remote.report_query() AS q;
CREATE FOREIGN TABLE ft_query (q text) SERVER loopback
  OPTIONS (schema_name 'remote', table_name 'current_query', fetch_size '33');
SELECT q FROM ft_query;
ALTER SERVER loopback OPTIONS (ADD fetch_size '44');
SELECT q FROM ft_query;
ALTER FOREIGN TABLE ft_query OPTIONS (DROP fetch_size);
SELECT q FROM ft_query;
ALTER SERVER loopback OPTIONS (DROP fetch_size);
SELECT q FROM ft_query;

-- Empty tables and empty results.
CREATE TABLE remote.empty (a int);
CREATE FOREIGN TABLE ft_empty (a int) SERVER loopback
  OPTIONS (schema_name 'remote', table_name 'empty');
SELECT * FROM ft_empty;
SELECT count(*) FROM ft_empty;
SELECT * FROM ft1 WHERE id < 0;

-- Dropped columns locally and remotely.
CREATE TABLE remote.dropcols (a int, b int, c int);
INSERT INTO remote.dropcols VALUES (1, 2, 3);
ALTER TABLE remote.dropcols DROP COLUMN b;
CREATE FOREIGN TABLE ft_dropcols (a int, x int, c int) SERVER loopback
  OPTIONS (schema_name 'remote', table_name 'dropcols');
ALTER FOREIGN TABLE ft_dropcols DROP COLUMN x;
SELECT * FROM ft_dropcols;
SELECT ft_dropcols FROM ft_dropcols;

-- LIMIT stops early; the connection is clean afterwards.
SELECT id FROM ft1 ORDER BY id LIMIT 3;
SELECT id FROM ft1 LIMIT 0;
SELECT count(*) FROM (SELECT id FROM ft1 LIMIT 150) s;

-- Rescans: the foreign table inside a nested loop, with parameters that
-- change and without.
CREATE TEMP TABLE outer_ids (x int);
INSERT INTO outer_ids VALUES (3), (1), (3), (999), (1001);
ANALYZE outer_ids;
SET enable_hashjoin = off;
SET enable_mergejoin = off;
SET enable_memoize = off;
SET enable_material = off;
-- Parameter changes on every rescan.
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT o.x, f.v FROM outer_ids o JOIN ft1 f ON f.id = o.x;
SELECT o.x, f.v FROM outer_ids o JOIN ft1 f ON f.id = o.x ORDER BY 1, 2;
SELECT o.x, f.v FROM outer_ids o JOIN remote.t1 f ON f.id = o.x ORDER BY 1, 2;
-- Non-equality join clauses travel as parameters too.
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT o.x, f.id FROM outer_ids o JOIN ft1 f ON f.id BETWEEN o.x - 1 AND o.x + 1;
SELECT o.x, f.id FROM outer_ids o JOIN ft1 f ON f.id BETWEEN o.x - 1 AND o.x + 1 ORDER BY 1, 2;
SELECT o.x, f.id FROM outer_ids o JOIN remote.t1 f ON f.id BETWEEN o.x - 1 AND o.x + 1 ORDER BY 1, 2;
-- No parameter: the same rows on every rescan, within one batch and over
-- several.
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT o.x, count(*) FROM outer_ids o, ft1 f WHERE f.id < 5 GROUP BY o.x;
SELECT o.x, count(*) FROM outer_ids o, ft1 f WHERE f.id < 5 GROUP BY o.x ORDER BY 1;
SELECT o.x, count(*), sum(f.id) FROM outer_ids o, ft1 f WHERE f.id <= 250 GROUP BY o.x ORDER BY 1;
-- LATERAL with a LIMIT: partial reads on each rescan.
SELECT o.x, l.id FROM outer_ids o,
  LATERAL (SELECT id FROM ft1 WHERE id > o.x ORDER BY id LIMIT 2) l ORDER BY 1, 2;
-- A correlated subquery: a PARAM_EXEC set by the outer query.
SELECT o.x, (SELECT v FROM ft1 WHERE id = o.x) FROM outer_ids o ORDER BY 1;
-- Parameter values of every shape travel as literals: quotes, backslashes,
-- a "$1" of their own, NULL; and a constant "$1" in the remote SQL stays.
CREATE TABLE remote.odd (id int, t text);
INSERT INTO remote.odd VALUES (1, 'it''s'), (2, 'back\slash'), (3, '$1 and $2'),
  (4, E'line\nbreak'), (5, NULL), (6, 'x$1y');
CREATE FOREIGN TABLE ft_odd (id int, t text) SERVER loopback
  OPTIONS (schema_name 'remote', table_name 'odd');
CREATE TEMP TABLE odd_keys AS SELECT id, t FROM remote.odd;
ANALYZE odd_keys;
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT k.id, f.t FROM odd_keys k JOIN ft_odd f ON f.t = k.t AND f.t <> 'x$1y';
SELECT k.id, f.t FROM odd_keys k JOIN ft_odd f ON f.t = k.t AND f.t <> 'x$1y' ORDER BY 1;
SELECT k.id, f.t FROM odd_keys k JOIN remote.odd f ON f.t = k.t AND f.t <> 'x$1y' ORDER BY 1;
SELECT k.id, f.id FROM odd_keys k JOIN ft_odd f ON f.t IS NOT DISTINCT FROM k.t ORDER BY 1;
DROP FOREIGN TABLE ft_odd;
DROP TABLE remote.odd, odd_keys;
RESET enable_hashjoin;
RESET enable_mergejoin;
RESET enable_memoize;
RESET enable_material;

-- Prepared statements with changing parameters, through the generic plan.
SET plan_cache_mode = force_generic_plan;
PREPARE by_id(int) AS SELECT id, v FROM ft1 WHERE id = $1;
EXPLAIN (VERBOSE, COSTS OFF) EXECUTE by_id(1);
EXECUTE by_id(1);
EXECUTE by_id(500);
EXECUTE by_id(NULL);
PREPARE by_range(int, int) AS SELECT count(*) FROM ft1 WHERE id BETWEEN $1 AND $2;
EXECUTE by_range(1, 10);
EXECUTE by_range(990, 2000);
DEALLOCATE by_id;
DEALLOCATE by_range;
RESET plan_cache_mode;

-- An initplan's value as a parameter.
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT v FROM ft1 WHERE id = (SELECT max(x) FROM outer_ids WHERE x < 1000);
SELECT v FROM ft1 WHERE id = (SELECT max(x) FROM outer_ids WHERE x < 1000);

-- A local cursor over a foreign table: partial reads, rewinds, CLOSE.
BEGIN;
DECLARE c SCROLL CURSOR FOR SELECT id FROM ft1 WHERE id <= 5;
FETCH 2 FROM c;
FETCH PRIOR FROM c;
FETCH ALL FROM c;
FETCH FIRST FROM c;
CLOSE c;
COMMIT;

DROP FOREIGN TABLE ft_named, ft_query, ft_empty, ft_dropcols;
DROP VIEW remote.current_query;
DROP FUNCTION remote.report_query();
DROP TABLE remote."Mixed Case", remote.empty, remote.dropcols, outer_ids;
