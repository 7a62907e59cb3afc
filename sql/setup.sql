--
-- setup: the extension, a loopback server and the objects later tests share
--
CREATE EXTENSION async_fdw;
SELECT extname, extversion, extnamespace::regnamespace AS schema,
       obj_description(oid, 'pg_extension') AS description
  FROM pg_extension WHERE extname = 'async_fdw';
SELECT fdwname, fdwhandler::regproc, fdwvalidator::regproc
  FROM pg_foreign_data_wrapper WHERE fdwname = 'async_fdw';

-- Objects that point back at this very instance: afdw_test_server(NAME,
-- WRAPPER, OPTIONS, DBNAME) makes a server NAME of the foreign-data wrapper
-- WRAPPER (async_fdw unless given) at database DBNAME (this one unless
-- given), with OPTIONS besides, written as CREATE SERVER takes them
-- ('max_connections ''1'''); afdw_test_conninfo() is a connection string
-- to this database, for dblink.
CREATE PROCEDURE afdw_test_server(name text, wrapper text DEFAULT 'async_fdw',
                                  options text DEFAULT NULL,
                                  dbname text DEFAULT current_database())
LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE format('CREATE SERVER %I FOREIGN DATA WRAPPER %I
                  OPTIONS (host %L, port %L, dbname %L%s)',
                 name, wrapper,
                 coalesce(nullif(current_setting('unix_socket_directories'), ''), 'localhost'),
                 current_setting('port'), dbname, ', ' || options);
END
$$;
CREATE FUNCTION afdw_test_conninfo() RETURNS text LANGUAGE sql AS $$
  SELECT format('host=%s port=%s dbname=%s',
                coalesce(nullif(current_setting('unix_socket_directories'), ''), 'localhost'),
                current_setting('port'), current_database())
$$;

-- A server pointing back at this very instance and database.
CALL afdw_test_server('loopback');
CALL afdw_test_server('loopback2');
CREATE USER MAPPING FOR CURRENT_USER SERVER loopback;
CREATE USER MAPPING FOR CURRENT_USER SERVER loopback2;
-- Connections past a session's first close at the end of each transaction
-- here (idle_timeout 0), so that the tests that count remote sessions do
-- not depend on how long a statement takes; 007_optional_connections.pl
-- checks the default, where the remote server closes them once idle.
ALTER SERVER loopback OPTIONS (ADD idle_timeout '0');
ALTER SERVER loopback2 OPTIONS (ADD idle_timeout '0');

-- The remote side: a schema of plain tables.
CREATE SCHEMA remote;
CREATE TABLE remote.t1 (id int PRIMARY KEY, v text, n numeric);
INSERT INTO remote.t1 SELECT g, 'v' || g, g * 1.5 FROM generate_series(1, 1000) g;
ANALYZE remote.t1;
CREATE FOREIGN TABLE ft1 (id int, v text, n numeric)
  SERVER loopback OPTIONS (schema_name 'remote', table_name 't1');
SELECT count(*), sum(id), max(v), sum(n) FROM ft1;
SELECT count(*), sum(id), max(v), sum(n) FROM remote.t1;

-- The states of async_fdw's remote sessions once they have settled: the
-- answer to a COMMIT of a transaction that only read is not waited for, so
-- the remote session may take a moment to become idle.
CREATE FUNCTION afdw_remote_states() RETURNS SETOF text LANGUAGE plpgsql AS $$
BEGIN
  FOR i IN 1..1000 LOOP
    PERFORM pg_stat_clear_snapshot();
    EXIT WHEN NOT EXISTS (SELECT 1 FROM pg_stat_activity
                           WHERE application_name = 'async_fdw' AND state <> 'idle');
    PERFORM pg_sleep(0.01);
  END LOOP;
  RETURN QUERY SELECT state FROM pg_stat_activity
                WHERE application_name = 'async_fdw' ORDER BY 1;
END
$$;

-- The rows of query Q against those of LQ (the same query on local tables),
-- in any order; both sets are shown when they differ.
CREATE FUNCTION rows_same(q text, lq text) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
  r1 text[];
  r2 text[];
BEGIN
  EXECUTE format('SELECT array_agg(s::text ORDER BY s::text) FROM (%s) s', q) INTO r1;
  EXECUTE format('SELECT array_agg(s::text ORDER BY s::text) FROM (%s) s', lq) INTO r2;
  IF r1 IS DISTINCT FROM r2 THEN
    RAISE NOTICE 'async_fdw: %', r1;
    RAISE NOTICE 'local:     %', r2;
  END IF;
  RETURN r1 IS NOT DISTINCT FROM r2;
END
$$;
-- The same in the order the rows come (for queries with ORDER BY); an
-- empty result never passes.
CREATE FUNCTION rows_in_order(q text, lq text) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
  r1 text[];
  r2 text[];
BEGIN
  EXECUTE format('SELECT array_agg(s::text) FROM (%s) s', q) INTO r1;
  EXECUTE format('SELECT array_agg(s::text) FROM (%s) s', lq) INTO r2;
  IF r1 IS DISTINCT FROM r2 THEN
    RAISE NOTICE 'async_fdw: %', r1;
    RAISE NOTICE 'local:     %', r2;
  END IF;
  RETURN r1 IS NOT DISTINCT FROM r2 AND r1 IS NOT NULL;
END
$$;

-- Whether another session, the dblink connection CONN to the remote
-- database, can lock remote row ID of table remote.TAB in MODE at once:
-- 'free', or the SQLSTATE of its error (55P03 when the row is locked).
-- (locking.sql and join_rowmarks.sql open the connection, with dblink.)
CREATE FUNCTION remote_lock_state(conn text, tab text, id int, mode text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  n int;
BEGIN
  SELECT c INTO n FROM dblink(conn,
    format('SELECT count(*) FROM (SELECT 1 FROM remote.%I WHERE id = %s FOR %s NOWAIT) s',
           tab, id, mode)) AS t(c int);
  RETURN 'free';
EXCEPTION WHEN OTHERS THEN
  RETURN SQLSTATE;
END
$$;
