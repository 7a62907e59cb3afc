--
-- modify_partitioned: writes through a partitioned table whose foreign
-- partitions are on two servers, each checked against the remote tables
-- (defects found by test/t/014_write_differential.pl).
--
CREATE SCHEMA mp;
CREATE TABLE mp.r1 (a int PRIMARY KEY, b int CHECK (b >= 0), c text);
CREATE TABLE mp.r2 (LIKE mp.r1 INCLUDING ALL);
CREATE TABLE mpt (a int, b int, c text) PARTITION BY HASH (a);
CREATE FOREIGN TABLE mpt1 PARTITION OF mpt FOR VALUES WITH (MODULUS 2, REMAINDER 0)
  SERVER loopback OPTIONS (schema_name 'mp', table_name 'r1');
CREATE FOREIGN TABLE mpt2 PARTITION OF mpt FOR VALUES WITH (MODULUS 2, REMAINDER 1)
  SERVER loopback2 OPTIONS (schema_name 'mp', table_name 'r2');

-- RETURNING of rows routed to foreign partitions: they come in the
-- partitioned table's slot, which does not hold heap tuples.
INSERT INTO mpt VALUES (1, 1, 'one'), (2, 2, E'tab\there'), (3, NULL, NULL)
  RETURNING *;
INSERT INTO mpt VALUES (1, 5, 'dup'), (4, 4, 'four') ON CONFLICT DO NOTHING
  RETURNING a, b, c;
COPY mpt FROM stdin;
5	5	five
\.
SELECT * FROM mp.r1 UNION ALL SELECT * FROM mp.r2 ORDER BY a;

-- A statement that is its own transaction and writes to both servers: the
-- rows of one server are streamed (batch_size 10), those of the other kept
-- for the end of the statement (batch_size 1000).  A remote error on the
-- second leaves nothing on the first.
ALTER FOREIGN TABLE mpt1 OPTIONS (ADD batch_size '10');
ALTER FOREIGN TABLE mpt2 OPTIONS (ADD batch_size '1000');
SELECT min(x) AS bad FROM generate_series(100, 200) x
  WHERE satisfies_hash_partition('mpt'::regclass, 2, 1, x) \gset
\set VERBOSITY sqlstate
INSERT INTO mpt SELECT g, CASE WHEN g = :bad THEN -1 ELSE 0 END, 'load'
  FROM generate_series(10, 300) g;
\set VERBOSITY terse
SELECT (SELECT count(*) FROM mp.r1) AS r1, (SELECT count(*) FROM mp.r2) AS r2;
-- The same with a COPY.
COPY mpt FROM stdin;
1000	0	a
1001	0	b
1002	0	c
1003	0	d
1004	0	e
1005	0	f
1006	0	g
1007	0	h
1008	0	i
1009	0	j
1010	0	k
1011	0	l
1012	0	m
1013	0	n
1014	0	o
1015	0	p
1016	0	q
1017	0	r
1018	0	s
1019	0	t
1020	0	u
1021	0	v
1022	0	w
1023	0	x
1024	0	y
1025	0	z
3	0	dup
\.
SELECT (SELECT count(*) FROM mp.r1) AS r1, (SELECT count(*) FROM mp.r2) AS r2;
-- Without an error, the load is there on both.
INSERT INTO mpt SELECT g, 0, 'load' FROM generate_series(10, 300) g;
SELECT (SELECT count(*) FROM mp.r1) + (SELECT count(*) FROM mp.r2) AS total,
       (SELECT count(*) FROM mp.r1) > 10 AND (SELECT count(*) FROM mp.r2) > 10 AS both;

-- An UPDATE or DELETE in a WITH: its target's rows are read, and locked,
-- on the writer that changes them (else it waits for itself).
SET statement_timeout = '10s';
WITH u AS (UPDATE mpt SET b = b + 1 WHERE a <= 5 RETURNING a, b)
  SELECT count(*), sum(b) FROM u;
WITH d AS (DELETE FROM mpt WHERE a = 5 RETURNING a)
  INSERT INTO mpt SELECT a + 1000, 0, 'moved' FROM d RETURNING *;
RESET statement_timeout;
SELECT * FROM (SELECT * FROM mp.r1 UNION ALL SELECT * FROM mp.r2) r
  WHERE a <= 5 OR a > 1000 ORDER BY a;

DROP TABLE mpt;
DROP SCHEMA mp CASCADE;
