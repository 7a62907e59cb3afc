-- sql/include/apt_block.sql
--   async.sql's checks of connections and snapshots over the partitioned
--   table apt, included (\i) once per fetch mode.  async.sql sets the mode
--   of servers loopback and loopback2, opens the dblink connection 'writer'
--   and sets :round (500, 600, 700) so that each round inserts rows of its
--   own (:round and :round + 1 in p1, :round + 2000 in p3, :round + 5000 in
--   p6).
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT (SELECT count(*) FROM apt WHERE a <= 1000),
         (SELECT count(*) FROM (SELECT a FROM apt WHERE a > 7500 LIMIT 10) s);
SELECT count(DISTINCT pid) AS connections, count(DISTINCT snap) AS snapshots
  FROM apt WHERE a <= 4000;
SELECT count(DISTINCT pid) AS connections, count(DISTINCT snap) AS snapshots
  FROM apt WHERE a > 4000;
-- Past max_connections, scans share connections: the same rows.  (Streams
-- of one Append take turns on a shared connection; other scans that share
-- one read with cursors.)
ALTER SERVER loopback OPTIONS (ADD max_connections '2');
SELECT count(DISTINCT pid) AS connections, count(DISTINCT snap) AS snapshots,
       count(*), sum(a) FROM apt WHERE a <= 4000;
ALTER SERVER loopback OPTIONS (SET max_connections '1');
SELECT count(DISTINCT pid) AS connections, count(*), sum(a) FROM apt WHERE a <= 4000;
ALTER SERVER loopback OPTIONS (DROP max_connections);
-- Rows committed remotely between two statements of one local transaction
-- are invisible to both, on every connection of both servers.
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT count(*), count(DISTINCT snap) FROM apt;
SELECT dblink_exec('writer', format('INSERT INTO shard.p1 VALUES (%s, ''new''), (%s, ''new'');
  INSERT INTO shard.p3 VALUES (%s, ''new''); INSERT INTO shard.p6 VALUES (%s, ''new'')',
  :round, :round + 1, :round + 2000, :round + 5000));
SELECT count(*), count(DISTINCT snap) FROM apt;
SELECT count(*) FROM apt a1 JOIN apt a2 USING (a) WHERE a1.b = 'new' OR a2.b = 'new';
SELECT count(*) FROM (SELECT a FROM apt WHERE b = 'new' LIMIT 10) s;
COMMIT;
SELECT count(*), sum(a) FROM apt WHERE b = 'new';
DELETE FROM shard.p1 WHERE b = 'new';
DELETE FROM shard.p3 WHERE b = 'new';
DELETE FROM shard.p6 WHERE b = 'new';
