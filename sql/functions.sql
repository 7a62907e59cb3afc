--
-- functions: async_fdw_get_connections, async_fdw_disconnect and
-- async_fdw_disconnect_all, side by side with postgres_fdw's; the update of
-- the extension from 1.0 and from 1.3 to the current version
--

-- Servers whose remote sessions carry their own application_name, so that
-- pg_stat_activity of the loopback server tells them apart; fn_b is used
-- through a mapping FOR PUBLIC; fn_pg is postgres_fdw's.
SET client_min_messages = warning;
CREATE EXTENSION postgres_fdw;
RESET client_min_messages;
CALL afdw_test_server('fn_a', options => 'application_name ''afdw_fn_a''');
CALL afdw_test_server('fn_b', options => 'application_name ''afdw_fn_b''');
CALL afdw_test_server('fn_d', options => 'application_name ''afdw_fn_d''');
CALL afdw_test_server('fn_e', options => 'application_name ''afdw_fn_e''');
CALL afdw_test_server('fn_pg', 'postgres_fdw', 'application_name ''afdw_fn_pg''');
CALL afdw_test_server('fn_pgd', 'postgres_fdw', 'application_name ''afdw_fn_pgd''');
CALL afdw_test_server('fn_pge', 'postgres_fdw', 'application_name ''afdw_fn_pge''');
CREATE USER MAPPING FOR CURRENT_USER SERVER fn_a;
CREATE USER MAPPING FOR PUBLIC SERVER fn_b;
CREATE USER MAPPING FOR CURRENT_USER SERVER fn_d;
CREATE USER MAPPING FOR CURRENT_USER SERVER fn_pg;
CREATE USER MAPPING FOR CURRENT_USER SERVER fn_pgd;
CREATE USER MAPPING FOR CURRENT_USER SERVER fn_e;
CREATE USER MAPPING FOR CURRENT_USER SERVER fn_pge;

-- A table of four partitions: three on fn_a, the first of them streamed
-- (enough rows that a stream read one row at a time is not over), the
-- last on fn_b; and a table on each of the other servers.
CREATE TABLE remote.fn (k int, v int);
INSERT INTO remote.fn SELECT 0, g FROM generate_series(1, 50000) g;
INSERT INTO remote.fn SELECT k, g FROM generate_series(1, 3) k, generate_series(1, 100) g;
CREATE TABLE fnp (k int, v int) PARTITION BY LIST (k);
DO $$
BEGIN
  FOR i IN 0..3 LOOP
    EXECUTE format('CREATE TABLE remote.fn%s AS SELECT * FROM remote.fn WHERE k = %s', i, i);
    EXECUTE format('CREATE FOREIGN TABLE fnp%s PARTITION OF fnp FOR VALUES IN (%s)
                    SERVER %s OPTIONS (schema_name ''remote'', table_name ''fn%s'')',
                   i, i, CASE WHEN i < 3 THEN 'fn_a' ELSE 'fn_b' END, i);
  END LOOP;
END
$$;
ALTER FOREIGN TABLE fnp0 OPTIONS (ADD fetch_mode 'stream', fetch_size '10');
CREATE FOREIGN TABLE fn_dt (k int, v int)
  SERVER fn_d OPTIONS (schema_name 'remote', table_name 'fn1');
CREATE FOREIGN TABLE fn_pgt (k int, v int)
  SERVER fn_pg OPTIONS (schema_name 'remote', table_name 'fn1');
CREATE FOREIGN TABLE fn_pgdt (k int, v int)
  SERVER fn_pgd OPTIONS (schema_name 'remote', table_name 'fn1');
CREATE FOREIGN TABLE fn_et (k int, v int)
  SERVER fn_e OPTIONS (schema_name 'remote', table_name 'fn1');
CREATE FOREIGN TABLE fn_pget (k int, v int)
  SERVER fn_pge OPTIONS (schema_name 'remote', table_name 'fn1');

-- The remote sessions of this backend's servers (application_name
-- afdw_<server>) once those that closed have left: after a disconnect the
-- remote backend takes a moment to exit.
CREATE FUNCTION fn_remote(server text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
  n bigint;
BEGIN
  FOR i IN 1..1000 LOOP
    PERFORM pg_stat_clear_snapshot();
    SELECT count(*) INTO n FROM pg_stat_activity
     WHERE application_name = 'afdw_' || server;
    EXIT WHEN n = 0;
    PERFORM pg_sleep(0.01);
  END LOOP;
  RETURN n;
END
$$;

-- A new session has no connection.
SELECT * FROM async_fdw_get_connections();
SELECT server_name, valid FROM postgres_fdw_get_connections();

-- 1. A local cursor over the partitioned table holds a connection per
-- partition: three to fn_a (one streaming), one to fn_b, each seen as a
-- remote backend of that server's application_name, opened in this
-- transaction.
BEGIN;
DECLARE c CURSOR FOR SELECT * FROM fnp;
MOVE 1 IN c;                    -- which partition answers first varies
SELECT server_name, valid, user_name = current_user AS mine, user_name,
       count(*) AS conns, bool_and(in_use) AS in_use,
       array_agg(DISTINCT slot ORDER BY slot) AS slots,
       array_agg(mode ORDER BY mode) AS modes
  FROM async_fdw_get_connections() GROUP BY 1, 2, 3, 4 ORDER BY 1;
SELECT pg_stat_clear_snapshot();
SELECT g.server_name, count(*) AS conns,
       bool_and(a.application_name = 'afdw_' || g.server_name) AS its_sessions,
       bool_and(g.opened_at >= a.backend_start AND g.opened_at >= now() AND
                g.opened_at <= clock_timestamp()) AS opened_now
  FROM async_fdw_get_connections() g JOIN pg_stat_activity a ON a.pid = g.remote_backend_pid
 GROUP BY 1 ORDER BY 1;
-- Connections held are not closed: a warning per server, and false.
SELECT async_fdw_disconnect('fn_a');
SELECT async_fdw_disconnect_all();
MOVE 1 IN c;
CLOSE c;
-- Scans are over, the remote transactions are not: still in use, no mode.
-- used_in_xact as postgres_fdw's: true; closed NULL unless check_conn
-- asks, then false (the remote sessions are there: see the TAP test
-- 018_get_connections.pl for one the server closed).
SELECT server_name, count(*), bool_and(in_use) AS in_use, count(mode) AS modes,
       bool_and(used_in_xact) AS used_in_xact, count(closed) AS checked
  FROM async_fdw_get_connections() GROUP BY 1 ORDER BY 1;
SELECT server_name, count(*), bool_or(closed) AS closed, count(closed) AS checked
  FROM async_fdw_get_connections(check_conn => true) GROUP BY 1 ORDER BY 1;
SELECT count(*), count(closed) AS checked FROM async_fdw_get_connections(false);
COMMIT;
-- The transaction over, its connections are kept, idle, not used by the
-- next transaction until it reads through them.
SELECT server_name, valid, bool_or(in_use) AS in_use, count(mode) AS modes,
       bool_or(used_in_xact) AS used_in_xact,
       bool_or(closed) AS closed, count(closed) AS checked
  FROM async_fdw_get_connections(true) GROUP BY 1, 2 ORDER BY 1;
BEGIN;
SELECT count(*) FROM fnp3;
SELECT server_name, bool_or(used_in_xact) AS used_in_xact
  FROM async_fdw_get_connections() GROUP BY 1 ORDER BY 1;
COMMIT;

-- 2. A change of server or user mapping while the transaction uses their
-- connections makes them invalid until the transaction ends, then they
-- close; as with postgres_fdw.
BEGIN;
SELECT count(*) FROM fnp;
SELECT count(*) FROM fn_pgt;
ALTER SERVER fn_a OPTIONS (ADD fetch_size '50');
ALTER USER MAPPING FOR PUBLIC SERVER fn_b OPTIONS (ADD password_required 'true');
ALTER SERVER fn_pg OPTIONS (ADD fetch_size '50');
SELECT server_name, valid, count(*) FROM async_fdw_get_connections()
 GROUP BY 1, 2 ORDER BY 1;
SELECT server_name, valid FROM postgres_fdw_get_connections() ORDER BY 1;
-- Invalid ones still work in the transaction.
SELECT count(*) FROM fnp;
COMMIT;
SELECT * FROM async_fdw_get_connections();
SELECT server_name, valid FROM postgres_fdw_get_connections() ORDER BY 1;
SELECT fn_remote('fn_a') AS fn_a, fn_remote('fn_b') AS fn_b;

-- A server dropped while the transaction uses it: no server_name (and no
-- user_name: its mapping went with it), as with postgres_fdw; a disconnect
-- cannot close it.
BEGIN;
SELECT count(*) FROM fn_dt;
SELECT count(*) FROM fn_pgdt;
DROP SERVER fn_d CASCADE;
DROP SERVER fn_pgd CASCADE;
SELECT server_name, valid, user_name, in_use FROM async_fdw_get_connections();
SELECT server_name, valid FROM postgres_fdw_get_connections();
SELECT async_fdw_disconnect_all();
SELECT postgres_fdw_disconnect_all();
COMMIT;
SELECT * FROM async_fdw_get_connections();
SELECT server_name, valid FROM postgres_fdw_get_connections();
SELECT fn_remote('fn_d') AS fn_d, fn_remote('fn_pgd') AS fn_pgd;

-- Between transactions, a change or a drop closes the connection at once,
-- as with postgres_fdw: also the one kept after a transaction that only
-- read, whose COMMIT answer async_fdw did not wait for (a dropped server's
-- used to stay open for the backend's life).
SELECT count(*) FROM fn_et;
SELECT count(*) FROM fn_pget;
SELECT server_name, valid, in_use FROM async_fdw_get_connections();
ALTER SERVER fn_e OPTIONS (ADD fetch_size '50');
SELECT * FROM async_fdw_get_connections();
SELECT fn_remote('fn_e') AS fn_e;
SELECT count(*) FROM fn_et;
DROP SERVER fn_e CASCADE;
DROP SERVER fn_pge CASCADE;
SELECT * FROM async_fdw_get_connections();
SELECT server_name, valid FROM postgres_fdw_get_connections();
SELECT fn_remote('fn_e') AS fn_e, fn_remote('fn_pge') AS fn_pge;

-- 3. Inside a transaction: connections it uses are kept (warning, false,
-- and they go on working), the others are closed.
SELECT count(*) FROM fnp;
SELECT count(*) FROM fn_pgt;
BEGIN;
SELECT count(*) FROM fnp3;
SELECT count(*) FROM fn_pgt;
SELECT async_fdw_disconnect('fn_b');
SELECT postgres_fdw_disconnect('fn_pg');
SELECT count(*) FROM fnp3;
SELECT count(*) FROM fn_pgt;
-- fn_a's connections are idle: closed; fn_b's is kept with a warning.
SELECT async_fdw_disconnect_all();
SELECT server_name, in_use FROM async_fdw_get_connections();
SELECT fn_remote('fn_a') AS fn_a;
SELECT count(*) FROM fnp;
COMMIT;

-- 4. Outside a transaction every connection closes, and its remote
-- backend goes.
SELECT count(*) FROM fnp;
SELECT count(*) FROM fn_pgt;
SELECT server_name, count(*) > 0 AS open FROM async_fdw_get_connections()
 GROUP BY 1 ORDER BY 1;
SELECT async_fdw_disconnect('fn_a');
SELECT server_name FROM async_fdw_get_connections();
SELECT fn_remote('fn_a') AS fn_a;
SELECT async_fdw_disconnect('fn_a');            -- nothing left to close
SELECT async_fdw_disconnect_all();
SELECT * FROM async_fdw_get_connections();
SELECT fn_remote('fn_a') AS fn_a, fn_remote('fn_b') AS fn_b;
SELECT async_fdw_disconnect_all();              -- nothing left to close
SELECT postgres_fdw_disconnect('fn_pg'), postgres_fdw_disconnect('fn_pg');
-- Closed connections open again when needed.
SELECT count(*) FROM fnp;
SELECT server_name, count(*) > 0 AS open FROM async_fdw_get_connections()
 GROUP BY 1 ORDER BY 1;
SELECT async_fdw_disconnect_all();

-- 5. Server names: NULL gives NULL (the functions are strict), an unknown
-- name the same error as postgres_fdw's (42704), a server of the other
-- wrapper false (no connection of this one to it), both ways.
\set VERBOSITY sqlstate
SELECT async_fdw_disconnect(NULL) IS NULL AS afdw, postgres_fdw_disconnect(NULL) IS NULL AS pg;
SELECT async_fdw_disconnect('fn_nosuch');
SELECT postgres_fdw_disconnect('fn_nosuch');
\set VERBOSITY default
SELECT async_fdw_disconnect('fn_nosuch');
SELECT postgres_fdw_disconnect('fn_nosuch');
SELECT count(*) FROM fn_pgt;
SELECT count(*) FROM fnp3;
SELECT async_fdw_disconnect('fn_pg'), postgres_fdw_disconnect('fn_b');
SELECT server_name FROM async_fdw_get_connections();
SELECT server_name FROM postgres_fdw_get_connections();
SELECT async_fdw_disconnect_all(), postgres_fdw_disconnect_all();

-- Declared like postgres_fdw's: every user may call them (they act on the
-- caller's connections only), strict, volatile, parallel restricted.
-- (postgres_fdw_get_connections's arguments and columns are those of the
-- server's version: 15 has two columns, 18 async_fdw's first six.  Its
-- columns are named above as both versions have them.)
SELECT p.proname,
       CASE WHEN p.proname = 'postgres_fdw_get_connections' THEN '(as the version has them)'
            ELSE pg_get_function_arguments(p.oid) END AS args,
       pg_get_function_result(p.oid) AS result,
       p.proisstrict, p.provolatile, p.proparallel, p.proacl
  FROM pg_proc p
 WHERE p.proname LIKE 'async_fdw_%' OR p.proname LIKE 'postgres_fdw_%'
 ORDER BY p.proname;

DROP FUNCTION fn_remote(text);
DROP TABLE fnp;
DROP FOREIGN TABLE fn_pgt;
DROP TABLE remote.fn, remote.fn0, remote.fn1, remote.fn2, remote.fn3;
DROP SERVER fn_a, fn_b, fn_pg CASCADE;
DROP EXTENSION postgres_fdw;

-- 6. Versions: CREATE EXTENSION installs the control file's default
-- version; 1.0 updates to it and then has the same functions as a fresh
-- install.
SELECT e.extversion, e.extversion = a.default_version AS is_default
  FROM pg_extension e JOIN pg_available_extensions a ON a.name = e.extname
 WHERE e.extname = 'async_fdw';
SELECT name, version, installed FROM pg_available_extension_versions
 WHERE name = 'async_fdw' ORDER BY version;
SELECT current_database() AS fn_regdb \gset
CREATE DATABASE fn_update;
\c fn_update
CREATE EXTENSION async_fdw VERSION '1.0';
SELECT extversion FROM pg_extension WHERE extname = 'async_fdw';
SELECT count(*) FROM pg_proc WHERE proname LIKE 'async_fdw_%connect%';
ALTER EXTENSION async_fdw UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'async_fdw';
CREATE TABLE fn_updated AS
  SELECT p.proname, pg_get_function_arguments(p.oid) AS args,
         pg_get_function_result(p.oid) AS result,
         p.proisstrict, p.provolatile, p.proparallel, p.proacl
    FROM pg_depend d JOIN pg_proc p ON p.oid = d.objid
   WHERE d.refclassid = 'pg_extension'::regclass AND d.classid = 'pg_proc'::regclass
     AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'async_fdw');
SELECT proname FROM fn_updated ORDER BY 1;
SELECT * FROM async_fdw_get_connections();
SELECT async_fdw_disconnect_all();
DROP EXTENSION async_fdw;

-- 1.3 to 1.4: the function of the same library answers the declaration of
-- an installation not updated yet (no argument, 1.3's columns) and, once
-- updated, 1.4's, on the same open connection.
CREATE EXTENSION async_fdw VERSION '1.3';
DO $$
BEGIN
  EXECUTE format('CREATE SERVER fn_up FOREIGN DATA WRAPPER async_fdw
                  OPTIONS (host %L, port %L, dbname %L)',
                 coalesce(nullif(current_setting('unix_socket_directories'), ''), 'localhost'),
                 current_setting('port'), current_database());
END
$$;
CREATE USER MAPPING FOR CURRENT_USER SERVER fn_up;
CREATE FOREIGN TABLE fn_up_t (extversion text)
  SERVER fn_up OPTIONS (schema_name 'pg_catalog', table_name 'pg_extension');
SELECT pg_get_function_arguments('async_fdw_get_connections'::regproc) AS args,
       pg_get_function_result('async_fdw_get_connections'::regproc) AS result;
BEGIN;
SELECT count(*) > 0 AS read FROM fn_up_t;
SELECT server_name, valid, user_name = current_user AS mine, slot, in_use, mode,
       remote_pid = (SELECT pid FROM pg_stat_activity
                      WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()
                        AND datname = current_database()) AS remote_pid,
       opened_at BETWEEN now() AND clock_timestamp() AS opened, can_prepare IS NULL AS can_prepare_unknown
  FROM async_fdw_get_connections();
ALTER EXTENSION async_fdw UPDATE TO '1.4';
SELECT extversion FROM pg_extension WHERE extname = 'async_fdw';
SELECT pg_get_function_arguments('async_fdw_get_connections'::regproc) AS args,
       pg_get_function_result('async_fdw_get_connections'::regproc) AS result;
SELECT server_name, user_name = current_user AS mine, valid, used_in_xact, closed,
       remote_backend_pid = (SELECT pid FROM pg_stat_activity
                              WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()
                                AND datname = current_database()) AS remote_pid,
       slot, in_use, mode, opened_at BETWEEN now() AND clock_timestamp() AS opened,
       can_prepare IS NULL AS can_prepare_unknown
  FROM async_fdw_get_connections(true);
COMMIT;
SELECT async_fdw_disconnect_all();
DROP SERVER fn_up CASCADE;
DROP EXTENSION async_fdw;

-- 1.5 to 1.6: 1.5's declaration (1.4's columns) is answered without the
-- new column; 1.6's has commit_fence, 'not preloaded' here (the regression
-- server does not preload async_fdw; 022_atomic_visibility.pl shows 'on'
-- and 'turned off').
CREATE EXTENSION async_fdw VERSION '1.5';
DO $$
BEGIN
  EXECUTE format('CREATE SERVER fn_up FOREIGN DATA WRAPPER async_fdw
                  OPTIONS (host %L, port %L, dbname %L)',
                 coalesce(nullif(current_setting('unix_socket_directories'), ''), 'localhost'),
                 current_setting('port'), current_database());
END
$$;
CREATE USER MAPPING FOR CURRENT_USER SERVER fn_up;
CREATE FOREIGN TABLE fn_up_t (extversion text)
  SERVER fn_up OPTIONS (schema_name 'pg_catalog', table_name 'pg_extension');
BEGIN;
SELECT count(*) > 0 AS read FROM fn_up_t;
SELECT server_name, used_in_xact, can_prepare FROM async_fdw_get_connections();
ALTER EXTENSION async_fdw UPDATE TO '1.6';
SELECT extversion FROM pg_extension WHERE extname = 'async_fdw';
SELECT server_name, used_in_xact, can_prepare, commit_fence FROM async_fdw_get_connections();
COMMIT;
SELECT async_fdw_disconnect_all();
DROP SERVER fn_up CASCADE;
DROP EXTENSION async_fdw;
CREATE EXTENSION async_fdw;
SELECT extversion FROM pg_extension WHERE extname = 'async_fdw';
-- The fresh install and the update differ in nothing (no row either way).
(SELECT p.proname, pg_get_function_arguments(p.oid) AS args,
        pg_get_function_result(p.oid) AS result,
        p.proisstrict, p.provolatile, p.proparallel, p.proacl
   FROM pg_depend d JOIN pg_proc p ON p.oid = d.objid
  WHERE d.refclassid = 'pg_extension'::regclass AND d.classid = 'pg_proc'::regclass
    AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'async_fdw')
 EXCEPT SELECT * FROM fn_updated)
UNION ALL
(SELECT * FROM fn_updated
 EXCEPT
 SELECT p.proname, pg_get_function_arguments(p.oid) AS args,
        pg_get_function_result(p.oid) AS result,
        p.proisstrict, p.provolatile, p.proparallel, p.proacl
   FROM pg_depend d JOIN pg_proc p ON p.oid = d.objid
  WHERE d.refclassid = 'pg_extension'::regclass AND d.classid = 'pg_proc'::regclass
    AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'async_fdw'));
\c :fn_regdb
DROP DATABASE fn_update;
