--
-- partition_key: a row never stays in a foreign partition its key has left.
-- PostgreSQL moves no row out of a foreign partition: an UPDATE that gives
-- a row another partition's key fails instead (the remote change is taken
-- back), as a direct modification and row by row; an UPDATE or INSERT
-- that names the partition itself fails as on a table of this server.
--
CREATE SCHEMA pk_remote;
CREATE TABLE pk_remote.h0 (id int, v text);
CREATE TABLE pk_remote.h1 (id int, v text);
CREATE TABLE pk_remote.r1 (id int, v text);
CREATE TABLE pk_remote.r2 (id int, v text);
CREATE TABLE pk_remote.l1 (grp text, id int);
CREATE TABLE pk_remote.s1 (id int, sub int, v text);
CREATE TABLE pk_remote.s2 (id int, sub int, v text);

-- Hash partitions on two servers, and the same rows in a local table.
CREATE TABLE pk_hash (id int, v text) PARTITION BY HASH (id);
CREATE FOREIGN TABLE pk_hash0 PARTITION OF pk_hash
  FOR VALUES WITH (MODULUS 2, REMAINDER 0) SERVER loopback
  OPTIONS (schema_name 'pk_remote', table_name 'h0');
CREATE FOREIGN TABLE pk_hash1 PARTITION OF pk_hash
  FOR VALUES WITH (MODULUS 2, REMAINDER 1) SERVER loopback2
  OPTIONS (schema_name 'pk_remote', table_name 'h1');
CREATE TABLE pk_hash_local (id int, v text) PARTITION BY HASH (id);
CREATE TABLE pk_hash_local0 PARTITION OF pk_hash_local
  FOR VALUES WITH (MODULUS 2, REMAINDER 0);
CREATE TABLE pk_hash_local1 PARTITION OF pk_hash_local
  FOR VALUES WITH (MODULUS 2, REMAINDER 1);
INSERT INTO pk_hash SELECT g, 'v' || g FROM generate_series(1, 20) g;
INSERT INTO pk_hash_local SELECT g, 'v' || g FROM generate_series(1, 20) g;
SELECT tableoid::regclass, count(*) FROM pk_hash GROUP BY 1 ORDER BY 1;

-- The issue's case: a lookup by key after the UPDATE must find every row.
-- As a direct modification, the remote UPDATE returns the rows it
-- changed, each checked.
EXPLAIN (VERBOSE, COSTS OFF)
  UPDATE pk_hash SET id = id + 10000 WHERE id BETWEEN 1 AND 8;
UPDATE pk_hash SET id = id + 10000 WHERE id BETWEEN 1 AND 8;
-- Row by row (a condition computed locally): the same.  (The rows of one
-- partition, whose error comes first whatever the order of the shards.)
EXPLAIN (VERBOSE, COSTS OFF)
  UPDATE pk_hash SET id = id + 10000 WHERE id BETWEEN 1 AND 8 AND random() >= 0;
UPDATE pk_hash SET id = id + 10000 WHERE id BETWEEN 1 AND 8 AND random() >= 0
  AND satisfies_hash_partition('pk_hash'::regclass, 2, 0, id);
-- Nothing changed: every row is found by its key, in its partition.
SELECT count(*) FROM generate_series(1, 20) k WHERE EXISTS (SELECT 1 FROM pk_hash WHERE id = k);
SELECT rows_same('SELECT tableoid::regclass, * FROM pk_hash',
                 'SELECT replace(tableoid::regclass::text, ''_local'', '''')::regclass, * FROM pk_hash_local');
-- Columns that are not keys change (a key that stays in its partition
-- too: range partitions, below).
UPDATE pk_hash SET v = v || '!' WHERE id <= 3 RETURNING *;
UPDATE pk_hash_local SET v = v || '!' WHERE id <= 3;
SELECT rows_same('SELECT * FROM pk_hash', 'SELECT * FROM pk_hash_local');

-- In a transaction: the failed UPDATE is taken back to the savepoint, the
-- change before it stays.
BEGIN;
UPDATE pk_hash SET v = 'before' WHERE id = 20;
SAVEPOINT s;
UPDATE pk_hash SET id = id + 10000 WHERE id BETWEEN 9 AND 12;
ROLLBACK TO SAVEPOINT s;
SELECT id, v FROM pk_hash WHERE id IN (9, 10, 11, 12, 20) ORDER BY id;
COMMIT;
SELECT id, v FROM pk_hash WHERE id = 20;

-- Range partitions: within the bounds the row changes, past them it fails.
CREATE TABLE pk_range (id int, v text) PARTITION BY RANGE (id);
CREATE FOREIGN TABLE pk_range1 PARTITION OF pk_range
  FOR VALUES FROM (1) TO (100) SERVER loopback
  OPTIONS (schema_name 'pk_remote', table_name 'r1');
CREATE FOREIGN TABLE pk_range2 PARTITION OF pk_range
  FOR VALUES FROM (100) TO (200) SERVER loopback2
  OPTIONS (schema_name 'pk_remote', table_name 'r2');
INSERT INTO pk_range VALUES (10, 'a'), (20, 'b'), (150, 'c');
UPDATE pk_range SET id = id + 50 WHERE id < 100 RETURNING tableoid::regclass, *;
UPDATE pk_range SET id = id + 50 WHERE id < 100;
UPDATE pk_range SET id = id + 50 WHERE id < 100 AND random() >= 0;
UPDATE pk_range SET id = NULL WHERE id = 150;
SELECT tableoid::regclass, * FROM pk_range ORDER BY id;

-- List partitions, with a foreign default partition.
CREATE TABLE pk_list (grp text, id int) PARTITION BY LIST (grp);
CREATE FOREIGN TABLE pk_list1 PARTITION OF pk_list
  FOR VALUES IN ('a', 'b') SERVER loopback
  OPTIONS (schema_name 'pk_remote', table_name 'l1');
CREATE TABLE pk_list_other PARTITION OF pk_list DEFAULT;
INSERT INTO pk_list VALUES ('a', 1), ('b', 2), ('z', 3);
UPDATE pk_list SET grp = 'b' WHERE grp = 'a';
UPDATE pk_list SET grp = 'z' WHERE grp = 'b';
-- Into a foreign partition from a local one: PostgreSQL moves the row.
UPDATE pk_list SET grp = 'a' WHERE grp = 'z';
SELECT tableoid::regclass, * FROM pk_list ORDER BY id;

-- Sub-partitions: the bounds of the parent partition count too.
CREATE TABLE pk_sub (id int, sub int, v text) PARTITION BY RANGE (id);
CREATE TABLE pk_sub_low PARTITION OF pk_sub FOR VALUES FROM (0) TO (100)
  PARTITION BY LIST (sub);
CREATE FOREIGN TABLE pk_sub_low1 PARTITION OF pk_sub_low FOR VALUES IN (1)
  SERVER loopback OPTIONS (schema_name 'pk_remote', table_name 's1');
CREATE FOREIGN TABLE pk_sub_low2 PARTITION OF pk_sub_low FOR VALUES IN (2)
  SERVER loopback2 OPTIONS (schema_name 'pk_remote', table_name 's2');
CREATE TABLE pk_sub_high PARTITION OF pk_sub FOR VALUES FROM (100) TO (200);
INSERT INTO pk_sub VALUES (1, 1, 'x'), (2, 2, 'y');
UPDATE pk_sub SET id = id + 10 RETURNING tableoid::regclass, *;
UPDATE pk_sub SET id = id + 100 WHERE sub = 1;
UPDATE pk_sub SET sub = 2 WHERE sub = 1;
UPDATE pk_sub SET sub = 2 WHERE sub = 1 AND random() >= 0;
SELECT tableoid::regclass, * FROM pk_sub ORDER BY id;

-- The partition itself as the target: its constraint holds, as for a
-- table of this server, for an UPDATE (direct, row by row, from a remote
-- join) and an INSERT (single row, batch, bulk load); COPY checks its rows
-- before the wrapper sees them.
UPDATE pk_range1 SET id = 500 WHERE id = 60;
UPDATE pk_range1 SET id = 500 WHERE id = 60 AND random() >= 0;
EXPLAIN (VERBOSE, COSTS OFF)
  UPDATE pk_range1 SET id = r2.id FROM pk_range2 r2 WHERE pk_range1.id + 90 = r2.id;
UPDATE pk_range1 SET id = r2.id FROM pk_range2 r2 WHERE pk_range1.id + 90 = r2.id;
UPDATE pk_range1 SET id = 61 WHERE id = 60 RETURNING *;
INSERT INTO pk_range1 VALUES (100, 'no');
INSERT INTO pk_range1 VALUES (5, 'yes'), (6, 'yes'), (700, 'no');
INSERT INTO pk_range1 SELECT g, 'no' FROM generate_series(90, 110) g;
ALTER FOREIGN TABLE pk_range1 OPTIONS (ADD batch_size '1');
INSERT INTO pk_range1 SELECT g, 'no' FROM generate_series(95, 105) g;
ALTER FOREIGN TABLE pk_range1 OPTIONS (DROP batch_size);
COPY pk_range1 FROM stdin;
7	yes
300	no
\.
INSERT INTO pk_range1 VALUES (8, 'yes') RETURNING *;
SELECT * FROM pk_range1 ORDER BY id;
SELECT * FROM pk_remote.r1 ORDER BY id;

-- A BEFORE ROW trigger of the foreign partition that changes the key
-- after the routing: the UPDATE would move the row, the INSERT breaks the
-- partition's constraint (as it would on a table of this server).
CREATE FUNCTION pk_shift() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  NEW.id := NEW.id + 1000;
  RETURN NEW;
END
$$;
CREATE TRIGGER pk_shift_upd BEFORE UPDATE ON pk_range2
  FOR EACH ROW EXECUTE FUNCTION pk_shift();
UPDATE pk_range SET v = 'moved' WHERE id = 150;
DROP TRIGGER pk_shift_upd ON pk_range2;
CREATE TRIGGER pk_shift_ins BEFORE INSERT ON pk_range2
  FOR EACH ROW EXECUTE FUNCTION pk_shift();
INSERT INTO pk_range VALUES (160, 'moved');
DROP TRIGGER pk_shift_ins ON pk_range2;
SELECT tableoid::regclass, * FROM pk_range ORDER BY id;

DROP TABLE pk_hash, pk_hash_local, pk_range, pk_list, pk_sub;
DROP FUNCTION pk_shift();
DROP SCHEMA pk_remote CASCADE;
