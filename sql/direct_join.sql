--
-- direct_join: an UPDATE ... FROM or DELETE ... USING whose tables are all
-- foreign tables of one server is sent as one remote statement joining
-- them (a direct modification over a remote join), when the join's
-- conditions, the new values and what RETURNING reads allow it; otherwise
-- the rows are changed one by one as before.  Every statement also runs
-- on local copies, and the remote tables are compared with them after.
--
CREATE TABLE remote.jt (id int PRIMARY KEY, b int, c text);
CREATE TABLE remote.js (id int PRIMARY KEY, k int, v text);
CREATE TABLE remote.ju (k int PRIMARY KEY, w text);
INSERT INTO remote.jt SELECT g, g % 10, 't' || g FROM generate_series(1, 200) g;
INSERT INTO remote.js SELECT g, g % 20, 's' || g FROM generate_series(1, 60) g;
INSERT INTO remote.ju SELECT g, 'u' || g FROM generate_series(0, 9) g;
CREATE TABLE jt_local AS SELECT * FROM remote.jt;
CREATE TABLE js_local AS SELECT * FROM remote.js;
CREATE TABLE ju_local AS SELECT * FROM remote.ju;
CREATE FOREIGN TABLE jt (id int, b int, c text)
  SERVER loopback OPTIONS (schema_name 'remote', table_name 'jt');
CREATE FOREIGN TABLE js (id int, k int, v text)
  SERVER loopback OPTIONS (schema_name 'remote', table_name 'js');
CREATE FOREIGN TABLE ju (k int, w text)
  SERVER loopback OPTIONS (schema_name 'remote', table_name 'ju');
CREATE FOREIGN TABLE js2 (id int, k int, v text)
  SERVER loopback2 OPTIONS (schema_name 'remote', table_name 'js');
ANALYZE jt; ANALYZE js; ANALYZE ju;

-- UPDATE ... FROM another table of the server: one remote statement.
EXPLAIN (VERBOSE, COSTS OFF)
UPDATE jt SET b = jt.b + 100, c = js.v FROM js WHERE jt.id = js.id AND js.k = 3;
UPDATE jt SET b = jt.b + 100, c = js.v FROM js WHERE jt.id = js.id AND js.k = 3;
UPDATE jt_local jt SET b = jt.b + 100, c = js.v FROM js_local js WHERE jt.id = js.id AND js.k = 3;
SELECT rows_same('SELECT * FROM remote.jt', 'SELECT * FROM jt_local');

-- RETURNING the target's columns and tableoid.
EXPLAIN (VERBOSE, COSTS OFF)
UPDATE jt SET c = 'r' FROM js WHERE jt.id = js.id AND js.k = 4
  RETURNING jt.id, jt.c, jt.tableoid::regclass;
UPDATE jt SET c = 'r' FROM js WHERE jt.id = js.id AND js.k = 4
  RETURNING jt.id, jt.c, jt.tableoid::regclass;
UPDATE jt_local jt SET c = 'r' FROM js_local js WHERE jt.id = js.id AND js.k = 4;
UPDATE jt SET c = 'w' FROM js WHERE jt.id = js.id AND js.k = 5 RETURNING jt;
UPDATE jt_local jt SET c = 'w' FROM js_local js WHERE jt.id = js.id AND js.k = 5;
SELECT rows_same('SELECT * FROM remote.jt', 'SELECT * FROM jt_local');

-- RETURNING the other tables' columns too: the remote statement returns
-- them after the target's (ju's are null where the outer join found none).
EXPLAIN (VERBOSE, COSTS OFF)
UPDATE jt SET c = 'o' FROM js LEFT JOIN ju ON js.k = ju.k
  WHERE jt.id = js.id AND jt.id BETWEEN 6 AND 12 RETURNING js.v, jt.id, ju.w, jt.c || js.k AS x;
UPDATE jt SET c = 'o' FROM js LEFT JOIN ju ON js.k = ju.k
  WHERE jt.id = js.id AND jt.id BETWEEN 6 AND 12 RETURNING js.v, jt.id, ju.w, jt.c || js.k AS x;
UPDATE jt_local jt SET c = 'o' FROM js_local js LEFT JOIN ju_local ju ON js.k = ju.k
  WHERE jt.id = js.id AND jt.id BETWEEN 6 AND 12;
DELETE FROM jt USING js WHERE jt.id = js.id AND js.id IN (16, 17) RETURNING js.k, js.v;
DELETE FROM jt_local jt USING js_local js WHERE jt.id = js.id AND js.id IN (16, 17);
-- RETURNING of no column: no RETURNING clause, a row per changed row.
EXPLAIN (VERBOSE, COSTS OFF)
UPDATE jt SET c = 'n' FROM js WHERE jt.id = js.id AND js.id IN (19, 20, 21)
  RETURNING 1 AS one, jt.tableoid::regclass;
UPDATE jt SET c = 'n' FROM js WHERE jt.id = js.id AND js.id IN (19, 20, 21)
  RETURNING 1 AS one, jt.tableoid::regclass;
UPDATE jt_local jt SET c = 'n' FROM js_local js WHERE jt.id = js.id AND js.id IN (19, 20, 21);
EXPLAIN (VERBOSE, COSTS OFF)
UPDATE jt SET c = 'n2' WHERE id IN (22, 23) RETURNING 2 AS two;
UPDATE jt SET c = 'n2' WHERE id IN (22, 23) RETURNING 2 AS two;
UPDATE jt_local SET c = 'n2' WHERE id IN (22, 23);
-- Whole rows, null where the outer join found none.
EXPLAIN (VERBOSE, COSTS OFF)
UPDATE jt SET c = 'p' FROM js LEFT JOIN ju ON js.k = ju.k
  WHERE jt.id = js.id AND jt.id IN (8, 18) RETURNING jt, js, ju, ju IS NULL AS no_ju;
UPDATE jt SET c = 'p' FROM js LEFT JOIN ju ON js.k = ju.k
  WHERE jt.id = js.id AND jt.id IN (8, 18) RETURNING jt, js, ju, ju IS NULL AS no_ju;
UPDATE jt_local jt SET c = 'p' FROM js_local js WHERE jt.id = js.id AND jt.id IN (8, 18);
SELECT rows_same('SELECT * FROM remote.jt', 'SELECT * FROM jt_local');

-- Three tables, one an outer join among the others.
EXPLAIN (VERBOSE, COSTS OFF)
UPDATE jt SET c = js.v || ju.w FROM js LEFT JOIN ju ON js.k = ju.k
  WHERE jt.id = js.id AND jt.id > 30;
UPDATE jt SET c = js.v || ju.w FROM js LEFT JOIN ju ON js.k = ju.k
  WHERE jt.id = js.id AND jt.id > 30;
UPDATE jt_local jt SET c = js.v || ju.w FROM js_local js LEFT JOIN ju_local ju ON js.k = ju.k
  WHERE jt.id = js.id AND jt.id > 30;
SELECT rows_same('SELECT * FROM remote.jt', 'SELECT * FROM jt_local');
EXPLAIN (VERBOSE, COSTS OFF)
UPDATE jt SET b = -1 FROM js INNER JOIN ju ON js.k = ju.k
  WHERE jt.id = js.id AND ju.w = 'u7' RETURNING jt.*;
UPDATE jt SET b = -1 FROM js INNER JOIN ju ON js.k = ju.k
  WHERE jt.id = js.id AND ju.w = 'u7' RETURNING jt.*;
UPDATE jt_local jt SET b = -1 FROM js_local js INNER JOIN ju_local ju ON js.k = ju.k
  WHERE jt.id = js.id AND ju.w = 'u7';
SELECT rows_same('SELECT * FROM remote.jt', 'SELECT * FROM jt_local');

-- DELETE ... USING.
EXPLAIN (VERBOSE, COSTS OFF)
DELETE FROM jt USING js WHERE jt.b = js.k AND js.id = 12;
DELETE FROM jt USING js WHERE jt.b = js.k AND js.id = 12;
DELETE FROM jt_local jt USING js_local js WHERE jt.b = js.k AND js.id = 12;
SELECT rows_same('SELECT * FROM remote.jt', 'SELECT * FROM jt_local');
DELETE FROM jt USING js WHERE jt.id = js.id AND js.k = 9 RETURNING jt.id, 100;
DELETE FROM jt_local jt USING js_local js WHERE jt.id = js.id AND js.k = 9;
SELECT rows_same('SELECT * FROM remote.jt', 'SELECT * FROM jt_local');

-- A parameter of a prepared statement, sent inline.
SET plan_cache_mode = force_generic_plan;
PREPARE upd(int, int) AS UPDATE jt SET b = $1 FROM js WHERE jt.id = js.id AND js.k = $2;
EXPLAIN (VERBOSE, COSTS OFF) EXECUTE upd(77, 8);
EXECUTE upd(77, 8);
UPDATE jt_local jt SET b = 77 FROM js_local js WHERE jt.id = js.id AND js.k = 8;
DEALLOCATE upd;
RESET plan_cache_mode;
SELECT rows_same('SELECT * FROM remote.jt', 'SELECT * FROM jt_local');

-- A self-join: the same remote table read again.
UPDATE jt SET b = t2.b + 1 FROM jt t2 WHERE jt.id = t2.id + 1 AND jt.id BETWEEN 150 AND 160;
UPDATE jt_local jt SET b = t2.b + 1 FROM jt_local t2 WHERE jt.id = t2.id + 1 AND jt.id BETWEEN 150 AND 160;
SELECT rows_same('SELECT * FROM remote.jt', 'SELECT * FROM jt_local');

-- Not sent as one statement: a condition computed locally, a new value
-- computed locally, RETURNING of the other table's ctid, a table of another
-- server, a local table.  The rows change one by one, with the same
-- result (those of a new value computed locally are read by a remote join
-- that locks the target's rows and returns their ctids: join_rowmarks.sql).
CREATE FUNCTION local_pos(int) RETURNS boolean LANGUAGE plpgsql AS
  $$BEGIN RETURN $1 > 0; END$$;
EXPLAIN (VERBOSE, COSTS OFF)
UPDATE jt SET b = jt.b + 1 FROM js WHERE jt.id = js.id AND local_pos(js.k);
UPDATE jt SET b = jt.b + 1 FROM js WHERE jt.id = js.id AND local_pos(js.k);
UPDATE jt_local jt SET b = jt.b + 1 FROM js_local js WHERE jt.id = js.id AND local_pos(js.k);
EXPLAIN (VERBOSE, COSTS OFF)
UPDATE jt SET b = CASE WHEN random() >= 0 THEN js.k ELSE 0 END FROM js WHERE jt.id = js.id AND js.k = 1;
UPDATE jt SET b = CASE WHEN random() >= 0 THEN js.k ELSE 0 END FROM js WHERE jt.id = js.id AND js.k = 1;
UPDATE jt_local jt SET b = js.k FROM js_local js WHERE jt.id = js.id AND js.k = 1;
UPDATE jt SET c = 'x' FROM js WHERE jt.id = js.id AND js.k = 2 RETURNING jt.id, js.ctid IS NOT NULL;
UPDATE jt_local jt SET c = 'x' FROM js_local js WHERE jt.id = js.id AND js.k = 2;
EXPLAIN (VERBOSE, COSTS OFF)
UPDATE jt SET c = 'y' FROM js2 WHERE jt.id = js2.id AND js2.k = 6;
UPDATE jt SET c = 'y' FROM js2 WHERE jt.id = js2.id AND js2.k = 6;
UPDATE jt_local jt SET c = 'y' FROM js_local js WHERE jt.id = js.id AND js.k = 6;
UPDATE jt SET c = 'z' FROM js_local WHERE jt.id = js_local.id AND js_local.k = 7;
UPDATE jt_local jt SET c = 'z' FROM js_local WHERE jt.id = js_local.id AND js_local.k = 7;
SELECT rows_same('SELECT * FROM remote.jt', 'SELECT * FROM jt_local');

-- Inside a transaction rolled back: the remote statement's change goes too.
BEGIN;
UPDATE jt SET c = 'rolled back' FROM js WHERE jt.id = js.id;
SELECT count(*) FROM jt WHERE c = 'rolled back';
ROLLBACK;
SELECT rows_same('SELECT * FROM remote.jt', 'SELECT * FROM jt_local');

DROP FUNCTION local_pos(int);
DROP FOREIGN TABLE jt, js, ju, js2;
DROP TABLE remote.jt, remote.js, remote.ju, jt_local, js_local, ju_local;
