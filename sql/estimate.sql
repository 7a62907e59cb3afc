--
-- estimate: use_remote_estimate (server and table option, as postgres_fdw's)
-- has the remote server EXPLAIN the scan and takes its rows and costs.
--
CREATE TABLE remote.est (id int, k int, t text);
INSERT INTO remote.est SELECT g, g % 10, 'r' || g FROM generate_series(1, 20000) g;
ANALYZE remote.est;
CREATE FOREIGN TABLE est (id int, k int, t text)
  SERVER loopback OPTIONS (schema_name 'remote', table_name 'est');

-- The planner's rows for a query, from EXPLAIN (FORMAT JSON).
CREATE FUNCTION est_rows(q text) RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE
  plan json;
BEGIN
  EXECUTE 'EXPLAIN (FORMAT JSON) ' || q INTO plan;
  RETURN (plan->0->'Plan'->>'Plan Rows')::float8;
END
$$;

-- Never analyzed locally: without remote estimates, a guess of ten pages.
SELECT est_rows('SELECT * FROM est') < 2000 AS guessed;
SELECT est_rows('SELECT * FROM est WHERE id <= 300') BETWEEN 250 AND 350 AS near_300;
-- With them, the remote planner's figures (its statistics are exact here).
ALTER FOREIGN TABLE est OPTIONS (ADD use_remote_estimate 'true');
SELECT est_rows('SELECT * FROM est') AS remote_rows;
SELECT est_rows('SELECT * FROM est WHERE id <= 300') BETWEEN 250 AND 350 AS remote_rows_near_300;
SELECT est_rows('SELECT * FROM est WHERE k = 3') BETWEEN 1800 AND 2200 AS remote_rows_near_2000;
-- A local condition is applied on top of the remote estimate.
SELECT est_rows('SELECT * FROM est WHERE k = 3 AND t::text ~ ''^r''') < 2200 AS local_on_top;
-- The server's option, overridden by the table's.
ALTER FOREIGN TABLE est OPTIONS (DROP use_remote_estimate);
ALTER SERVER loopback OPTIONS (ADD use_remote_estimate 'true');
SELECT est_rows('SELECT * FROM est') AS remote_rows;
ALTER FOREIGN TABLE est OPTIONS (ADD use_remote_estimate 'false');
SELECT est_rows('SELECT * FROM est') < 2000 AS guessed;
ALTER FOREIGN TABLE est OPTIONS (DROP use_remote_estimate);
-- A remote query with parameters is estimated locally (no values yet);
-- the rows are right either way.
PREPARE est_p(int) AS SELECT count(*) FROM est WHERE id <= $1;
SET plan_cache_mode = force_generic_plan;
EXECUTE est_p(300);
RESET plan_cache_mode;
DEALLOCATE est_p;
SELECT count(*), sum(id) FROM est WHERE k = 3;
ALTER SERVER loopback OPTIONS (DROP use_remote_estimate);
-- Bad values, as for any Boolean option.
ALTER FOREIGN TABLE est OPTIONS (ADD use_remote_estimate 'sometimes');
ALTER SERVER loopback OPTIONS (ADD use_remote_estimate '');

DROP FOREIGN TABLE est;
DROP TABLE remote.est;
DROP FUNCTION est_rows(text);
