--
-- first_query: the first query of a session loads async_fdw while it is
-- planned, too late for its planner hook; it gets the same partial
-- aggregates and partitionwise joins as the session's later queries, and
-- the planner settings are as they were afterwards.  (Uses the tables of
-- the aggregate and join tests.)
--
\c
EXPLAIN (COSTS OFF) SELECT count(*), sum(i8), avg(i2) FROM ag;
SHOW enable_partitionwise_aggregate;
SELECT count(*), sum(i8), avg(i2) FROM ag;
SELECT count(*), sum(i8), avg(i2) FROM ag_local;
\c
EXPLAIN (COSTS OFF) SELECT count(*) FROM jp1 JOIN jp2 ON jp1.id = jp2.id;
SHOW enable_partitionwise_join;
SHOW enable_partitionwise_aggregate;
\c
SELECT count(*), max(t) FROM jp1 JOIN jp2 ON jp1.id = jp2.id WHERE b = 2;
SELECT count(*), max(t) FROM remote.jt1 JOIN remote.jt2 ON jt1.id = jt2.id WHERE b = 2;
-- The settings of async_fdw hold before it is loaded.
\c
SET async_fdw.partitionwise_aggregate = off;
EXPLAIN (COSTS OFF) SELECT count(*) FROM ag;
\c
SET enable_partitionwise_aggregate = on;
EXPLAIN (COSTS OFF) SELECT count(*) FROM ag;
SHOW enable_partitionwise_aggregate;
-- A first query whose planning fails (the remote EXPLAIN of
-- use_remote_estimate finds no table) leaves the settings as they were.
CREATE TABLE fq_broken (id int) PARTITION BY RANGE (id);
CREATE FOREIGN TABLE fq_broken1 PARTITION OF fq_broken FOR VALUES FROM (0) TO (10)
  SERVER loopback OPTIONS (table_name 'no_such_table', use_remote_estimate 'true');
\c
SELECT count(*) FROM fq_broken;
SHOW enable_partitionwise_aggregate;
SELECT count(*) FROM ag WHERE id < 0;
SHOW enable_partitionwise_aggregate;
-- The same in a savepoint rolled back, the transaction going on.
\c
BEGIN;
SAVEPOINT a;
SELECT count(*) FROM fq_broken;
ROLLBACK TO SAVEPOINT a;
SHOW enable_partitionwise_aggregate;
SELECT count(*) FROM ag WHERE id < 0;
COMMIT;
SHOW enable_partitionwise_aggregate;
DROP TABLE fq_broken;

-- An EXISTS, IN or NOT EXISTS over co-located partitioned tables: the
-- planner pulls the subquery up into a semi- or anti-join, so the planner
-- hook turns partitionwise join and aggregation on for it as for a join.
-- The session's first query (too late for the hook) and every later one,
-- plain and prepared, after other queries, get the same plan: each
-- partition's semi-join and partial count sent to its server.
\c
EXPLAIN (COSTS OFF) SELECT a % 3, count(*) FROM jp1 WHERE EXISTS (SELECT 1 FROM jp2 WHERE jp2.id = jp1.id AND b > 1) GROUP BY 1;
SELECT count(*) FROM ag;
EXPLAIN (COSTS OFF) SELECT a % 3, count(*) FROM jp1 WHERE EXISTS (SELECT 1 FROM jp2 WHERE jp2.id = jp1.id AND b > 1) GROUP BY 1;
SHOW enable_partitionwise_join;
PREPARE fq_in AS SELECT a % 3, count(*) FROM jp1 WHERE id IN (SELECT id FROM jp2 WHERE b > 1) GROUP BY 1 ORDER BY 1;
EXPLAIN (COSTS OFF) EXECUTE fq_in;
EXPLAIN (COSTS OFF) EXECUTE fq_in;
EXPLAIN (COSTS OFF) SELECT a % 3, count(*) FROM jp1 WHERE NOT EXISTS (SELECT 1 FROM jp2 WHERE jp2.id = jp1.id) GROUP BY 1;
SELECT rows_same($$SELECT a % 3, count(*) FROM jp1 WHERE EXISTS (SELECT 1 FROM jp2 WHERE jp2.id = jp1.id AND b > 1) GROUP BY 1$$,
                 $$SELECT a % 3, count(*) FROM remote.jt1 WHERE EXISTS (SELECT 1 FROM remote.jt2 WHERE jt2.id = jt1.id AND b > 1) GROUP BY 1$$);
EXECUTE fq_in;
SELECT a % 3, count(*) FROM remote.jt1 WHERE id IN (SELECT id FROM remote.jt2 WHERE b > 1) GROUP BY 1 ORDER BY 1;
SELECT rows_same($$SELECT a % 3, count(*) FROM jp1 WHERE NOT EXISTS (SELECT 1 FROM jp2 WHERE jp2.id = jp1.id) GROUP BY 1$$,
                 $$SELECT a % 3, count(*) FROM remote.jt1 WHERE NOT EXISTS (SELECT 1 FROM remote.jt2 WHERE jt2.id = jt1.id) GROUP BY 1$$);
DEALLOCATE fq_in;

-- An IN whose subquery is grouped (by the partition key, with a HAVING):
-- the planner turns it into a join with the subquery, planned on its own,
-- whose aggregate each partition's server computes.  The same plan in the
-- session's first query and in every later one, plain and prepared.
\c
EXPLAIN (COSTS OFF) SELECT a % 3, count(*) FROM jp1 WHERE id IN (SELECT id FROM jp2 GROUP BY id HAVING sum(b) > 1) GROUP BY 1;
SELECT count(*) FROM ag;
EXPLAIN (COSTS OFF) SELECT a % 3, count(*) FROM jp1 WHERE id IN (SELECT id FROM jp2 GROUP BY id HAVING sum(b) > 1) GROUP BY 1;
PREPARE fq_gin AS SELECT a % 3, count(*) FROM jp1 WHERE id IN (SELECT id FROM jp2 GROUP BY id HAVING sum(b) > 1) GROUP BY 1 ORDER BY 1;
EXPLAIN (COSTS OFF) EXECUTE fq_gin;
EXECUTE fq_gin;
SELECT a % 3, count(*) FROM remote.jt1 WHERE id IN (SELECT id FROM remote.jt2 GROUP BY id HAVING sum(b) > 1) GROUP BY 1 ORDER BY 1;
DEALLOCATE fq_gin;
