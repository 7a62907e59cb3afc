--
-- connection: connections open on first use, are kept across transactions,
-- carry the session settings in their startup packet, and are dropped when
-- their server or user mapping changes or when they break
--

-- A remote view showing the remote session's own state.
CREATE VIEW remote.session_info AS
  SELECT pg_backend_pid() AS pid,
         current_setting('search_path') AS search_path,
         current_setting('TimeZone') AS timezone,
         current_setting('DateStyle') AS datestyle,
         current_setting('IntervalStyle') AS intervalstyle,
         current_setting('extra_float_digits') AS extra_float_digits,
         current_setting('client_encoding') AS client_encoding,
         current_setting('application_name') AS application_name,
         current_setting('transaction_isolation') AS isolation;
CREATE FOREIGN TABLE session_info (pid int, search_path text, timezone text,
  datestyle text, intervalstyle text, extra_float_digits text,
  client_encoding text, application_name text, isolation text)
  SERVER loopback OPTIONS (schema_name 'remote', table_name 'session_info');

-- No connection until the first use.
SELECT count(*) FROM pg_stat_activity WHERE application_name = 'async_fdw';

SELECT search_path, timezone, datestyle, intervalstyle, extra_float_digits,
       client_encoding = current_setting('server_encoding') AS encoding_ok,
       application_name
  FROM session_info;

-- The same connection serves the next transactions.
CREATE TEMP TABLE first_pid AS SELECT pid FROM session_info;
SELECT (SELECT pid FROM session_info) = (SELECT pid FROM first_pid) AS reused;
BEGIN;
SELECT (SELECT pid FROM session_info) = (SELECT pid FROM first_pid) AS reused;
COMMIT;

-- One connection per user mapping: loopback2 gets its own.
CREATE FOREIGN TABLE session_info2 (pid int)
  SERVER loopback2 OPTIONS (schema_name 'remote', table_name 'session_info');
SELECT (SELECT pid FROM session_info2) <> (SELECT pid FROM first_pid) AS separate;
SELECT count(*) FROM pg_stat_activity WHERE application_name = 'async_fdw';

-- ALTER SERVER drops the connection; the next use opens a new one.
ALTER SERVER loopback OPTIONS (ADD application_name 'afdw_regress');
SELECT application_name, pid <> (SELECT pid FROM first_pid) AS new_connection
  FROM session_info;
ALTER SERVER loopback OPTIONS (DROP application_name);
SELECT application_name FROM session_info;

-- So does ALTER USER MAPPING.
DELETE FROM first_pid;
INSERT INTO first_pid SELECT pid FROM session_info;
ALTER USER MAPPING FOR CURRENT_USER SERVER loopback OPTIONS (ADD user 'postgres_does_not_matter');
ALTER USER MAPPING FOR CURRENT_USER SERVER loopback OPTIONS (DROP user);
SELECT pid <> (SELECT pid FROM first_pid) AS new_connection FROM session_info;

-- A change inside the transaction that uses the connection takes effect at
-- its end.
DELETE FROM first_pid;
INSERT INTO first_pid SELECT pid FROM session_info;
BEGIN;
SELECT pid = (SELECT pid FROM first_pid) AS same FROM session_info;
ALTER SERVER loopback OPTIONS (ADD fetch_size '50');
SELECT pid = (SELECT pid FROM first_pid) AS same FROM session_info;
COMMIT;
SELECT pid = (SELECT pid FROM first_pid) AS same FROM session_info;
ALTER SERVER loopback OPTIONS (DROP fetch_size);

-- A broken connection is found and replaced at the next use.
DELETE FROM first_pid;
INSERT INTO first_pid SELECT pid FROM session_info;
SELECT pg_terminate_backend(pid, 10000) FROM first_pid;
SELECT pid <> (SELECT pid FROM first_pid) AS reconnected FROM session_info;
-- Inside a transaction the loss is an error, and the transaction can be
-- retried.
DELETE FROM first_pid;
INSERT INTO first_pid SELECT pid FROM session_info;
BEGIN;
SELECT count(*) FROM session_info;
SELECT pg_terminate_backend(pid, 10000) FROM first_pid;
\set VERBOSITY terse
SELECT count(*) FROM session_info;
\set VERBOSITY default
ROLLBACK;
SELECT count(*) FROM session_info;
-- The session lost inside a savepoint: the savepoint's rollback cannot
-- clean up, and the next use fails with 08000 (connection_exception), the
-- code postgres_fdw gives a connection whose abort cleanup failed.
DELETE FROM first_pid;
BEGIN;
SAVEPOINT s;
INSERT INTO first_pid SELECT pid FROM session_info;
SELECT pg_terminate_backend(pid, 10000) FROM first_pid;
ROLLBACK TO SAVEPOINT s;
\set VERBOSITY sqlstate
SELECT count(*) FROM session_info;
\set VERBOSITY default
ROLLBACK;
SELECT count(*) FROM session_info;

-- keep_connections off: closed at the end of each transaction.
ALTER SERVER loopback2 OPTIONS (ADD keep_connections 'off',
                                ADD application_name 'afdw_nokeep');
SELECT count(*) FROM session_info2;
-- The remote backend exits asynchronously: give it up to ten seconds.
DO $$
BEGIN
  FOR i IN 1..100 LOOP
    PERFORM pg_stat_clear_snapshot();
    EXIT WHEN NOT EXISTS (SELECT 1 FROM pg_stat_activity
                           WHERE application_name = 'afdw_nokeep');
    PERFORM pg_sleep(0.1);
  END LOOP;
END
$$;
SELECT count(*) FROM pg_stat_activity WHERE application_name = 'afdw_nokeep';
ALTER SERVER loopback2 OPTIONS (DROP application_name);
ALTER SERVER loopback2 OPTIONS (DROP keep_connections);

-- A server that is down, and one that does not exist.
CREATE SERVER nowhere FOREIGN DATA WRAPPER async_fdw
  OPTIONS (host '127.0.0.1', port '1', connect_timeout '5');
CREATE USER MAPPING FOR CURRENT_USER SERVER nowhere;
CREATE FOREIGN TABLE ft_nowhere (id int) SERVER nowhere;
\set VERBOSITY default
SELECT * FROM ft_nowhere;
-- The failure left the other connections usable.
SELECT count(*) FROM ft1;
DROP SERVER nowhere CASCADE;

-- Password rules for users who are not superusers.
CREATE ROLE regress_afdw_nosuper NOSUPERUSER;
GRANT USAGE ON FOREIGN SERVER loopback2 TO regress_afdw_nosuper;
GRANT USAGE ON SCHEMA remote TO regress_afdw_nosuper;
GRANT SELECT ON remote.t1 TO regress_afdw_nosuper;
CREATE FOREIGN TABLE ft_nosuper (id int) SERVER loopback2
  OPTIONS (schema_name 'remote', table_name 't1');
GRANT SELECT ON ft_nosuper TO regress_afdw_nosuper;
-- Without a password in the mapping.
CREATE USER MAPPING FOR regress_afdw_nosuper SERVER loopback2;
SET ROLE regress_afdw_nosuper;
SELECT count(*) FROM ft_nosuper;
RESET ROLE;
-- With a password the server never asks for (trust authentication).
ALTER USER MAPPING FOR regress_afdw_nosuper SERVER loopback2
  OPTIONS (ADD user 'postgres', ADD password 'secret');
SET ROLE regress_afdw_nosuper;
SELECT count(*) FROM ft_nosuper;
RESET ROLE;
-- A superuser may waive the rule.
ALTER USER MAPPING FOR regress_afdw_nosuper SERVER loopback2
  OPTIONS (ADD password_required 'false');
SET ROLE regress_afdw_nosuper;
SELECT count(*) FROM ft_nosuper;
RESET ROLE;
DROP FOREIGN TABLE ft_nosuper;
DROP USER MAPPING FOR regress_afdw_nosuper SERVER loopback2;
REVOKE ALL ON remote.t1 FROM regress_afdw_nosuper;
REVOKE ALL ON SCHEMA remote FROM regress_afdw_nosuper;
REVOKE ALL ON FOREIGN SERVER loopback2 FROM regress_afdw_nosuper;
DROP ROLE regress_afdw_nosuper;

DROP FOREIGN TABLE session_info2;
DROP TABLE first_pid;
