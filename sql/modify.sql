--
-- modify: INSERT, UPDATE and DELETE row by row, batches, bulk loads with
-- COPY FROM STDIN, and reading one's own writes; every write is compared
-- with the same statement on a local table.
--
CREATE SCHEMA wr;
-- Which remote statements wrote (COPY or INSERT), by a remote trigger.
CREATE TABLE wr.log (query text);
CREATE FUNCTION wr.log_query() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO wr.log VALUES (CASE WHEN current_query() ~ 'COPY' THEN 'COPY'
                                  WHEN current_query() ~ 'INSERT' THEN 'INSERT' END);
  RETURN NULL;
END
$$;
CREATE TABLE wr.t (a int PRIMARY KEY, b int, c text, d date DEFAULT '2000-01-01',
                   g int GENERATED ALWAYS AS (b * 2) STORED);
CREATE TRIGGER t_log AFTER INSERT ON wr.t FOR EACH STATEMENT EXECUTE FUNCTION wr.log_query();
CREATE FOREIGN TABLE wt (a int, b int, c text, d date DEFAULT '1999-12-31',
                         g int GENERATED ALWAYS AS (b * 2) STORED)
  SERVER loopback OPTIONS (schema_name 'wr', table_name 't');
CREATE TABLE lt (a int PRIMARY KEY, b int, c text, d date DEFAULT '1999-12-31',
                 g int GENERATED ALWAYS AS (b * 2) STORED);

-- One row, the local default, the generated column computed remotely.
INSERT INTO wt (a, b, c) VALUES (1, 10, 'one');
INSERT INTO lt (a, b, c) VALUES (1, 10, 'one');
INSERT INTO wt VALUES (2, 20, 'two', '2020-02-02') RETURNING *;
INSERT INTO lt VALUES (2, 20, 'two', '2020-02-02') RETURNING *;
-- Values that need escaping, in a small INSERT and in a COPY stream.
INSERT INTO wt (a, b, c) VALUES (3, NULL, E'tab\there'), (4, 4, E'new\nline'),
  (5, 5, E'back\\slash'), (6, 6, '\N'), (7, 7, NULL), (8, 8, E'quote''s'),
  (9, 9, E'cr\rlf'), (10, 10, '');
INSERT INTO lt (a, b, c) VALUES (3, NULL, E'tab\there'), (4, 4, E'new\nline'),
  (5, 5, E'back\\slash'), (6, 6, '\N'), (7, 7, NULL), (8, 8, E'quote''s'),
  (9, 9, E'cr\rlf'), (10, 10, '');
SELECT * FROM wr.log;
TRUNCATE wr.log;
INSERT INTO wt (a, b, c)
  SELECT g, g % 7, CASE g % 5 WHEN 0 THEN E'x\ty' WHEN 1 THEN E'\\N' WHEN 2 THEN NULL
                              WHEN 3 THEN E'a\nb\\c' ELSE 'v' || g END
  FROM generate_series(11, 2000) g;
INSERT INTO lt (a, b, c)
  SELECT g, g % 7, CASE g % 5 WHEN 0 THEN E'x\ty' WHEN 1 THEN E'\\N' WHEN 2 THEN NULL
                              WHEN 3 THEN E'a\nb\\c' ELSE 'v' || g END
  FROM generate_series(11, 2000) g;
-- Past batch_size (1000) rows the load streams with COPY.
SELECT * FROM wr.log;
TRUNCATE wr.log;
SELECT rows_same('SELECT * FROM wt', 'SELECT * FROM lt');
SELECT rows_same('SELECT * FROM wr.t', 'SELECT * FROM lt');

-- COPY into the foreign table, with a column list.
COPY wt (a, c) FROM stdin;
3001	copied
3002	\N
3003	with\ttab
\.
COPY lt (a, c) FROM stdin;
3001	copied
3002	\N
3003	with\ttab
\.
SELECT rows_same('SELECT * FROM wt', 'SELECT * FROM lt');

-- EXPLAIN VERBOSE shows the statement, and how a load streams.
EXPLAIN (VERBOSE, COSTS OFF) INSERT INTO wt (a, b, c) VALUES (1, 2, 'x');
EXPLAIN (VERBOSE, COSTS OFF) INSERT INTO wt (a, b, c) VALUES (1, 2, 'x') RETURNING g;

-- ON CONFLICT DO NOTHING: the rows the remote server skipped do not count.
INSERT INTO wt (a, b, c) VALUES (1, 0, 'dup'), (4000, 0, 'new') ON CONFLICT DO NOTHING;
INSERT INTO lt (a, b, c) VALUES (1, 0, 'dup'), (4000, 0, 'new') ON CONFLICT DO NOTHING;
INSERT INTO wt (a, b, c) VALUES (1, 0, 'dup') ON CONFLICT DO NOTHING RETURNING a;
INSERT INTO wt (a, b, c) VALUES (1, 0, 'dup') ON CONFLICT (a) DO UPDATE SET b = 1;
EXPLAIN (VERBOSE, COSTS OFF)
INSERT INTO wt (a, b, c) VALUES (1, 0, 'dup') ON CONFLICT DO NOTHING;
TRUNCATE wr.log;
ALTER FOREIGN TABLE wt OPTIONS (ADD batch_size '3');
INSERT INTO wt (a, b, c) SELECT g, 1, 'b' FROM generate_series(3998, 4005) g ON CONFLICT DO NOTHING;
INSERT INTO lt (a, b, c) SELECT g, 1, 'b' FROM generate_series(3998, 4005) g ON CONFLICT DO NOTHING;
-- batch_size 3: three INSERTs.
SELECT * FROM wr.log;
TRUNCATE wr.log;
ALTER FOREIGN TABLE wt OPTIONS (DROP batch_size);
SELECT rows_same('SELECT * FROM wt', 'SELECT * FROM lt');

-- A remote error: the remote SQLSTATE and message, the table named.
\set VERBOSITY default
INSERT INTO wt (a, b, c) VALUES (1, 0, 'dup');
\set VERBOSITY terse
DO $$
BEGIN
  INSERT INTO wt (a, b, c) SELECT g, 0, 'x' FROM generate_series(1990, 2500) g;
EXCEPTION WHEN unique_violation THEN
  RAISE NOTICE 'unique_violation: %', SQLERRM;
END
$$;
-- Nothing of the failed statements stays.
SELECT rows_same('SELECT * FROM wr.t', 'SELECT * FROM lt');

-- UPDATE and DELETE row by row (conditions the remote server cannot check).
CREATE FUNCTION local_even(int) RETURNS boolean LANGUAGE plpgsql AS
  $$ BEGIN RETURN $1 % 2 = 0; END $$;
EXPLAIN (VERBOSE, COSTS OFF) UPDATE wt SET b = b + 100 WHERE local_even(a);
UPDATE wt SET b = b + 100 WHERE local_even(a) AND a < 50;
UPDATE lt SET b = b + 100 WHERE local_even(a) AND a < 50;
UPDATE wt SET c = c || '!' WHERE local_even(a) AND a BETWEEN 100 AND 104 RETURNING a, b, c, g;
UPDATE lt SET c = c || '!' WHERE local_even(a) AND a BETWEEN 100 AND 104 RETURNING a, b, c, g;
DELETE FROM wt WHERE local_even(a) AND a > 1900 RETURNING a, c;
DELETE FROM lt WHERE local_even(a) AND a > 1900 RETURNING a, c;
SELECT rows_same('SELECT * FROM wr.t', 'SELECT * FROM lt');
-- RETURNING ctid gives where the remote row now is.
CREATE TEMP TABLE returned_ctid (tid tid);
WITH u AS (UPDATE wt SET c = c WHERE a = 3 AND local_even(a + 1) RETURNING ctid)
INSERT INTO returned_ctid SELECT ctid FROM u;
SELECT tid = (SELECT ctid FROM wr.t WHERE a = 3) AS same_ctid FROM returned_ctid;
-- A remote view has no ctid: RETURNING asks for it only when it is read,
-- as postgres_fdw does (an INSERT through a view failed before).
CREATE TABLE wr.vt_rows (a int, b text);
CREATE VIEW wr.vt AS SELECT a, b FROM wr.vt_rows;
CREATE FOREIGN TABLE wvt (a int, b text) SERVER loopback
  OPTIONS (schema_name 'wr', table_name 'vt');
EXPLAIN (VERBOSE, COSTS OFF) INSERT INTO wvt VALUES (1, 'one') RETURNING *;
INSERT INTO wvt VALUES (1, 'one') RETURNING *;
INSERT INTO wvt VALUES (2, 'two') RETURNING b;
SELECT * FROM wvt ORDER BY a;
DROP FOREIGN TABLE wvt;
DROP VIEW wr.vt;
DROP TABLE wr.vt_rows;

-- Locked rows are changed through the same remote transaction: no wait.
SET statement_timeout = '10s';
BEGIN;
SELECT a FROM wt WHERE a = 1 FOR UPDATE;
UPDATE wt SET b = -1 WHERE a = 1 AND local_even(a + 1);
SELECT a, b FROM wt WHERE a = 1;
ROLLBACK;
RESET statement_timeout;
SELECT a, b FROM wr.t WHERE a = 1;

-- Local triggers: BEFORE ROW changes the row sent, AFTER ROW sees the row
-- as the remote server stored it (its generated column).
CREATE FUNCTION wr.before_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  NEW.c := NEW.c || ' (before)';
  RETURN NEW;
END
$$;
CREATE FUNCTION wr.after_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE NOTICE 'after % of %: g = %', TG_OP, NEW.a, NEW.g;
  RETURN NULL;
END
$$;
CREATE TRIGGER wt_before BEFORE INSERT ON wt FOR EACH ROW EXECUTE FUNCTION wr.before_row();
CREATE TRIGGER wt_after AFTER INSERT OR UPDATE ON wt FOR EACH ROW EXECUTE FUNCTION wr.after_row();
INSERT INTO wt (a, b, c) VALUES (5000, 21, 'trig');
UPDATE wt SET b = 22 WHERE a = 5000;
SELECT a, b, c, g FROM wr.t WHERE a = 5000;
DROP TRIGGER wt_before ON wt;
DROP TRIGGER wt_after ON wt;
-- A BEFORE ROW UPDATE trigger may change columns the statement does not
-- set: every column is sent (c here, which only the trigger changes).
CREATE TRIGGER wt_before_upd BEFORE UPDATE ON wt FOR EACH ROW EXECUTE FUNCTION wr.before_row();
EXPLAIN (VERBOSE, COSTS OFF) UPDATE wt SET b = 23 WHERE a = 5000;
UPDATE wt SET b = 23 WHERE a = 5000;
SELECT a, b, c, g FROM wr.t WHERE a = 5000;
UPDATE wt SET b = 24 WHERE a = 5000 RETURNING a, b, c, g;
SELECT a, b, c, g FROM wr.t WHERE a = 5000;
DROP TRIGGER wt_before_upd ON wt;
DELETE FROM wr.t WHERE a = 5000;

-- A partitioned table of foreign partitions: two on one server, one on
-- another.
CREATE TABLE wr.p1 (a int PRIMARY KEY, b int, c text);
CREATE TABLE wr.p2 (LIKE wr.p1 INCLUDING ALL);
CREATE TABLE wr.p3 (LIKE wr.p1 INCLUDING ALL);
CREATE TABLE wp (a int, b int, c text) PARTITION BY HASH (a);
CREATE FOREIGN TABLE wp1 PARTITION OF wp FOR VALUES WITH (MODULUS 3, REMAINDER 0)
  SERVER loopback OPTIONS (schema_name 'wr', table_name 'p1');
CREATE FOREIGN TABLE wp2 PARTITION OF wp FOR VALUES WITH (MODULUS 3, REMAINDER 1)
  SERVER loopback OPTIONS (schema_name 'wr', table_name 'p2');
CREATE FOREIGN TABLE wp3 PARTITION OF wp FOR VALUES WITH (MODULUS 3, REMAINDER 2)
  SERVER loopback2 OPTIONS (schema_name 'wr', table_name 'p3');
CREATE TABLE lp (a int PRIMARY KEY, b int, c text);
EXPLAIN (VERBOSE, COSTS OFF) INSERT INTO wp SELECT g, g % 10, 'p' || g FROM generate_series(1, 3000) g;
INSERT INTO wp SELECT g, g % 10, 'p' || g FROM generate_series(1, 3000) g;
INSERT INTO lp SELECT g, g % 10, 'p' || g FROM generate_series(1, 3000) g;
COPY wp FROM stdin;
5001	1	c1
5002	2	c2
5003	3	c3
5004	4	c4
\.
COPY lp FROM stdin;
5001	1	c1
5002	2	c2
5003	3	c3
5004	4	c4
\.
SELECT rows_same('SELECT * FROM wp', 'SELECT * FROM lp');
SELECT (SELECT count(*) FROM wr.p1) > 0 AND (SELECT count(*) FROM wr.p2) > 0 AND
       (SELECT count(*) FROM wr.p3) > 0 AS all_partitions_written;

-- Read your own writes: inside a transaction, every later read of a server
-- written to sees the writes, across partitions on one server, and a
-- rolled-back savepoint takes its writes back.
BEGIN;
INSERT INTO wp SELECT g, 0, 'tx' FROM generate_series(6001, 6300) g;
INSERT INTO lp SELECT g, 0, 'tx' FROM generate_series(6001, 6300) g;
SELECT rows_same('SELECT * FROM wp', 'SELECT * FROM lp');
SELECT count(*) FROM wp WHERE c = 'tx';
SAVEPOINT s1;
INSERT INTO wp VALUES (6301, 0, 'tx'), (6302, 0, 'tx'), (6303, 0, 'tx');
UPDATE wp SET b = 9 WHERE c = 'tx' AND local_even(a);
SELECT count(*), sum(b) FROM wp WHERE c = 'tx';
ROLLBACK TO SAVEPOINT s1;
SELECT count(*), sum(b) FROM wp WHERE c = 'tx';
DELETE FROM wp WHERE c = 'tx' AND a > 6200 AND local_even(a);
DELETE FROM lp WHERE c = 'tx' AND a > 6200 AND local_even(a);
SELECT rows_same('SELECT * FROM wp', 'SELECT * FROM lp');
COMMIT;
SELECT rows_same('SELECT * FROM wp', 'SELECT * FROM lp');
SELECT rows_same('SELECT * FROM wr.p1 UNION ALL SELECT * FROM wr.p2 UNION ALL SELECT * FROM wr.p3',
                 'SELECT * FROM lp');

-- A failure in the middle of a load into several partitions: the
-- statement fails with the remote error, and nothing of it stays.
INSERT INTO wp SELECT g, 0, 'late' FROM generate_series(2990, 4000) g;
SELECT count(*) FROM wp WHERE c = 'late';
SELECT rows_same('SELECT * FROM wp', 'SELECT * FROM lp');

-- A transaction rolled back takes its loads back.
BEGIN;
INSERT INTO wp SELECT g, 0, 'rb' FROM generate_series(7001, 9000) g;
SELECT count(*) FROM wp WHERE c = 'rb';
ROLLBACK;
SELECT count(*) FROM wp WHERE c = 'rb';

-- An UPDATE of the partition key that would move a row out of its
-- foreign partition fails, and changes nothing (partition_key.sql).
UPDATE wp SET a = a + 100000 WHERE a = 5001 AND local_even(a + 1);
SELECT rows_same('SELECT * FROM wp', 'SELECT * FROM lp');

-- Statements the remote server runs, counted by a statement trigger.
CREATE TABLE wr.stmts (tab text);
CREATE FUNCTION wr.count_stmt() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO wr.stmts VALUES (TG_TABLE_NAME);
  RETURN NULL;
END
$$;

-- A table of no column: every row is an INSERT ... DEFAULT VALUES of its
-- own, from an INSERT as from COPY (DEFAULT VALUES takes one row).
CREATE TABLE wr.nocols ();
CREATE TRIGGER count_stmt AFTER INSERT ON wr.nocols
  FOR EACH STATEMENT EXECUTE FUNCTION wr.count_stmt();
CREATE FOREIGN TABLE ft_nocols () SERVER loopback
  OPTIONS (schema_name 'wr', table_name 'nocols');
COPY ft_nocols FROM stdin;



\.
INSERT INTO ft_nocols SELECT FROM generate_series(1, 4);
SELECT count(*) FROM ft_nocols;
SELECT count(*) FROM wr.stmts WHERE tab = 'nocols';

-- batch_size 1 is an INSERT a row, rows routed to the table by an UPDATE
-- of the partition key included; a larger one loads them in bulk.
CREATE TABLE wb (a int, b text) PARTITION BY LIST (a);
CREATE TABLE wb_local PARTITION OF wb FOR VALUES IN (0);
CREATE TABLE wr.wb1 (a int, b text);
CREATE TABLE wr.wb2 (a int, b text);
CREATE TRIGGER count_stmt AFTER INSERT ON wr.wb1
  FOR EACH STATEMENT EXECUTE FUNCTION wr.count_stmt();
CREATE TRIGGER count_stmt AFTER INSERT ON wr.wb2
  FOR EACH STATEMENT EXECUTE FUNCTION wr.count_stmt();
CREATE FOREIGN TABLE wb1 PARTITION OF wb FOR VALUES IN (1) SERVER loopback
  OPTIONS (schema_name 'wr', table_name 'wb1', batch_size '1');
CREATE FOREIGN TABLE wb2 PARTITION OF wb FOR VALUES IN (2) SERVER loopback
  OPTIONS (schema_name 'wr', table_name 'wb2', batch_size '10');
INSERT INTO wb SELECT 0, 'x' || g FROM generate_series(1, 6) g;
UPDATE wb SET a = 1 WHERE a = 0 AND b IN ('x1', 'x2', 'x3');
UPDATE wb SET a = 2 WHERE a = 0 AND b IN ('x4', 'x5', 'x6');
EXPLAIN (VERBOSE, COSTS OFF) INSERT INTO wb1 SELECT 1, 'y' || g FROM generate_series(1, 3) g;
INSERT INTO wb1 SELECT 1, 'y' || g FROM generate_series(1, 3) g;
SELECT tableoid::regclass, count(*) FROM wb GROUP BY 1 ORDER BY 1;
SELECT tab, count(*) FROM wr.stmts WHERE tab LIKE 'wb%' GROUP BY 1 ORDER BY 1;

DROP TABLE wb;
DROP FOREIGN TABLE ft_nocols;
DROP TABLE wp, lp, lt;
DROP FOREIGN TABLE wt;
DROP FUNCTION local_even(int);
DROP SCHEMA wr CASCADE;
