--
-- join_rowmarks: remote joins under row marks (SELECT ... FOR UPDATE or FOR
-- SHARE, the other tables of an UPDATE or DELETE) and joins whose target
-- holds whole rows and ctids.  The remote SELECT locks the rows of the
-- tables the query locks (FOR UPDATE OF r<n>), and returns each marked
-- table's whole row, null where an outer join found none; the local join
-- under the Foreign Scan remakes a row when the executor rechecks it
-- (test/t/017_join_recheck.pl) and sends nothing otherwise.  Rows are
-- compared with the same queries on the remote tables; another session
-- (dblink on the remote database) checks which remote rows are locked.
--
CREATE EXTENSION IF NOT EXISTS dblink;
SELECT dblink_connect('rm_locker', afdw_test_conninfo());

CREATE TABLE remote.rma (id int PRIMARY KEY, x int, t text);
CREATE TABLE remote.rmb (id int PRIMARY KEY, y int, u text);
CREATE TABLE remote.rmc (k int PRIMARY KEY, w text);
INSERT INTO remote.rma SELECT g, g % 7, 'a' || g FROM generate_series(1, 100) g;
INSERT INTO remote.rmb SELECT g, g % 5, CASE WHEN g % 9 = 0 THEN NULL ELSE 'b' || g END
  FROM generate_series(1, 100, 2) g;
INSERT INTO remote.rmc SELECT g, 'c' || g FROM generate_series(0, 2) g;
-- A dropped column in the local row type: whole rows skip it.
CREATE FOREIGN TABLE frma (id int, gone int, x int, t text)
  SERVER loopback OPTIONS (schema_name 'remote', table_name 'rma');
ALTER FOREIGN TABLE frma DROP COLUMN gone;
CREATE FOREIGN TABLE frmb (id int, y int, u text)
  SERVER loopback OPTIONS (schema_name 'remote', table_name 'rmb');
CREATE FOREIGN TABLE frmc (k int, w text)
  SERVER loopback OPTIONS (schema_name 'remote', table_name 'rmc');
CREATE TABLE rm_local (id int PRIMARY KEY, z int);
INSERT INTO rm_local SELECT g, g FROM generate_series(1, 30) g;
ANALYZE frma; ANALYZE frmb; ANALYZE frmc; ANALYZE rm_local;

-- remote_lock_state (setup.sql) asks it of the remote rows.

-- 1. FOR UPDATE OF one side: the remote join locks that table's rows, and
-- returns both whole rows; the local join under it is for rechecks.
EXPLAIN (VERBOSE, COSTS OFF)
SELECT a.id, b.u FROM frma a JOIN frmb b ON a.id = b.id WHERE a.x = 3
  ORDER BY a.id FOR UPDATE OF a;
SELECT rows_same($$SELECT a.id, b.u FROM frma a JOIN frmb b ON a.id = b.id WHERE a.x = 3 FOR UPDATE OF a$$,
                 $$SELECT a.id, b.u FROM remote.rma a JOIN remote.rmb b ON a.id = b.id WHERE a.x = 3$$);
-- Only the joined rows of a are locked: 17 (joined), not 10 (x = 3, no
-- row of b; a scan of a alone would have locked it) nor b's 17.
BEGIN;
SELECT a.id, b.u FROM frma a JOIN frmb b ON a.id = b.id WHERE a.x = 3
  ORDER BY a.id FOR UPDATE OF a;
SELECT remote_lock_state('rm_locker', 'rma', 17, 'UPDATE') AS a17, remote_lock_state('rm_locker', 'rma', 10, 'UPDATE') AS a10,
       remote_lock_state('rm_locker', 'rmb', 17, 'UPDATE') AS b17;
COMMIT;

-- 2. FOR UPDATE of all: both tables' rows.
EXPLAIN (VERBOSE, COSTS OFF)
SELECT a.id, b.u FROM frma a JOIN frmb b ON a.id = b.id WHERE a.x = 3 FOR UPDATE;
BEGIN;
SELECT a.id, b.u FROM frma a JOIN frmb b ON a.id = b.id WHERE a.x = 3
  ORDER BY a.id FOR NO KEY UPDATE;
SELECT remote_lock_state('rm_locker', 'rma', 17, 'UPDATE') AS a17, remote_lock_state('rm_locker', 'rmb', 17, 'UPDATE') AS b17,
       remote_lock_state('rm_locker', 'rmb', 19, 'UPDATE') AS b19;
COMMIT;

-- 3. FOR SHARE: another FOR SHARE passes, FOR UPDATE does not.
EXPLAIN (VERBOSE, COSTS OFF)
SELECT a.id, b.u FROM frma a JOIN frmb b ON a.id = b.id WHERE a.x = 3 FOR SHARE;
BEGIN;
SELECT a.id, b.u FROM frma a JOIN frmb b ON a.id = b.id WHERE a.x = 3
  ORDER BY a.id FOR KEY SHARE;
SELECT remote_lock_state('rm_locker', 'rma', 31, 'SHARE') AS a31_share, remote_lock_state('rm_locker', 'rma', 31, 'UPDATE') AS a31,
       remote_lock_state('rm_locker', 'rmb', 31, 'UPDATE') AS b31;
COMMIT;
-- FOR SHARE OF one side, FOR UPDATE OF the other.
EXPLAIN (VERBOSE, COSTS OFF)
SELECT a.id, b.u FROM frma a JOIN frmb b ON a.id = b.id WHERE a.x = 3
  FOR SHARE OF a FOR UPDATE OF b;

-- 4. Three tables, the third on the nullable side of an outer join: its
-- whole row is null where no row matched (it is not locked: it cannot be).
EXPLAIN (VERBOSE, COSTS OFF)
SELECT a.id, b.u, c.w FROM frma a JOIN frmb b ON a.id = b.id LEFT JOIN frmc c ON b.y = c.k
  WHERE a.id < 20 FOR UPDATE OF a, b;
SELECT rows_same($$SELECT a.id, b.u, c.w FROM frma a JOIN frmb b ON a.id = b.id LEFT JOIN frmc c ON b.y = c.k
                   WHERE a.id < 20 FOR UPDATE OF a, b$$,
                 $$SELECT a.id, b.u, c.w FROM remote.rma a JOIN remote.rmb b ON a.id = b.id LEFT JOIN remote.rmc c ON b.y = c.k
                   WHERE a.id < 20$$);

-- 5. Whole rows and ctids in the target of a join, with outer joins: the
-- whole row of a table without a matching row is null, a row with null
-- columns is not.
EXPLAIN (VERBOSE, COSTS OFF)
SELECT a.ctid, a, b, b.ctid FROM frma a LEFT JOIN frmb b ON a.id = b.id WHERE a.id % 9 = 0;
SELECT rows_same($$SELECT a.ctid, a::text, b::text, b.ctid, b IS NULL FROM frma a LEFT JOIN frmb b ON a.id = b.id WHERE a.id % 9 = 0$$,
                 $$SELECT a.ctid, a::text, b::text, b.ctid, b IS NULL FROM remote.rma a LEFT JOIN remote.rmb b ON a.id = b.id WHERE a.id % 9 = 0$$);
SELECT a, b FROM frma a LEFT JOIN frmb b ON a.id = b.id WHERE a.id IN (8, 9) ORDER BY a.id;
SELECT (a).t, (b).u, a.ctid FROM frma a LEFT JOIN frmb b ON a.id = b.id WHERE a.id IN (8, 9) ORDER BY a.id;
EXPLAIN (VERBOSE, COSTS OFF)
SELECT b, c FROM frmb b FULL JOIN frmc c ON b.y = c.k AND b.id < 3;
SELECT rows_same($$SELECT b::text, c::text FROM frmb b FULL JOIN frmc c ON b.y = c.k AND b.id < 3$$,
                 $$SELECT b::text, c::text FROM remote.rmb b FULL JOIN remote.rmc c ON b.y = c.k AND b.id < 3$$);

-- 6. Row marks of a local table only: the foreign tables' rows are copied
-- (their whole rows), not locked; their join is remote.
EXPLAIN (VERBOSE, COSTS OFF)
SELECT l.id, l.z, a.t, b.u FROM rm_local l JOIN frma a ON l.id = a.id JOIN frmb b ON a.id = b.id
  FOR UPDATE OF l;
SELECT rows_same($$SELECT l.id, l.z, a.t, b.u FROM rm_local l JOIN frma a ON l.id = a.id JOIN frmb b ON a.id = b.id FOR UPDATE OF l$$,
                 $$SELECT l.id, l.z, a.t, b.u FROM rm_local l JOIN remote.rma a ON l.id = a.id JOIN remote.rmb b ON a.id = b.id$$);
-- A value of a subquery computed at the remote join (a placeholder): the
-- Foreign Scan computes it from the columns the join returns, null where
-- the outer join above finds no row.
EXPLAIN (VERBOSE, COSTS OFF)
SELECT * FROM rm_local l LEFT JOIN (SELECT a.*, COALESCE(a.t || b.u, 'none') AS cz
  FROM frma a JOIN frmb b ON a.id = b.id AND a.id < 20) ss ON l.id = ss.id
  ORDER BY l.id FOR UPDATE OF l;
SELECT rows_same($$SELECT l.id, ss.x, ss.cz FROM rm_local l LEFT JOIN (SELECT a.*, COALESCE(a.t || b.u, 'none') AS cz
                   FROM frma a JOIN frmb b ON a.id = b.id AND a.id < 20) ss ON l.id = ss.id FOR UPDATE OF l$$,
                 $$SELECT l.id, ss.x, ss.cz FROM rm_local l LEFT JOIN (SELECT a.*, COALESCE(a.t || b.u, 'none') AS cz
                   FROM remote.rma a JOIN remote.rmb b ON a.id = b.id AND a.id < 20) ss ON l.id = ss.id$$);
-- One computed below an outer join of the remote join: not computed again
-- from its null columns ('none' would be wrong), so that join is local.
SELECT rows_same($$SELECT b.id, ss.cz FROM frmb b LEFT JOIN (SELECT a.id, COALESCE(a.t, 'none') AS cz
                   FROM frma a WHERE a.id < 5) ss ON b.id = ss.id WHERE b.id < 12$$,
                 $$SELECT b.id, ss.cz FROM remote.rmb b LEFT JOIN (SELECT a.id, COALESCE(a.t, 'none') AS cz
                   FROM remote.rma a WHERE a.id < 5) ss ON b.id = ss.id WHERE b.id < 12$$);
-- An UPDATE of a local table from a remote join.
CREATE TABLE rm_local2 AS SELECT * FROM rm_local;
EXPLAIN (VERBOSE, COSTS OFF)
UPDATE rm_local l SET z = l.z + b.y FROM frma a JOIN frmb b ON a.id = b.id
  WHERE l.id = a.id AND a.x < 3;
UPDATE rm_local l SET z = l.z + b.y FROM frma a JOIN frmb b ON a.id = b.id
  WHERE l.id = a.id AND a.x < 3;
UPDATE rm_local2 l SET z = l.z + b.y FROM remote.rma a JOIN remote.rmb b ON a.id = b.id
  WHERE l.id = a.id AND a.x < 3;
SELECT rows_same('SELECT * FROM rm_local', 'SELECT * FROM rm_local2');
DELETE FROM rm_local l USING frma a JOIN frmb b ON a.id = b.id WHERE l.id = a.id AND b.y = 4;
DELETE FROM rm_local2 l USING remote.rma a JOIN remote.rmb b ON a.id = b.id WHERE l.id = a.id AND b.y = 4;
SELECT rows_same('SELECT * FROM rm_local', 'SELECT * FROM rm_local2');

-- 7. The target of an UPDATE or DELETE of a foreign table in a remote
-- join that cannot be the remote UPDATE or DELETE itself: the join locks
-- the target's rows (FOR UPDATE OF r<n>) and returns their ctids, by which
-- each row is changed, on the same connection.
CREATE TABLE rm_copy AS SELECT * FROM remote.rma;
EXPLAIN (VERBOSE, COSTS OFF)
UPDATE frma a SET x = CASE WHEN random() >= 0 THEN a.x + b.y ELSE 0 END
  FROM frmb b WHERE a.id = b.id AND a.id > 80;
UPDATE frma a SET x = CASE WHEN random() >= 0 THEN a.x + b.y ELSE 0 END
  FROM frmb b WHERE a.id = b.id AND a.id > 80 RETURNING a.id, a.x, b.u, a.ctid IS NOT NULL;
UPDATE rm_copy a SET x = a.x + b.y FROM remote.rmb b WHERE a.id = b.id AND a.id > 80;
SELECT rows_same('SELECT * FROM remote.rma', 'SELECT * FROM rm_copy');
-- Its rows stay locked until the end of the transaction.
BEGIN;
UPDATE frma a SET t = CASE WHEN random() >= 0 THEN a.t || '!' END
  FROM frmb b WHERE a.id = b.id AND a.id IN (61, 62, 63);
SELECT remote_lock_state('rm_locker', 'rma', 61, 'UPDATE') AS a61, remote_lock_state('rm_locker', 'rma', 62, 'UPDATE') AS a62,
       remote_lock_state('rm_locker', 'rmb', 61, 'UPDATE') AS b61;
ROLLBACK;
-- A DELETE whose join with a third table has a condition computed locally:
-- the three tables join remotely, in a scan (not the remote DELETE) whose
-- Filter checks the condition on the joined rows.
CREATE FUNCTION rm_local_eq(int, int) RETURNS boolean LANGUAGE plpgsql AS
  $$BEGIN RETURN $1 = $2; END$$;
EXPLAIN (VERBOSE, COSTS OFF)
DELETE FROM frma a USING frmb b JOIN frmc c ON rm_local_eq(b.y, c.k)
  WHERE a.id = b.id AND a.id > 90 RETURNING a.id, c.w;
DELETE FROM frma a USING frmb b JOIN frmc c ON rm_local_eq(b.y, c.k)
  WHERE a.id = b.id AND a.id > 90 RETURNING a.id, c.w;
DELETE FROM rm_copy a USING remote.rmb b JOIN remote.rmc c ON b.y = c.k
  WHERE a.id = b.id AND a.id > 90;
SELECT rows_same('SELECT * FROM remote.rma', 'SELECT * FROM rm_copy');
DROP TABLE rm_copy;
DROP FUNCTION rm_local_eq(int, int);

-- LIMIT and OFFSET under FOR UPDATE: the remote query has them before its
-- locking clause, and no Limit or LockRows node is left locally.  The
-- remote locks the rows its OFFSET skips and its LIMIT returns, as a local
-- LockRows under a Limit would: 3 (skipped), 17 and 31, not 45.
EXPLAIN (VERBOSE, COSTS OFF)
SELECT a.id, b.u FROM frma a JOIN frmb b ON a.id = b.id WHERE a.x = 3
  ORDER BY a.id OFFSET 1 LIMIT 2 FOR UPDATE OF a;
BEGIN;
SELECT a.id, b.u FROM frma a JOIN frmb b ON a.id = b.id WHERE a.x = 3
  ORDER BY a.id OFFSET 1 LIMIT 2 FOR UPDATE OF a;
SELECT remote_lock_state('rm_locker', 'rma', 3, 'UPDATE') AS a3, remote_lock_state('rm_locker', 'rma', 17, 'UPDATE') AS a17,
       remote_lock_state('rm_locker', 'rma', 31, 'UPDATE') AS a31, remote_lock_state('rm_locker', 'rma', 45, 'UPDATE') AS a45,
       remote_lock_state('rm_locker', 'rmb', 17, 'UPDATE') AS b17;
COMMIT;
-- One table, FOR SHARE, a LIMIT of the statement's parameter.
PREPARE rm_lim(int) AS SELECT id, x FROM frma WHERE x = 4 AND id < 80 ORDER BY id DESC LIMIT $1 FOR SHARE;
SET plan_cache_mode = force_generic_plan;
EXPLAIN (VERBOSE, COSTS OFF) EXECUTE rm_lim(2);
BEGIN;
EXECUTE rm_lim(2);
SELECT remote_lock_state('rm_locker', 'rma', 74, 'UPDATE') AS a74, remote_lock_state('rm_locker', 'rma', 74, 'SHARE') AS a74_share,
       remote_lock_state('rm_locker', 'rma', 67, 'UPDATE') AS a67, remote_lock_state('rm_locker', 'rma', 60, 'UPDATE') AS a60;
COMMIT;
RESET plan_cache_mode;
DEALLOCATE rm_lim;
-- With a local table locked too, its LockRows stays (and the Limit above).
EXPLAIN (VERBOSE, COSTS OFF)
SELECT l.id, a.t FROM rm_local l JOIN frma a ON a.id = l.id ORDER BY l.id LIMIT 3 FOR UPDATE;
SELECT l.id, a.t FROM rm_local l JOIN frma a ON a.id = l.id ORDER BY l.id LIMIT 3 FOR UPDATE;

-- A condition that cannot be sent, under row locks: the join is remote,
-- the Foreign Scan checks the condition (on rechecked rows too:
-- test/t/017_join_rowmarks.pl).  Asked of the plan's lines, which differ
-- between PostgreSQL versions.
CREATE FUNCTION rm_abs(int) RETURNS int LANGUAGE plpgsql IMMUTABLE AS 'BEGIN RETURN abs($1); END';
CREATE FUNCTION rm_remote_join(query text) RETURNS bool LANGUAGE plpgsql AS $$
DECLARE
  line text;
BEGIN
  FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) ' || query LOOP
    IF line LIKE '%Relations: frma a INNER JOIN frmb b%' THEN
      RETURN true;
    END IF;
  END LOOP;
  RETURN false;
END $$;
SELECT rm_remote_join($$SELECT * FROM rm_local l LEFT JOIN (SELECT a.* FROM frma a JOIN frmb b
    ON a.id = b.id AND a.id < 30 AND a.x <= rm_abs(b.y)) ss ON l.z = ss.x
  ORDER BY l.id FOR UPDATE OF l$$) AS remote_with_local_condition;
SELECT rows_same($$SELECT * FROM rm_local l LEFT JOIN (SELECT a.* FROM frma a JOIN frmb b
                     ON a.id = b.id AND a.id < 30 AND a.x <= rm_abs(b.y)) ss ON l.z = ss.x FOR UPDATE OF l$$,
                 $$SELECT * FROM rm_local l LEFT JOIN (SELECT a.* FROM remote.rma a JOIN remote.rmb b
                     ON a.id = b.id AND a.id < 30 AND a.x <= rm_abs(b.y)) ss ON l.z = ss.x$$);
-- The same, the join's rows sorted for a merge join above it: the sort
-- under the Foreign Scan, for rechecks, returns the columns the local
-- condition reads too.
ALTER FOREIGN TABLE frmb OPTIONS (ADD use_remote_estimate 'true');
SET enable_hashjoin = off;
SET enable_nestloop = off;
SELECT rm_remote_join($$SELECT * FROM rm_local l LEFT JOIN (SELECT a.* FROM frma a JOIN frmb b
    ON a.id = b.id AND a.id < 30 AND a.x = rm_abs(b.y)) ss ON 'a' || l.z = ss.t
  ORDER BY l.id FOR UPDATE OF l$$) AS sorted_remote_with_local_condition;
SELECT rows_same($$SELECT * FROM rm_local l LEFT JOIN (SELECT a.* FROM frma a JOIN frmb b
                     ON a.id = b.id AND a.id < 30 AND a.x = rm_abs(b.y)) ss ON 'a' || l.z = ss.t FOR UPDATE OF l$$,
                 $$SELECT * FROM rm_local l LEFT JOIN (SELECT a.* FROM remote.rma a JOIN remote.rmb b
                     ON a.id = b.id AND a.id < 30 AND a.x = rm_abs(b.y)) ss ON 'a' || l.z = ss.t$$);
RESET enable_hashjoin;
RESET enable_nestloop;
ALTER FOREIGN TABLE frmb OPTIONS (DROP use_remote_estimate);
DROP FUNCTION rm_remote_join(text);
DROP FUNCTION rm_abs(int);

SELECT dblink_disconnect('rm_locker');
DROP TABLE rm_local, rm_local2;
DROP FOREIGN TABLE frma, frmb, frmc;
DROP TABLE remote.rma, remote.rmb, remote.rmc;
DROP EXTENSION dblink;
