--
-- xact: remote transactions start at first use, are REPEATABLE READ (or
-- SERIALIZABLE), end with the local transaction, and mirror savepoints
--
CREATE EXTENSION IF NOT EXISTS dblink;

-- What the remote sessions of async_fdw are doing right now.
CREATE VIEW afdw_sessions AS
  SELECT state
    FROM pg_stat_activity
   WHERE application_name = 'async_fdw' AND pid <> pg_backend_pid();

-- The isolation level follows the local one.
SELECT isolation FROM session_info;
BEGIN ISOLATION LEVEL SERIALIZABLE;
SELECT isolation FROM session_info;
COMMIT;
BEGIN ISOLATION LEVEL READ COMMITTED;
SELECT isolation FROM session_info;
COMMIT;

-- Inside a transaction the remote transaction stays open; after it, none.
BEGIN;
SELECT count(*) FROM ft1;
SELECT state FROM afdw_sessions ORDER BY 1;
COMMIT;
SELECT * FROM afdw_remote_states();
BEGIN;
SELECT count(*) FROM ft1;
ROLLBACK;
SELECT * FROM afdw_remote_states();

-- An error ends the remote transaction too.
BEGIN;
SELECT count(*) FROM ft1;
SELECT 1 / 0;
ROLLBACK;
SELECT * FROM afdw_remote_states();

-- One snapshot per local transaction: rows committed remotely by another
-- session between two scans are seen by neither.  The checks run in each
-- fetch mode, streams first; every round inserts rows of its own.
SELECT dblink_connect('other', afdw_test_conninfo());
CREATE TABLE remote.snap (id int);
INSERT INTO remote.snap VALUES (1);
CREATE FOREIGN TABLE ft_snap (id int) SERVER loopback
  OPTIONS (schema_name 'remote', table_name 'snap', fetch_mode 'stream');
-- The checks are in include/snap_block.sql.  pg_regress feeds this file to
-- psql on standard input, so the block is found from the test directory it
-- names.
\getenv abs_srcdir PG_ABS_SRCDIR
\set snap_block :abs_srcdir '/sql/include/snap_block.sql'
\set round 1
\i :snap_block

-- The same with cursors.
ALTER FOREIGN TABLE ft_snap OPTIONS (SET fetch_mode 'cursor');
\set round 2
\i :snap_block

-- The same in auto mode, where the scan under the LIMIT uses a cursor and
-- the others stream.
ALTER FOREIGN TABLE ft_snap OPTIONS (DROP fetch_mode);
\set round 3
\i :snap_block

-- Savepoints: the remote savepoint is made when the connection is first
-- used inside the subtransaction, and rolled back or released with it.
BEGIN;
SELECT count(*) FROM ft1;
SAVEPOINT a;
SELECT count(*) FROM ft1 WHERE id > 500;
SAVEPOINT b;
SELECT count(*) FROM ft1 WHERE id > 900;
ROLLBACK TO SAVEPOINT b;
SELECT count(*) FROM ft1 WHERE id > 990;
RELEASE SAVEPOINT a;
SELECT count(*) FROM ft1;
COMMIT;
SELECT * FROM afdw_remote_states();

-- A remote error inside a subtransaction leaves the outer one usable.
BEGIN;
SELECT count(*) FROM ft1;
SAVEPOINT a;
SELECT * FROM ft1 WHERE 1 / (id - 5) > 0;
ROLLBACK TO SAVEPOINT a;
SELECT count(*) FROM ft1;
SAVEPOINT c;
SELECT count(*) FROM ft1 WHERE 1 / (id - 5000) > 0;
RELEASE SAVEPOINT c;
COMMIT;
SELECT * FROM afdw_remote_states();

-- Subtransactions in PL/pgSQL exception blocks.
DO $$
DECLARE
  n int;
BEGIN
  FOR i IN 1..3 LOOP
    BEGIN
      SELECT count(*) INTO n FROM ft1 WHERE 1 / (id - i) > 0;
    EXCEPTION WHEN division_by_zero THEN
      RAISE NOTICE 'caught division by zero in round %', i;
    END;
  END LOOP;
  SELECT count(*) INTO n FROM ft1;
  RAISE NOTICE 'count after the loop: %', n;
END
$$;
SELECT * FROM afdw_remote_states();

-- Subtransactions opened before the first use.
BEGIN;
SAVEPOINT x;
SAVEPOINT y;
SELECT count(*) FROM ft1;
ROLLBACK TO SAVEPOINT x;
SELECT count(*) FROM ft1;
COMMIT;

-- PREPARE TRANSACTION is refused after using async_fdw, and nothing stays
-- open remotely.
BEGIN;
SELECT count(*) FROM ft1;
PREPARE TRANSACTION 'afdw_regress';
SELECT count(*) FROM pg_prepared_xacts;
SELECT * FROM afdw_remote_states();
-- Without async_fdw in the transaction it works as usual.
BEGIN;
SELECT 1;
PREPARE TRANSACTION 'afdw_regress';
COMMIT PREPARED 'afdw_regress';

-- A cursor over a foreign table, read partly, closed or left open.
BEGIN;
DECLARE c CURSOR FOR SELECT id FROM ft1 ORDER BY id;
FETCH 3 FROM c;
FETCH 2 FROM c;
CLOSE c;
DECLARE d CURSOR FOR SELECT id FROM ft1 WHERE id > 995;
FETCH 2 FROM d;
COMMIT;
SELECT * FROM afdw_remote_states();

-- statement_timeout interrupts a remote query that runs long, and the
-- connection stays usable.
CREATE FUNCTION remote.slow(s float8) RETURNS int
  LANGUAGE sql AS 'SELECT 1 FROM pg_sleep(s)';
CREATE VIEW remote.slow_view AS SELECT remote.slow(5) AS x;
CREATE FOREIGN TABLE ft_slow (x int) SERVER loopback
  OPTIONS (schema_name 'remote', table_name 'slow_view');
SET statement_timeout = '300ms';
SELECT * FROM ft_slow;
RESET statement_timeout;
SELECT count(*) FROM ft1;
SELECT count(*) FROM pg_stat_activity
 WHERE application_name = 'async_fdw' AND state = 'active'
   AND pid <> pg_backend_pid();

SELECT dblink_disconnect('other');
DROP FOREIGN TABLE ft_snap, ft_slow;
DROP VIEW remote.slow_view;
DROP FUNCTION remote.slow(float8);
DROP TABLE remote.snap;
DROP VIEW afdw_sessions;
DROP EXTENSION dblink;

-- A cursor declared at the transaction's level and fetched in a savepoint
-- that is rolled back: it goes on from where the FETCHes left it, as a
-- cursor of a local table does (no FETCH is left in flight for the
-- rollback to cancel).
CREATE FUNCTION cursor_rest(tbl text, OUT n bigint, OUT s bigint) LANGUAGE plpgsql AS $$
DECLARE
  c refcursor;
  r record;
BEGIN
  n := 0; s := 0;
  OPEN c FOR EXECUTE format('SELECT id FROM %s', tbl);
  FETCH c INTO r; n := n + 1; s := s + r.id;
  BEGIN
    FOR i IN 1..300 LOOP
      FETCH c INTO r; n := n + 1; s := s + r.id;
    END LOOP;
    RAISE EXCEPTION 'undone';
  EXCEPTION WHEN raise_exception THEN NULL;
  END;
  LOOP
    FETCH c INTO r;
    EXIT WHEN NOT FOUND;
    n := n + 1; s := s + r.id;
  END LOOP;
END
$$;
SELECT * FROM cursor_rest('remote.t1');
SELECT * FROM cursor_rest('ft1');
BEGIN;
DECLARE c CURSOR FOR SELECT id FROM ft1 ORDER BY id;
FETCH 5 FROM c;
SAVEPOINT a;
MOVE 300 IN c;
ROLLBACK TO SAVEPOINT a;
FETCH 3 FROM c;
COMMIT;
DROP FUNCTION cursor_rest(text, OUT bigint, OUT bigint);
