--
-- lookup_commit: a read-only statement that is its own transaction, whose
-- scan is its server's only one and runs once, sends its query and the
-- remote COMMIT in one message (one round trip); any other keeps the
-- remote transaction open until the local one ends
--

-- The last messages the remote sessions of async_fdw received, once all
-- are idle (the answer to a COMMIT sent after the rows is not waited for),
-- each once (a session closed at the end of the transaction may still be
-- listed for a moment): a query and its COMMIT in one message, a query
-- alone (its COMMIT went later), or what else it was.
CREATE FUNCTION afdw_last_messages() RETURNS SETOF text LANGUAGE plpgsql AS $$
BEGIN
  FOR i IN 1..1000 LOOP
    PERFORM pg_stat_clear_snapshot();
    EXIT WHEN NOT EXISTS (SELECT 1 FROM pg_stat_activity
                           WHERE application_name = 'async_fdw'
                             AND pid <> pg_backend_pid() AND state <> 'idle');
    PERFORM pg_sleep(0.01);
  END LOOP;
  RETURN QUERY
    SELECT DISTINCT CASE WHEN query LIKE 'START TRANSACTION %; COMMIT TRANSACTION'
                THEN 'query and COMMIT in one message'
                WHEN query LIKE 'START TRANSACTION %'
                THEN 'query, its transaction still open'
                ELSE query END
      FROM pg_stat_activity
     WHERE application_name = 'async_fdw' AND pid <> pg_backend_pid()
     ORDER BY 1;
END
$$;

CREATE TABLE remote.lc (id int PRIMARY KEY, v text);
INSERT INTO remote.lc SELECT g, 'v' || g FROM generate_series(1, 200) g;
ANALYZE remote.lc;
CREATE FOREIGN TABLE ft_lc (id int, v text)
  SERVER loopback OPTIONS (schema_name 'remote', table_name 'lc');
CREATE FOREIGN TABLE ft_lc2 (id int, v text)
  SERVER loopback2 OPTIONS (schema_name 'remote', table_name 'lc');
CREATE TABLE local_ids (id int);
INSERT INTO local_ids VALUES (3), (5);
ANALYZE local_ids;
SELECT async_fdw_disconnect_all();

-- A lookup: query and COMMIT in one message.  (The session's first
-- transaction also sets its idle timeout after the COMMIT, so it is not
-- one.)  With the COMMIT sent after the rows, the next statement would wait
-- for its answer before sending its own query: two round trips.
SELECT * FROM ft_lc WHERE id = 1;
SELECT * FROM ft_lc WHERE id = 2;
-- The remote session is idle as soon as the statement returns: the
-- COMMIT's answer came with the rows.
SELECT pg_stat_clear_snapshot();
SELECT state FROM pg_stat_activity
 WHERE application_name = 'async_fdw' AND pid <> pg_backend_pid();
SELECT * FROM afdw_last_messages();
-- A stream (the planner's choice for a whole table) too.
SELECT count(*), max(v) FROM (SELECT * FROM ft_lc OFFSET 0) s;
SELECT * FROM afdw_last_messages();
-- A query bounded to fetch_size + 1 rows (a cursor would need a FETCH).
ALTER FOREIGN TABLE ft_lc OPTIONS (ADD fetch_mode 'cursor');
SELECT * FROM ft_lc WHERE id = 3;
SELECT * FROM afdw_last_messages();
ALTER FOREIGN TABLE ft_lc OPTIONS (DROP fetch_mode);
-- Scans of two servers: each its own.
SET enable_nestloop = off;
SELECT a.v, b.v FROM ft_lc a JOIN ft_lc2 b ON a.id + 1 = b.id WHERE a.id = 4;
SELECT a.v, b.v FROM ft_lc a JOIN ft_lc2 b ON a.id + 1 = b.id WHERE a.id = 5;
RESET enable_nestloop;
SELECT * FROM afdw_last_messages();
SELECT count(*) FROM pg_stat_activity
 WHERE application_name = 'async_fdw' AND pid <> pg_backend_pid()
   AND query LIKE 'START TRANSACTION %; COMMIT TRANSACTION';
SELECT async_fdw_disconnect('loopback2');

-- More rows than the estimate allowed for (stale statistics): the bounded
-- query tells that there are more, and the query runs again with a
-- cursor, in a remote transaction of its own; all rows come back.
ANALYZE ft_lc;
UPDATE remote.lc SET v = 'same' WHERE id <= 50;
ALTER FOREIGN TABLE ft_lc OPTIONS (ADD fetch_size '3', ADD fetch_mode 'cursor');
EXPLAIN (COSTS OFF) SELECT id FROM ft_lc WHERE v = 'same';
SELECT count(*), min(id), max(id) FROM (SELECT id FROM ft_lc WHERE v = 'same' OFFSET 0) s;
SELECT * FROM afdw_last_messages();
ALTER FOREIGN TABLE ft_lc OPTIONS (DROP fetch_size, DROP fetch_mode);
UPDATE remote.lc SET v = 'v' || id WHERE id <= 50;

-- A remote error: the COMMIT never runs, the local statement fails, the
-- remote transaction is rolled back with the local one, and the next
-- lookup is one round trip again.
SELECT * FROM ft_lc WHERE id = 1 AND 1 / (id - 1) = 0;
SELECT * FROM afdw_last_messages();
SELECT * FROM ft_lc WHERE id = 9;
SELECT * FROM afdw_last_messages();
-- The same with the bounded query.
ALTER FOREIGN TABLE ft_lc OPTIONS (ADD fetch_mode 'cursor');
SELECT * FROM ft_lc WHERE id = 1 AND 1 / (id - 1) = 0;
SELECT * FROM afdw_last_messages();
SELECT * FROM ft_lc WHERE id = 9;
SELECT * FROM afdw_last_messages();
ALTER FOREIGN TABLE ft_lc OPTIONS (DROP fetch_mode);

-- A stream stopped early: the COMMIT never runs either; the remote
-- transaction ends with the local one.
SELECT count(*) FROM (SELECT id FROM (SELECT * FROM ft_lc OFFSET 0) s
                       WHERE id > 0 AND (random() >= 0) LIMIT 1) s;
SELECT * FROM afdw_remote_states();
SELECT * FROM ft_lc WHERE id = 10;
SELECT * FROM afdw_last_messages();

-- Not when the remote transaction must outlive the statement.
-- In a transaction block:
BEGIN;
SELECT * FROM ft_lc WHERE id = 11;
SELECT * FROM afdw_last_messages();
COMMIT;
-- In several statements of one message (an implicit transaction block):
SELECT 1 \; SELECT * FROM ft_lc WHERE id = 12;
SELECT * FROM afdw_last_messages();
-- At REPEATABLE READ (a second statement of the transaction would need the
-- same snapshot):
SET default_transaction_isolation = 'repeatable read';
SELECT * FROM ft_lc WHERE id = 13;
SELECT * FROM afdw_last_messages();
RESET default_transaction_isolation;
-- Locking rows:
SELECT * FROM ft_lc WHERE id = 14 FOR UPDATE;
SELECT * FROM afdw_last_messages();
-- Two scans of one server:
SELECT v FROM ft_lc WHERE id = 15 UNION ALL SELECT v FROM ft_lc WHERE id = 16 ORDER BY 1;
SELECT * FROM afdw_last_messages();
-- The inner side of a nested loop, run once per outer row:
SET enable_hashjoin = off;
SET enable_mergejoin = off;
SET enable_material = off;
EXPLAIN (COSTS OFF)
SELECT l.id, f.v FROM local_ids l JOIN ft_lc f ON f.id = l.id;
SELECT l.id, f.v FROM local_ids l JOIN ft_lc f ON f.id = l.id ORDER BY 1;
SELECT * FROM afdw_last_messages();
RESET enable_hashjoin;
RESET enable_mergejoin;
RESET enable_material;
-- An EXECUTE of a prepared statement, whose query is not the text the
-- client sent (as in a function):
PREPARE lk(int) AS SELECT * FROM ft_lc WHERE id = $1;
EXECUTE lk(18);
SELECT * FROM afdw_last_messages();
DEALLOCATE lk;
-- Inside a function (more statements may follow in its transaction):
CREATE FUNCTION lc_lookup(int) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  RETURN (SELECT v FROM ft_lc WHERE id = $1);
END
$$;
SELECT lc_lookup(17);
SELECT * FROM afdw_last_messages();
-- The lookups of a subquery run per outer row:
SELECT id, (SELECT v FROM ft_lc f WHERE f.id = l.id) FROM local_ids l ORDER BY 1;
SELECT * FROM afdw_last_messages();

-- An UPDATE or DELETE that is its own transaction and its only remote
-- work, sent as one remote statement, carries the COMMIT: one message,
-- one round trip.  Each case starts with new remote sessions, opened by a
-- lookup (a session's first transaction sets its idle timeout after the
-- COMMIT, and carries none), so that the last messages are the case's.
SELECT async_fdw_disconnect_all();
SELECT count(*) FROM ft_lc WHERE id = 1;
UPDATE ft_lc SET v = 'u1' WHERE id = 1;
SELECT * FROM afdw_last_messages();
DELETE FROM ft_lc WHERE id = 200;
SELECT * FROM afdw_last_messages();
-- The remote session is idle when the statement returns, its change
-- committed and visible to others at once.
SELECT state FROM pg_stat_activity
 WHERE application_name = 'async_fdw' AND pid <> pg_backend_pid();
SELECT id, v FROM remote.lc WHERE id IN (1, 200);
-- A remote failure skips the COMMIT: nothing changed.
UPDATE ft_lc SET id = 2 WHERE id = 1;
SELECT id, v FROM remote.lc WHERE id IN (1, 2) ORDER BY id;
-- A COMMIT that fails (a deferred constraint of the remote table) fails
-- the statement with its error, and the change is not there.
CREATE FUNCTION remote.lc_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.v = 'refused' THEN
    RAISE EXCEPTION 'refused at commit' USING ERRCODE = 'check_violation';
  END IF;
  RETURN NULL;
END
$$;
CREATE CONSTRAINT TRIGGER lc_refuse AFTER UPDATE ON remote.lc
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION remote.lc_refuse();
UPDATE ft_lc SET v = 'refused' WHERE id = 3;
SELECT id, v FROM remote.lc WHERE id = 3;
UPDATE ft_lc SET v = 'accepted' WHERE id = 3;
SELECT * FROM afdw_last_messages();
SELECT id, v FROM remote.lc WHERE id = 3;
DROP TRIGGER lc_refuse ON remote.lc;
DROP FUNCTION remote.lc_refuse();

-- Not when anything may follow the remote change or fail after it: the
-- COMMIT goes after the statement (or the transaction is prepared on
-- each server written, two-phase commit).  RETURNING (its rows are
-- converted after the change):
SELECT async_fdw_disconnect_all();
SELECT count(*) FROM ft_lc WHERE id = 1;
UPDATE ft_lc SET v = 'r4' WHERE id = 4 RETURNING id, v;
SELECT * FROM afdw_last_messages();
-- A transaction block:
BEGIN;
UPDATE ft_lc SET v = 'b5' WHERE id = 5;
COMMIT;
SELECT * FROM afdw_last_messages();
-- An AFTER STATEMENT trigger:
CREATE FUNCTION lc_after() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RETURN NULL;
END
$$;
CREATE TRIGGER lc_after AFTER UPDATE ON ft_lc
  FOR EACH STATEMENT EXECUTE FUNCTION lc_after();
UPDATE ft_lc SET v = 'after' WHERE id = 9;
SELECT * FROM afdw_last_messages();
DROP TRIGGER lc_after ON ft_lc;
-- A statement that also writes locally (two-phase commit):
CREATE TABLE lc_log (n int);
CREATE FUNCTION lc_logged(int) RETURNS int LANGUAGE sql AS
  'INSERT INTO lc_log VALUES ($1) RETURNING $1';
SELECT async_fdw_disconnect_all();
SELECT count(*) FROM ft_lc WHERE id = 1;
UPDATE ft_lc SET v = 'logged' WHERE id = (SELECT lc_logged(8));
SELECT regexp_replace(m, '''.*''', '''...''') FROM afdw_last_messages() m;
-- An UPDATE in a function: the statement that called it goes on after it,
-- and fails here; the remote change goes with it (it was committed with
-- the UPDATE, and stayed, before the fix).
CREATE FUNCTION lc_then_fail(int) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  UPDATE ft_lc SET v = 'in function' WHERE id = $1;
  RAISE EXCEPTION 'the calling statement fails after the update';
END
$$;
SELECT async_fdw_disconnect_all();
SELECT count(*) FROM ft_lc WHERE id = 1;
SELECT lc_then_fail(10);
SELECT id, v FROM remote.lc WHERE id = 10;
-- The same in a trigger: a local table's BEFORE ROW trigger updates the
-- foreign table, and the client's INSERT then fails on its next row.
CREATE TABLE lc_local (id int CHECK (id > 0));
CREATE FUNCTION lc_trigger() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE ft_lc SET v = 'by trigger' WHERE id = 11;
  RETURN NEW;
END
$$;
CREATE TRIGGER lc_trigger BEFORE INSERT ON lc_local
  FOR EACH ROW EXECUTE FUNCTION lc_trigger();
SELECT async_fdw_disconnect_all();
SELECT count(*) FROM ft_lc WHERE id = 1;
INSERT INTO lc_local VALUES (1), (-1);
SELECT id, v FROM remote.lc WHERE id = 11;
DROP TRIGGER lc_trigger ON lc_local;
INSERT INTO lc_local VALUES (1);
-- A rule turns the client's statement into several plans, run one after
-- the other: here two direct UPDATEs of one server, the second of which
-- fails remotely; the first's change goes with it.
CREATE TABLE remote.lc_r1 (id int, v text);
CREATE TABLE remote.lc_r2 (id int, v text CHECK (v <> 'bad'));
INSERT INTO remote.lc_r1 VALUES (1, 'r1');
INSERT INTO remote.lc_r2 VALUES (1, 'r2');
CREATE FOREIGN TABLE lc_r1 (id int, v text)
  SERVER loopback OPTIONS (schema_name 'remote', table_name 'lc_r1');
CREATE FOREIGN TABLE lc_r2 (id int, v text)
  SERVER loopback OPTIONS (schema_name 'remote', table_name 'lc_r2');
CREATE VIEW lc_both AS SELECT * FROM lc_r2;
CREATE RULE lc_both_upd AS ON UPDATE TO lc_both DO INSTEAD (
  UPDATE lc_r1 SET v = NEW.v WHERE lc_r1.id = OLD.id;
  UPDATE lc_r2 SET v = NEW.v WHERE lc_r2.id = OLD.id);
SELECT async_fdw_disconnect_all();
SELECT count(*) FROM ft_lc WHERE id = 1;
\set VERBOSITY terse
UPDATE lc_both SET v = 'bad' WHERE id = 1;
\set VERBOSITY default
SELECT (SELECT v FROM remote.lc_r1) AS r1, (SELECT v FROM remote.lc_r2) AS r2;
-- Without the failure, both changes are there.
UPDATE lc_both SET v = 'good' WHERE id = 1;
SELECT (SELECT v FROM remote.lc_r1) AS r1, (SELECT v FROM remote.lc_r2) AS r2;
DROP VIEW lc_both;
DROP FOREIGN TABLE lc_r1, lc_r2;
DROP TABLE remote.lc_r1, remote.lc_r2;
DROP TABLE lc_local;
DROP FUNCTION lc_then_fail(int), lc_trigger();
-- An UPDATE of two servers: neither COMMIT may precede the other's
-- statement's end (two-phase commit).  With one partition left after
-- pruning, one server: the COMMIT rides.
CREATE TABLE remote.lc6 AS SELECT * FROM remote.lc WHERE id = 6;
CREATE TABLE remote.lc7 AS SELECT * FROM remote.lc WHERE id = 7;
CREATE TABLE lc_two (id int, v text) PARTITION BY LIST (id);
CREATE FOREIGN TABLE lc_two1 PARTITION OF lc_two FOR VALUES IN (6)
  SERVER loopback OPTIONS (schema_name 'remote', table_name 'lc6');
CREATE FOREIGN TABLE lc_two2 PARTITION OF lc_two FOR VALUES IN (7)
  SERVER loopback2 OPTIONS (schema_name 'remote', table_name 'lc7');
SELECT async_fdw_disconnect_all();
SELECT count(*) FROM lc_two;
UPDATE lc_two SET v = 'two' WHERE id IN (6, 7);
SELECT regexp_replace(m, '''.*''', '''...''') FROM afdw_last_messages() m;
SELECT async_fdw_disconnect_all();
SELECT count(*) FROM lc_two;
UPDATE lc_two SET v = 'one' WHERE id = 6;
SELECT * FROM afdw_last_messages();
SELECT * FROM lc_two ORDER BY id;
SELECT id, v FROM remote.lc WHERE id BETWEEN 4 AND 9 ORDER BY id;
DROP TABLE lc_two, lc_log, remote.lc6, remote.lc7;
DROP FUNCTION lc_logged(int), lc_after();

DROP FUNCTION lc_lookup(int);
DROP FOREIGN TABLE ft_lc, ft_lc2;
DROP TABLE remote.lc, local_ids;
DROP FUNCTION afdw_last_messages();
SELECT async_fdw_disconnect_all();
