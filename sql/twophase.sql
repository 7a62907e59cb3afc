--
-- twophase: two-phase commit of the remote transactions that wrote, when
-- async_fdw.two_phase_commit asks for it, and the recovery of remote
-- transactions left prepared.  (Crashes are in test/t/015_two_phase_commit.pl.)
--
CREATE SCHEMA tp;
CREATE TABLE tp.a (x int PRIMARY KEY);
CREATE TABLE tp.b (x int PRIMARY KEY);
CREATE FOREIGN TABLE tpa (x int) SERVER loopback OPTIONS (schema_name 'tp', table_name 'a');
CREATE FOREIGN TABLE tpb (x int) SERVER loopback2 OPTIONS (schema_name 'tp', table_name 'b');
CREATE TABLE tp_local (x int);
-- The records left (a backend's next two-phase commit, or recovery,
-- deletes those of its finished ones), and how many remote transactions the
-- commit of the transaction that started at T prepared: its records bear
-- its start time.
CREATE FUNCTION tp_records() RETURNS bigint LANGUAGE sql AS
  $$ SELECT count(*) FROM async_fdw_prepared_xacts $$;
CREATE FUNCTION tp_prepared(t timestamptz) RETURNS bigint LANGUAGE sql AS
  $$ SELECT count(*) FROM async_fdw_prepared_xacts WHERE prepared_at = t $$;
SHOW async_fdw.two_phase_commit;
-- Earlier tests' two-phase commits left records: recovery deletes them.
SELECT count(*) FROM async_fdw_recover_prepared_transactions();
SELECT tp_records();

-- auto: one server written, no two-phase commit.
BEGIN; SELECT now() AS t \gset
INSERT INTO tpa VALUES (1); COMMIT;
SELECT tp_prepared(:'t');
-- Two servers: both prepared, then committed.
BEGIN; SELECT now() AS t \gset
INSERT INTO tpa VALUES (2); INSERT INTO tpb VALUES (2); COMMIT;
SELECT tp_prepared(:'t');
SELECT count(*) FROM pg_prepared_xacts;
-- One server and a local table.
BEGIN; SELECT now() AS t \gset
INSERT INTO tpa VALUES (3); INSERT INTO tp_local VALUES (3); COMMIT;
SELECT tp_prepared(:'t');
-- The records of the backend's earlier ones went with it.
SELECT tp_records();
-- A server that only read takes no part.
BEGIN; SELECT now() AS t \gset
SELECT count(*) FROM tpb; INSERT INTO tpa VALUES (4); COMMIT;
SELECT tp_prepared(:'t');
-- on: one server suffices.
SET async_fdw.two_phase_commit = on;
BEGIN; SELECT now() AS t \gset
INSERT INTO tpa VALUES (5); COMMIT;
SELECT tp_prepared(:'t');
-- off: never.
SET async_fdw.two_phase_commit = off;
BEGIN; SELECT now() AS t \gset
INSERT INTO tpa VALUES (6); INSERT INTO tpb VALUES (6); COMMIT;
SELECT tp_prepared(:'t');
RESET async_fdw.two_phase_commit;
SELECT * FROM tp.a ORDER BY x;
SELECT * FROM tp.b ORDER BY x;

-- A remote transaction that fails at PREPARE (a deferred constraint
-- trigger fires then): the local transaction fails with the remote error,
-- and nothing stays anywhere.
CREATE FUNCTION tp.refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.x = 99 THEN
    RAISE EXCEPTION 'b refuses 99' USING ERRCODE = 'check_violation';
  END IF;
  RETURN NULL;
END
$$;
CREATE CONSTRAINT TRIGGER b_refuse AFTER INSERT ON tp.b
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION tp.refuse();
\set VERBOSITY sqlstate
BEGIN; INSERT INTO tpa VALUES (99); INSERT INTO tpb VALUES (99); INSERT INTO tp_local VALUES (99); COMMIT;
\set VERBOSITY default
SELECT (SELECT count(*) FROM tp.a WHERE x = 99) AS a, (SELECT count(*) FROM tp.b WHERE x = 99) AS b,
       (SELECT count(*) FROM tp_local WHERE x = 99) AS local,
       (SELECT count(*) FROM pg_prepared_xacts) AS prepared;
SELECT tp_records();

-- PREPARE TRANSACTION of the local transaction still fails clearly.
BEGIN; INSERT INTO tpa VALUES (7);
PREPARE TRANSACTION 'local';
SELECT count(*) FROM tp.a WHERE x = 7;

-- Recovery: the records of committed transactions no longer prepared
-- anywhere are deleted.
SELECT * FROM async_fdw_recover_prepared_transactions();
SELECT tp_records();

-- Remote transactions left prepared, as a coordinator that crashed would
-- leave them: one whose local transaction committed (its record exists),
-- one whose local transaction aborted (no record).  Here the "remote"
-- server is this very instance, so they are prepared in this session.
SELECT 'afdw_' || system_identifier || '_' ||
       (SELECT oid FROM pg_database WHERE datname = current_database()) || '_'
  AS prefix FROM pg_control_system() \gset
SELECT umid AS umid1 FROM pg_user_mappings WHERE srvname = 'loopback' AND usename = current_user \gset
SELECT umid AS umid2 FROM pg_user_mappings WHERE srvname = 'loopback2' AND usename = current_user \gset
-- Local transaction ids that are over (1 and 2, the bootstrap's).
SELECT :'prefix' || '1_' || :'umid1' AS gid1, :'prefix' || '2_' || :'umid2' AS gid2 \gset
BEGIN; INSERT INTO tp.a VALUES (100);
PREPARE TRANSACTION :'gid1';
BEGIN; INSERT INTO tp.b VALUES (101);
PREPARE TRANSACTION :'gid2';
INSERT INTO async_fdw_prepared_xacts (gid, server_id, user_mapping_id)
  SELECT :'gid1', srvid, umid FROM pg_user_mappings
   WHERE srvname = 'loopback' AND usename = current_user;
SELECT server_name, gid = :'gid1' AS first, local_state, action
  FROM async_fdw_recover_prepared_transactions(dry_run => true) ORDER BY 1;
SELECT count(*) FROM pg_prepared_xacts;
-- One server at a time: loopback's is committed, loopback2's left.
SELECT server_name, gid = :'gid1' AS first, local_state, action
  FROM async_fdw_recover_prepared_transactions(server => 'loopback') ORDER BY 1;
SELECT gid = :'gid2' AS second FROM pg_prepared_xacts;
SELECT server_name, gid = :'gid1' AS first, local_state, action
  FROM async_fdw_recover_prepared_transactions(false, 'loopback2') ORDER BY 1;
SELECT count(*) FROM pg_prepared_xacts;
SELECT x FROM tp.a WHERE x >= 100 UNION ALL SELECT x FROM tp.b WHERE x >= 100;
SELECT tp_records();
-- Left alone: one whose local transaction is in progress (here the
-- prepared transaction itself, named after its own id), and one whose user
-- mapping is gone (no mapping has OID 1; every server of this database lists
-- it: those of other test files too, left out here).
BEGIN; INSERT INTO tp.a VALUES (102);
SELECT :'prefix' || pg_current_xact_id() || '_' || :'umid1' AS gid3 \gset
PREPARE TRANSACTION :'gid3';
SELECT :'prefix' || '2_1' AS gid4 \gset
BEGIN; INSERT INTO tp.b VALUES (103);
PREPARE TRANSACTION :'gid4';
SELECT server_name, gid = :'gid3' AS third, local_state, action
  FROM async_fdw_recover_prepared_transactions()
 WHERE server_name IN ('loopback', 'loopback2') ORDER BY 1, 2;
SELECT count(*) FROM pg_prepared_xacts;
ROLLBACK PREPARED :'gid3';
ROLLBACK PREPARED :'gid4';

-- A server that cannot be reached is reported; the others are recovered.
CREATE SERVER tp_down FOREIGN DATA WRAPPER async_fdw
  OPTIONS (host '127.0.0.1', port '1', dbname 'postgres', connect_timeout '2');
CREATE USER MAPPING FOR CURRENT_USER SERVER tp_down;
SELECT server_name, gid, local_state, action LIKE 'failed: could not connect%' AS failed
  FROM async_fdw_recover_prepared_transactions();
DROP SERVER tp_down CASCADE;
-- A server that does not exist, one of another wrapper, a null dry_run.
CREATE FOREIGN DATA WRAPPER tp_other_fdw;
CREATE SERVER tp_other FOREIGN DATA WRAPPER tp_other_fdw;
SELECT * FROM async_fdw_recover_prepared_transactions(server => 'tp_nowhere');
SELECT * FROM async_fdw_recover_prepared_transactions(server => 'tp_other');
SELECT * FROM async_fdw_recover_prepared_transactions(NULL);
DROP FOREIGN DATA WRAPPER tp_other_fdw CASCADE;
-- A wrapper of another name whose handler is async_fdw's (by another SQL
-- name): its server is async_fdw's, and recovered (no user mapping: nothing
-- to list).
CREATE FUNCTION tp_alias_handler() RETURNS fdw_handler
  AS '$libdir/async_fdw', 'async_fdw_handler' LANGUAGE C STRICT;
CREATE FOREIGN DATA WRAPPER tp_alias_fdw HANDLER tp_alias_handler;
CREATE SERVER tp_alias FOREIGN DATA WRAPPER tp_alias_fdw;
SELECT * FROM async_fdw_recover_prepared_transactions(server => 'tp_alias');
DROP FOREIGN DATA WRAPPER tp_alias_fdw CASCADE;
DROP FUNCTION tp_alias_handler();

-- Only superusers may recover (it finishes other users' transactions), and
-- nobody but async_fdw writes the records.
CREATE ROLE regress_tp_user;
SET ROLE regress_tp_user;
\set VERBOSITY sqlstate
SELECT * FROM async_fdw_recover_prepared_transactions();
INSERT INTO async_fdw_prepared_xacts (gid, server_id, user_mapping_id) VALUES ('x', 0, 0);
\set VERBOSITY default
RESET ROLE;
DROP ROLE regress_tp_user;

-- A server that a non-superuser owns, with a user mapping he made there for
-- a superuser, without a password: the recovery, which visits every server
-- as a superuser by itself, does not connect through it, as he could not
-- himself, and says why (it logged in as the superuser before).
CREATE ROLE regress_tp_owner;
GRANT USAGE ON FOREIGN DATA WRAPPER async_fdw TO regress_tp_owner;
CALL afdw_test_server('tp_owned');
ALTER SERVER tp_owned OWNER TO regress_tp_owner;
SET ROLE regress_tp_owner;
CREATE USER MAPPING FOR SESSION_USER SERVER tp_owned;
RESET ROLE;
SELECT server_name, gid, action
  FROM async_fdw_recover_prepared_transactions(server => 'tp_owned');
-- With a superuser for owner, it does (nothing to finish there).
ALTER SERVER tp_owned OWNER TO CURRENT_USER;
SELECT server_name, gid, action
  FROM async_fdw_recover_prepared_transactions(server => 'tp_owned');
DROP SERVER tp_owned CASCADE;
REVOKE USAGE ON FOREIGN DATA WRAPPER async_fdw FROM regress_tp_owner;
DROP ROLE regress_tp_owner;
-- The listing names every object with its schema: a server whose options
-- put a schema of its own first on the remote search_path (which a
-- transaction pooler leaves to them outside remote transactions) does not
-- have the listing call that schema's "=".
CREATE SCHEMA tp_path;
CREATE FUNCTION tp_path.name_eq(name, name) RETURNS boolean LANGUAGE plpgsql
  COST 0.0001 AS $$
BEGIN
  RAISE EXCEPTION 'the listing called tp_path.=';
END
$$;
CREATE OPERATOR tp_path.= (LEFTARG = name, RIGHTARG = name, FUNCTION = tp_path.name_eq);
CALL afdw_test_server('tp_pathed',
  options => 'pooler ''transaction'', options ''-c search_path=tp_path,pg_catalog''');
CREATE USER MAPPING FOR CURRENT_USER SERVER tp_pathed;
-- (A prepared transaction of this database's prefix, not of async_fdw's
-- form, for the listing to compare: it is not recovered.)
SELECT format('afdw_%s_%s_tp_path', system_identifier,
              (SELECT oid FROM pg_database WHERE datname = current_database())) AS tp_gid
  FROM pg_control_system() \gset
BEGIN;
PREPARE TRANSACTION :'tp_gid';
SELECT server_name, gid, action
  FROM async_fdw_recover_prepared_transactions(server => 'tp_pathed');
ROLLBACK PREPARED :'tp_gid';
DROP SERVER tp_pathed CASCADE;
DROP SCHEMA tp_path CASCADE;

-- The server option two_phase_commit overrides the setting for its
-- server; a bad value is refused.
\set VERBOSITY sqlstate
ALTER SERVER loopback OPTIONS (ADD two_phase_commit 'maybe');
\set VERBOSITY default
SET async_fdw.two_phase_commit = off;
ALTER SERVER loopback OPTIONS (ADD two_phase_commit 'on');
BEGIN; SELECT now() AS t \gset
INSERT INTO tpa VALUES (200); COMMIT;
SELECT tp_prepared(:'t');
-- The session knows now that loopback can prepare.
SELECT bool_or(can_prepare) FROM async_fdw_get_connections()
 WHERE server_name = 'loopback';
-- One server on and another off cannot both be obeyed: an error, and
-- nothing is written.
ALTER SERVER loopback2 OPTIONS (ADD two_phase_commit 'off');
\set VERBOSITY sqlstate
BEGIN; INSERT INTO tpa VALUES (201); INSERT INTO tpb VALUES (201); COMMIT;
\set VERBOSITY default
SELECT (SELECT count(*) FROM tp.a WHERE x = 201) + (SELECT count(*) FROM tp.b WHERE x = 201) AS written;
-- But a write rolled back with its savepoint (or exception block) is no
-- write: the other server commits as if alone.
BEGIN; SELECT now() AS t \gset
SAVEPOINT a; INSERT INTO tpb VALUES (204); ROLLBACK TO SAVEPOINT a;
INSERT INTO tpa VALUES (204); COMMIT;
SELECT tp_prepared(:'t');
DO $$
BEGIN
  BEGIN
    INSERT INTO tpb VALUES (205);
    RAISE EXCEPTION 'undone';
  EXCEPTION WHEN raise_exception THEN NULL;
  END;
  INSERT INTO tpa VALUES (205);
END
$$;
-- A write kept by a savepoint released still counts.
\set VERBOSITY sqlstate
BEGIN; SAVEPOINT a; INSERT INTO tpb VALUES (206); RELEASE SAVEPOINT a;
INSERT INTO tpa VALUES (206); COMMIT;
\set VERBOSITY default
SELECT x, (SELECT count(*) FROM tp.b WHERE b.x = a.x) AS in_b
  FROM tp.a WHERE x BETWEEN 204 AND 206 ORDER BY x;
-- Off for the server, although on for the session: no PREPARE.
SET async_fdw.two_phase_commit = on;
ALTER SERVER loopback OPTIONS (SET two_phase_commit 'off');
BEGIN; SELECT now() AS t \gset
INSERT INTO tpa VALUES (202); COMMIT;
SELECT tp_prepared(:'t');
-- auto for both servers, although off for the session: both prepare.
SET async_fdw.two_phase_commit = off;
ALTER SERVER loopback OPTIONS (SET two_phase_commit 'auto');
ALTER SERVER loopback2 OPTIONS (SET two_phase_commit 'auto');
BEGIN; SELECT now() AS t \gset
INSERT INTO tpa VALUES (203); INSERT INTO tpb VALUES (203); COMMIT;
SELECT tp_prepared(:'t');
ALTER SERVER loopback OPTIONS (DROP two_phase_commit);
ALTER SERVER loopback2 OPTIONS (DROP two_phase_commit);

-- parallel_commit: true (async_fdw's default) sends the COMMITs of all
-- servers at once; false commits one server after another, as postgres_fdw
-- does by default.  A deferred trigger that sleeps at each COMMIT records
-- when it started: together, or half a second apart.
CREATE TABLE tp.commit_log (tbl text, at timestamptz);
CREATE FUNCTION tp.slow_commit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO tp.commit_log VALUES (TG_TABLE_NAME, clock_timestamp());
  PERFORM pg_sleep(0.5);
  RETURN NULL;
END
$$;
CREATE CONSTRAINT TRIGGER a_slow AFTER INSERT ON tp.a
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION tp.slow_commit();
CREATE CONSTRAINT TRIGGER b_slow AFTER INSERT ON tp.b
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION tp.slow_commit();
BEGIN; INSERT INTO tpa VALUES (210); INSERT INTO tpb VALUES (210); COMMIT;
SELECT count(*), max(at) - min(at) < interval '0.4 s' AS together FROM tp.commit_log;
TRUNCATE tp.commit_log;
ALTER SERVER loopback OPTIONS (ADD parallel_commit 'false');
ALTER SERVER loopback2 OPTIONS (ADD parallel_commit 'false');
BEGIN; INSERT INTO tpa VALUES (211); INSERT INTO tpb VALUES (211); COMMIT;
SELECT count(*), max(at) - min(at) >= interval '0.5 s' AS one_after_the_other FROM tp.commit_log;
ALTER SERVER loopback OPTIONS (DROP parallel_commit);
ALTER SERVER loopback2 OPTIONS (DROP parallel_commit);
RESET async_fdw.two_phase_commit;

DROP FUNCTION tp_records();
DROP FUNCTION tp_prepared(timestamptz);
DROP FOREIGN TABLE tpa, tpb;
DROP TABLE tp_local;
DROP SCHEMA tp CASCADE;
