--
-- cleanup: what async_fdw leaves in its remote sessions, and how it behaves
-- when a remote session dies inside a transaction
--
-- A server with a single pooled connection, so that every scan below runs
-- in the same remote session, where the remote views show that session's
-- own prepared statements and cursors.
CALL afdw_test_server('loopback_one', options => 'max_connections ''1''');
CREATE USER MAPPING FOR CURRENT_USER SERVER loopback_one;
CREATE TABLE remote.cl (id int, v int);
INSERT INTO remote.cl SELECT g, g FROM generate_series(1, 100) g;
INSERT INTO remote.cl VALUES (0, 0);
-- inv fails remotely (division by zero) on the row with id 0 only.
CREATE VIEW remote.cl_inv AS SELECT id, 100 / v AS inv FROM remote.cl;
CREATE VIEW remote.cl_prepared AS
  SELECT count(*) AS n FROM pg_prepared_statements WHERE name LIKE 'afdw_s%';
-- The cursors open in the session, but the one reading this view.
CREATE VIEW remote.cl_cursors AS
  SELECT count(*) AS n FROM pg_cursors WHERE statement NOT LIKE '%cl_cursors%';
CREATE FOREIGN TABLE ft_cl_inv (id int, inv int) SERVER loopback_one
  OPTIONS (schema_name 'remote', table_name 'cl_inv', fetch_size '10');
CREATE FOREIGN TABLE ft_cl (id int, v int) SERVER loopback_one
  OPTIONS (schema_name 'remote', table_name 'cl', fetch_mode 'cursor', fetch_size '10');
CREATE FOREIGN TABLE ft_cl_prepared (n bigint) SERVER loopback_one
  OPTIONS (schema_name 'remote', table_name 'cl_prepared');
CREATE FOREIGN TABLE ft_cl_cursors (n bigint) SERVER loopback_one
  OPTIONS (schema_name 'remote', table_name 'cl_cursors');
CREATE TABLE cl_keys (k int);
INSERT INTO cl_keys VALUES (1), (2), (3);
CREATE TABLE cl_bad_keys (k int);
INSERT INTO cl_bad_keys VALUES (1), (0), (2);
ANALYZE cl_keys, cl_bad_keys;
SET enable_hashjoin = off;
SET enable_mergejoin = off;
SET enable_material = off;
SET enable_memoize = off;

-- A failing EXECUTE of a remote prepared statement makes the next scan
-- prepare it again: the failed one is deallocated, so the remote session
-- does not collect them.  (Each failure used to leave one behind.)
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT k, inv FROM cl_keys JOIN ft_cl_inv ON id = k;
SELECT k, inv FROM cl_keys JOIN ft_cl_inv ON id = k ORDER BY k;
SELECT n FROM ft_cl_prepared;
SELECT k, inv FROM cl_bad_keys JOIN ft_cl_inv ON id = k ORDER BY k;
SELECT n FROM ft_cl_prepared;
SELECT k, inv FROM cl_keys JOIN ft_cl_inv ON id = k ORDER BY k;
SELECT n FROM ft_cl_prepared;
SELECT k, inv FROM cl_bad_keys JOIN ft_cl_inv ON id = k ORDER BY k;
SELECT k, inv FROM cl_bad_keys JOIN ft_cl_inv ON id = k ORDER BY k;
SELECT n FROM ft_cl_prepared;
-- The same in a subtransaction whose error is caught: the statement is
-- deallocated within the transaction that goes on.
BEGIN;
SELECT k, inv FROM cl_keys JOIN ft_cl_inv ON id = k ORDER BY k;
SAVEPOINT a;
SELECT k, inv FROM cl_bad_keys JOIN ft_cl_inv ON id = k ORDER BY k;
ROLLBACK TO a;
SELECT k, inv FROM cl_bad_keys JOIN ft_cl_inv ON id = k ORDER BY k;
ROLLBACK TO a;
SELECT n FROM ft_cl_prepared;
COMMIT;
-- A PREPARE that fails (the remote view is gone) leaves nothing to
-- deallocate, and the session stays usable.
DROP VIEW remote.cl_inv;
SELECT k, inv FROM cl_keys JOIN ft_cl_inv ON id = k ORDER BY k;
CREATE VIEW remote.cl_inv AS SELECT id, 100 / v AS inv FROM remote.cl;
SELECT n FROM ft_cl_prepared;
SELECT k, inv FROM cl_keys JOIN ft_cl_inv ON id = k ORDER BY k;
SELECT n FROM ft_cl_prepared;

-- The remote cursor of a local cursor closed inside a savepoint that is
-- then rolled back is still closed: it was opened before the savepoint,
-- so the rollback leaves it open remotely.
BEGIN;
DECLARE c CURSOR FOR SELECT id FROM ft_cl ORDER BY id;
FETCH 2 FROM c;
SAVEPOINT a;
SELECT n FROM ft_cl_cursors;
CLOSE c;
ROLLBACK TO a;
SELECT n FROM ft_cl_cursors;
COMMIT;
-- A cursor opened inside the savepoint is gone with it: nothing to close.
BEGIN;
SAVEPOINT a;
DECLARE c CURSOR FOR SELECT id FROM ft_cl ORDER BY id;
FETCH 2 FROM c;
CLOSE c;
ROLLBACK TO a;
SELECT n FROM ft_cl_cursors;
COMMIT;
-- Released savepoints hand their cursors to the level above.
BEGIN;
SAVEPOINT a;
DECLARE c CURSOR FOR SELECT id FROM ft_cl ORDER BY id;
FETCH 2 FROM c;
RELEASE a;
SAVEPOINT b;
SELECT n FROM ft_cl_cursors;
CLOSE c;
ROLLBACK TO b;
SELECT n FROM ft_cl_cursors;
COMMIT;

RESET enable_hashjoin;
RESET enable_mergejoin;
RESET enable_material;
RESET enable_memoize;

-- A remote session killed inside a transaction: later statements fail
-- with SQLSTATE 08006 as with postgres_fdw, whether they would use the
-- dead connection or open one that joins the transaction, and a CLOSE of
-- a cursor over it does not pretend to succeed.  After the rollback,
-- fresh connections work.
CREATE FUNCTION cl_kill_remote() RETURNS bool LANGUAGE sql AS $$
  SELECT bool_and(pg_terminate_backend(pid, 10000)) FROM pg_stat_activity
   WHERE application_name IN ('async_fdw', 'cl_postgres_fdw')
$$;
\set VERBOSITY sqlstate
BEGIN;
DECLARE c CURSOR FOR SELECT id FROM ft1 ORDER BY id;
FETCH 1 FROM c;
SELECT cl_kill_remote();
SELECT count(*) FROM ft1;
\echo :ERROR :LAST_ERROR_SQLSTATE
ROLLBACK;
SELECT count(*) FROM ft1;
BEGIN;
DECLARE c CURSOR FOR SELECT id FROM ft1 ORDER BY id;
FETCH 1 FROM c;
SELECT cl_kill_remote();
CLOSE c;
\echo :ERROR :LAST_ERROR_SQLSTATE
ROLLBACK;
SELECT count(*) FROM ft1;
-- The same with the cursor's scan still fetching.
BEGIN;
DECLARE c CURSOR FOR SELECT id FROM ft1;
FETCH 1 FROM c;
SELECT cl_kill_remote();
CLOSE c;
\echo :ERROR :LAST_ERROR_SQLSTATE
ROLLBACK;
BEGIN;
SELECT count(*) FROM ft1;
SELECT cl_kill_remote();
SELECT count(*) FROM ft1;
\echo :ERROR :LAST_ERROR_SQLSTATE
ROLLBACK;
SELECT count(*) FROM ft1;
-- Killed within a savepoint, whose rollback then finds the session gone:
-- the remote transaction is lost, and a CLOSE of the cursor opened before
-- the savepoint fails as a broken connection's (08006, as postgres_fdw's
-- CLOSE), not only what would use the connection.
BEGIN;
DECLARE c CURSOR FOR SELECT id FROM ft1 ORDER BY id;
FETCH 1 FROM c;
SAVEPOINT s;
SELECT cl_kill_remote();
ROLLBACK TO SAVEPOINT s;
SELECT count(*) FROM ft1;
\echo :ERROR :LAST_ERROR_SQLSTATE
ROLLBACK TO SAVEPOINT s;
RELEASE SAVEPOINT s;
CLOSE c;
\echo :ERROR :LAST_ERROR_SQLSTATE
ROLLBACK;
SELECT count(*) FROM ft1;
-- postgres_fdw, for comparison (its warnings at rollback hidden).
SET client_min_messages = error;
CREATE EXTENSION postgres_fdw;
CALL afdw_test_server('cl_pg', 'postgres_fdw', 'application_name ''cl_postgres_fdw''');
CREATE USER MAPPING FOR CURRENT_USER SERVER cl_pg;
CREATE FOREIGN TABLE pg_t1 (id int, v text, n numeric)
  SERVER cl_pg OPTIONS (schema_name 'remote', table_name 't1');
BEGIN;
DECLARE c CURSOR FOR SELECT id FROM pg_t1 ORDER BY id;
FETCH 1 FROM c;
SELECT cl_kill_remote();
CLOSE c;
\echo :ERROR :LAST_ERROR_SQLSTATE
ROLLBACK;
BEGIN;
SELECT count(*) FROM pg_t1;
SELECT cl_kill_remote();
SELECT count(*) FROM pg_t1;
\echo :ERROR :LAST_ERROR_SQLSTATE
ROLLBACK;
SELECT count(*) FROM pg_t1;
RESET client_min_messages;
\set VERBOSITY default

DROP FOREIGN TABLE pg_t1;
DROP USER MAPPING FOR CURRENT_USER SERVER cl_pg;
DROP SERVER cl_pg;
DROP EXTENSION postgres_fdw;
DROP FUNCTION cl_kill_remote();
DROP FOREIGN TABLE ft_cl_inv, ft_cl, ft_cl_prepared, ft_cl_cursors;
DROP VIEW remote.cl_inv, remote.cl_prepared, remote.cl_cursors;
DROP TABLE remote.cl, cl_keys, cl_bad_keys;
DROP USER MAPPING FOR CURRENT_USER SERVER loopback_one;
DROP SERVER loopback_one;

-- The snapshot id that the first connection of a transaction exports goes
-- into the SQL of the others: it is quoted, and refused unless it looks
-- like one.  A remote database whose pg_export_snapshot() answers with
-- something else:
SELECT current_database() AS cl_regdb \gset
CREATE DATABASE cl_evil;
\c cl_evil
CREATE TABLE t (id int);
INSERT INTO t VALUES (1), (2);
CREATE OR REPLACE FUNCTION pg_catalog.pg_export_snapshot() RETURNS text
  LANGUAGE sql AS $$ SELECT 'x''y'::text $$;
\c :cl_regdb
CALL afdw_test_server('loopback_evil', dbname => 'cl_evil');
CREATE USER MAPPING FOR CURRENT_USER SERVER loopback_evil;
CREATE FOREIGN TABLE ft_evil (id int) SERVER loopback_evil
  OPTIONS (schema_name 'public', table_name 't');
BEGIN;
SELECT count(*) FROM ft_evil;
SELECT count(*) FROM ft_evil a, ft_evil b;
ROLLBACK;
DROP FOREIGN TABLE ft_evil;
DROP USER MAPPING FOR CURRENT_USER SERVER loopback_evil;
DROP SERVER loopback_evil;
DROP DATABASE cl_evil WITH (FORCE);
