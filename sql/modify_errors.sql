--
-- modify_errors: writes cut short: a statement timeout in the
-- middle of a streamed load, a remote session that dies in the middle of
-- one, a remote error in a deferred single-row INSERT; afterwards the
-- session and its connections work, and nothing of the failed statements
-- stays.
--
CREATE SCHEMA we;
CREATE TABLE we.s (a int PRIMARY KEY, b text);
CREATE FOREIGN TABLE ws (a int, b text)
  SERVER loopback OPTIONS (schema_name 'we', table_name 's');
-- The remote server takes its time with each row of a load, or dies at a
-- given row.
CREATE FUNCTION we.slow() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.b = 'slow' THEN
    PERFORM pg_sleep(0.002);
  ELSIF NEW.b = 'die' AND NEW.a = 300 THEN
    PERFORM pg_terminate_backend(pg_backend_pid());
  END IF;
  RETURN NEW;
END
$$;
CREATE TRIGGER s_slow BEFORE INSERT ON we.s FOR EACH ROW EXECUTE FUNCTION we.slow();

-- A statement timeout while the load streams: the COPY is failed remotely,
-- the remote transaction rolled back, the connection kept.
-- (Where the timeout strikes, and so the error's context, depends on timing.)
\set VERBOSITY terse
SET statement_timeout = '300ms';
INSERT INTO ws SELECT g, 'slow' FROM generate_series(1, 5000) g;
RESET statement_timeout;
\set VERBOSITY default
SELECT count(*) FROM ws;
SELECT count(*) FROM we.s;

-- The same inside a transaction block, then a rolled-back savepoint's load.
BEGIN;
INSERT INTO ws VALUES (1, 'kept');
SAVEPOINT s1;
SET LOCAL statement_timeout = '300ms';
\set VERBOSITY terse
INSERT INTO ws SELECT g, 'slow' FROM generate_series(2, 5000) g;
\set VERBOSITY default
ROLLBACK TO SAVEPOINT s1;
SELECT a, b FROM ws;
COMMIT;
SELECT a, b FROM we.s;

-- The remote session dies in the middle of a load: the error says the
-- connection was lost; the next statement reconnects.
\set VERBOSITY sqlstate
INSERT INTO ws SELECT g, 'die' FROM generate_series(2, 1000) g;
\set VERBOSITY default
SELECT a, b FROM ws;
INSERT INTO ws SELECT g, 'after' FROM generate_series(2, 500) g;
SELECT count(*) FROM we.s;

-- A single-row INSERT that is its own transaction travels with the
-- COMMIT: its error is still the statement's, with the remote SQL.
INSERT INTO ws VALUES (1, 'dup');
SELECT count(*) FROM we.s;
-- And in a transaction block it is sent at once.
BEGIN;
INSERT INTO ws VALUES (1, 'dup');
ROLLBACK;

-- A savepoint rolled back after a failed write: the transaction goes on.
BEGIN;
SAVEPOINT s2;
INSERT INTO ws VALUES (1, 'dup');
ROLLBACK TO SAVEPOINT s2;
INSERT INTO ws VALUES (10000, 'after the savepoint');
COMMIT;
SELECT a, b FROM we.s WHERE a = 10000;

-- A remote UPDATE that fails while another query of the statement needs
-- its connection (a subquery of RETURNING reading the same server) fails
-- the statement with its own error, not with the 25P02 of the query sent
-- into its failed remote transaction.  (Found by test/smith.)
CREATE TABLE we.ev1 (id int, n int);
CREATE TABLE we.ev2 (id int, n int);
CREATE TABLE we.look (g int);
INSERT INTO we.ev1 VALUES (1, 10);
INSERT INTO we.ev2 VALUES (2, 20);
INSERT INTO we.look VALUES (7);
CREATE TABLE wev (id int, n int) PARTITION BY LIST (id);
CREATE FOREIGN TABLE wev1 PARTITION OF wev FOR VALUES IN (1) SERVER loopback
  OPTIONS (schema_name 'we', table_name 'ev1');
CREATE FOREIGN TABLE wev2 PARTITION OF wev FOR VALUES IN (2) SERVER loopback2
  OPTIONS (schema_name 'we', table_name 'ev2');
CREATE FOREIGN TABLE wlook (g int) SERVER loopback2
  OPTIONS (schema_name 'we', table_name 'look');
\set VERBOSITY sqlstate
UPDATE wev SET n = n / (CASE WHEN id = 2 THEN 0 ELSE 1 END)
  RETURNING (SELECT g FROM wlook LIMIT 1);
BEGIN;
UPDATE wev SET n = n / (CASE WHEN id = 2 THEN 0 ELSE 1 END)
  RETURNING (SELECT g FROM wlook LIMIT 1);
ROLLBACK;
\set VERBOSITY default
UPDATE wev SET n = n + 1 RETURNING (SELECT g FROM wlook LIMIT 1), id, n;
SELECT * FROM wev ORDER BY id;
DROP TABLE wev;
DROP FOREIGN TABLE wlook;

-- A load whose server cannot be reached fails when its writer connects,
-- and leaves nothing behind: the session's next scans and loads, of the
-- same server's tables among others, work (a state of the failed load
-- left in the list of loads under way hung the next scan).
CREATE SERVER we_refused FOREIGN DATA WRAPPER async_fdw
  OPTIONS (host '127.0.0.1', port '1', connect_timeout '5');
CREATE USER MAPPING FOR CURRENT_USER SERVER we_refused;
CREATE FOREIGN TABLE we_refused_ft (id int, n int) SERVER we_refused;
CREATE TABLE wmix (id int, n int) PARTITION BY LIST (id);
CREATE FOREIGN TABLE wmix1 PARTITION OF wmix FOR VALUES IN (1) SERVER loopback
  OPTIONS (schema_name 'we', table_name 'ev1');
CREATE FOREIGN TABLE wmix2 PARTITION OF wmix FOR VALUES IN (2) SERVER we_refused;
INSERT INTO we_refused_ft VALUES (1, 1);
INSERT INTO we_refused_ft SELECT g, g FROM generate_series(1, 5) g;
SELECT * FROM wmix1;
-- The load of the reachable partition began before the other's failed.
INSERT INTO wmix VALUES (1, 100), (2, 200);
BEGIN;
INSERT INTO we_refused_ft VALUES (1, 1);
ROLLBACK;
SELECT * FROM we.ev1 ORDER BY n;
INSERT INTO wmix VALUES (1, 101), (1, 102);
SELECT * FROM wmix1 ORDER BY n;
DROP TABLE wmix;
DROP SERVER we_refused CASCADE;

DROP FOREIGN TABLE ws;
DROP SCHEMA we CASCADE;
