--
-- pooler: the server option that says what stands before the server.  A
-- direct server taken for a pooler works too (test/t/008_pgbouncer.pl runs
-- a real pgbouncer): the settings hold in every remote transaction, and a
-- transaction pooler's lookups prepare nothing.
--
-- A word outside the set: 42601, as for fetch_mode.
\set VERBOSITY sqlstate
CREATE SERVER afdw_pooler_bad FOREIGN DATA WRAPPER async_fdw
  OPTIONS (pooler 'statement');
\set VERBOSITY default
CREATE SERVER afdw_pooler_bad FOREIGN DATA WRAPPER async_fdw
  OPTIONS (pooler 'statement');
CREATE SERVER afdw_pooler_bad FOREIGN DATA WRAPPER async_fdw
  OPTIONS (pooler '');
CREATE SERVER afdw_pooler_ok FOREIGN DATA WRAPPER async_fdw
  OPTIONS (pooler 'AUTO');
ALTER SERVER afdw_pooler_ok OPTIONS (SET pooler 'none');
ALTER SERVER afdw_pooler_ok OPTIONS (SET pooler 'session');
ALTER SERVER afdw_pooler_ok OPTIONS (SET pooler 'transaction');
ALTER SERVER afdw_pooler_ok OPTIONS (SET pooler 'pgbouncer');
DROP SERVER afdw_pooler_ok;
-- Not on a table.
CREATE FOREIGN TABLE ft_pooler_bad (id int) SERVER loopback OPTIONS (pooler 'none');

-- Loopback servers in each mode.
CALL afdw_test_server('loopback_session', options => 'pooler ''session''');
CREATE USER MAPPING FOR CURRENT_USER SERVER loopback_session;
CALL afdw_test_server('loopback_transaction', options => 'pooler ''transaction''');
CREATE USER MAPPING FOR CURRENT_USER SERVER loopback_transaction;
CREATE VIEW remote.pooler_settings AS
  SELECT current_setting('search_path') AS sp, current_setting('TimeZone') AS tz,
         current_setting('DateStyle') AS ds, current_setting('IntervalStyle') AS ist,
         current_setting('extra_float_digits') AS efd, current_query() AS q;
CREATE FOREIGN TABLE ft_pooler_settings_s (sp text, tz text, ds text, ist text, efd text, q text)
  SERVER loopback_session OPTIONS (schema_name 'remote', table_name 'pooler_settings');
CREATE FOREIGN TABLE ft_pooler_settings_t (sp text, tz text, ds text, ist text, efd text, q text)
  SERVER loopback_transaction OPTIONS (schema_name 'remote', table_name 'pooler_settings');
CREATE FOREIGN TABLE ft_pooler_settings_n (sp text, tz text, ds text, ist text, efd text, q text)
  SERVER loopback OPTIONS (schema_name 'remote', table_name 'pooler_settings');

-- The settings each session reads under, and how the transaction began.
SELECT sp, tz, ds, ist, efd, q LIKE '%SET LOCAL%' AS set_local FROM ft_pooler_settings_n;
SELECT sp, tz, ds, ist, efd, q LIKE '%SET LOCAL%' AS set_local FROM ft_pooler_settings_s;
SELECT sp, tz, ds, ist, efd, q LIKE '%SET LOCAL%' AS set_local FROM ft_pooler_settings_t;
-- In a transaction block and a savepoint rolled back, too.
BEGIN;
SAVEPOINT a;
SELECT sp, tz FROM ft_pooler_settings_t;
ROLLBACK TO SAVEPOINT a;
SELECT sp, tz, ds, ist, efd FROM ft_pooler_settings_t;
COMMIT;
SELECT regexp_replace(q, 'snapshot ''[^'']*''', 'snapshot X', 'gi') AS first_message
  FROM ft_pooler_settings_t;

-- Lookups: a transaction pooler sends the values inline, a session
-- pooler prepares as a direct connection does.
CREATE VIEW remote.pooler_pr AS SELECT p.id, p.v, current_query() AS q FROM remote.t1 p;
CREATE FOREIGN TABLE ft_pooler_pr_s (id int, v text, q text)
  SERVER loopback_session OPTIONS (schema_name 'remote', table_name 'pooler_pr');
CREATE FOREIGN TABLE ft_pooler_pr_t (id int, v text, q text)
  SERVER loopback_transaction OPTIONS (schema_name 'remote', table_name 'pooler_pr');
CREATE TABLE pooler_keys (k int);
INSERT INTO pooler_keys VALUES (1), (7), (42), (999), (NULL), (3000);
ANALYZE pooler_keys;
SET enable_hashjoin = off;
SET enable_mergejoin = off;
SET enable_material = off;
SET enable_memoize = off;
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT k, id, v FROM pooler_keys JOIN ft_pooler_pr_t ON id = k;
SELECT k, id, v, regexp_replace(q, '^.*SAVEPOINT afdw_ra; ', '') AS remote_query
  FROM pooler_keys JOIN ft_pooler_pr_t ON id = k ORDER BY k;
SELECT k, id, v, regexp_replace(q, 'afdw_s\d+', 'afdw_sN', 'g') ~ 'EXECUTE afdw_sN' AS executed
  FROM pooler_keys JOIN ft_pooler_pr_s ON id = k ORDER BY k;
SELECT k, id, v FROM pooler_keys JOIN remote.t1 ON id = k ORDER BY k;
-- Statements left prepared in each remote session: none through the
-- transaction pooler.
CREATE VIEW remote.pooler_prepared AS
  SELECT count(*) AS n FROM pg_prepared_statements WHERE name LIKE 'afdw_s%';
CREATE FOREIGN TABLE ft_pooler_prepared_s (n bigint)
  SERVER loopback_session OPTIONS (schema_name 'remote', table_name 'pooler_prepared');
CREATE FOREIGN TABLE ft_pooler_prepared_t (n bigint)
  SERVER loopback_transaction OPTIONS (schema_name 'remote', table_name 'pooler_prepared');
SELECT (SELECT n FROM ft_pooler_prepared_s) AS session_pooler,
       (SELECT n FROM ft_pooler_prepared_t) AS transaction_pooler;
RESET enable_hashjoin;
RESET enable_mergejoin;
RESET enable_material;
RESET enable_memoize;

DROP TABLE pooler_keys;
DROP FOREIGN TABLE ft_pooler_pr_s, ft_pooler_pr_t, ft_pooler_settings_s,
  ft_pooler_settings_t, ft_pooler_settings_n, ft_pooler_prepared_s,
  ft_pooler_prepared_t;
DROP VIEW remote.pooler_pr, remote.pooler_settings, remote.pooler_prepared;
DROP USER MAPPING FOR CURRENT_USER SERVER loopback_session;
DROP USER MAPPING FOR CURRENT_USER SERVER loopback_transaction;
DROP SERVER loopback_session, loopback_transaction;
