--
-- idle_window: a connection past the first, which the remote server closes
-- once it has been idle for idle_timeout, is opened again rather than used
-- when the server may close it before the scan's first command arrives
--
CALL afdw_test_server('loopback_idle', options => 'max_connections ''2'', idle_timeout ''600''');
CREATE USER MAPPING FOR CURRENT_USER SERVER loopback_idle;
CREATE TABLE remote.iw1 (id int);
INSERT INTO remote.iw1 SELECT generate_series(1, 10);
CREATE TABLE remote.iw2 (id int);
INSERT INTO remote.iw2 SELECT generate_series(1, 20);
CREATE FOREIGN TABLE iw1 (id int) SERVER loopback_idle
  OPTIONS (schema_name 'remote', table_name 'iw1');
CREATE FOREIGN TABLE iw2 (id int) SERVER loopback_idle
  OPTIONS (schema_name 'remote', table_name 'iw2');
CREATE FUNCTION iw_wait(float8) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_sleep($1);
  RETURN 'waited';
END
$$;
-- The lines of EXPLAIN (VERBOSE) of Q, trimmed.
CREATE FUNCTION iw_plan_lines(q text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
  l text;
BEGIN
  FOR l IN EXECUTE 'EXPLAIN (VERBOSE, COSTS OFF) ' || q LOOP
    RETURN NEXT btrim(l);
  END LOOP;
END
$$;
-- The remote backend of slot 1, or NULL.
CREATE FUNCTION iw_slot1_pid() RETURNS int LANGUAGE sql AS $$
  SELECT remote_backend_pid FROM async_fdw_get_connections()
  WHERE server_name = 'loopback_idle' AND slot = 1
$$;

-- Two scans hold slots 0 and 1; slot 1 leaves its transaction with the
-- remote idle_session_timeout of 600 ms.
SELECT (SELECT count(*) FROM iw1) AS n1, (SELECT count(*) FROM iw2) AS n2;
-- The next statement takes slot 1 at once, fresh, but its scans send
-- their first commands only when the subplans run, after 0.8 s: slot 1's
-- remote session would be closed by then, and is opened again instead.
SELECT iw_wait(0.8), (SELECT count(*) FROM iw1) AS n1, (SELECT count(*) FROM iw2) AS n2;

-- The same when the scan's parameter is what takes the time: the value of
-- its condition comes from a subplan that runs when the scan is about to
-- send its first command, and the scan opens slot 1 again after it,
-- rather than before it.
SELECT (SELECT count(*) FROM iw1) AS n1, (SELECT count(*) FROM iw2) AS n2;
SELECT (SELECT count(*) FROM iw1) AS n1,
       (SELECT count(*) FROM iw2 WHERE id > (SELECT length(iw_wait(0.8)))) AS n2;
-- (The remote query of iw2 takes the subplan's value as a parameter.)
SELECT line FROM iw_plan_lines(
  'SELECT (SELECT count(*) FROM iw1) AS n1,
          (SELECT count(*) FROM iw2 WHERE id > (SELECT length(iw_wait(0.8)))) AS n2')
  AS line WHERE line LIKE '%Remote SQL%';

-- A transaction that does not use slot 1 does not restart its idle time:
-- after 0.5 s of statements on slot 0 alone, slot 1 is in the last
-- quarter of its 600 ms, and the next statement opens it again rather
-- than use it (the remote server would close it in a moment).
SELECT (SELECT count(*) FROM iw1) AS n1, (SELECT count(*) FROM iw2) AS n2;
CREATE TEMP TABLE iw_before AS SELECT iw_slot1_pid() AS pid;
SELECT pid IS NOT NULL AS open FROM iw_before;
SELECT count(*), iw_wait(0.25) FROM iw1;
SELECT count(*), iw_wait(0.25) FROM iw1;
SELECT (SELECT count(*) FROM iw1) AS n1, (SELECT count(*) FROM iw2) AS n2;
SELECT iw_slot1_pid() <> pid AS reopened FROM iw_before;

-- Cleanup
DROP FUNCTION iw_slot1_pid();
DROP FUNCTION iw_plan_lines(text);
DROP FUNCTION iw_wait(float8);
DROP FOREIGN TABLE iw1, iw2;
DROP TABLE remote.iw1, remote.iw2;
DROP USER MAPPING FOR CURRENT_USER SERVER loopback_idle;
DROP SERVER loopback_idle;
