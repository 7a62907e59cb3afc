--
-- semi_nested: a semi- or anti-join (EXISTS, IN, NOT EXISTS) below another
-- join of the same server is sent inside the remote query, as a subquery
-- filtered by its [NOT] EXISTS: under an inner or outer join, two in one
-- join tree, one inside another's EXISTS, with the query's ORDER BY and
-- LIMIT.  Every result is compared with the same query on local tables.
--
CREATE TABLE remote.sn_a (id int, k int, v text);
CREATE TABLE remote.sn_b (id int, k int);
CREATE TABLE remote.sn_c (id int, k int);
INSERT INTO remote.sn_a SELECT g, g % 50, 'a' || g FROM generate_series(1, 600) g;
INSERT INTO remote.sn_b SELECT g, g % 7 FROM generate_series(1, 300) g WHERE g % 3 <> 0;
INSERT INTO remote.sn_c SELECT g, g % 11 FROM generate_series(1, 200) g WHERE g % 5 <> 0;
INSERT INTO remote.sn_b VALUES (NULL, NULL);
ANALYZE remote.sn_a, remote.sn_b, remote.sn_c;
CREATE FOREIGN TABLE sn_a (id int, k int, v text) SERVER loopback
  OPTIONS (schema_name 'remote', table_name 'sn_a');
CREATE FOREIGN TABLE sn_b (id int, k int) SERVER loopback
  OPTIONS (schema_name 'remote', table_name 'sn_b');
CREATE FOREIGN TABLE sn_c (id int, k int) SERVER loopback
  OPTIONS (schema_name 'remote', table_name 'sn_c');
ANALYZE sn_a, sn_b, sn_c;

-- The query on the foreign tables and on the remote tables themselves.
CREATE FUNCTION sn_same(q text) RETURNS boolean LANGUAGE sql AS $$
  SELECT rows_in_order(q, replace(replace(replace(q, 'sn_a', 'remote.sn_a'),
                                          'sn_b', 'remote.sn_b'), 'sn_c', 'remote.sn_c'))
$$;

-- A semi-join as the side of an inner join.
EXPLAIN (VERBOSE, COSTS OFF)
SELECT a.id, b.k FROM sn_a a JOIN (SELECT * FROM sn_b WHERE EXISTS
  (SELECT 1 FROM sn_c WHERE sn_c.id = sn_b.id)) b ON a.id = b.id
 ORDER BY a.id LIMIT 10;
SELECT sn_same($$SELECT a.id, b.k FROM sn_a a JOIN (SELECT * FROM sn_b WHERE EXISTS
  (SELECT 1 FROM sn_c WHERE sn_c.id = sn_b.id)) b ON a.id = b.id
 ORDER BY a.id LIMIT 10$$);
-- On the nullable side of a left join: its rows stay when none match.
EXPLAIN (VERBOSE, COSTS OFF)
SELECT a.id, b.id FROM sn_a a LEFT JOIN (SELECT * FROM sn_b WHERE EXISTS
  (SELECT 1 FROM sn_c WHERE sn_c.id = sn_b.id)) b ON a.id = b.id
 WHERE a.id > 150 ORDER BY a.id LIMIT 20;
SELECT sn_same($$SELECT a.id, b.id FROM sn_a a LEFT JOIN (SELECT * FROM sn_b WHERE EXISTS
  (SELECT 1 FROM sn_c WHERE sn_c.id = sn_b.id)) b ON a.id = b.id
 WHERE a.id > 150 ORDER BY a.id LIMIT 20$$);
-- An anti-join there: NOT EXISTS.
SELECT sn_same($$SELECT a.id, b.id FROM sn_a a LEFT JOIN (SELECT * FROM sn_b WHERE NOT EXISTS
  (SELECT 1 FROM sn_c WHERE sn_c.id = sn_b.id)) b ON a.id = b.id
 ORDER BY a.id LIMIT 30$$);
-- Two in one join tree.
EXPLAIN (VERBOSE, COSTS OFF)
SELECT a.id, b.k, c.k FROM sn_a a
  JOIN (SELECT * FROM sn_b WHERE EXISTS (SELECT 1 FROM sn_c WHERE sn_c.id = sn_b.id)) b
    ON a.id = b.id
  JOIN (SELECT * FROM sn_c WHERE EXISTS (SELECT 1 FROM sn_b WHERE sn_b.k = sn_c.k)) c
    ON a.k = c.id
 ORDER BY a.id, c.k LIMIT 10;
SELECT sn_same($$SELECT a.id, b.k, c.k FROM sn_a a
  JOIN (SELECT * FROM sn_b WHERE EXISTS (SELECT 1 FROM sn_c WHERE sn_c.id = sn_b.id)) b
    ON a.id = b.id
  JOIN (SELECT * FROM sn_c WHERE EXISTS (SELECT 1 FROM sn_b WHERE sn_b.k = sn_c.k)) c
    ON a.k = c.id
 ORDER BY a.id, c.k LIMIT 10$$);
-- A semi-join inside another's EXISTS (IN over a table with an EXISTS).
EXPLAIN (VERBOSE, COSTS OFF)
SELECT a.id, a.v FROM sn_a a WHERE a.id IN
  (SELECT b.id FROM sn_b b WHERE EXISTS (SELECT 1 FROM sn_c c WHERE c.k = b.k))
 ORDER BY a.id LIMIT 10;
SELECT sn_same($$SELECT a.id, a.v FROM sn_a a WHERE a.id IN
  (SELECT b.id FROM sn_b b WHERE EXISTS (SELECT 1 FROM sn_c c WHERE c.k = b.k))
 ORDER BY a.id LIMIT 10$$);
SELECT sn_same($$SELECT a.id FROM sn_a a WHERE NOT EXISTS
  (SELECT 1 FROM sn_b b WHERE b.id = a.id AND EXISTS (SELECT 1 FROM sn_c c WHERE c.id = b.id))
 ORDER BY a.id$$);
-- Right and full joins of semi-joins.
SELECT sn_same($$SELECT x.id, y.id FROM
  (SELECT * FROM sn_b WHERE EXISTS (SELECT 1 FROM sn_c WHERE sn_c.id = sn_b.id AND sn_b.k < 3)) x
  RIGHT JOIN
  (SELECT * FROM sn_b WHERE EXISTS (SELECT 1 FROM sn_c WHERE sn_c.id = sn_b.id)) y
  ON x.id = y.id ORDER BY y.id, x.id$$);
SELECT sn_same($$SELECT x.id, y.id FROM
  (SELECT * FROM sn_b WHERE EXISTS (SELECT 1 FROM sn_c WHERE sn_c.id = sn_b.id AND sn_b.k < 3)) x
  FULL JOIN
  (SELECT * FROM sn_a WHERE EXISTS (SELECT 1 FROM sn_c WHERE sn_c.k = sn_a.k)) y
  ON x.id = y.id ORDER BY y.id, x.id$$);
-- Aggregated above.
SELECT sn_same($$SELECT a.k, count(*), sum(b.id) FROM sn_a a JOIN (SELECT * FROM sn_b WHERE EXISTS
  (SELECT 1 FROM sn_c WHERE sn_c.id = sn_b.id)) b ON a.id = b.id GROUP BY a.k ORDER BY a.k$$);
-- A query that locks rows keeps the semi-join apart (a subquery cannot be
-- locked through).
EXPLAIN (VERBOSE, COSTS OFF)
SELECT a.id FROM sn_a a JOIN (SELECT * FROM sn_b WHERE EXISTS
  (SELECT 1 FROM sn_c WHERE sn_c.id = sn_b.id)) b ON a.id = b.id
 ORDER BY a.id LIMIT 3 FOR UPDATE OF a;
SELECT a.id FROM sn_a a JOIN (SELECT * FROM sn_b WHERE EXISTS
  (SELECT 1 FROM sn_c WHERE sn_c.id = sn_b.id)) b ON a.id = b.id
 ORDER BY a.id LIMIT 3 FOR UPDATE OF a;

DROP FUNCTION sn_same(text);
DROP FOREIGN TABLE sn_a, sn_b, sn_c;
DROP TABLE remote.sn_a, remote.sn_b, remote.sn_c;
