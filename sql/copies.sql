--
-- copies: a foreign table with the same rows on several servers (option
-- copies) joined with a partitioned table: each partition's join is made
-- on the partition's own server, with the copy there (replicated_joins.c).  Which
-- server made a row shows in served_by: the copy is a view returning its
-- session's application_name, which each server sets apart.
--
CALL afdw_test_server('cp_s1', options => 'application_name ''cp_s1'', idle_timeout ''0''');
CALL afdw_test_server('cp_s2', options => 'application_name ''cp_s2'', idle_timeout ''0''');
CALL afdw_test_server('cp_s3', options => 'application_name ''cp_s3'', idle_timeout ''0''');
CALL afdw_test_server('cp_s4', options => 'application_name ''cp_s4'', idle_timeout ''0''');
CREATE USER MAPPING FOR CURRENT_USER SERVER cp_s1;
CREATE USER MAPPING FOR CURRENT_USER SERVER cp_s2;
CREATE USER MAPPING FOR CURRENT_USER SERVER cp_s3;
CREATE USER MAPPING FOR CURRENT_USER SERVER cp_s4;

-- The facts: four partitions, two a server; cpl the same rows locally.
CREATE TABLE cpf (id int, k int, v int) PARTITION BY HASH (id);
CREATE TABLE cpl (id int, k int, v int) PARTITION BY HASH (id);
DO $$
BEGIN
  FOR i IN 0..3 LOOP
    EXECUTE format('CREATE TABLE remote.cpf_%s (id int, k int, v int)', i);
    EXECUTE format('CREATE FOREIGN TABLE cpf_%s PARTITION OF cpf
                    FOR VALUES WITH (MODULUS 4, REMAINDER %s) SERVER %I
                    OPTIONS (schema_name %L, table_name %L)',
                   i, i, 'cp_s' || (1 + i % 2), 'remote', 'cpf_' || i);
    EXECUTE format('CREATE TABLE cpl_%s PARTITION OF cpl
                    FOR VALUES WITH (MODULUS 4, REMAINDER %s)', i, i);
  END LOOP;
END
$$;
INSERT INTO cpf SELECT g, g % 12, g % 100 FROM generate_series(1, 2000) g;
INSERT INTO cpl SELECT g, g % 12, g % 100 FROM generate_series(1, 2000) g;
-- The server of each partition, for the expected rows.
CREATE FUNCTION cp_server(id int) RETURNS text LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN satisfies_hash_partition('cpl'::regclass, 4, 0, id)
                OR satisfies_hash_partition('cpl'::regclass, 4, 2, id)
              THEN 'cp_s1' ELSE 'cp_s2' END
$$;

-- The dimensions, replicated: each server's copy is the same view.
CREATE TABLE remote.cp_dim_rows (k int, name text, region int);
INSERT INTO remote.cp_dim_rows SELECT g, 'name ' || g, g % 3 FROM generate_series(0, 9) g;
CREATE VIEW remote.cp_dim AS
  SELECT k, name, region, current_setting('application_name') AS served_by
    FROM remote.cp_dim_rows;
CREATE TABLE remote.cp_region (region int, rname text);
INSERT INTO remote.cp_region VALUES (0, 'north'), (1, 'south');
CREATE FOREIGN TABLE cpd (k int, name text, region int, served_by text) SERVER cp_s1
  OPTIONS (schema_name 'remote', table_name 'cp_dim', copies 'cp_s2');
CREATE FOREIGN TABLE cpr (region int, rname text) SERVER cp_s2
  OPTIONS (schema_name 'remote', table_name 'cp_region', copies 'cp_s1');
ANALYZE cpf;
ANALYZE cpl;
ANALYZE cpd;
ANALYZE cpr;

-- The option names servers of async_fdw, each once.
ALTER FOREIGN TABLE cpd OPTIONS (SET copies 'cp_nosuch');
CREATE FOREIGN DATA WRAPPER cp_other;
CREATE SERVER cp_other_s FOREIGN DATA WRAPPER cp_other;
ALTER FOREIGN TABLE cpd OPTIONS (SET copies 'cp_s2, cp_other_s');
ALTER FOREIGN TABLE cpd OPTIONS (SET copies 'cp_s2, cp_s2');
ALTER FOREIGN TABLE cpd OPTIONS (SET copies '');
-- (Not a server option; the hint lists libpq's options, which vary.)
\set VERBOSITY terse
ALTER SERVER cp_s1 OPTIONS (ADD copies 'cp_s2');
\set VERBOSITY default
DROP SERVER cp_other_s;
DROP FOREIGN DATA WRAPPER cp_other;

-- async_fdw_check_copies: the copies agree with the foreign table (no
-- row); a column of another type, a missing column, a missing table are
-- each named, for every server of the copies.
SELECT * FROM async_fdw_check_copies('cpd');
CREATE FOREIGN TABLE cp_bad (k bigint, name text, nope int) SERVER cp_s1
  OPTIONS (schema_name 'remote', table_name 'cp_dim', copies 'cp_s2');
SELECT * FROM async_fdw_check_copies('cp_bad') ORDER BY 1, 2;
ALTER FOREIGN TABLE cp_bad OPTIONS (SET table_name 'cp_nosuch');
SELECT * FROM async_fdw_check_copies('cp_bad') ORDER BY 1, 2;
DROP FOREIGN TABLE cp_bad;
SELECT * FROM async_fdw_check_copies('cpf_0');
SELECT * FROM async_fdw_check_copies('cpl');

-- Each partition joined on its own server: served_by is the partition's.
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT f.id, d.name, d.served_by FROM cpf f JOIN cpd d ON f.k = d.k WHERE f.v < 5;
SELECT rows_same(
  'SELECT f.id, d.name, d.served_by FROM cpf f JOIN cpd d ON f.k = d.k WHERE f.v < 5',
  'SELECT f.id, d.name, cp_server(f.id) FROM cpl f JOIN remote.cp_dim_rows d ON f.k = d.k WHERE f.v < 5');
-- Its cost: the partitions' joins run at once on their two servers, so
-- the Append counts the remote work of the busier server (two partitions
-- of four), not the sum of all four (replicated_joins.c's serial_excess); what each
-- row costs here stays summed.
CREATE FUNCTION cp_append_cost(q text, OUT below_sum boolean, OUT above_max boolean)
LANGUAGE plpgsql AS $$
DECLARE
  plan jsonb;
  app jsonb;
  kids float8[];
BEGIN
  EXECUTE 'EXPLAIN (FORMAT JSON) ' || q INTO plan;
  SELECT n INTO app FROM jsonb_path_query(plan, 'strict $.**.Plan ? (@."Node Type" == "Append")') n
    LIMIT 1;
  SELECT array_agg((k ->> 'Total Cost')::float8) INTO kids
    FROM jsonb_array_elements(app -> 'Plans') k;
  below_sum := (app ->> 'Total Cost')::float8 <
    0.85 * (SELECT sum(c) FROM unnest(kids) c);
  above_max := (app ->> 'Total Cost')::float8 >= (SELECT max(c) FROM unnest(kids) c);
END
$$;
CREATE TABLE cpb (id int, k int, v int) PARTITION BY HASH (id);
DO $$
BEGIN
  FOR i IN 0..3 LOOP
    EXECUTE format('CREATE TABLE remote.cpb_%s (id int, k int, v int)', i);
    EXECUTE format('CREATE FOREIGN TABLE cpb_%s PARTITION OF cpb
                    FOR VALUES WITH (MODULUS 4, REMAINDER %s) SERVER %I
                    OPTIONS (schema_name %L, table_name %L)',
                   i, i, 'cp_s' || (1 + i % 2), 'remote', 'cpb_' || i);
  END LOOP;
END
$$;
INSERT INTO cpb SELECT g, g % 12, g % 100 FROM generate_series(1, 80000) g;
ANALYZE cpb;
SELECT * FROM cp_append_cost('SELECT f.id, d.name FROM cpb f JOIN cpd d ON f.k = d.k WHERE f.v < 5');
DROP TABLE cpb;
DROP TABLE remote.cpb_0, remote.cpb_1, remote.cpb_2, remote.cpb_3;
DROP FUNCTION cp_append_cost(text);
-- A star: the second dimension's join goes with each partition's too.
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT f.id, d.name, r.rname FROM cpf f JOIN cpd d ON f.k = d.k
    JOIN cpr r ON d.region = r.region WHERE f.v < 5;
SELECT rows_same(
  'SELECT f.id, d.name, r.rname, d.served_by FROM cpf f JOIN cpd d ON f.k = d.k JOIN cpr r ON d.region = r.region WHERE f.v < 5',
  'SELECT f.id, d.name, r.rname, cp_server(f.id) FROM cpl f JOIN remote.cp_dim_rows d ON f.k = d.k JOIN remote.cp_region r ON d.region = r.region WHERE f.v < 5');
-- Aggregated above the joins: each partition's join is partially
-- aggregated on its server (its groups sent, not its rows), and the
-- Finalize Aggregate combines them here.  (cp_plan: the plan's nodes and
-- remote queries, the remote aliases r<n> numbered as the version does.)
CREATE FUNCTION cp_plan(q text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
  line text;
BEGIN
  FOR line IN EXECUTE 'EXPLAIN (VERBOSE, COSTS OFF) ' || q LOOP
    CONTINUE WHEN line ~ '^\s*(Output|Fetch Mode|Sort Key|Group Key):';
    RETURN NEXT regexp_replace(line, '\mr[0-9]+\M', 'r_', 'g');
  END LOOP;
END
$$;
-- How many of a plan's remote queries are partial aggregates.
CREATE FUNCTION cp_partials(q text) RETURNS bigint LANGUAGE sql AS $$
  SELECT count(*) FROM cp_plan(q) l WHERE l ~ 'Partial Aggregate on'
$$;
SELECT * FROM cp_plan('SELECT r.rname, count(*), sum(f.v) FROM cpf f JOIN cpd d ON f.k = d.k
    JOIN cpr r ON d.region = r.region GROUP BY r.rname');
SELECT rows_same(
  'SELECT r.rname, count(*), sum(f.v) FROM cpf f JOIN cpd d ON f.k = d.k JOIN cpr r ON d.region = r.region GROUP BY r.rname',
  'SELECT r.rname, count(*), sum(f.v) FROM cpl f JOIN remote.cp_dim_rows d ON f.k = d.k JOIN remote.cp_region r ON d.region = r.region GROUP BY r.rname');
-- Without GROUP BY; with HAVING (a volatile part checked here); grouped by
-- expressions; avg, whose partial state is sent serialized; FILTER; a
-- left join (NULL groups); a semi-join.
EXPLAIN (COSTS OFF)
  SELECT count(*), sum(f.v), avg(f.v) FROM cpf f JOIN cpd d ON f.k = d.k;
SELECT rows_same(
  'SELECT count(*), sum(f.v), avg(f.v), max(d.name) FROM cpf f JOIN cpd d ON f.k = d.k',
  'SELECT count(*), sum(f.v), avg(f.v), max(d.name) FROM cpl f JOIN remote.cp_dim_rows d ON f.k = d.k');
EXPLAIN (COSTS OFF)
  SELECT d.region, count(*) FROM cpf f JOIN cpd d ON f.k = d.k GROUP BY d.region
    HAVING sum(f.v) > 20000 AND random() >= 0;
SELECT rows_same(
  'SELECT d.region, count(*) FROM cpf f JOIN cpd d ON f.k = d.k GROUP BY d.region HAVING sum(f.v) > 20000 AND random() >= 0',
  'SELECT d.region, count(*) FROM cpl f JOIN remote.cp_dim_rows d ON f.k = d.k GROUP BY d.region HAVING sum(f.v) > 20000 AND random() >= 0');
SELECT rows_same(
  'SELECT d.name || ''x'', f.v % 3, count(*) * 2, sum(f.v) + 1, avg(f.v::numeric) FROM cpf f JOIN cpd d ON f.k = d.k WHERE f.v < 50 GROUP BY 1, 2',
  'SELECT d.name || ''x'', f.v % 3, count(*) * 2, sum(f.v) + 1, avg(f.v::numeric) FROM cpl f JOIN remote.cp_dim_rows d ON f.k = d.k WHERE f.v < 50 GROUP BY 1, 2');
SELECT rows_same(
  'SELECT d.region, sum(f.v) FILTER (WHERE f.v > 50), count(*) FILTER (WHERE d.name LIKE ''%1%'') FROM cpf f JOIN cpd d ON f.k = d.k GROUP BY d.region',
  'SELECT d.region, sum(f.v) FILTER (WHERE f.v > 50), count(*) FILTER (WHERE d.name LIKE ''%1%'') FROM cpl f JOIN remote.cp_dim_rows d ON f.k = d.k GROUP BY d.region');
SELECT rows_same(
  'SELECT d.name, count(*), sum(f.v) FROM cpf f LEFT JOIN cpd d ON f.k = d.k GROUP BY d.name',
  'SELECT d.name, count(*), sum(f.v) FROM cpl f LEFT JOIN remote.cp_dim_rows d ON f.k = d.k GROUP BY d.name');
SELECT rows_same(
  'SELECT f.k, count(*) FROM cpf f WHERE EXISTS (SELECT 1 FROM cpd d WHERE d.k = f.k AND d.region = 1) GROUP BY f.k',
  'SELECT f.k, count(*) FROM cpl f WHERE EXISTS (SELECT 1 FROM remote.cp_dim_rows d WHERE d.k = f.k AND d.region = 1) GROUP BY f.k');
-- A generic plan, its parameter sent to every partition's query.
SET plan_cache_mode = force_generic_plan;
PREPARE cp_grouped(int) AS
  SELECT d.region, count(*), sum(f.v) FROM cpf f JOIN cpd d ON f.k = d.k
    WHERE f.v < $1 GROUP BY d.region ORDER BY 1;
EXPLAIN (COSTS OFF) EXECUTE cp_grouped(10);
EXECUTE cp_grouped(10);
EXECUTE cp_grouped(50);
SELECT d.region, count(*), sum(f.v) FROM cpl f JOIN remote.cp_dim_rows d ON f.k = d.k
  WHERE f.v < 50 GROUP BY d.region ORDER BY 1;
DEALLOCATE cp_grouped;
RESET plan_cache_mode;
-- Rescanned with each outer row's parameter (a correlated subquery), and
-- read by cursor.
SELECT rows_same(
  'SELECT r.region, (SELECT count(*) FROM cpf f JOIN cpd d ON f.k = d.k WHERE d.region = r.region AND f.v < r.region * 40) FROM cpr r',
  'SELECT r.region, (SELECT count(*) FROM cpl f JOIN remote.cp_dim_rows d ON f.k = d.k WHERE d.region = r.region AND f.v < r.region * 40) FROM remote.cp_region r');
-- Grouped by the outer row's value only, which is NULL or matches nothing
-- for some rows: no group then, not a group of NULLs (from 16 the planner
-- finds such a GROUP BY constant and groups by no column).
SELECT rows_same(
  'SELECT o.k, ARRAY(SELECT x::text FROM (SELECT o.k, count(*), sum(f.v) FROM cpf f JOIN cpd d ON f.k = d.k WHERE d.region = o.k GROUP BY o.k) x) FROM (VALUES (1), (NULL::int), (7)) o(k)',
  'SELECT o.k, ARRAY(SELECT x::text FROM (SELECT o.k, count(*), sum(f.v) FROM cpl f JOIN remote.cp_dim_rows d ON f.k = d.k WHERE d.region = o.k GROUP BY o.k) x) FROM (VALUES (1), (NULL::int), (7)) o(k)');
SELECT cp_partials('SELECT o.k, ARRAY(SELECT x::text FROM (SELECT o.k, count(*), sum(f.v) FROM cpf f JOIN cpd d ON f.k = d.k WHERE d.region = o.k GROUP BY o.k) x) FROM (VALUES (1), (NULL::int), (7)) o(k)');
-- The same over the partitions alone (partitionwise aggregation).
SELECT rows_same(
  'SELECT o.k, ARRAY(SELECT x::text FROM (SELECT o.k, count(*), sum(f.v) FROM cpf f WHERE f.k = o.k GROUP BY o.k) x) FROM (VALUES (1), (NULL::int), (70)) o(k)',
  'SELECT o.k, ARRAY(SELECT x::text FROM (SELECT o.k, count(*), sum(f.v) FROM cpl f WHERE f.k = o.k GROUP BY o.k) x) FROM (VALUES (1), (NULL::int), (70)) o(k)');
-- ... and by a generic plan's parameter, with rows and without: from 16
-- the planner finds that GROUP BY constant, and the remote partial
-- aggregates group by a constant expression.
SET plan_cache_mode = force_generic_plan;
PREPARE cp_by_param(int, int) AS
  SELECT $1, count(*), sum(f.v) FROM cpf f WHERE f.v < $2 GROUP BY $1;
SELECT cp_partials('EXECUTE cp_by_param(5, 50)');
EXECUTE cp_by_param(5, 50);
EXECUTE cp_by_param(5, -1);
SELECT 5, count(*), sum(f.v) FROM cpl f WHERE f.v < 50;
DEALLOCATE cp_by_param;
RESET plan_cache_mode;
-- ... and a column a condition fixes, with and without rows: from 16 the
-- partial target carries it as a column outside the grouping items, which
-- the remote partial aggregates group by.
SELECT cp_partials('SELECT f.k, count(*), sum(f.v) FROM cpf f WHERE f.k = 3 GROUP BY f.k');
SELECT cp_partials('SELECT f.k + 1, count(*), sum(f.v) FROM cpf f WHERE f.k = 3 GROUP BY f.k');
SELECT rows_same(
  'SELECT f.k, count(*), sum(f.v) FROM cpf f WHERE f.k = 3 GROUP BY f.k',
  'SELECT f.k, count(*), sum(f.v) FROM cpl f WHERE f.k = 3 GROUP BY f.k');
SELECT rows_same(
  'SELECT f.k + 1, count(*), sum(f.v) FROM cpf f WHERE f.k = 3 GROUP BY f.k',
  'SELECT f.k + 1, count(*), sum(f.v) FROM cpl f WHERE f.k = 3 GROUP BY f.k');
SELECT rows_same(
  'SELECT f.k, count(*), sum(f.v) FROM cpf f WHERE f.k = 70 GROUP BY f.k',
  'SELECT f.k, count(*), sum(f.v) FROM cpl f WHERE f.k = 70 GROUP BY f.k');
ALTER FOREIGN TABLE cpf_0 OPTIONS (ADD fetch_mode 'cursor', fetch_size '2');
ALTER FOREIGN TABLE cpf_1 OPTIONS (ADD fetch_mode 'cursor', fetch_size '2');
SELECT cp_partials('SELECT f.v, count(*) FROM cpf f JOIN cpd d ON f.k = d.k GROUP BY f.v');
SELECT rows_same(
  'SELECT f.v, count(*), max(d.name) FROM cpf f JOIN cpd d ON f.k = d.k GROUP BY f.v',
  'SELECT f.v, count(*), max(d.name) FROM cpl f JOIN remote.cp_dim_rows d ON f.k = d.k GROUP BY f.v');
ALTER FOREIGN TABLE cpf_0 OPTIONS (DROP fetch_mode, DROP fetch_size);
ALTER FOREIGN TABLE cpf_1 OPTIONS (DROP fetch_mode, DROP fetch_size);
-- No partial form (DISTINCT, ORDER BY in the aggregate): aggregated here.
SELECT cp_partials('SELECT d.region, count(DISTINCT f.v) FROM cpf f JOIN cpd d ON f.k = d.k GROUP BY d.region');
SELECT cp_partials('SELECT d.region, string_agg(f.id::text, '','' ORDER BY f.id) FROM cpf f JOIN cpd d ON f.k = d.k GROUP BY d.region');
SELECT rows_same(
  'SELECT d.region, count(DISTINCT f.v), string_agg(f.id::text, '','' ORDER BY f.id) FROM cpf f JOIN cpd d ON f.k = d.k WHERE f.id < 100 GROUP BY d.region',
  'SELECT d.region, count(DISTINCT f.v), string_agg(f.id::text, '','' ORDER BY f.id) FROM cpl f JOIN remote.cp_dim_rows d ON f.k = d.k WHERE f.id < 100 GROUP BY d.region');
-- A function the servers are not known to have: aggregated here.
CREATE FUNCTION cp_plus(int) RETURNS int LANGUAGE plpgsql IMMUTABLE AS
  'BEGIN RETURN $1 + 1; END';
SELECT cp_partials('SELECT d.region, max(cp_plus(f.v)) FROM cpf f JOIN cpd d ON f.k = d.k GROUP BY d.region');
SELECT rows_same(
  'SELECT d.region, max(cp_plus(f.v)), count(*) FROM cpf f JOIN cpd d ON f.k = d.k GROUP BY d.region',
  'SELECT d.region, max(cp_plus(f.v)), count(*) FROM cpl f JOIN remote.cp_dim_rows d ON f.k = d.k GROUP BY d.region');
DROP FUNCTION cp_plus(int);
-- The setting off: no join on the shards, so none aggregated there.
SET async_fdw.join_copies = off;
SELECT cp_partials('SELECT d.region, count(*) FROM cpf f JOIN cpd d ON f.k = d.k GROUP BY d.region');
RESET async_fdw.join_copies;
DROP FUNCTION cp_partials(text);
DROP FUNCTION cp_plan(text);
-- Left join (keys 10 and 11 have no dimension row), semi- and anti-join.
SELECT rows_same(
  'SELECT f.id, d.name, d.served_by FROM cpf f LEFT JOIN cpd d ON f.k = d.k WHERE f.v < 5',
  'SELECT f.id, d.name, CASE WHEN d.k IS NOT NULL THEN cp_server(f.id) END FROM cpl f LEFT JOIN remote.cp_dim_rows d ON f.k = d.k WHERE f.v < 5');
SELECT rows_same(
  'SELECT f.id FROM cpf f WHERE f.v < 10 AND EXISTS (SELECT 1 FROM cpd d WHERE d.k = f.k AND d.region = 1)',
  'SELECT f.id FROM cpl f WHERE f.v < 10 AND EXISTS (SELECT 1 FROM remote.cp_dim_rows d WHERE d.k = f.k AND d.region = 1)');
SELECT rows_same(
  'SELECT f.id FROM cpf f WHERE f.v < 10 AND NOT EXISTS (SELECT 1 FROM cpd d WHERE d.k = f.k)',
  'SELECT f.id FROM cpl f WHERE f.v < 10 AND NOT EXISTS (SELECT 1 FROM remote.cp_dim_rows d WHERE d.k = f.k)');
-- A pruned partitioned table: its partitions left, each on its server.
SELECT rows_same(
  'SELECT f.id, d.served_by FROM cpf f JOIN cpd d ON f.k = d.k WHERE f.id IN (1, 2, 3)',
  'SELECT f.id, cp_server(f.id) FROM cpl f JOIN remote.cp_dim_rows d ON f.k = d.k WHERE f.id IN (1, 2, 3)');
-- A condition of the copy that only its own server runs: NOT IN over the
-- dimension, written into the dimension's remote query on cp_s1 (its
-- subquery is a scan of cp_s1). The partitions of cp_s2 cannot send it
-- with their join of the copy there: the rows are those of a local join,
-- and nothing fails (it failed with "subquery cannot be sent to the remote
-- server").
SELECT rows_same(
  'SELECT f.id FROM cpf f WHERE f.v < 10 AND f.k IN (SELECT d.k FROM cpd d WHERE d.region NOT IN (SELECT region FROM cpd WHERE k = 3))',
  'SELECT f.id FROM cpl f WHERE f.v < 10 AND f.k IN (SELECT d.k FROM remote.cp_dim_rows d WHERE d.region NOT IN (SELECT region FROM remote.cp_dim_rows WHERE k = 3))');
SELECT rows_same(
  'SELECT f.id, d.name FROM cpf f JOIN cpd d ON f.k = d.k WHERE f.v < 10 AND d.region NOT IN (SELECT region FROM cpd WHERE k = 3)',
  'SELECT f.id, d.name FROM cpl f JOIN remote.cp_dim_rows d ON f.k = d.k WHERE f.v < 10 AND d.region NOT IN (SELECT region FROM remote.cp_dim_rows WHERE k = 3)');

-- Four servers: each partition on its own, joined with the copy there.
CREATE FOREIGN TABLE cpd4 (k int, name text, region int, served_by text) SERVER cp_s1
  OPTIONS (schema_name 'remote', table_name 'cp_dim', copies 'cp_s2, cp_s3, cp_s4');
CREATE TABLE cpf4 (id int, k int, v int) PARTITION BY HASH (id);
DO $$
BEGIN
  FOR i IN 0..3 LOOP
    EXECUTE format('CREATE FOREIGN TABLE cpf4_%s PARTITION OF cpf4
                    FOR VALUES WITH (MODULUS 4, REMAINDER %s) SERVER %I
                    OPTIONS (schema_name %L, table_name %L)',
                   i, i, 'cp_s' || (1 + i), 'remote', 'cpf_' || i);
  END LOOP;
END
$$;
ANALYZE cpf4;
ANALYZE cpd4;
SELECT rows_same(
  'SELECT f.id, d.name, d.served_by FROM cpf4 f JOIN cpd4 d ON f.k = d.k WHERE f.v < 5',
  'SELECT f.id, d.name, ''cp_s'' || (1 + (SELECT r FROM generate_series(0, 3) r
                                          WHERE satisfies_hash_partition(''cpl''::regclass, 4, r, f.id)))
     FROM cpl f JOIN remote.cp_dim_rows d ON f.k = d.k WHERE f.v < 5');
DROP TABLE cpf4;
DROP FOREIGN TABLE cpd4;

-- Partitions of another wrapper (a partitionwise join of postgres_fdw's
-- partitions) are not async_fdw's to join with the copies: a local join.
SET client_min_messages = warning;  -- whether an earlier test made it or not
CREATE EXTENSION IF NOT EXISTS postgres_fdw;
RESET client_min_messages;
CALL afdw_test_server('cp_pg', 'postgres_fdw');
CREATE USER MAPPING FOR CURRENT_USER SERVER cp_pg;
CREATE TABLE cpg1 (id int, k int, v int) PARTITION BY HASH (id);
CREATE TABLE cpg2 (id int, k int, v int) PARTITION BY HASH (id);
DO $$
BEGIN
  FOR i IN 0..1 LOOP
    EXECUTE format('CREATE FOREIGN TABLE cpg1_%s PARTITION OF cpg1
                    FOR VALUES WITH (MODULUS 2, REMAINDER %s) SERVER cp_pg
                    OPTIONS (schema_name %L, table_name %L)', i, i, 'remote', 'cpf_' || i);
    EXECUTE format('CREATE FOREIGN TABLE cpg2_%s PARTITION OF cpg2
                    FOR VALUES WITH (MODULUS 2, REMAINDER %s) SERVER cp_pg
                    OPTIONS (schema_name %L, table_name %L)', i, i, 'remote', 'cpf_' || i);
  END LOOP;
END
$$;
SET enable_partitionwise_join = on;
SELECT count(*) FROM cpg1 a JOIN cpg2 b ON a.id = b.id AND a.v = b.v
  JOIN cpd d ON d.k = a.k WHERE a.v < 5;
SELECT count(*) FROM remote.cpf_0 a JOIN remote.cp_dim_rows d ON d.k = a.k WHERE a.v < 5
  AND satisfies_hash_partition('cpg1'::regclass, 2, 0, a.id);
SELECT count(*) FROM remote.cpf_1 a JOIN remote.cp_dim_rows d ON d.k = a.k WHERE a.v < 5
  AND satisfies_hash_partition('cpg1'::regclass, 2, 1, a.id);
RESET enable_partitionwise_join;
DROP TABLE cpg1, cpg2;
DROP USER MAPPING FOR CURRENT_USER SERVER cp_pg;
DROP SERVER cp_pg;

-- A partition on a server without a copy: the join is made locally, the
-- dimension read once, from its own server.
CREATE TABLE remote.cpf_x (id int, k int, v int);
INSERT INTO remote.cpf_x VALUES (5000, 1, 1);
CREATE TABLE cpf3 (id int, k int, v int) PARTITION BY RANGE (id);
CREATE FOREIGN TABLE cpf3_a PARTITION OF cpf3 FOR VALUES FROM (0) TO (3000) SERVER cp_s1
  OPTIONS (schema_name 'remote', table_name 'cpf_0');
CREATE FOREIGN TABLE cpf3_b PARTITION OF cpf3 FOR VALUES FROM (3000) TO (6000) SERVER cp_s3
  OPTIONS (schema_name 'remote', table_name 'cpf_x');
EXPLAIN (COSTS OFF) SELECT f.id, d.served_by FROM cpf3 f JOIN cpd d ON f.k = d.k;
SELECT rows_same(
  'SELECT f.id, d.name, d.served_by FROM cpf3 f JOIN cpd d ON f.k = d.k',
  'SELECT f.id, d.name, ''cp_s1'' FROM (SELECT * FROM remote.cpf_0 UNION ALL SELECT * FROM remote.cpf_x) f JOIN remote.cp_dim_rows d ON f.k = d.k');
DROP TABLE cpf3;
DROP TABLE remote.cpf_x;

-- The setting off: the join is made locally.
SET async_fdw.join_copies = off;
EXPLAIN (COSTS OFF)
  SELECT f.id, d.name FROM cpf f JOIN cpd d ON f.k = d.k WHERE f.v < 5;
SELECT rows_same(
  'SELECT f.id, d.name FROM cpf f JOIN cpd d ON f.k = d.k WHERE f.v < 5',
  'SELECT f.id, d.name FROM cpl f JOIN remote.cp_dim_rows d ON f.k = d.k WHERE f.v < 5');
RESET async_fdw.join_copies;

-- Rows locked: each table is read by itself.
EXPLAIN (COSTS OFF) SELECT f.id FROM cpf f JOIN cpd d ON f.k = d.k WHERE f.v < 5 FOR SHARE OF f;
SELECT count(*) FROM (SELECT f.id FROM cpf f JOIN cpd d ON f.k = d.k WHERE f.v < 5
                       FOR SHARE OF f) s;
SELECT count(*) FROM cpl f JOIN remote.cp_dim_rows d ON f.k = d.k WHERE f.v < 5;

-- A replicated table read alone reads one copy, the sessions spread over
-- them by process ID (the copies in order: its own server's, then the
-- option's).  Joined with a table of one server, the copy on that server:
-- the join goes to it whole.
SELECT DISTINCT served_by = (ARRAY['cp_s1', 'cp_s2'])[pg_backend_pid() % 2 + 1] AS spread
  FROM cpd;
CREATE TABLE remote.cp_other (k int, note text);
INSERT INTO remote.cp_other VALUES (1, 'one'), (2, 'two'), (4, 'four');
CREATE FOREIGN TABLE cpo (k int, note text) SERVER cp_s2
  OPTIONS (schema_name 'remote', table_name 'cp_other');
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT d.name, d.served_by, o.note FROM cpd d JOIN cpo o ON o.k = d.k;
SELECT d.name, d.served_by, o.note FROM cpd d JOIN cpo o ON o.k = d.k ORDER BY 1;
-- A copy the user has no user mapping for is not chosen.
CREATE ROLE regress_cp_user;
GRANT SELECT ON cpd, cpo TO regress_cp_user;
CREATE USER MAPPING FOR regress_cp_user SERVER cp_s1 OPTIONS (password_required 'false');
SET ROLE regress_cp_user;
SELECT DISTINCT served_by FROM cpd;
RESET ROLE;
DROP USER MAPPING FOR regress_cp_user SERVER cp_s1;
REVOKE ALL ON cpd, cpo FROM regress_cp_user;
DROP ROLE regress_cp_user;
-- Naming a server in option copies takes USAGE on it, as creating a
-- foreign table there does: the table is read from and written to every
-- copy.
CREATE ROLE regress_cp_owner;
CREATE SCHEMA cp_owned AUTHORIZATION regress_cp_owner;
GRANT USAGE ON FOREIGN SERVER cp_s1 TO regress_cp_owner;
SET ROLE regress_cp_owner;
CREATE FOREIGN TABLE cp_owned.usage (k int, name text) SERVER cp_s1
  OPTIONS (schema_name 'remote', table_name 'cp_dim', copies 'cp_s2');
CREATE FOREIGN TABLE cp_owned.usage (k int, name text) SERVER cp_s1
  OPTIONS (schema_name 'remote', table_name 'cp_dim');
ALTER FOREIGN TABLE cp_owned.usage OPTIONS (ADD copies 'cp_s2');
RESET ROLE;
GRANT USAGE ON FOREIGN SERVER cp_s2 TO regress_cp_owner;
SET ROLE regress_cp_owner;
ALTER FOREIGN TABLE cp_owned.usage OPTIONS (ADD copies 'cp_s2');
RESET ROLE;
DROP SCHEMA cp_owned CASCADE;
REVOKE USAGE ON FOREIGN SERVER cp_s1, cp_s2 FROM regress_cp_owner;
DROP ROLE regress_cp_owner;

-- Writes go to every copy (test/t/021_replicated_writes.pl writes real
-- copies on servers of their own): an INSERT, and an UPDATE or DELETE sent
-- whole, the copies named in EXPLAIN; a change by row identity, which
-- differs between copies, is refused.
CREATE FUNCTION cp_local(t text) RETURNS text LANGUAGE plpgsql
  AS 'BEGIN RETURN upper(t); END';
EXPLAIN (VERBOSE, COSTS OFF) INSERT INTO cpd VALUES (99, 'x', 0, NULL);
EXPLAIN (VERBOSE, COSTS OFF) UPDATE cpd SET name = 'y' WHERE k = 1;
EXPLAIN (VERBOSE, COSTS OFF) DELETE FROM cpd WHERE k = 1 RETURNING k;
\set VERBOSITY default
UPDATE cpd SET name = cp_local(name) WHERE k = 1;
DELETE FROM cpd WHERE cp_local(name) = 'X';
UPDATE cpd SET name = 'y' FROM cpr WHERE cpd.region = cpr.region;
\set VERBOSITY terse
SELECT count(*) FROM remote.cp_dim_rows;
DROP FUNCTION cp_local(text);

-- Real writes to two copies in one database: each server's copy is the
-- view of its own rows (by application_name); the second copy refuses a
-- name 'bad'.
CREATE TABLE remote.cp_w_rows (server text DEFAULT current_setting('application_name'),
  k int, name text, CHECK (NOT (server = 'cp_s2' AND name = 'bad')));
CREATE VIEW remote.cp_w AS SELECT k, name FROM remote.cp_w_rows
  WHERE server = current_setting('application_name');
CREATE FOREIGN TABLE cpw (k int, name text) SERVER cp_s1
  OPTIONS (schema_name 'remote', table_name 'cp_w', copies 'cp_s2');
INSERT INTO cpw VALUES (1, 'one'), (2, 'two');
INSERT INTO cpw VALUES (3, 'three') RETURNING *;
COPY cpw FROM STDIN;
4	four
\.
UPDATE cpw SET name = name || '!' WHERE k >= 2 RETURNING *;
DELETE FROM cpw WHERE k = 1;
BEGIN;
INSERT INTO cpw VALUES (5, 'five');
UPDATE cpw SET name = 'FIVE' WHERE k = 5;
COMMIT;
SELECT server, k, name FROM remote.cp_w_rows ORDER BY 1, 2;
-- A write one copy refuses, alone or later in a transaction: no copy changes.
\set VERBOSITY default
INSERT INTO cpw VALUES (6, 'bad');
UPDATE cpw SET name = 'bad' WHERE k = 2;
BEGIN;
DELETE FROM cpw WHERE k = 3;
INSERT INTO cpw VALUES (7, 'bad');
COMMIT;
-- Copies that differ: a row only the second has.
INSERT INTO remote.cp_w_rows VALUES ('cp_s2', 9, 'stray');
DELETE FROM cpw WHERE k > 2;
\set VERBOSITY terse
DELETE FROM remote.cp_w_rows WHERE k = 9;
SELECT server, k, name FROM remote.cp_w_rows ORDER BY 1, 2;
-- Row by row (a value or condition computed here), by the declared key:
-- every copy.
ALTER FOREIGN TABLE cpw ALTER COLUMN k OPTIONS (ADD key 'true');
CREATE FUNCTION cp_upper(t text) RETURNS text LANGUAGE plpgsql
  AS 'BEGIN RETURN upper(t); END';
EXPLAIN (VERBOSE, COSTS OFF) UPDATE cpw SET name = cp_upper(name) WHERE k = 2;
UPDATE cpw SET name = cp_upper(name) WHERE k = 2 RETURNING *;
DELETE FROM cpw WHERE cp_upper(name) = 'FIVE' RETURNING k;
-- A key of two columns (the old value of a column the UPDATE sets finds
-- the row), a value with a quote, a join with a local table, a generic
-- plan, a local row trigger (the whole row sent).
ALTER FOREIGN TABLE cpw ALTER COLUMN name OPTIONS (ADD key 'true');
INSERT INTO cpw VALUES (6, 'it''s');
EXPLAIN (VERBOSE, COSTS OFF) DELETE FROM cpw WHERE cp_upper(name) = 'IT''S';
UPDATE cpw SET name = cp_upper(name) WHERE cp_upper(name) = 'IT''S' RETURNING *;
CREATE TEMP TABLE cp_new (k int, name text);
INSERT INTO cp_new VALUES (3, 'three?'), (4, 'four?');
UPDATE cpw SET name = n.name FROM cp_new n WHERE cpw.k = n.k;
SET plan_cache_mode = force_generic_plan;
PREPARE cp_upd(int) AS UPDATE cpw SET name = cp_upper(name) WHERE k = $1;
EXECUTE cp_upd(3);
EXECUTE cp_upd(4);
DEALLOCATE cp_upd;
RESET plan_cache_mode;
CREATE FUNCTION cp_suffix() RETURNS trigger LANGUAGE plpgsql
  AS 'BEGIN NEW.name := NEW.name || ''#''; RETURN NEW; END';
CREATE TRIGGER cp_suffix BEFORE UPDATE ON cpw FOR EACH ROW EXECUTE FUNCTION cp_suffix();
UPDATE cpw SET name = 'six' WHERE k = 6;
DROP TRIGGER cp_suffix ON cpw;
DROP FUNCTION cp_suffix();
DROP TABLE cp_new;
ALTER FOREIGN TABLE cpw ALTER COLUMN name OPTIONS (DROP key);
SELECT server, k, name FROM remote.cp_w_rows ORDER BY 1, 2;
DROP FUNCTION cp_upper(text);
-- Read back through the table: one copy.
SELECT * FROM cpw ORDER BY k;
-- A write to it rolled back with its savepoint no longer makes the
-- transaction's other writes need two-phase commit (cp_s3's is off); one
-- kept by a savepoint released still does.
ALTER SERVER cp_s3 OPTIONS (ADD two_phase_commit 'off');
CREATE TABLE remote.cp_plain_t (k int, name text);
CREATE FOREIGN TABLE cp_plain (k int, name text) SERVER cp_s3
  OPTIONS (schema_name 'remote', table_name 'cp_plain_t');
BEGIN;
SAVEPOINT a;
INSERT INTO cpw VALUES (20, 'gone');
ROLLBACK TO SAVEPOINT a;
INSERT INTO cp_plain VALUES (1, 'kept');
COMMIT;
\set VERBOSITY sqlstate
BEGIN;
SAVEPOINT a;
INSERT INTO cpw VALUES (21, 'x');
RELEASE SAVEPOINT a;
INSERT INTO cp_plain VALUES (2, 'not kept');
COMMIT;
\set VERBOSITY default
SELECT * FROM remote.cp_plain_t;
SELECT count(*) FROM remote.cp_w_rows WHERE k IN (20, 21);
DROP FOREIGN TABLE cp_plain;
DROP TABLE remote.cp_plain_t;
ALTER SERVER cp_s3 OPTIONS (DROP two_phase_commit);
DROP FOREIGN TABLE cpw;
DROP VIEW remote.cp_w;
DROP TABLE remote.cp_w_rows;

DROP FUNCTION cp_server(int);
DROP TABLE cpf, cpl;
DROP FOREIGN TABLE cpd, cpr, cpo;
DROP VIEW remote.cp_dim;
DROP TABLE remote.cp_dim_rows, remote.cp_region, remote.cp_other, remote.cpf_0, remote.cpf_1,
  remote.cpf_2, remote.cpf_3;
DROP USER MAPPING FOR CURRENT_USER SERVER cp_s1;
DROP USER MAPPING FOR CURRENT_USER SERVER cp_s2;
DROP USER MAPPING FOR CURRENT_USER SERVER cp_s3;
DROP USER MAPPING FOR CURRENT_USER SERVER cp_s4;
DROP SERVER cp_s1, cp_s2, cp_s3, cp_s4;
