--
-- bulk_visibility: rows that an INSERT keeps for a bulk load are in the
-- remote table before any query of the same statement reads that server
-- (a trigger of another table, a sibling partition's trigger, a function)
--
CREATE TABLE remote.bv (a text, b int);
CREATE FOREIGN TABLE bv_ft (a text, b int)
  SERVER loopback OPTIONS (schema_name 'remote', table_name 'bv', batch_size '3');
CREATE TABLE bv_local (a text, b int);
CREATE FUNCTION bv_count() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE NOTICE '% % of %: % rows in bv_ft', TG_WHEN, TG_OP, NEW.a,
    (SELECT count(*) FROM bv_ft);
  RETURN NEW;
END
$$;
CREATE TRIGGER bv_local_count BEFORE INSERT OR UPDATE ON bv_local
  FOR EACH ROW EXECUTE FUNCTION bv_count();

-- The foreign table's rows, kept (batch_size 3), are counted by the local
-- table's trigger before each of its rows.
WITH t AS (INSERT INTO bv_local VALUES ('r1', 1), ('r2', 2), ('r3', 3), ('r4', 4), ('r5', 5) RETURNING *)
INSERT INTO bv_ft SELECT * FROM t;
SELECT count(*) FROM remote.bv;
WITH t AS (UPDATE bv_local SET b = b + 10 RETURNING *)
INSERT INTO bv_ft SELECT * FROM t;
SELECT count(*), sum(b) FROM remote.bv;
DELETE FROM bv_ft;
DELETE FROM bv_local;

-- A partition's trigger counts its foreign sibling's rows.
CREATE TABLE bv_parent (a text, b int) PARTITION BY LIST (a);
CREATE FOREIGN TABLE bv_part_f PARTITION OF bv_parent FOR VALUES IN ('f')
  SERVER loopback OPTIONS (schema_name 'remote', table_name 'bv', batch_size '10');
CREATE TABLE bv_part_l PARTITION OF bv_parent FOR VALUES IN ('l');
CREATE FUNCTION bv_count_part() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE NOTICE 'before row %: % rows in bv_part_f', NEW.b,
    (SELECT count(*) FROM bv_part_f);
  RETURN NEW;
END
$$;
CREATE TRIGGER bv_part_count BEFORE INSERT ON bv_part_l
  FOR EACH ROW EXECUTE FUNCTION bv_count_part();
INSERT INTO bv_parent VALUES ('f', 1), ('l', 2), ('f', 3), ('f', 4), ('l', 5);
SELECT tableoid::regclass, * FROM bv_parent ORDER BY b;

-- A function of the source rows reads the table being loaded, in a
-- statement that is its own transaction; an UPDATE sent whole does too.
CREATE FUNCTION bv_seen() RETURNS bigint LANGUAGE sql AS
  $$ SELECT count(*) FROM bv_ft $$;
INSERT INTO bv_ft SELECT 'g' || g, bv_seen() FROM generate_series(1, 4) g;
SELECT a, b FROM remote.bv WHERE a LIKE 'g%' ORDER BY a;
CREATE FUNCTION bv_bump() RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE n bigint;
BEGIN
  UPDATE bv_ft SET b = b + 100 WHERE a LIKE 'g%';
  GET DIAGNOSTICS n = ROW_COUNT;
  RETURN n;
END
$$;
INSERT INTO bv_ft SELECT 'h' || g, bv_bump() FROM generate_series(1, 3) g;
SELECT a, b FROM remote.bv WHERE a LIKE 'g%' OR a LIKE 'h%' ORDER BY a;

-- A function that reads the table in a subtransaction of its own (an
-- exception block) which rolls back: the rows kept go in at the
-- statement's level, not into that subtransaction, and every row stays.
-- With the rows kept as one INSERT (batch_size 1000) and streamed (3).
CREATE FUNCTION bv_peek(i int) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE n bigint;
BEGIN
  BEGIN
    SELECT count(*) INTO n FROM bv_ft WHERE a LIKE 'p%';
    RAISE EXCEPTION 'undone';
  EXCEPTION WHEN raise_exception THEN NULL;
  END;
  RETURN n;
END
$$;
ALTER FOREIGN TABLE bv_ft OPTIONS (SET batch_size '1000');
INSERT INTO bv_ft SELECT 'p' || g, bv_peek(g) FROM generate_series(1, 10) g;
SELECT count(*), sum(b) FROM remote.bv WHERE a LIKE 'p%';
BEGIN;
INSERT INTO bv_ft SELECT 'p' || g, bv_peek(g) FROM generate_series(11, 20) g;
SAVEPOINT s;
INSERT INTO bv_ft SELECT 'p' || g, bv_peek(g) FROM generate_series(21, 25) g;
ROLLBACK TO SAVEPOINT s;
COMMIT;
SELECT count(*), sum(b) FROM remote.bv WHERE a LIKE 'p%';
ALTER FOREIGN TABLE bv_ft OPTIONS (SET batch_size '3');
INSERT INTO bv_ft SELECT 'q' || g, bv_peek(g) FROM generate_series(1, 10) g;
SELECT count(*) FROM remote.bv WHERE a LIKE 'q%';
-- The same subtransaction wrote to the server first (an INSERT that sends
-- its row at its end, in the subtransaction's remote savepoint): the rows
-- kept stay kept (that query does not see them, as it would not see
-- postgres_fdw's batch not yet sent) and all go at the end of the
-- statement; the subtransaction's own row is rolled back.
CREATE TABLE remote.bv_other (i int);
CREATE FOREIGN TABLE bv_other (i int) SERVER loopback
  OPTIONS (schema_name 'remote', table_name 'bv_other');
CREATE FUNCTION bv_write_peek(k int) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE n bigint;
BEGIN
  BEGIN
    INSERT INTO bv_other VALUES (k);
    SELECT count(*) INTO n FROM bv_ft WHERE a LIKE 'w%';
    RAISE EXCEPTION 'undone';
  EXCEPTION WHEN raise_exception THEN NULL;
  END;
  RETURN n;
END
$$;
ALTER FOREIGN TABLE bv_ft OPTIONS (SET batch_size '1000');
INSERT INTO bv_ft SELECT 'w' || g, bv_write_peek(g) FROM generate_series(1, 5) g;
SELECT a, b FROM remote.bv WHERE a LIKE 'w%' ORDER BY a;
SELECT count(*) FROM remote.bv_other;
-- Rows sent for a query in a subtransaction fail there (a duplicate key),
-- and the subtransaction catches the error: the statement fails with it
-- all the same, kept as one INSERT and streamed, in a transaction block
-- and alone; nothing of it stays, the local rows neither.
CREATE TABLE remote.bv_key (id int PRIMARY KEY, v text);
INSERT INTO remote.bv_key VALUES (1, 'old');
CREATE FOREIGN TABLE bv_key (id int, v text) SERVER loopback
  OPTIONS (schema_name 'remote', table_name 'bv_key', batch_size '1000');
CREATE TABLE bv_log (i int);
CREATE FUNCTION bv_key_peek() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE n bigint;
BEGIN
  BEGIN
    SELECT count(*) INTO n FROM bv_key;
  EXCEPTION WHEN unique_violation THEN RAISE NOTICE 'caught: %', SQLERRM;
  END;
  RETURN NULL;
END
$$;
CREATE TRIGGER bv_log_peek AFTER INSERT ON bv_log
  FOR EACH ROW EXECUTE FUNCTION bv_key_peek();
BEGIN;
INSERT INTO bv_key VALUES (100, 'good');
WITH x AS (INSERT INTO bv_key VALUES (1, 'dup'), (2, 'new')),
     y AS (INSERT INTO bv_log VALUES (1))
SELECT 1;
COMMIT;
ALTER FOREIGN TABLE bv_key OPTIONS (SET batch_size '2');
WITH x AS (INSERT INTO bv_key VALUES (5, 'a'), (6, 'b'), (7, 'c'), (1, 'dup')),
     y AS (INSERT INTO bv_log VALUES (2))
SELECT 1;
SELECT * FROM remote.bv_key ORDER BY id;
SELECT * FROM bv_log;
-- A write kept for the COMMIT (the statement is its own transaction) and
-- sent by a deferred trigger's query, which catches its error: the commit
-- fails, since the remote transaction failed and its writes with it.
CREATE TABLE bv_dlog (i int);
CREATE CONSTRAINT TRIGGER bv_dlog_peek AFTER INSERT ON bv_dlog
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION bv_key_peek();
ALTER FOREIGN TABLE bv_key OPTIONS (SET batch_size '1000');
WITH y AS (INSERT INTO bv_dlog VALUES (1))
INSERT INTO bv_key VALUES (9, 'n'), (1, 'dup');
-- The same without two-phase commit.
ALTER SERVER loopback OPTIONS (ADD two_phase_commit 'off');
WITH y AS (INSERT INTO bv_dlog VALUES (1))
INSERT INTO bv_key VALUES (9, 'n'), (1, 'dup');
ALTER SERVER loopback OPTIONS (DROP two_phase_commit);
SELECT * FROM remote.bv_key ORDER BY id;
SELECT * FROM bv_dlog;
DROP TABLE bv_log, bv_dlog;
DROP FUNCTION bv_key_peek();
DROP FOREIGN TABLE bv_key;
DROP TABLE remote.bv_key;
DROP FUNCTION bv_peek(int), bv_write_peek(int);
DROP FOREIGN TABLE bv_other;
DROP TABLE remote.bv_other;

DROP FUNCTION bv_seen(), bv_bump();
DROP TABLE bv_parent;
DROP FUNCTION bv_count_part();
DROP TABLE bv_local;
DROP FUNCTION bv_count();
DROP FOREIGN TABLE bv_ft;
DROP TABLE remote.bv;
