--
-- locking: SELECT ... FOR UPDATE / FOR SHARE locks the remote rows it
-- reads, as postgres_fdw does: FOR [NO KEY] UPDATE becomes FOR UPDATE,
-- FOR [KEY] SHARE becomes FOR SHARE, on the locked tables only.  Another
-- session (dblink on the remote database) checks which rows are locked.
--
CREATE EXTENSION IF NOT EXISTS dblink;
SELECT dblink_connect('locker', afdw_test_conninfo());

CREATE TABLE remote.lk (id int PRIMARY KEY, v text);
INSERT INTO remote.lk SELECT g, 'v' || g FROM generate_series(1, 10) g;
CREATE TABLE remote.lk2 (id int PRIMARY KEY, v text);
INSERT INTO remote.lk2 SELECT g, 'w' || g FROM generate_series(1, 10) g;
CREATE FOREIGN TABLE ft_lk (id int, v text)
  SERVER loopback OPTIONS (schema_name 'remote', table_name 'lk');
CREATE FOREIGN TABLE ft_lk2 (id int, v text)
  SERVER loopback OPTIONS (schema_name 'remote', table_name 'lk2');

-- remote_lock_state (setup.sql) asks it of the remote rows.

-- The remote SQL carries the clause; locking scans read through a cursor.
EXPLAIN (VERBOSE, COSTS OFF) SELECT * FROM ft_lk WHERE id = 1 FOR UPDATE;
EXPLAIN (VERBOSE, COSTS OFF) SELECT * FROM ft_lk WHERE id = 1 FOR NO KEY UPDATE;
EXPLAIN (VERBOSE, COSTS OFF) SELECT * FROM ft_lk WHERE id = 1 FOR SHARE;
EXPLAIN (VERBOSE, COSTS OFF) SELECT * FROM ft_lk WHERE id = 1 FOR KEY SHARE;
EXPLAIN (VERBOSE, COSTS OFF) SELECT * FROM ft_lk WHERE id = 1 FOR UPDATE NOWAIT;
-- Without a locking clause, no clause.
EXPLAIN (VERBOSE, COSTS OFF) SELECT * FROM ft_lk WHERE id = 1;

-- FOR UPDATE: the row read is locked until the end of the transaction;
-- the others are not.
BEGIN;
SELECT * FROM ft_lk WHERE id = 1 FOR UPDATE;
SELECT remote_lock_state('locker', 'lk', 1, 'UPDATE') AS row1_update,
       remote_lock_state('locker', 'lk', 1, 'SHARE') AS row1_share,
       remote_lock_state('locker', 'lk', 2, 'UPDATE') AS row2_update;
COMMIT;
-- Once the local COMMIT has returned, the remote one is over too.
SELECT remote_lock_state('locker', 'lk', 1, 'UPDATE') AS row1_after_commit;
-- FOR NO KEY UPDATE locks as FOR UPDATE.
BEGIN;
SELECT * FROM ft_lk WHERE id = 3 FOR NO KEY UPDATE;
SELECT remote_lock_state('locker', 'lk', 3, 'KEY SHARE') AS row3_key_share,
       remote_lock_state('locker', 'lk', 3, 'UPDATE') AS row3_update;
ROLLBACK;
-- FOR SHARE lets another FOR SHARE through, not FOR UPDATE.
BEGIN;
SELECT * FROM ft_lk WHERE id = 2 FOR SHARE;
SELECT remote_lock_state('locker', 'lk', 2, 'SHARE') AS row2_share,
       remote_lock_state('locker', 'lk', 2, 'UPDATE') AS row2_update,
       remote_lock_state('locker', 'lk', 1, 'UPDATE') AS row1_update;
COMMIT;
-- FOR KEY SHARE locks as FOR SHARE.
BEGIN;
SELECT * FROM ft_lk WHERE id = 4 FOR KEY SHARE;
SELECT remote_lock_state('locker', 'lk', 4, 'SHARE') AS row4_share,
       remote_lock_state('locker', 'lk', 4, 'NO KEY UPDATE') AS row4_no_key_update;
COMMIT;
-- A LIMIT: the rows returned stay locked, in stream mode too (locking
-- scans use a cursor).  A constant LIMIT goes with the remote query; one
-- a volatile function computes stays local, and the scan is left
-- unfinished.
ALTER FOREIGN TABLE ft_lk OPTIONS (ADD fetch_mode 'stream', fetch_size '1');
EXPLAIN (VERBOSE, COSTS OFF) SELECT * FROM ft_lk ORDER BY id LIMIT 1 FOR UPDATE;
BEGIN;
SELECT * FROM ft_lk WHERE id >= 5 ORDER BY id LIMIT 1 FOR UPDATE;
SELECT remote_lock_state('locker', 'lk', 5, 'UPDATE') AS row5_update;
COMMIT;
EXPLAIN (VERBOSE, COSTS OFF) SELECT * FROM ft_lk ORDER BY id LIMIT (random() * 0)::int + 1 FOR UPDATE;
BEGIN;
SELECT * FROM ft_lk WHERE id >= 5 ORDER BY id LIMIT (random() * 0)::int + 1 FOR UPDATE;
SELECT remote_lock_state('locker', 'lk', 5, 'UPDATE') AS row5_update;
COMMIT;
ALTER FOREIGN TABLE ft_lk OPTIONS (DROP fetch_mode, DROP fetch_size);

-- A join: FOR UPDATE OF one table locks its rows only.
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT * FROM ft_lk a JOIN ft_lk2 b USING (id) WHERE id = 6 FOR UPDATE OF a;
BEGIN;
SELECT * FROM ft_lk a JOIN ft_lk2 b USING (id) WHERE id = 6 FOR UPDATE OF a;
SELECT remote_lock_state('locker', 'lk', 6, 'UPDATE') AS lk_row6,
       remote_lock_state('locker', 'lk2', 6, 'UPDATE') AS lk2_row6;
COMMIT;
BEGIN;
SELECT * FROM ft_lk a JOIN ft_lk2 b USING (id) WHERE id = 7 FOR SHARE;
SELECT remote_lock_state('locker', 'lk', 7, 'UPDATE') AS lk_row7,
       remote_lock_state('locker', 'lk2', 7, 'UPDATE') AS lk2_row7,
       remote_lock_state('locker', 'lk2', 7, 'SHARE') AS lk2_row7_share;
COMMIT;

-- Under an Append: a partitioned table of foreign partitions.
CREATE TABLE remote.lkp1 AS SELECT * FROM remote.lk WHERE id <= 5;
CREATE TABLE remote.lkp2 AS SELECT * FROM remote.lk2 WHERE id > 5;
CREATE TABLE afdw_lkp (id int, v text) PARTITION BY RANGE (id);
CREATE FOREIGN TABLE afdw_lkp1 PARTITION OF afdw_lkp FOR VALUES FROM (1) TO (6)
  SERVER loopback OPTIONS (schema_name 'remote', table_name 'lkp1');
CREATE FOREIGN TABLE afdw_lkp2 PARTITION OF afdw_lkp FOR VALUES FROM (6) TO (11)
  SERVER loopback2 OPTIONS (schema_name 'remote', table_name 'lkp2');
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT * FROM afdw_lkp WHERE id IN (2, 8) FOR UPDATE;
BEGIN;
SELECT * FROM afdw_lkp WHERE id IN (2, 8) ORDER BY id FOR UPDATE;
SELECT remote_lock_state('locker', 'lkp1', 2, 'UPDATE') AS p1_row2,
       remote_lock_state('locker', 'lkp2', 8, 'UPDATE') AS p2_row8,
       remote_lock_state('locker', 'lkp1', 3, 'UPDATE') AS p1_row3,
       remote_lock_state('locker', 'lkp2', 9, 'UPDATE') AS p2_row9;
COMMIT;
SELECT remote_lock_state('locker', 'lkp1', 2, 'UPDATE') AS p1_row2_after,
       remote_lock_state('locker', 'lkp2', 8, 'UPDATE') AS p2_row8_after;

-- Clean up.
SELECT dblink_disconnect('locker');
DROP TABLE afdw_lkp;
DROP FOREIGN TABLE ft_lk, ft_lk2;
DROP TABLE remote.lk, remote.lk2, remote.lkp1, remote.lkp2;
DROP EXTENSION dblink;
