--
-- holds: a command that fails between taking a connection of the pool and
-- giving it back gives it back all the same.  In a transaction that goes
-- on (after a rolled-back savepoint, or a recovery whose failure is only
-- reported) no connection stays in use, and a TRUNCATE, which needs every
-- other connection of its server idle, runs.
--
CREATE TABLE remote.hd (id int);
CREATE FOREIGN TABLE hd_ft (id int) SERVER loopback
  OPTIONS (schema_name 'remote', table_name 'hd');
CREATE VIEW hd_in_use AS
  SELECT count(*) FILTER (WHERE in_use) AS in_use
    FROM async_fdw_get_connections() WHERE server_name = 'loopback';
\set VERBOSITY terse

-- The remote estimate of a table that is not there.
CREATE FOREIGN TABLE hd_missing (id int) SERVER loopback
  OPTIONS (schema_name 'remote', table_name 'hd_missing', use_remote_estimate 'true');
BEGIN;
SELECT count(*) FROM ft1;
SELECT * FROM hd_in_use;
SAVEPOINT a;
SELECT * FROM hd_missing;
ROLLBACK TO SAVEPOINT a;
SELECT * FROM hd_in_use;
TRUNCATE hd_ft;
COMMIT;

-- ANALYZE of a table that is not there, and of one whose sampled row does
-- not convert.
ALTER FOREIGN TABLE hd_missing OPTIONS (SET use_remote_estimate 'false');
CREATE TABLE remote.hd_text (id text);
INSERT INTO remote.hd_text VALUES ('1'), ('x');
CREATE FOREIGN TABLE hd_bad (id int) SERVER loopback
  OPTIONS (schema_name 'remote', table_name 'hd_text');
BEGIN;
SELECT count(*) FROM ft1;
SAVEPOINT a;
ANALYZE hd_missing;
ROLLBACK TO SAVEPOINT a;
SELECT * FROM hd_in_use;
SAVEPOINT b;
ANALYZE hd_bad;
ROLLBACK TO SAVEPOINT b;
SELECT * FROM hd_in_use;
TRUNCATE hd_ft;
COMMIT;

-- A writer that cannot connect, while the connection that read first is
-- held so that another one writes.
BEGIN;
SELECT count(*) FROM ft1;
SAVEPOINT a;
ALTER SERVER loopback OPTIONS (SET port '1');
INSERT INTO hd_ft VALUES (1);
ROLLBACK TO SAVEPOINT a;
SELECT * FROM hd_in_use;
TRUNCATE hd_ft;
COMMIT;

-- Recovery in a transaction that used the server: refused, reported, and
-- the transaction goes on.
BEGIN;
SELECT count(*) FROM ft1;
SELECT server_name, action FROM async_fdw_recover_prepared_transactions()
  WHERE server_name = 'loopback';
SELECT * FROM hd_in_use;
TRUNCATE hd_ft;
COMMIT;

\set VERBOSITY default
DROP VIEW hd_in_use;
DROP FOREIGN TABLE hd_ft, hd_missing, hd_bad;
DROP TABLE remote.hd, remote.hd_text;
