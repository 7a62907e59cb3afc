--
-- budget: the server option max_shared_connections and the function
-- async_fdw_connection_budget() on a server where async_fdw is not
-- preloaded (the budget itself is tested in test/t/009_budget.pl).
--
-- The option takes an integer from 0 (no budget); a bad value fails with
-- 22023, as a bad fetch_size does in postgres_fdw.
\set VERBOSITY sqlstate
CREATE SERVER afdw_budget_bad FOREIGN DATA WRAPPER async_fdw OPTIONS (max_shared_connections '-1');
CREATE SERVER afdw_budget_bad FOREIGN DATA WRAPPER async_fdw OPTIONS (max_shared_connections 'ten');
CREATE SERVER afdw_budget_bad FOREIGN DATA WRAPPER async_fdw OPTIONS (max_shared_connections '');
CREATE SERVER afdw_budget_bad FOREIGN DATA WRAPPER async_fdw OPTIONS (max_shared_connections '1.5');
\set VERBOSITY default
CREATE SERVER afdw_budget_bad FOREIGN DATA WRAPPER async_fdw OPTIONS (max_shared_connections '2147483648');

CREATE SERVER afdw_budget_a FOREIGN DATA WRAPPER async_fdw
  OPTIONS (max_shared_connections '0');
CREATE SERVER afdw_budget_b FOREIGN DATA WRAPPER async_fdw
  OPTIONS (max_shared_connections '2147483647');
-- Only servers take it.
\set VERBOSITY terse
CREATE USER MAPPING FOR CURRENT_USER SERVER afdw_budget_a OPTIONS (max_shared_connections '1');
CREATE FOREIGN TABLE afdw_budget_t (id int) SERVER afdw_budget_a OPTIONS (max_shared_connections '1');
ALTER FOREIGN DATA WRAPPER async_fdw OPTIONS (max_shared_connections '1');
\set VERBOSITY default

-- Not preloaded: each server's budget (its option, else this server's
-- max_connections; NULL for none), but no shared figures.
SELECT server_name,
       CASE WHEN budget = current_setting('max_connections')::int
            THEN 'max_connections' ELSE budget::text END AS budget,
       held, idle_expiring, waiting
  FROM async_fdw_connection_budget()
 WHERE server_name IN ('loopback', 'afdw_budget_a', 'afdw_budget_b')
 ORDER BY 1;
ALTER SERVER afdw_budget_a OPTIONS (SET max_shared_connections '7');
SELECT budget FROM async_fdw_connection_budget() WHERE server_name = 'afdw_budget_a';
-- Servers of other wrappers are not listed.
CREATE FOREIGN DATA WRAPPER afdw_budget_other;
CREATE SERVER afdw_budget_c FOREIGN DATA WRAPPER afdw_budget_other;
SELECT count(*) FROM async_fdw_connection_budget() WHERE server_name = 'afdw_budget_c';
-- A wrapper of another name whose handler is async_fdw's is async_fdw;
-- one whose handler is another function of the library is not
-- (afdw_server_is_ours reads pg_proc).
CREATE FOREIGN DATA WRAPPER afdw_budget_alias HANDLER async_fdw_handler;
CREATE SERVER afdw_budget_d FOREIGN DATA WRAPPER afdw_budget_alias;
DO $$
BEGIN
  EXECUTE format('CREATE FUNCTION afdw_budget_not_handler() RETURNS fdw_handler LANGUAGE c AS %L, %L',
                 (SELECT probin FROM pg_proc WHERE proname = 'async_fdw_handler'),
                 'async_fdw_get_connections');
END $$;
CREATE FOREIGN DATA WRAPPER afdw_budget_other2 HANDLER afdw_budget_not_handler;
CREATE SERVER afdw_budget_e FOREIGN DATA WRAPPER afdw_budget_other2;
SELECT server_name FROM async_fdw_connection_budget()
 WHERE server_name IN ('afdw_budget_d', 'afdw_budget_e');
DROP SERVER afdw_budget_d, afdw_budget_e;
DROP FOREIGN DATA WRAPPER afdw_budget_alias, afdw_budget_other2;
DROP FUNCTION afdw_budget_not_handler();
-- Queries run as before.
SELECT count(*) > 0 AS rows FROM ft1;

DROP SERVER afdw_budget_a, afdw_budget_b, afdw_budget_c;
DROP FOREIGN DATA WRAPPER afdw_budget_other;
