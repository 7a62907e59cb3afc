--
-- direct_modify: UPDATE and DELETE of foreign tables run by the remote
-- server as one statement (direct modification), on a foreign table and
-- on partitioned tables of foreign partitions on several servers or one,
-- where every partition's statement is sent at executor start.  Every
-- statement is also run on local copies of the tables, and the remote
-- contents are compared with them afterwards.
--
CREATE TABLE remote.dm1 (id int PRIMARY KEY, b int CHECK (b < 1000000), c text);
INSERT INTO remote.dm1 SELECT g, g * 10, 'c' || g FROM generate_series(1, 100) g;
CREATE TABLE dm1_local AS SELECT * FROM remote.dm1;
CREATE FOREIGN TABLE dm1 (id int, b int, c text)
  SERVER loopback OPTIONS (schema_name 'remote', table_name 'dm1');

-- Two more servers on this instance: four partitions on four servers.
CALL afdw_test_server('loopback3', options => 'idle_timeout ''0''');
CALL afdw_test_server('loopback4', options => 'idle_timeout ''0''');
CREATE USER MAPPING FOR CURRENT_USER SERVER loopback3;
CREATE USER MAPPING FOR CURRENT_USER SERVER loopback4;

CREATE TABLE remote.dp1 (id int PRIMARY KEY, b int, c text);
CREATE TABLE remote.dp2 (LIKE remote.dp1 INCLUDING ALL);
CREATE TABLE remote.dp3 (LIKE remote.dp1 INCLUDING ALL);
CREATE TABLE remote.dp4 (LIKE remote.dp1 INCLUDING ALL);
INSERT INTO remote.dp1 SELECT g, g, 'p' || g FROM generate_series(1, 100) g;
INSERT INTO remote.dp2 SELECT g, g, 'p' || g FROM generate_series(101, 200) g;
INSERT INTO remote.dp3 SELECT g, g, 'p' || g FROM generate_series(201, 300) g;
INSERT INTO remote.dp4 SELECT g, g, 'p' || g FROM generate_series(301, 400) g;
CREATE TABLE dp_local AS
  SELECT * FROM remote.dp1 UNION ALL SELECT * FROM remote.dp2
  UNION ALL SELECT * FROM remote.dp3 UNION ALL SELECT * FROM remote.dp4;

-- dp: four partitions on four servers; ds: three on one server.
CREATE TABLE dp (id int, b int, c text) PARTITION BY RANGE (id);
CREATE FOREIGN TABLE dp_1 PARTITION OF dp FOR VALUES FROM (1) TO (101)
  SERVER loopback OPTIONS (schema_name 'remote', table_name 'dp1');
CREATE FOREIGN TABLE dp_2 PARTITION OF dp FOR VALUES FROM (101) TO (201)
  SERVER loopback2 OPTIONS (schema_name 'remote', table_name 'dp2');
CREATE FOREIGN TABLE dp_3 PARTITION OF dp FOR VALUES FROM (201) TO (301)
  SERVER loopback3 OPTIONS (schema_name 'remote', table_name 'dp3');
CREATE FOREIGN TABLE dp_4 PARTITION OF dp FOR VALUES FROM (301) TO (401)
  SERVER loopback4 OPTIONS (schema_name 'remote', table_name 'dp4');

CREATE TABLE remote.ds1 (id int PRIMARY KEY, b int, c text);
CREATE TABLE remote.ds2 (LIKE remote.ds1 INCLUDING ALL);
CREATE TABLE remote.ds3 (LIKE remote.ds1 INCLUDING ALL);
INSERT INTO remote.ds1 SELECT g, g % 7, 's' || g FROM generate_series(1, 50) g;
INSERT INTO remote.ds2 SELECT g, g % 7, 's' || g FROM generate_series(51, 100) g;
INSERT INTO remote.ds3 SELECT g, g % 7, 's' || g FROM generate_series(101, 150) g;
CREATE TABLE ds_local AS
  SELECT * FROM remote.ds1 UNION ALL SELECT * FROM remote.ds2 UNION ALL SELECT * FROM remote.ds3;
CREATE TABLE ds (id int, b int, c text) PARTITION BY RANGE (id);
CREATE FOREIGN TABLE ds_1 PARTITION OF ds FOR VALUES FROM (1) TO (51)
  SERVER loopback OPTIONS (schema_name 'remote', table_name 'ds1');
CREATE FOREIGN TABLE ds_2 PARTITION OF ds FOR VALUES FROM (51) TO (101)
  SERVER loopback OPTIONS (schema_name 'remote', table_name 'ds2');
CREATE FOREIGN TABLE ds_3 PARTITION OF ds FOR VALUES FROM (101) TO (151)
  SERVER loopback OPTIONS (schema_name 'remote', table_name 'ds3');

-- The row count of statement Q.
CREATE FUNCTION dm_count(q text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
  n bigint;
BEGIN
  EXECUTE q;
  GET DIAGNOSTICS n = ROW_COUNT;
  RETURN n;
END
$$;

-- 1. One foreign table: the plans show the remote statement.
EXPLAIN (VERBOSE, COSTS OFF) UPDATE dm1 SET b = b + 1, c = c || '!' WHERE id % 3 = 0;
EXPLAIN (VERBOSE, COSTS OFF) DELETE FROM dm1 WHERE id > 95;
EXPLAIN (VERBOSE, COSTS OFF) UPDATE dm1 SET b = 0 WHERE id = 1 RETURNING id, b + 1, c;
EXPLAIN (VERBOSE, COSTS OFF) DELETE FROM dm1 WHERE c = 'c3' RETURNING *;
-- A plain EXPLAIN sends nothing: the rows stay.
SELECT rows_same($$SELECT * FROM remote.dm1$$, $$SELECT * FROM dm1_local$$);

-- The statements, with their row counts, on both sides.
SELECT dm_count($$UPDATE dm1 SET b = b + 1, c = c || '!' WHERE id % 3 = 0$$) AS remote,
       dm_count($$UPDATE dm1_local SET b = b + 1, c = c || '!' WHERE id % 3 = 0$$) AS local;
SELECT dm_count($$DELETE FROM dm1 WHERE id > 95$$) AS remote,
       dm_count($$DELETE FROM dm1_local WHERE id > 95$$) AS local;
SELECT dm_count($$UPDATE dm1 SET b = NULL WHERE id IN (1, 2, 1000)$$) AS remote,
       dm_count($$UPDATE dm1_local SET b = NULL WHERE id IN (1, 2, 1000)$$) AS local;
SELECT dm_count($$UPDATE dm1 SET c = upper(c) WHERE b IS NULL OR b BETWEEN 100 AND 140$$) AS remote,
       dm_count($$UPDATE dm1_local SET c = upper(c) WHERE b IS NULL OR b BETWEEN 100 AND 140$$) AS local;
SELECT dm_count($$DELETE FROM dm1 WHERE false$$), dm_count($$UPDATE dm1 SET b = b WHERE id < 0$$);
SELECT rows_same($$SELECT * FROM remote.dm1$$, $$SELECT * FROM dm1_local$$);

-- RETURNING: computed locally from the returned columns, a row each.
UPDATE dm1 SET b = 0 WHERE id = 1 RETURNING id, b + 1, c;
UPDATE dm1_local SET b = 0 WHERE id = 1;
DELETE FROM dm1 WHERE c = 'c4' RETURNING *;
DELETE FROM dm1_local WHERE c = 'c4';
UPDATE dm1 SET c = 'none' WHERE id = -1 RETURNING *;
WITH u AS (UPDATE dm1 SET b = b * 2 WHERE id BETWEEN 10 AND 14 RETURNING id, b, c, tableoid::regclass AS t)
  SELECT * FROM u ORDER BY id;
UPDATE dm1_local SET b = b * 2 WHERE id BETWEEN 10 AND 14;
WITH d AS (DELETE FROM dm1 WHERE id BETWEEN 20 AND 24 RETURNING 1)
  SELECT count(*) FROM d;
DELETE FROM dm1_local WHERE id BETWEEN 20 AND 24;
SELECT rows_same($$SELECT * FROM remote.dm1$$, $$SELECT * FROM dm1_local$$);
-- The new values are not computed again from the new row: b + 1 at the
-- top of int's range would overflow.
ALTER TABLE remote.dm1 DROP CONSTRAINT dm1_b_check;
UPDATE dm1 SET b = 2147483647 - 1 WHERE id = 30;
UPDATE dm1 SET b = b + 1 WHERE id = 30 RETURNING *;
SELECT dm_count($$UPDATE dm1 SET b = 30 WHERE id = 30$$) AS remote,
       dm_count($$UPDATE dm1_local SET b = 30 WHERE id = 30$$) AS local;
ALTER TABLE remote.dm1 ADD CONSTRAINT dm1_b_check CHECK (b < 1000000);
SELECT rows_same($$SELECT * FROM remote.dm1$$, $$SELECT * FROM dm1_local$$);

-- 2. A parameter of a generic plan is sent as its value.
SET plan_cache_mode = force_generic_plan;
PREPARE upd(int, text) AS UPDATE dm1 SET b = b + $1, c = $2 WHERE id = $1;
EXPLAIN (VERBOSE, COSTS OFF) EXECUTE upd(5, 'five');
EXECUTE upd(5, 'five');
EXECUTE upd(6, E'six\\''s');
UPDATE dm1_local SET b = b + 5, c = 'five' WHERE id = 5;
UPDATE dm1_local SET b = b + 6, c = E'six\\''s' WHERE id = 6;
PREPARE del(int) AS DELETE FROM dm1 WHERE id = $1 RETURNING c;
EXECUTE del(7);
EXECUTE del(7);
DELETE FROM dm1_local WHERE id = 7;
DEALLOCATE upd;
DEALLOCATE del;
RESET plan_cache_mode;
SELECT rows_same($$SELECT * FROM remote.dm1$$, $$SELECT * FROM dm1_local$$);

-- 3. Partitioned tables: one remote statement per partition.
EXPLAIN (VERBOSE, COSTS OFF) UPDATE dp SET b = b + 1;
EXPLAIN (VERBOSE, COSTS OFF) DELETE FROM ds WHERE b = 3 RETURNING id;
SELECT dm_count($$UPDATE dp SET b = b + 1$$) AS remote,
       dm_count($$UPDATE dp_local SET b = b + 1$$) AS local;
SELECT dm_count($$UPDATE dp SET c = c || 'x' WHERE id % 10 = 1 OR id > 390$$) AS remote,
       dm_count($$UPDATE dp_local SET c = c || 'x' WHERE id % 10 = 1 OR id > 390$$) AS local;
SELECT dm_count($$DELETE FROM dp WHERE b % 25 = 0$$) AS remote,
       dm_count($$DELETE FROM dp_local WHERE b % 25 = 0$$) AS local;
-- Pruned partitions get no statement.
EXPLAIN (VERBOSE, COSTS OFF) UPDATE dp SET b = 0 WHERE id BETWEEN 150 AND 250;
SELECT dm_count($$UPDATE dp SET b = 0 WHERE id BETWEEN 150 AND 250$$) AS remote,
       dm_count($$UPDATE dp_local SET b = 0 WHERE id BETWEEN 150 AND 250$$) AS local;
WITH u AS (UPDATE dp SET b = -b WHERE id % 50 = 7 RETURNING tableoid::regclass AS part, id, b)
  SELECT * FROM u ORDER BY id;
UPDATE dp_local SET b = -b WHERE id % 50 = 7;
SELECT rows_same($$SELECT * FROM dp$$, $$SELECT * FROM dp_local$$);
SELECT rows_same($$SELECT * FROM remote.dp1 UNION ALL SELECT * FROM remote.dp2
                   UNION ALL SELECT * FROM remote.dp3 UNION ALL SELECT * FROM remote.dp4$$,
                 $$SELECT * FROM dp_local$$);
-- Three partitions on one server take turns on its one writer.
SELECT dm_count($$UPDATE ds SET b = b * 100 + 1 WHERE b > 2$$) AS remote,
       dm_count($$UPDATE ds_local SET b = b * 100 + 1 WHERE b > 2$$) AS local;
WITH d AS (DELETE FROM ds WHERE b = 3 OR b = 601 RETURNING id, b) SELECT count(*), sum(id), sum(b) FROM d;
DELETE FROM ds_local WHERE b = 3 OR b = 601;
SELECT rows_same($$SELECT * FROM remote.ds1 UNION ALL SELECT * FROM remote.ds2 UNION ALL SELECT * FROM remote.ds3$$,
                 $$SELECT * FROM ds_local$$);
-- A parameter computed at run time (an initial plan): sent at the first
-- fetch instead.
EXPLAIN (VERBOSE, COSTS OFF) UPDATE dp SET b = b + 1 WHERE id = (SELECT max(id) FROM dm1_local);
SELECT dm_count($$UPDATE dp SET b = b + 1 WHERE id = (SELECT max(id) FROM dm1_local)$$) AS remote,
       dm_count($$UPDATE dp_local SET b = b + 1 WHERE id = (SELECT max(id) FROM dm1_local)$$) AS local;
SELECT rows_same($$SELECT * FROM dp$$, $$SELECT * FROM dp_local$$);

-- 4. The four shards work at the same time: each remote statement sleeps
-- in a statement trigger and notes when it began and ended; they overlap.
CREATE TABLE remote.dm_log (tab text, began timestamptz, ended timestamptz);
CREATE FUNCTION remote.dm_slow() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_sleep(0.5);
  INSERT INTO remote.dm_log VALUES (TG_TABLE_NAME, statement_timestamp(), clock_timestamp());
  RETURN NULL;
END
$$;
CREATE TRIGGER slow AFTER UPDATE ON remote.dp1 FOR EACH STATEMENT EXECUTE FUNCTION remote.dm_slow();
CREATE TRIGGER slow AFTER UPDATE ON remote.dp2 FOR EACH STATEMENT EXECUTE FUNCTION remote.dm_slow();
CREATE TRIGGER slow AFTER UPDATE ON remote.dp3 FOR EACH STATEMENT EXECUTE FUNCTION remote.dm_slow();
CREATE TRIGGER slow AFTER UPDATE ON remote.dp4 FOR EACH STATEMENT EXECUTE FUNCTION remote.dm_slow();
SELECT dm_count($$UPDATE dp SET c = c || 'y' WHERE id % 20 = 3$$) AS remote,
       dm_count($$UPDATE dp_local SET c = c || 'y' WHERE id % 20 = 3$$) AS local;
SELECT count(*) AS statements, max(began) < min(ended) AS overlapping FROM remote.dm_log;
DROP TRIGGER slow ON remote.dp1;
DROP TRIGGER slow ON remote.dp2;
DROP TRIGGER slow ON remote.dp3;
DROP TRIGGER slow ON remote.dp4;
SELECT rows_same($$SELECT * FROM dp$$, $$SELECT * FROM dp_local$$);

-- 5. Transactions: a rollback undoes the remote statements; later reads
-- in the transaction see them; a rolled-back savepoint brings rows back.
BEGIN;
UPDATE dp SET b = 1000 + id WHERE id % 2 = 0;
DELETE FROM dm1 WHERE id < 50;
SELECT count(*), sum(b) FROM dp WHERE b > 1000;
SELECT count(*) FROM dm1;
ROLLBACK;
SELECT rows_same($$SELECT * FROM dp$$, $$SELECT * FROM dp_local$$);
SELECT rows_same($$SELECT * FROM remote.dm1$$, $$SELECT * FROM dm1_local$$);
BEGIN;
SELECT dm_count($$UPDATE ds SET c = 'kept' WHERE id <= 60$$) AS remote,
       dm_count($$UPDATE ds_local SET c = 'kept' WHERE id <= 60$$) AS local;
SAVEPOINT s1;
DELETE FROM ds WHERE id > 40;
UPDATE dm1 SET b = -1;
SELECT count(*) FROM ds;
ROLLBACK TO SAVEPOINT s1;
SELECT count(*) FROM ds;
SELECT dm_count($$UPDATE ds SET b = b + 1 WHERE id > 140$$) AS remote,
       dm_count($$UPDATE ds_local SET b = b + 1 WHERE id > 140$$) AS local;
COMMIT;
SELECT rows_same($$SELECT * FROM remote.ds1 UNION ALL SELECT * FROM remote.ds2 UNION ALL SELECT * FROM remote.ds3$$,
                 $$SELECT * FROM ds_local$$);
SELECT rows_same($$SELECT * FROM remote.dm1$$, $$SELECT * FROM dm1_local$$);

-- 6. A remote error is the statement's, with the remote SQLSTATE; nothing
-- of the statement stays, on any shard.
UPDATE dm1 SET id = 2 WHERE id = 3;
UPDATE dm1 SET b = 2000000 WHERE id = 8;
\set VERBOSITY sqlstate
UPDATE dm1 SET id = 2 WHERE id = 3;
UPDATE dm1 SET b = 2000000 WHERE id = 8;
\set VERBOSITY default
ALTER TABLE remote.dp3 ADD CONSTRAINT dp3_b CHECK (b <> 999);
UPDATE dp SET b = 999 WHERE id IN (5, 255, 305);
SELECT rows_same($$SELECT * FROM dp$$, $$SELECT * FROM dp_local$$);
ALTER TABLE remote.dp3 DROP CONSTRAINT dp3_b;
BEGIN;
UPDATE dm1 SET b = 5 WHERE id = 9;
SAVEPOINT s2;
UPDATE dm1 SET b = 2000000 WHERE id = 9;
ROLLBACK TO SAVEPOINT s2;
UPDATE dm1 SET c = 'nine' WHERE id = 9;
COMMIT;
UPDATE dm1_local SET b = 5, c = 'nine' WHERE id = 9;
SELECT rows_same($$SELECT * FROM remote.dm1$$, $$SELECT * FROM dm1_local$$);

-- 7. Not pushed, changed row by row instead: a volatile function, a
-- function of the user, in the new values or the conditions, a join, a
-- row trigger on the foreign table, RETURNING of the ctid.  (Until the
-- row-by-row path exists, these fail.)
CREATE FUNCTION dm_user_fn(int) RETURNS int LANGUAGE plpgsql IMMUTABLE
  AS 'BEGIN RETURN $1 + 1; END';
CREATE FUNCTION dm_trig() RETURNS trigger LANGUAGE plpgsql AS 'BEGIN RETURN NEW; END';
EXPLAIN (VERBOSE, COSTS OFF) UPDATE dm1 SET b = (random() * 0)::int WHERE id = 10;
EXPLAIN (VERBOSE, COSTS OFF) UPDATE dm1 SET b = dm_user_fn(b) WHERE id = 10;
EXPLAIN (VERBOSE, COSTS OFF) DELETE FROM dm1 WHERE dm_user_fn(id) = 11;
EXPLAIN (VERBOSE, COSTS OFF) DELETE FROM dm1 WHERE id = 10 RETURNING ctid;
EXPLAIN (VERBOSE, COSTS OFF) UPDATE dm1 SET b = l.b FROM dm1_local l WHERE dm1.id = l.id AND l.id = 10;
EXPLAIN (VERBOSE, COSTS OFF) UPDATE dp SET b = 7 WHERE c = dm_user_fn(id)::text;
CREATE TRIGGER dm_row BEFORE UPDATE ON dm1 FOR EACH ROW EXECUTE FUNCTION dm_trig();
EXPLAIN (VERBOSE, COSTS OFF) UPDATE dm1 SET b = 1 WHERE id = 10;
DROP TRIGGER dm_row ON dm1;
BEGIN;
UPDATE dm1 SET b = (random() * 0)::int WHERE id = 10;
ROLLBACK;
BEGIN;
DELETE FROM dm1 WHERE dm_user_fn(id) = 11;
ROLLBACK;
SELECT rows_same($$SELECT * FROM remote.dm1$$, $$SELECT * FROM dm1_local$$);

-- RETURNING rows are converted as a scan's rows are (row_builder.c): a
-- remote value the local type cannot hold names the column and the table;
-- over a remote join, the other table's columns too.
CREATE TABLE remote.dm_wide (id int PRIMARY KEY, v bigint);
INSERT INTO remote.dm_wide VALUES (1, 5), (2, 10000000000);
CREATE FOREIGN TABLE dm_narrow (id int, v int)
  SERVER loopback OPTIONS (schema_name 'remote', table_name 'dm_wide');
CREATE FOREIGN TABLE dm_narrow2 (id int, v int)
  SERVER loopback OPTIONS (schema_name 'remote', table_name 'dm_wide');
EXPLAIN (VERBOSE, COSTS OFF) UPDATE dm_narrow SET id = id WHERE id = 2 RETURNING v;
UPDATE dm_narrow SET id = id WHERE id = 1 RETURNING id, v;
UPDATE dm_narrow SET id = id WHERE id = 2 RETURNING v;
UPDATE dm_narrow n SET id = n.id FROM dm_narrow2 m WHERE n.id = m.id AND m.id = 1 RETURNING n.v, m.v;
UPDATE dm_narrow n SET id = n.id FROM dm_narrow2 m WHERE n.id = m.id - 1 AND m.id = 2 RETURNING n.v, m.v;
DROP FOREIGN TABLE dm_narrow, dm_narrow2;
DROP TABLE remote.dm_wide;

DROP FUNCTION dm_user_fn(int);
DROP FUNCTION dm_count(text);
DROP FUNCTION dm_trig();
DROP TABLE dp, ds, dp_local, ds_local, dm1_local;
DROP FOREIGN TABLE dm1;
DROP TABLE remote.dm1, remote.dp1, remote.dp2, remote.dp3, remote.dp4,
  remote.ds1, remote.ds2, remote.ds3, remote.dm_log;
DROP FUNCTION remote.dm_slow();
DROP USER MAPPING FOR CURRENT_USER SERVER loopback3;
DROP USER MAPPING FOR CURRENT_USER SERVER loopback4;
DROP SERVER loopback3, loopback4;
