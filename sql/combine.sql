--
-- combine: the small scans of an Append that share a connection send one
-- remote query, the UNION ALL of theirs (async_fdw.combine_scans); the
-- first reads every row, the others none.  Only where each row comes out
-- as its own scan would make it: same columns and projection, no
-- tableoid, no parameters, no pruning while the Append runs.
--
CALL afdw_test_server('cb_s1', options => 'max_connections ''2'', idle_timeout ''0''');
CALL afdw_test_server('cb_s2', options => 'max_connections ''2'', idle_timeout ''0''');
CREATE USER MAPPING FOR CURRENT_USER SERVER cb_s1;
CREATE USER MAPPING FOR CURRENT_USER SERVER cb_s2;

-- Eight partitions, four a server, two connections a server: two scans
-- share each connection.  cbl holds the same rows locally.
CREATE TABLE cbp (id int, grp int, v text) PARTITION BY HASH (id);
CREATE TABLE cbl (id int, grp int, v text) PARTITION BY HASH (id);
DO $$
BEGIN
  FOR i IN 0..7 LOOP
    EXECUTE format('CREATE TABLE remote.cb_%s (id int, grp int, v text)', i);
    EXECUTE format('CREATE FOREIGN TABLE cbp_%s PARTITION OF cbp
                    FOR VALUES WITH (MODULUS 8, REMAINDER %s) SERVER %I
                    OPTIONS (schema_name %L, table_name %L)',
                   i, i, 'cb_s' || (1 + i % 2), 'remote', 'cb_' || i);
    EXECUTE format('CREATE TABLE cbl_%s PARTITION OF cbl
                    FOR VALUES WITH (MODULUS 8, REMAINDER %s)', i, i);
  END LOOP;
END
$$;
INSERT INTO cbp SELECT g, g % 5, 'v' || g FROM generate_series(1, 200) g;
INSERT INTO cbl SELECT g, g % 5, 'v' || g FROM generate_series(1, 200) g;
ANALYZE cbp;
ANALYZE cbl;

-- The "Remote Reads" lines of a query's EXPLAIN (ANALYZE, VERBOSE), with
-- how many scans show each.
CREATE FUNCTION cb_reads(query text) RETURNS TABLE (reads text, scans bigint)
LANGUAGE plpgsql AS $$
DECLARE
  line text;
  found text[] := '{}';
BEGIN
  FOR line IN EXECUTE 'EXPLAIN (ANALYZE, BUFFERS OFF, VERBOSE, COSTS OFF, TIMING OFF, SUMMARY OFF) ' || query LOOP
    IF line ~ 'Remote Reads' THEN
      found := found || btrim(line);
    END IF;
  END LOOP;
  RETURN QUERY SELECT f, count(*) FROM unnest(found) f GROUP BY f ORDER BY f;
END
$$;

-- Partial aggregates of the eight partitions: four remote queries, each
-- carrying a sibling's.
SELECT * FROM cb_reads('SELECT count(*), sum(id), max(v) FROM cbp');
SELECT rows_same('SELECT count(*), sum(id), max(v) FROM cbp',
                 'SELECT count(*), sum(id), max(v) FROM cbl');
EXPLAIN (VERBOSE, COSTS OFF) SELECT count(*), sum(id), max(v) FROM cbp;
-- Grouped by another column: several rows a partition.
SELECT * FROM cb_reads('SELECT grp, count(*), sum(id) FROM cbp GROUP BY grp');
SELECT rows_same('SELECT grp, count(*), sum(id) FROM cbp GROUP BY grp',
                 'SELECT grp, count(*), sum(id) FROM cbl GROUP BY grp');
-- Plain scans of the partitions, each expected to return few rows.
SELECT * FROM cb_reads('SELECT * FROM cbp WHERE v LIKE ''v1%''');
SELECT rows_same('SELECT * FROM cbp WHERE v LIKE ''v1%''',
                 'SELECT * FROM cbl WHERE v LIKE ''v1%''');
-- Whole rows and ctids come from each partition's own rows.
SELECT rows_same('SELECT cbp FROM cbp WHERE id < 40',
                 'SELECT cbl FROM cbl WHERE id < 40');

-- tableoid names the scan's own table: such scans send their own queries.
SELECT * FROM cb_reads('SELECT tableoid::regclass, count(*) FROM cbp GROUP BY 1');
SELECT rows_same('SELECT right(tableoid::regclass::text, 1), count(*), sum(id) FROM cbp GROUP BY 1',
                 'SELECT right(tableoid::regclass::text, 1), count(*), sum(id) FROM cbl GROUP BY 1');

-- Branches of a UNION ALL that project differently are not combined:
-- each row keeps its own branch's constant.  (One connection to cb_s1
-- from here on: its scans share it.)
ALTER SERVER cb_s1 OPTIONS (SET max_connections '1');
CREATE FOREIGN TABLE cb_a (id int, grp int, v text) SERVER cb_s1
  OPTIONS (schema_name 'remote', table_name 'cb_0');
CREATE FOREIGN TABLE cb_b (id int, grp int, v text) SERVER cb_s1
  OPTIONS (schema_name 'remote', table_name 'cb_2');
ANALYZE cb_a;
ANALYZE cb_b;
SET async_fdw.prefer_remote_joins = on;
SELECT * FROM cb_reads('SELECT id, 1 AS src FROM cb_a UNION ALL SELECT id, 2 FROM cb_b');
SELECT rows_same('SELECT id, 1 AS src FROM cb_a UNION ALL SELECT id, 2 FROM cb_b',
                 'SELECT id, 1 AS src FROM remote.cb_0 UNION ALL SELECT id, 2 FROM remote.cb_2');
-- The same projection: combined.
SELECT * FROM cb_reads('SELECT id, v FROM cb_a UNION ALL SELECT id, v FROM cb_b');
SELECT rows_same('SELECT id, v FROM cb_a UNION ALL SELECT id, v FROM cb_b',
                 'SELECT id, v FROM remote.cb_0 UNION ALL SELECT id, v FROM remote.cb_2');
RESET async_fdw.prefer_remote_joins;

-- A partition whose columns lie differently (a dropped column before
-- them) is read by its own query; the others still go together.
CREATE TABLE remote.cb_odd (id int, grp int, v text);
CREATE TABLE cbq (id int, grp int, v text) PARTITION BY LIST (grp);
CREATE FOREIGN TABLE cbq_0 PARTITION OF cbq FOR VALUES IN (0) SERVER cb_s1
  OPTIONS (schema_name 'remote', table_name 'cb_0');
CREATE FOREIGN TABLE cbq_1 PARTITION OF cbq FOR VALUES IN (1) SERVER cb_s1
  OPTIONS (schema_name 'remote', table_name 'cb_2');
CREATE FOREIGN TABLE cbq_odd (gone int, id int, grp int, v text) SERVER cb_s1
  OPTIONS (schema_name 'remote', table_name 'cb_odd');
ALTER FOREIGN TABLE cbq_odd DROP COLUMN gone;
ALTER TABLE cbq ATTACH PARTITION cbq_odd FOR VALUES IN (2);
INSERT INTO remote.cb_odd SELECT id, 2, v FROM remote.cb_4;
ANALYZE cbq;
SET async_fdw.prefer_remote_joins = on;
SELECT * FROM cb_reads('SELECT id, v FROM cbq');
SELECT rows_same('SELECT id, v FROM cbq',
                 'SELECT id, v FROM remote.cb_0 UNION ALL SELECT id, v FROM remote.cb_2 UNION ALL SELECT id, v FROM remote.cb_odd');
RESET async_fdw.prefer_remote_joins;
ALTER SERVER cb_s1 OPTIONS (SET max_connections '2');

-- Rescans (a subquery run again for each outer row, its aggregate's
-- input rescanned): the first run goes combined; a rescan runs each
-- scan's own query, and a scan whose rows came in one batch reads them
-- again.
SET enable_hashjoin = off;
SET enable_mergejoin = off;
SET enable_material = off;
SET enable_memoize = off;
SELECT * FROM cb_reads('SELECT g, (SELECT count(*) + g FROM cbp WHERE v LIKE ''v1%'') FROM generate_series(1, 3) g');
SELECT rows_same('SELECT g, (SELECT count(*) + g FROM cbp WHERE v LIKE ''v1%'') FROM generate_series(1, 3) g',
                 'SELECT g, (SELECT count(*) + g FROM cbl WHERE v LIKE ''v1%'') FROM generate_series(1, 3) g');
-- Partitions read with parameters (a lookup per outer row) send their
-- own queries.
CREATE TEMP TABLE cb_keys AS SELECT g AS k FROM generate_series(1, 6) g;
ANALYZE cb_keys;
SELECT rows_same('SELECT k, v FROM cb_keys JOIN cbp ON id = k',
                 'SELECT k, v FROM cb_keys JOIN cbl ON id = k');
RESET enable_hashjoin;
RESET enable_mergejoin;
RESET enable_material;
RESET enable_memoize;

-- A generic plan's parameter goes to every scan: each sends its own
-- query, whichever partitions the Append keeps.
SET plan_cache_mode = force_generic_plan;
PREPARE cb_q(int[]) AS SELECT count(*), sum(id) FROM cbp WHERE id = ANY ($1);
SELECT * FROM cb_reads('EXECUTE cb_q(''{1,2,3,4,5,6,7,8,9,10}'')');
EXECUTE cb_q('{1,2,3,4,5,6,7,8,9,10}');
SELECT count(*), sum(id) FROM cbl WHERE id = ANY ('{1,2,3,4,5,6,7,8,9,10}');
DEALLOCATE cb_q;
RESET plan_cache_mode;

-- The setting off: one query a scan, the same rows.
SET async_fdw.combine_scans = off;
SELECT * FROM cb_reads('SELECT count(*), sum(id), max(v) FROM cbp');
SELECT rows_same('SELECT count(*), sum(id), max(v) FROM cbp',
                 'SELECT count(*), sum(id), max(v) FROM cbl');
RESET async_fdw.combine_scans;

-- Large scans keep their own queries (and streams).
SET async_fdw.prefer_remote_joins = on;
ALTER SERVER cb_s1 OPTIONS (ADD fetch_size '10');
ALTER SERVER cb_s2 OPTIONS (ADD fetch_size '10');
SELECT * FROM cb_reads('SELECT * FROM cbp');
SELECT rows_same('SELECT * FROM cbp', 'SELECT * FROM cbl');
ALTER SERVER cb_s1 OPTIONS (DROP fetch_size);
ALTER SERVER cb_s2 OPTIONS (DROP fetch_size);
RESET async_fdw.prefer_remote_joins;

-- Small and large scans on one connection: the large ones stream one
-- after the other, and the query carrying the small ones takes its turn
-- among them, as a text stream.
ALTER SERVER cb_s1 OPTIONS (SET max_connections '1', ADD fetch_size '10');
DO $$
BEGIN
  FOR i IN 0..3 LOOP
    EXECUTE format('CREATE TABLE remote.cbm_%s (id int, grp int, v text)', i);
    EXECUTE format('INSERT INTO remote.cbm_%s SELECT g, %s, %L || g FROM generate_series(1, %s) g',
                   i, i, 'v', CASE WHEN i IN (0, 3) THEN 30 ELSE 3 END);
  END LOOP;
END
$$;
CREATE TABLE cbm (id int, grp int, v text) PARTITION BY LIST (grp);
CREATE FOREIGN TABLE cbm_0 PARTITION OF cbm FOR VALUES IN (0) SERVER cb_s1
  OPTIONS (schema_name 'remote', table_name 'cbm_0');
CREATE FOREIGN TABLE cbm_1 PARTITION OF cbm FOR VALUES IN (1) SERVER cb_s1
  OPTIONS (schema_name 'remote', table_name 'cbm_1');
CREATE FOREIGN TABLE cbm_2 PARTITION OF cbm FOR VALUES IN (2) SERVER cb_s1
  OPTIONS (schema_name 'remote', table_name 'cbm_2');
CREATE FOREIGN TABLE cbm_3 PARTITION OF cbm FOR VALUES IN (3) SERVER cb_s1
  OPTIONS (schema_name 'remote', table_name 'cbm_3');
ANALYZE cbm;
SET statement_timeout = '30s';
SELECT * FROM cb_reads('SELECT id, v FROM cbm');
SELECT rows_same('SELECT id, grp, v FROM cbm',
                 'SELECT * FROM remote.cbm_0 UNION ALL SELECT * FROM remote.cbm_1 UNION ALL SELECT * FROM remote.cbm_2 UNION ALL SELECT * FROM remote.cbm_3');
RESET statement_timeout;
ALTER SERVER cb_s1 OPTIONS (SET max_connections '2', DROP fetch_size);

-- A remote error in a combined query names the scan that sent it and
-- says that it carried its siblings'.
ALTER TABLE remote.cb_5 RENAME TO cb_5_gone;
\set VERBOSITY default
SELECT count(*) FROM cbp;
ALTER TABLE remote.cb_5_gone RENAME TO cb_5;
SELECT rows_same('SELECT count(*), sum(id), max(v) FROM cbp',
                 'SELECT count(*), sum(id), max(v) FROM cbl');

DROP FUNCTION cb_reads(text);
DROP TABLE cbp, cbl, cbq, cbm;
DROP FOREIGN TABLE cb_a, cb_b;
DROP TABLE remote.cb_0, remote.cb_1, remote.cb_2, remote.cb_3, remote.cb_4,
  remote.cb_5, remote.cb_6, remote.cb_7, remote.cb_odd, remote.cbm_0,
  remote.cbm_1, remote.cbm_2, remote.cbm_3;
DROP USER MAPPING FOR CURRENT_USER SERVER cb_s1;
DROP USER MAPPING FOR CURRENT_USER SERVER cb_s2;
DROP SERVER cb_s1, cb_s2;
