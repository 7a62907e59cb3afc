--
-- ctid: a foreign table's ctid is the remote row's, fetched when the query
-- references it, in every way a scan reads rows (streams in text and in
-- binary format, cursors, prepared remote statements), and conditions on
-- it are evaluated remotely, as with postgres_fdw.
--
CREATE EXTENSION IF NOT EXISTS postgres_fdw;
CALL afdw_test_server('pg_loopback_ctid', 'postgres_fdw');
CREATE USER MAPPING FOR CURRENT_USER SERVER pg_loopback_ctid;

-- Rows on many pages, and some moved by updates, so that ctids are not
-- simply the ids.
CREATE TABLE remote.ct (id int, pad text);
INSERT INTO remote.ct SELECT g, repeat('x', 200) FROM generate_series(1, 2000) g;
UPDATE remote.ct SET pad = 'moved' WHERE id % 500 = 0;
CREATE FOREIGN TABLE ft_ct (id int, pad text)
  SERVER loopback OPTIONS (schema_name 'remote', table_name 'ct');
CREATE FOREIGN TABLE pg_ct (id int, pad text)
  SERVER pg_loopback_ctid OPTIONS (schema_name 'remote', table_name 'ct');

-- The remote SQL fetches ctid only where it is referenced, and ships
-- conditions on it.
EXPLAIN (VERBOSE, COSTS OFF) SELECT id FROM ft_ct;
EXPLAIN (VERBOSE, COSTS OFF) SELECT ctid, id FROM ft_ct;
EXPLAIN (VERBOSE, COSTS OFF) SELECT * FROM ft_ct WHERE ctid = '(0,2)';
EXPLAIN (VERBOSE, COSTS OFF) SELECT id FROM ft_ct WHERE ctid IN ('(0,1)', '(1,1)');
EXPLAIN (VERBOSE, COSTS OFF) SELECT id FROM ft_ct WHERE ctid > '(0,5)' AND id < 8;
EXPLAIN (VERBOSE, COSTS OFF) SELECT id FROM pg_ct WHERE ctid = '(0,2)';

-- The rows that differ from the remote table's (ctid, id): none, in each
-- way of reading.
CREATE FUNCTION afdw_ctid_diff(tab text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  n_fdw bigint;
  only_fdw bigint;
  only_remote bigint;
BEGIN
  EXECUTE format('SELECT count(*) FROM %I', tab) INTO n_fdw;
  EXECUTE format('SELECT count(*) FROM (SELECT ctid, id FROM %I
                  EXCEPT SELECT ctid, id FROM remote.ct) s', tab) INTO only_fdw;
  EXECUTE format('SELECT count(*) FROM (SELECT ctid, id FROM remote.ct
                  EXCEPT SELECT ctid, id FROM %I) s', tab) INTO only_remote;
  RETURN format('%s rows, %s only here, %s only remote', n_fdw, only_fdw, only_remote);
END
$$;
-- Streams: the first in text format (it checks the remote types), the
-- next ones in binary format.
SELECT afdw_ctid_diff('ft_ct');
SELECT afdw_ctid_diff('ft_ct');
SELECT afdw_ctid_diff('pg_ct');
-- Through a cursor, one row per FETCH and more.
ALTER FOREIGN TABLE ft_ct OPTIONS (ADD fetch_mode 'cursor', fetch_size '1');
SELECT afdw_ctid_diff('ft_ct');
ALTER FOREIGN TABLE ft_ct OPTIONS (SET fetch_size '7');
SELECT afdw_ctid_diff('ft_ct');
ALTER FOREIGN TABLE ft_ct OPTIONS (DROP fetch_size);

-- The first row, and conditions on ctid, with both wrappers.
SELECT ctid, id FROM ft_ct ORDER BY ctid LIMIT 1;
SELECT ctid, id FROM pg_ct ORDER BY ctid LIMIT 1;
SELECT ctid, id FROM ft_ct WHERE ctid = '(0,2)';
SELECT ctid, id FROM pg_ct WHERE ctid = '(0,2)';
SELECT ctid, id FROM ft_ct WHERE ctid IN ('(0,1)', '(1,1)') ORDER BY id;
SELECT ctid, id FROM pg_ct WHERE ctid IN ('(0,1)', '(1,1)') ORDER BY id;
SELECT ctid, id FROM ft_ct WHERE id % 500 = 0 ORDER BY id;
SELECT ctid, id FROM pg_ct WHERE id % 500 = 0 ORDER BY id;
-- A ctid not referenced is not made up either.
SELECT count(*) FROM ft_ct WHERE id < 5;

-- A parameterized scan, run as a prepared remote statement per outer row,
-- and a generic plan's parameter.
CREATE TABLE afdw_ct_keys (id int);
INSERT INTO afdw_ct_keys VALUES (2), (500), (1999);
ANALYZE afdw_ct_keys;
SET enable_hashjoin = off;
SET enable_mergejoin = off;
SET enable_material = off;
SET enable_memoize = off;
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT f.ctid, f.id FROM afdw_ct_keys k JOIN ft_ct f ON f.id = k.id;
SELECT f.ctid, f.id FROM afdw_ct_keys k JOIN ft_ct f ON f.id = k.id ORDER BY f.id;
SELECT r.ctid, r.id FROM afdw_ct_keys k JOIN remote.ct r ON r.id = k.id ORDER BY r.id;
RESET enable_hashjoin;
RESET enable_mergejoin;
RESET enable_material;
RESET enable_memoize;
SET plan_cache_mode = force_generic_plan;
PREPARE afdw_ct_q(int) AS SELECT ctid, id FROM ft_ct WHERE id = $1;
EXPLAIN (VERBOSE, COSTS OFF) EXECUTE afdw_ct_q(1000);
EXECUTE afdw_ct_q(1000);
EXECUTE afdw_ct_q(21);
PREPARE afdw_ct_q2(tid) AS SELECT ctid, id FROM ft_ct WHERE ctid = $1;
EXECUTE afdw_ct_q2('(0,3)');
DEALLOCATE afdw_ct_q;
DEALLOCATE afdw_ct_q2;
RESET plan_cache_mode;
-- Streams once more, with the parameter inline.
ALTER FOREIGN TABLE ft_ct OPTIONS (SET fetch_mode 'stream');
SET plan_cache_mode = force_generic_plan;
PREPARE afdw_ct_q(int) AS SELECT ctid, id FROM ft_ct WHERE id = $1;
EXECUTE afdw_ct_q(1000);
DEALLOCATE afdw_ct_q;
RESET plan_cache_mode;
SELECT afdw_ctid_diff('ft_ct');

-- Clean up.
DROP FUNCTION afdw_ctid_diff(text);
DROP TABLE afdw_ct_keys;
DROP FOREIGN TABLE ft_ct, pg_ct;
DROP TABLE remote.ct;
DROP USER MAPPING FOR CURRENT_USER SERVER pg_loopback_ctid;
DROP SERVER pg_loopback_ctid;
