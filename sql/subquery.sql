--
-- subquery: a condition "x op ANY/ALL (subquery)" that the planner keeps as
-- a subplan (NOT IN, IN under OR, op ALL) is sent inside the scan's remote
-- query when the subquery is one remote SELECT to the same server as the
-- same user: the remote server evaluates the whole condition.  Otherwise
-- it stays a local filter.  Every result is compared with local tables.
--
CREATE TABLE remote.sq_a (id int PRIMARY KEY, g int, v text);
CREATE TABLE remote.sq_b (id int PRIMARY KEY, k int, note text);
INSERT INTO remote.sq_a SELECT i, i % 7, 'a' || i FROM generate_series(1, 200) i;
INSERT INTO remote.sq_b SELECT i, i * 3, CASE WHEN i % 5 = 0 THEN 'bad' ELSE 'ok' END
  FROM generate_series(1, 60) i;
CREATE TABLE remote.sq_n (k int);
INSERT INTO remote.sq_n VALUES (3), (NULL), (9);
ANALYZE remote.sq_a, remote.sq_b, remote.sq_n;
CREATE FOREIGN TABLE sqa (id int, g int, v text)
  SERVER loopback OPTIONS (schema_name 'remote', table_name 'sq_a');
CREATE FOREIGN TABLE sqb (id int, k int, note text)
  SERVER loopback OPTIONS (schema_name 'remote', table_name 'sq_b');
CREATE FOREIGN TABLE sqn (k int)
  SERVER loopback OPTIONS (schema_name 'remote', table_name 'sq_n');
-- the same table through the other server
CREATE FOREIGN TABLE sqb2 (id int, k int, note text)
  SERVER loopback2 OPTIONS (schema_name 'remote', table_name 'sq_b');

-- NOT IN over the same server: one remote query.
EXPLAIN (VERBOSE, COSTS OFF)
SELECT id, v FROM sqa WHERE id NOT IN (SELECT k FROM sqb WHERE note = 'bad');
SELECT rows_same($$SELECT id, v FROM sqa WHERE id NOT IN (SELECT k FROM sqb WHERE note = 'bad')$$,
                 $$SELECT id, v FROM remote.sq_a WHERE id NOT IN (SELECT k FROM remote.sq_b WHERE note = 'bad')$$);
-- NOT IN of a set with a NULL: no row, as locally.
EXPLAIN (VERBOSE, COSTS OFF)
SELECT count(*) FROM sqa WHERE id NOT IN (SELECT k FROM sqn);
SELECT count(*) FROM sqa WHERE id NOT IN (SELECT k FROM sqn);
SELECT count(*) FROM remote.sq_a WHERE id NOT IN (SELECT k FROM remote.sq_n);
-- IN under OR, op ALL, and a NULL on the left.
SELECT rows_same($$SELECT id FROM sqa WHERE id IN (SELECT k FROM sqb WHERE note = 'bad') OR g = 0$$,
                 $$SELECT id FROM remote.sq_a WHERE id IN (SELECT k FROM remote.sq_b WHERE note = 'bad') OR g = 0$$);
EXPLAIN (VERBOSE, COSTS OFF)
SELECT id FROM sqa WHERE id > ALL (SELECT k FROM sqb WHERE id < 50);
SELECT rows_same($$SELECT id FROM sqa WHERE id > ALL (SELECT k FROM sqb WHERE id < 50)$$,
                 $$SELECT id FROM remote.sq_a WHERE id > ALL (SELECT k FROM remote.sq_b WHERE id < 50)$$);
SELECT rows_same($$SELECT id FROM sqa WHERE (CASE WHEN g = 1 THEN NULL ELSE id END) NOT IN (SELECT k FROM sqb)$$,
                 $$SELECT id FROM remote.sq_a WHERE (CASE WHEN g = 1 THEN NULL ELSE id END) NOT IN (SELECT k FROM remote.sq_b)$$);

-- A comparison of two types, a subquery that is a remote aggregate, and
-- one that is a remote join.
EXPLAIN (VERBOSE, COSTS OFF)
SELECT id FROM sqa WHERE id::bigint NOT IN (SELECT k FROM sqb WHERE note = 'bad');
SELECT rows_same($$SELECT id FROM sqa WHERE id::bigint NOT IN (SELECT k FROM sqb WHERE note = 'bad')$$,
                 $$SELECT id FROM remote.sq_a WHERE id::bigint NOT IN (SELECT k FROM remote.sq_b WHERE note = 'bad')$$);
EXPLAIN (VERBOSE, COSTS OFF)
SELECT id FROM sqa WHERE g NOT IN (SELECT max(k) % 7 FROM sqb WHERE note = 'bad');
SELECT rows_same($$SELECT id FROM sqa WHERE g NOT IN (SELECT max(k) % 7 FROM sqb WHERE note = 'bad')$$,
                 $$SELECT id FROM remote.sq_a WHERE g NOT IN (SELECT max(k) % 7 FROM remote.sq_b WHERE note = 'bad')$$);
EXPLAIN (VERBOSE, COSTS OFF)
SELECT id FROM sqa WHERE id NOT IN (SELECT b.k FROM sqb b JOIN sqa a ON a.id = b.id WHERE a.g = 2);
SELECT rows_same($$SELECT id FROM sqa WHERE id NOT IN (SELECT b.k FROM sqb b JOIN sqa a ON a.id = b.id WHERE a.g = 2)$$,
                 $$SELECT id FROM remote.sq_a WHERE id NOT IN (SELECT b.k FROM remote.sq_b b JOIN remote.sq_a a ON a.id = b.id WHERE a.g = 2)$$);

-- The condition goes into a remote join too.
EXPLAIN (VERBOSE, COSTS OFF)
SELECT a.id, b.note FROM sqa a JOIN sqb b ON a.id = b.id
 WHERE a.id NOT IN (SELECT k FROM sqb WHERE note = 'bad');
SELECT rows_same($$SELECT a.id, b.note FROM sqa a JOIN sqb b ON a.id = b.id WHERE a.id NOT IN (SELECT k FROM sqb WHERE note = 'bad')$$,
                 $$SELECT a.id, b.note FROM remote.sq_a a JOIN remote.sq_b b ON a.id = b.id WHERE a.id NOT IN (SELECT k FROM remote.sq_b WHERE note = 'bad')$$);

-- Stays local: another server, a correlated subquery, a subquery with a
-- local condition, a subquery's column that needs a conversion...
EXPLAIN (VERBOSE, COSTS OFF)
SELECT id FROM sqa WHERE id NOT IN (SELECT k FROM sqb2 WHERE note = 'bad');
SELECT rows_same($$SELECT id FROM sqa WHERE id NOT IN (SELECT k FROM sqb2 WHERE note = 'bad')$$,
                 $$SELECT id FROM remote.sq_a WHERE id NOT IN (SELECT k FROM remote.sq_b WHERE note = 'bad')$$);
EXPLAIN (VERBOSE, COSTS OFF)
SELECT id FROM sqa WHERE id NOT IN (SELECT k FROM sqb WHERE sqb.id = sqa.g);
SELECT rows_same($$SELECT id FROM sqa WHERE id NOT IN (SELECT k FROM sqb WHERE sqb.id = sqa.g)$$,
                 $$SELECT id FROM remote.sq_a WHERE id NOT IN (SELECT k FROM remote.sq_b WHERE sq_b.id = sq_a.g)$$);
EXPLAIN (VERBOSE, COSTS OFF)
SELECT id FROM sqa WHERE id NOT IN (SELECT k FROM sqb WHERE note || random()::text <> '');
EXPLAIN (VERBOSE, COSTS OFF)
SELECT id FROM sqa WHERE id::numeric NOT IN (SELECT k FROM sqb WHERE note = 'bad');
SELECT rows_same($$SELECT id FROM sqa WHERE id::numeric NOT IN (SELECT k FROM sqb WHERE note = 'bad')$$,
                 $$SELECT id FROM remote.sq_a WHERE id::numeric NOT IN (SELECT k FROM remote.sq_b WHERE note = 'bad')$$);
-- ... or a subquery that computes its column locally, or returns more.
EXPLAIN (VERBOSE, COSTS OFF)
SELECT id FROM sqa WHERE id NOT IN (SELECT k * 2 FROM sqb WHERE note = 'bad');
EXPLAIN (VERBOSE, COSTS OFF)
SELECT id FROM sqa WHERE g NOT IN (SELECT max(k) % 7 FROM sqb GROUP BY note);
SELECT rows_same($$SELECT id FROM sqa WHERE g NOT IN (SELECT max(k) % 7 FROM sqb GROUP BY note)$$,
                 $$SELECT id FROM remote.sq_a WHERE g NOT IN (SELECT max(k) % 7 FROM remote.sq_b GROUP BY note)$$);

-- Partitions on two servers: the one on the subquery's server sends it,
-- the other evaluates it locally, reading the subquery's scan.
CREATE TABLE remote.sq_p1 AS SELECT * FROM remote.sq_a WHERE id <= 100;
CREATE TABLE remote.sq_p2 AS SELECT * FROM remote.sq_a WHERE id > 100;
CREATE TABLE sqp (id int, g int, v text) PARTITION BY RANGE (id);
CREATE FOREIGN TABLE sqp1 PARTITION OF sqp FOR VALUES FROM (MINVALUE) TO (101)
  SERVER loopback OPTIONS (schema_name 'remote', table_name 'sq_p1');
CREATE FOREIGN TABLE sqp2 PARTITION OF sqp FOR VALUES FROM (101) TO (MAXVALUE)
  SERVER loopback2 OPTIONS (schema_name 'remote', table_name 'sq_p2');
EXPLAIN (VERBOSE, COSTS OFF)
SELECT id FROM sqp WHERE id NOT IN (SELECT k FROM sqb WHERE note = 'ok');
SELECT rows_same($$SELECT id FROM sqp WHERE id NOT IN (SELECT k FROM sqb WHERE note = 'ok')$$,
                 $$SELECT id FROM remote.sq_a WHERE id NOT IN (SELECT k FROM remote.sq_b WHERE note = 'ok')$$);

-- ... also when the subquery's rows come in many batches, read while the
-- other partition's rows are filtered.
CREATE TABLE remote.sq_many AS SELECT g * 2 AS k FROM generate_series(1, 3000) g;
CREATE FOREIGN TABLE sqmany (k int)
  SERVER loopback OPTIONS (schema_name 'remote', table_name 'sq_many', fetch_size '50');
EXPLAIN (VERBOSE, COSTS OFF)
SELECT count(*) FROM sqp WHERE id NOT IN (SELECT k FROM sqmany);
SELECT count(*) FROM sqp WHERE id NOT IN (SELECT k FROM sqmany);
SELECT count(*) FROM remote.sq_a WHERE id NOT IN (SELECT k FROM remote.sq_many);
SELECT count(*) FROM sqp WHERE id NOT IN (SELECT k FROM sqmany) OR id % 3 = 0;
SELECT count(*) FROM remote.sq_a WHERE id NOT IN (SELECT k FROM remote.sq_many) OR id % 3 = 0;
DROP FOREIGN TABLE sqmany;
DROP TABLE remote.sq_many;

-- A prepared statement, generic plan, with a parameter outside the subquery.
PREPARE sq(int) AS SELECT count(*) FROM sqa WHERE g = $1 AND id NOT IN (SELECT k FROM sqb WHERE note = 'bad');
SET plan_cache_mode = force_generic_plan;
EXPLAIN (VERBOSE, COSTS OFF) EXECUTE sq(3);
EXECUTE sq(3);
EXECUTE sq(4);
RESET plan_cache_mode;
SELECT count(*) FROM remote.sq_a WHERE g = 3 AND id NOT IN (SELECT k FROM remote.sq_b WHERE note = 'bad');
SELECT count(*) FROM remote.sq_a WHERE g = 4 AND id NOT IN (SELECT k FROM remote.sq_b WHERE note = 'bad');
DEALLOCATE sq;

-- An error inside the subquery is the remote server's, as it would be
-- locally; the session goes on.
SELECT count(*) FROM sqa WHERE id NOT IN (SELECT 1 / (k - k) FROM sqb);
SELECT count(*) FROM sqa WHERE id NOT IN (SELECT k FROM sqb WHERE note = 'bad');

-- UPDATE and DELETE with such a condition change the same rows.
BEGIN;
UPDATE sqa SET v = v || '!' WHERE id NOT IN (SELECT k FROM sqb) AND g = 5;
SELECT count(*) FROM sqa WHERE v LIKE '%!';
SELECT count(*) FROM remote.sq_a WHERE id NOT IN (SELECT k FROM remote.sq_b) AND g = 5;
SELECT count(*) FROM remote.sq_a WHERE g = 6;
DELETE FROM sqa WHERE id NOT IN (SELECT k FROM sqb) AND g = 6;
SELECT count(*) FROM sqa WHERE g = 6;
SELECT count(*) FROM remote.sq_a WHERE g = 6 AND id IN (SELECT k FROM remote.sq_b);
ROLLBACK;

-- An uncorrelated scalar subquery (an initplan) whose plan is one remote
-- SELECT of the scan's server and user mapping is written in place of its
-- parameter: one remote query, no round trip first for the value.
EXPLAIN (VERBOSE, COSTS OFF)
SELECT id, v FROM sqa WHERE id > (SELECT max(k) FROM sqb WHERE note = 'bad') - 30;
SELECT rows_same($$SELECT id, v FROM sqa WHERE id > (SELECT max(k) FROM sqb WHERE note = 'bad') - 30$$,
                 $$SELECT id, v FROM remote.sq_a WHERE id > (SELECT max(k) FROM remote.sq_b WHERE note = 'bad') - 30$$);
-- The initplan itself does not run, nor is its remote query sent: the
-- remote rows are read once (a view that counts its reads with a sequence:
-- 120 if the initplan's query went too).
CREATE SEQUENCE remote.sq_reads;
CREATE VIEW remote.sq_counted AS SELECT k, nextval('remote.sq_reads') AS n FROM remote.sq_b;
CREATE FOREIGN TABLE sqc (k int)
  SERVER loopback OPTIONS (schema_name 'remote', table_name 'sq_counted');
SELECT count(*) FROM sqa WHERE id > (SELECT max(k) FROM sqc) - 30;
SELECT last_value FROM remote.sq_reads;
-- Two initplans written into the remote query of an aggregate: neither
-- runs on its own (60 + 2 x 60).
SELECT count(*), min((SELECT max(k) FROM sqc)) FROM sqa WHERE id > (SELECT max(k) FROM sqc) - 30;
SELECT last_value FROM remote.sq_reads;
-- One whose value is read here too (the select list of a scan): it runs
-- for that use (180 + 60 + 60).
SELECT id, (SELECT max(k) FROM sqc) AS m FROM sqa WHERE id > (SELECT max(k) FROM sqc) - 3 ORDER BY id;
SELECT last_value FROM remote.sq_reads;
DROP FOREIGN TABLE sqc;
DROP VIEW remote.sq_counted;
DROP SEQUENCE remote.sq_reads;
-- A grouped subquery's value, an aggregate of the outer scan's server.
EXPLAIN (VERBOSE, COSTS OFF)
SELECT g, count(*) FROM sqa WHERE id < (SELECT avg(k) FROM sqb) GROUP BY g;
SELECT rows_same($$SELECT g, count(*) FROM sqa WHERE id < (SELECT avg(k) FROM sqb) GROUP BY g$$,
                 $$SELECT g, count(*) FROM remote.sq_a WHERE id < (SELECT avg(k) FROM remote.sq_b) GROUP BY g$$);
-- No row: NULL, no row matches.
SELECT count(*) FROM sqa WHERE id > (SELECT k FROM sqb WHERE note = 'none');
-- More than one row: the remote server's error, the one local tables give.
SELECT count(*) FROM sqa WHERE id > (SELECT k FROM sqb WHERE note = 'bad');
SELECT count(*) FROM remote.sq_a WHERE id > (SELECT k FROM remote.sq_b WHERE note = 'bad');
-- The value used locally as well: the initplan runs for that use.
EXPLAIN (VERBOSE, COSTS OFF)
SELECT id, (SELECT max(k) FROM sqb) AS m FROM sqa WHERE id > (SELECT max(k) FROM sqb) - 5;
SELECT id, (SELECT max(k) FROM sqb) AS m FROM sqa WHERE id > (SELECT max(k) FROM sqb) - 5 ORDER BY id;
-- The subquery on another server: its value is sent as a parameter.
EXPLAIN (VERBOSE, COSTS OFF)
SELECT id FROM sqa WHERE id > (SELECT max(k) FROM sqb2) - 5;
SELECT id FROM sqa WHERE id > (SELECT max(k) FROM sqb2) - 5 ORDER BY id;
-- Partitions on two servers: the partition on the subquery's server writes
-- it, the other takes its value.
EXPLAIN (VERBOSE, COSTS OFF)
SELECT id FROM sqp WHERE id > (SELECT max(k) FROM sqb) - 10 OR id < (SELECT min(k) FROM sqb);
SELECT rows_same($$SELECT id FROM sqp WHERE id > (SELECT max(k) FROM sqb) - 10 OR id < (SELECT min(k) FROM sqb)$$,
                 $$SELECT id FROM remote.sq_a WHERE id > (SELECT max(k) FROM remote.sq_b) - 10 OR id < (SELECT min(k) FROM remote.sq_b)$$);
-- A subquery with a parameter of its own (a generic plan's $1) is not
-- written there: its value is sent.
PREPARE sqi(int) AS SELECT count(*) FROM sqa WHERE id > (SELECT max(k) FROM sqb WHERE id < $1);
SET plan_cache_mode = force_generic_plan;
EXPLAIN (VERBOSE, COSTS OFF) EXECUTE sqi(20);
EXECUTE sqi(20);
RESET plan_cache_mode;
SELECT count(*) FROM remote.sq_a WHERE id > (SELECT max(k) FROM remote.sq_b WHERE id < 20);
DEALLOCATE sqi;
-- A correlated scalar subquery is no initplan: unchanged.
SELECT rows_same($$SELECT id, (SELECT count(*) FROM sqb b WHERE b.k = a.id) FROM sqa a WHERE id < 20$$,
                 $$SELECT id, (SELECT count(*) FROM remote.sq_b b WHERE b.k = a.id) FROM remote.sq_a a WHERE id < 20$$);
-- In a transaction after writes of the subquery's table: the remote query
-- sees them, as the initplan would.
BEGIN;
INSERT INTO sqb VALUES (1000, 250, 'bad');
SELECT count(*) FROM sqa WHERE id > (SELECT max(k) FROM sqb WHERE note = 'bad') - 60;
ROLLBACK;
SELECT count(*) FROM remote.sq_a WHERE id > 250 - 60;

DROP TABLE sqp;
DROP FOREIGN TABLE sqa, sqb, sqn, sqb2;
DROP TABLE remote.sq_a, remote.sq_b, remote.sq_n, remote.sq_p1, remote.sq_p2;
