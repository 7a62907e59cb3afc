--
-- join_gating: a join condition that reads no table (CURRENT_USER =
-- SESSION_USER) is checked once, in a gating Result.  From PostgreSQL 17
-- on the core planner puts that Result above a remote join too, which is
-- then sent with its ORDER BY; before 17 no such join is sent
-- (join_gating_1.out).  A false one empties what it gates: only where that
-- empties the whole join are the sides joined remotely.
--
CREATE FOREIGN TABLE jg1 (id int, v text, n numeric)
  SERVER loopback OPTIONS (schema_name 'remote', table_name 't1');
CREATE FOREIGN TABLE jg2 (id int, v text, n numeric)
  SERVER loopback OPTIONS (schema_name 'remote', table_name 't1');
CREATE FOREIGN TABLE jg3 (id int, v text, n numeric)
  SERVER loopback OPTIONS (schema_name 'remote', table_name 't1');
ANALYZE jg1, jg2, jg3;

EXPLAIN (VERBOSE, COSTS OFF)
SELECT t1.id, t2.id FROM jg1 t1 JOIN jg2 t2 ON (t1.id = t2.id AND CURRENT_USER = SESSION_USER)
 ORDER BY t1.v, t1.id OFFSET 100 LIMIT 5;
SELECT t1.id, t2.id FROM jg1 t1 JOIN jg2 t2 ON (t1.id = t2.id AND CURRENT_USER = SESSION_USER)
 ORDER BY t1.v, t1.id OFFSET 100 LIMIT 5;
SELECT count(*) FROM jg1 t1 JOIN jg2 t2 ON (t1.id = t2.id AND CURRENT_USER <> SESSION_USER);

-- Three tables: the condition of the lower join is checked above the
-- whole remote join, which it empties as well.
EXPLAIN (COSTS OFF)
SELECT count(*), sum(t3.id)
  FROM (jg1 t1 JOIN jg2 t2 ON t1.id = t2.id AND CURRENT_USER = SESSION_USER)
  JOIN jg3 t3 ON t3.id = t1.id;
SELECT count(*), sum(t3.id)
  FROM (jg1 t1 JOIN jg2 t2 ON t1.id = t2.id AND CURRENT_USER = SESSION_USER)
  JOIN jg3 t3 ON t3.id = t1.id;
SELECT count(*)
  FROM (jg1 t1 JOIN jg2 t2 ON t1.id = t2.id AND CURRENT_USER <> SESSION_USER)
  JOIN jg3 t3 ON t3.id = t1.id;

-- Where a false condition empties a side only (the nullable side of an
-- outer join, the inner side of an anti-join), the rows of the other side
-- stay: compared with the same tables read locally.
EXPLAIN (COSTS OFF)
SELECT t3.id, t1.id FROM jg3 t3 LEFT JOIN (jg1 t1 JOIN jg2 t2
  ON t1.id = t2.id AND CURRENT_USER <> SESSION_USER) ON t3.id = t1.id;
SELECT rows_same(
  'SELECT t3.id, t1.id FROM jg3 t3 LEFT JOIN (jg1 t1 JOIN jg2 t2
     ON t1.id = t2.id AND CURRENT_USER <> SESSION_USER) ON t3.id = t1.id',
  'SELECT t3.id, t1.id FROM remote.t1 t3 LEFT JOIN (remote.t1 t1 JOIN remote.t1 t2
     ON t1.id = t2.id AND CURRENT_USER <> SESSION_USER) ON t3.id = t1.id');
SELECT rows_same(
  'SELECT t3.id FROM jg3 t3 WHERE NOT EXISTS (SELECT 1 FROM jg1 t1 JOIN jg2 t2
     ON t1.id = t2.id AND CURRENT_USER <> SESSION_USER WHERE t1.id = t3.id)',
  'SELECT t3.id FROM remote.t1 t3 WHERE NOT EXISTS (SELECT 1 FROM remote.t1 t1 JOIN remote.t1 t2
     ON t1.id = t2.id AND CURRENT_USER <> SESSION_USER WHERE t1.id = t3.id)');
SELECT rows_same(
  'SELECT t3.id, t1.id FROM jg3 t3 LEFT JOIN (jg1 t1 JOIN jg2 t2
     ON t1.id = t2.id AND CURRENT_USER = SESSION_USER) ON t3.id = t1.id',
  'SELECT t3.id, t1.id FROM remote.t1 t3 LEFT JOIN (remote.t1 t1 JOIN remote.t1 t2
     ON t1.id = t2.id AND CURRENT_USER = SESSION_USER) ON t3.id = t1.id');

DROP FOREIGN TABLE jg1, jg2, jg3;
