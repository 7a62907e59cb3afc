-- sql/include/snap_block.sql
--   xact.sql's checks of the one snapshot per local transaction, included
--   (\i) once per fetch mode.  xact.sql sets the mode of ft_snap, opens the
--   dblink connection 'other' and sets :round (1, 2, 3) so that each round
--   inserts rows of its own (:round * 10 + 1 and + 2 under REPEATABLE READ,
--   + 3 under READ COMMITTED).
-- The join reads the table twice in one statement, on two connections;
-- EXPLAIN shows the fetch mode of each scan.
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT count(*) FROM ft_snap a, (SELECT id FROM ft_snap LIMIT 100) b;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT count(*), max(id) FROM ft_snap;
SELECT dblink_exec('other', format('INSERT INTO remote.snap VALUES (%s), (%s)',
                                   :round * 10 + 1, :round * 10 + 2));
SELECT count(*), max(id) FROM ft_snap;
SELECT count(*) FROM ft_snap a, (SELECT id FROM ft_snap LIMIT 100) b;
COMMIT;
SELECT count(*), max(id) FROM ft_snap;
-- Under READ COMMITTED locally the remote transaction is still REPEATABLE
-- READ: a statement's rows never change under it, nor does a transaction's.
BEGIN ISOLATION LEVEL READ COMMITTED;
SELECT count(*), max(id) FROM ft_snap;
SELECT dblink_exec('other', format('INSERT INTO remote.snap VALUES (%s)',
                                   :round * 10 + 3));
SELECT count(*), max(id) FROM ft_snap;
COMMIT;
SELECT count(*), max(id) FROM ft_snap;
