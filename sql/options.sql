--
-- options: async_fdw's option validator at CREATE and ALTER of servers,
-- user mappings, foreign tables, their columns and the wrapper itself.
--
-- An unknown name fails with ERRCODE_FDW_INVALID_OPTION_NAME (HV00D) and a
-- hint listing the valid names for that kind of object; a bad value fails
-- naming option and value, with the SQLSTATE postgres_fdw 15 gives it:
-- 22023 for a number, 42601 for a word that is not among the valid ones.
-- Everything created here is dropped at the end; setup's objects are only
-- read (loopback, remote.t1) or granted on and revoked (loopback2).
--

-- Runs one statement and returns "ok" or the SQLSTATE and message of its
-- error, so that error codes show without file and line numbers.
CREATE FUNCTION afdw_opt_try(cmd text) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE cmd;
  RETURN 'ok';
EXCEPTION WHEN others THEN
  RETURN SQLSTATE || ': ' || SQLERRM;
END
$$;

-- The options of an object, sorted, so that their order in the catalog
-- (which follows the order of the ALTERs) does not matter.
CREATE FUNCTION afdw_opt_sorted(opts text[]) RETURNS text[]
LANGUAGE sql IMMUTABLE AS $$
  SELECT array_agg(o ORDER BY o) FROM unnest(opts) o
$$;

--
-- Servers
--

-- Every option of async_fdw's own, and some of libpq's, are accepted.
-- The server is never connected to: nothing listens at its address.
CREATE SERVER afdw_opt_srv FOREIGN DATA WRAPPER async_fdw
  OPTIONS (host 'afdw-nowhere.invalid', port '1', dbname 'nodb',
           application_name 'afdw_options', connect_timeout '5',
           sslmode 'disable', options '-c work_mem=4MB',
           fetch_size '50', async_capable 'false',
           fdw_startup_cost '10.5', fdw_tuple_cost '0',
           keep_connections 'off', max_connections '2');
SELECT afdw_opt_sorted(srvoptions) FROM pg_foreign_server
  WHERE srvname = 'afdw_opt_srv';

-- Spellings of the accepted values: the largest int, true/false in the
-- forms parse_bool takes, costs as integers and in exponent form.
CREATE SERVER afdw_opt_srv2 FOREIGN DATA WRAPPER async_fdw
  OPTIONS (fetch_size '2147483647', max_connections '1',
           async_capable 'on', keep_connections 'yes',
           fdw_startup_cost '0', fdw_tuple_cost '1e-3');
SELECT afdw_opt_sorted(srvoptions) FROM pg_foreign_server
  WHERE srvname = 'afdw_opt_srv2';
DROP SERVER afdw_opt_srv2;

-- An unknown name: the hint lists the server options (libpq's connection
-- options, which depend on the libpq version, then async_fdw's own).
CREATE SERVER afdw_opt_bad FOREIGN DATA WRAPPER async_fdw
  OPTIONS (table_name 't1');

-- The same errors without repeating the long hint.
\set VERBOSITY terse
-- A user name and password belong to the user mapping.
CREATE SERVER afdw_opt_bad FOREIGN DATA WRAPPER async_fdw OPTIONS (user 'u');
CREATE SERVER afdw_opt_bad FOREIGN DATA WRAPPER async_fdw OPTIONS (password 'p');
-- async_fdw sets these libpq options itself.
CREATE SERVER afdw_opt_bad FOREIGN DATA WRAPPER async_fdw
  OPTIONS (client_encoding 'LATIN1');
CREATE SERVER afdw_opt_bad FOREIGN DATA WRAPPER async_fdw
  OPTIONS (fallback_application_name 'x');
-- libpq's debug option is not offered.
CREATE SERVER afdw_opt_bad FOREIGN DATA WRAPPER async_fdw
  OPTIONS (replication 'database');
-- Options of other objects, a misspelling, and names are case sensitive.
CREATE SERVER afdw_opt_bad FOREIGN DATA WRAPPER async_fdw OPTIONS (column_name 'c');
CREATE SERVER afdw_opt_bad FOREIGN DATA WRAPPER async_fdw OPTIONS (password_required 'true');
CREATE SERVER afdw_opt_bad FOREIGN DATA WRAPPER async_fdw OPTIONS (fetchsize '10');
CREATE SERVER afdw_opt_bad FOREIGN DATA WRAPPER async_fdw OPTIONS ("Fetch_Size" '10');
\set VERBOSITY default

-- Bad values of fetch_size: zero, negative, not a number, empty, too
-- large for an int (2^31 and 2^40).  The detail gives the valid range.
CREATE SERVER afdw_opt_bad FOREIGN DATA WRAPPER async_fdw OPTIONS (fetch_size '0');
\set VERBOSITY terse
CREATE SERVER afdw_opt_bad FOREIGN DATA WRAPPER async_fdw OPTIONS (fetch_size '-5');
CREATE SERVER afdw_opt_bad FOREIGN DATA WRAPPER async_fdw OPTIONS (fetch_size 'abc');
CREATE SERVER afdw_opt_bad FOREIGN DATA WRAPPER async_fdw OPTIONS (fetch_size '');
CREATE SERVER afdw_opt_bad FOREIGN DATA WRAPPER async_fdw OPTIONS (fetch_size '2147483648');
CREATE SERVER afdw_opt_bad FOREIGN DATA WRAPPER async_fdw OPTIONS (fetch_size '1099511627776');
-- max_connections must be positive too.
CREATE SERVER afdw_opt_bad FOREIGN DATA WRAPPER async_fdw OPTIONS (max_connections '0');
CREATE SERVER afdw_opt_bad FOREIGN DATA WRAPPER async_fdw OPTIONS (max_connections 'many');
\set VERBOSITY default
-- fetch_mode takes auto, stream or cursor, in any case.
CREATE SERVER afdw_opt_bad FOREIGN DATA WRAPPER async_fdw OPTIONS (fetch_mode 'fast');
CREATE SERVER afdw_opt_fm FOREIGN DATA WRAPPER async_fdw OPTIONS (fetch_mode 'Stream');
ALTER SERVER afdw_opt_fm OPTIONS (SET fetch_mode 'cursor');
ALTER SERVER afdw_opt_fm OPTIONS (SET fetch_mode 'auto');
ALTER SERVER afdw_opt_fm OPTIONS (SET fetch_mode '');
DROP SERVER afdw_opt_fm;

-- Bad Boolean values.
CREATE SERVER afdw_opt_bad FOREIGN DATA WRAPPER async_fdw OPTIONS (async_capable 'maybe');
\set VERBOSITY terse
CREATE SERVER afdw_opt_bad FOREIGN DATA WRAPPER async_fdw OPTIONS (async_capable '');
CREATE SERVER afdw_opt_bad FOREIGN DATA WRAPPER async_fdw OPTIONS (keep_connections 'x');
\set VERBOSITY default

-- postgres_fdw's transaction options parallel_commit and parallel_abort
-- (Boolean, servers only), and async_fdw's two_phase_commit (off, auto or
-- on, any case): accepted, and bad values rejected as the others are.
CREATE SERVER afdw_opt_tx FOREIGN DATA WRAPPER async_fdw
  OPTIONS (parallel_commit 'true', parallel_abort 'off', two_phase_commit 'AUTO');
ALTER SERVER afdw_opt_tx OPTIONS (SET two_phase_commit 'on', SET parallel_commit 'no');
SELECT afdw_opt_sorted(srvoptions) FROM pg_foreign_server
  WHERE srvname = 'afdw_opt_tx';
SELECT cmd, afdw_opt_try(cmd) FROM (VALUES
  ('ALTER SERVER afdw_opt_tx OPTIONS (SET parallel_commit ''maybe'')'),
  ('ALTER SERVER afdw_opt_tx OPTIONS (SET parallel_abort '''')'),
  ('ALTER SERVER afdw_opt_tx OPTIONS (SET two_phase_commit ''always'')'),
  ('CREATE FOREIGN TABLE afdw_opt_bad (a int) SERVER afdw_opt_tx OPTIONS (parallel_commit ''true'')'),
  ('CREATE USER MAPPING FOR PUBLIC SERVER afdw_opt_tx OPTIONS (two_phase_commit ''on'')')
) v(cmd) ORDER BY cmd;
DROP SERVER afdw_opt_tx;

-- Bad costs: negative, not a number, infinite.
CREATE SERVER afdw_opt_bad FOREIGN DATA WRAPPER async_fdw OPTIONS (fdw_startup_cost '-1');
\set VERBOSITY terse
CREATE SERVER afdw_opt_bad FOREIGN DATA WRAPPER async_fdw OPTIONS (fdw_tuple_cost '-0.01');
CREATE SERVER afdw_opt_bad FOREIGN DATA WRAPPER async_fdw OPTIONS (fdw_startup_cost 'abc');
CREATE SERVER afdw_opt_bad FOREIGN DATA WRAPPER async_fdw OPTIONS (fdw_tuple_cost 'abc');
CREATE SERVER afdw_opt_bad FOREIGN DATA WRAPPER async_fdw OPTIONS (fdw_startup_cost 'Infinity');
CREATE SERVER afdw_opt_bad FOREIGN DATA WRAPPER async_fdw OPTIONS (fdw_tuple_cost 'NaN');
\set VERBOSITY default

-- None of the failed CREATEs left a server behind.
SELECT srvname FROM pg_foreign_server WHERE srvname LIKE 'afdw_opt%' ORDER BY 1;

-- The error codes: HV00D for a name, 22023 or 42601 for a value.
SELECT cmd, afdw_opt_try(cmd) FROM (VALUES
  ('CREATE SERVER afdw_opt_bad FOREIGN DATA WRAPPER async_fdw OPTIONS (nosuch ''1'')'),
  ('CREATE SERVER afdw_opt_bad FOREIGN DATA WRAPPER async_fdw OPTIONS (fetch_size ''0'')'),
  ('CREATE SERVER afdw_opt_bad FOREIGN DATA WRAPPER async_fdw OPTIONS (async_capable ''maybe'')'),
  ('CREATE SERVER afdw_opt_bad FOREIGN DATA WRAPPER async_fdw OPTIONS (fdw_tuple_cost ''-1'')'),
  ('ALTER SERVER afdw_opt_srv OPTIONS (ADD nosuch ''1'')'),
  ('ALTER SERVER afdw_opt_srv OPTIONS (SET fetch_size ''-5'')')
) v(cmd) ORDER BY cmd;

-- ALTER SERVER validates too, and a failed ALTER changes nothing.
\set VERBOSITY terse
ALTER SERVER afdw_opt_srv OPTIONS (ADD table_name 't');
ALTER SERVER afdw_opt_srv OPTIONS (SET fetch_size '0');
ALTER SERVER afdw_opt_srv OPTIONS (SET fetch_size '-5');
ALTER SERVER afdw_opt_srv OPTIONS (SET fetch_size 'abc');
ALTER SERVER afdw_opt_srv OPTIONS (SET fetch_size '1099511627776');
ALTER SERVER afdw_opt_srv OPTIONS (SET async_capable 'maybe');
ALTER SERVER afdw_opt_srv OPTIONS (SET keep_connections 'x');
ALTER SERVER afdw_opt_srv OPTIONS (SET fdw_startup_cost '-1');
ALTER SERVER afdw_opt_srv OPTIONS (SET fdw_tuple_cost '-1');
ALTER SERVER afdw_opt_srv OPTIONS (SET fdw_tuple_cost 'abc');
ALTER SERVER afdw_opt_srv OPTIONS (SET max_connections '0');
-- A bad value next to a good one rejects the whole statement.
ALTER SERVER afdw_opt_srv OPTIONS (SET fetch_size '10', SET max_connections '0');
\set VERBOSITY default
SELECT afdw_opt_sorted(srvoptions) FROM pg_foreign_server
  WHERE srvname = 'afdw_opt_srv';

-- An option moves through ADD, SET and DROP.
ALTER SERVER afdw_opt_srv OPTIONS (DROP fetch_size);
SELECT o FROM pg_foreign_server, unnest(srvoptions) o
  WHERE srvname = 'afdw_opt_srv' AND o LIKE 'fetch_size=%';
ALTER SERVER afdw_opt_srv OPTIONS (ADD fetch_size '500');
SELECT o FROM pg_foreign_server, unnest(srvoptions) o
  WHERE srvname = 'afdw_opt_srv' AND o LIKE 'fetch_size=%';
ALTER SERVER afdw_opt_srv OPTIONS (SET fetch_size '1000');
SELECT o FROM pg_foreign_server, unnest(srvoptions) o
  WHERE srvname = 'afdw_opt_srv' AND o LIKE 'fetch_size=%';
ALTER SERVER afdw_opt_srv OPTIONS (DROP fetch_size);
SELECT o FROM pg_foreign_server, unnest(srvoptions) o
  WHERE srvname = 'afdw_opt_srv' AND o LIKE 'fetch_size=%';
-- Adding an option twice, or setting or dropping a missing one, is
-- PostgreSQL's own error, not the validator's.
ALTER SERVER afdw_opt_srv OPTIONS (ADD async_capable 'true');
ALTER SERVER afdw_opt_srv OPTIONS (SET fetch_size '10');
ALTER SERVER afdw_opt_srv OPTIONS (DROP fetch_size);
-- The same moves for the other kinds of option.
ALTER SERVER afdw_opt_srv OPTIONS (SET async_capable 'true', SET keep_connections 'on',
                                   SET fdw_startup_cost '250', DROP fdw_tuple_cost,
                                   SET max_connections '8', ADD fetch_size '7');
SELECT afdw_opt_sorted(srvoptions) FROM pg_foreign_server
  WHERE srvname = 'afdw_opt_srv';

--
-- User mappings
--

CREATE USER MAPPING FOR CURRENT_USER SERVER afdw_opt_srv
  OPTIONS (user 'someone', password 'secret', sslpassword 'pw',
           password_required 'true', sslcert 'client.crt', sslkey 'client.key');
SELECT afdw_opt_sorted(umoptions) FROM pg_user_mappings
  WHERE srvname = 'afdw_opt_srv' AND usename = CURRENT_USER;

-- An unknown name: the hint lists the user mapping options.
ALTER USER MAPPING FOR CURRENT_USER SERVER afdw_opt_srv OPTIONS (ADD fetch_size '10');
\set VERBOSITY terse
ALTER USER MAPPING FOR CURRENT_USER SERVER afdw_opt_srv OPTIONS (ADD host 'h');
ALTER USER MAPPING FOR CURRENT_USER SERVER afdw_opt_srv OPTIONS (ADD dbname 'd');
ALTER USER MAPPING FOR CURRENT_USER SERVER afdw_opt_srv OPTIONS (ADD async_capable 'true');
ALTER USER MAPPING FOR CURRENT_USER SERVER afdw_opt_srv OPTIONS (ADD table_name 't');
CREATE USER MAPPING FOR PUBLIC SERVER afdw_opt_srv OPTIONS (fetch_size '10');
CREATE USER MAPPING FOR PUBLIC SERVER afdw_opt_srv OPTIONS (keep_connections 'off');
-- A bad Boolean.
ALTER USER MAPPING FOR CURRENT_USER SERVER afdw_opt_srv OPTIONS (SET password_required 'x');
CREATE USER MAPPING FOR PUBLIC SERVER afdw_opt_srv OPTIONS (password_required 'x');
\set VERBOSITY default
SELECT cmd, afdw_opt_try(cmd) FROM (VALUES
  ('CREATE USER MAPPING FOR PUBLIC SERVER afdw_opt_srv OPTIONS (fetch_size ''10'')'),
  ('CREATE USER MAPPING FOR PUBLIC SERVER afdw_opt_srv OPTIONS (password_required ''x'')')
) v(cmd) ORDER BY cmd;
-- Only the valid mapping exists.
SELECT usename = CURRENT_USER AS mine, afdw_opt_sorted(umoptions)
  FROM pg_user_mappings WHERE srvname = 'afdw_opt_srv' ORDER BY 1;

-- A superuser may set password_required to false.
ALTER USER MAPPING FOR CURRENT_USER SERVER afdw_opt_srv
  OPTIONS (SET password_required 'false', DROP sslpassword);
SELECT afdw_opt_sorted(umoptions) FROM pg_user_mappings
  WHERE srvname = 'afdw_opt_srv' AND usename = CURRENT_USER;
-- A mapping with no options at all.
CREATE USER MAPPING FOR PUBLIC SERVER afdw_opt_srv;
SELECT usename, umoptions FROM pg_user_mappings
  WHERE srvname = 'afdw_opt_srv' AND usename = 'public';
DROP USER MAPPING FOR PUBLIC SERVER afdw_opt_srv;

--
-- Non-superusers: password_required false, sslcert and sslkey need a
-- superuser; everything else on one's own mapping does not.
--
CREATE ROLE regress_afdw_user NOLOGIN;
GRANT USAGE ON FOREIGN SERVER loopback2 TO regress_afdw_user;
SET ROLE regress_afdw_user;
CREATE USER MAPPING FOR regress_afdw_user SERVER loopback2
  OPTIONS (password_required 'false');
CREATE USER MAPPING FOR regress_afdw_user SERVER loopback2
  OPTIONS (sslcert 'client.crt');
CREATE USER MAPPING FOR regress_afdw_user SERVER loopback2
  OPTIONS (sslkey 'client.key');
SELECT cmd, afdw_opt_try(cmd) FROM (VALUES
  ('CREATE USER MAPPING FOR regress_afdw_user SERVER loopback2 OPTIONS (password_required ''off'')'),
  ('CREATE USER MAPPING FOR regress_afdw_user SERVER loopback2 OPTIONS (sslcert ''c'')')
) v(cmd) ORDER BY cmd;
-- password_required true, user and password are fine.
CREATE USER MAPPING FOR regress_afdw_user SERVER loopback2
  OPTIONS (user 'regress_afdw_user', password 'secret', password_required 'true');
-- ALTER checks the same.
ALTER USER MAPPING FOR regress_afdw_user SERVER loopback2
  OPTIONS (SET password_required 'false');
ALTER USER MAPPING FOR regress_afdw_user SERVER loopback2
  OPTIONS (ADD sslcert 'client.crt');
ALTER USER MAPPING FOR regress_afdw_user SERVER loopback2
  OPTIONS (ADD sslkey 'client.key');
ALTER USER MAPPING FOR regress_afdw_user SERVER loopback2
  OPTIONS (SET password 'secret2', DROP password_required);
RESET ROLE;
SELECT afdw_opt_sorted(umoptions) FROM pg_user_mappings
  WHERE srvname = 'loopback2' AND usename = 'regress_afdw_user';

-- The superuser may set all three on the role's mapping.
ALTER USER MAPPING FOR regress_afdw_user SERVER loopback2
  OPTIONS (ADD password_required 'false', ADD sslcert 'client.crt',
           ADD sslkey 'client.key');
SELECT afdw_opt_sorted(umoptions) FROM pg_user_mappings
  WHERE srvname = 'loopback2' AND usename = 'regress_afdw_user';
-- The validator sees all of a mapping's options, so the role can no
-- longer alter the mapping the superuser gave those options to; it may
-- still drop it.
SET ROLE regress_afdw_user;
ALTER USER MAPPING FOR regress_afdw_user SERVER loopback2
  OPTIONS (SET password 'secret3');
DROP USER MAPPING FOR regress_afdw_user SERVER loopback2;
RESET ROLE;
-- A superuser may also create such a mapping for the role directly.
CREATE USER MAPPING FOR regress_afdw_user SERVER loopback2
  OPTIONS (password_required 'false', sslcert 'client.crt', sslkey 'client.key');
SELECT afdw_opt_sorted(umoptions) FROM pg_user_mappings
  WHERE srvname = 'loopback2' AND usename = 'regress_afdw_user';
DROP USER MAPPING FOR regress_afdw_user SERVER loopback2;
REVOKE USAGE ON FOREIGN SERVER loopback2 FROM regress_afdw_user;
DROP ROLE regress_afdw_user;

--
-- Foreign tables and their columns
--

CREATE FOREIGN TABLE afdw_opt_ft (a int OPTIONS (column_name 'id'), b text)
  SERVER afdw_opt_srv
  OPTIONS (schema_name 'remote', table_name 't1', fetch_size '20',
           async_capable 'false');
SELECT afdw_opt_sorted(ftoptions) FROM pg_foreign_table
  WHERE ftrelid = 'afdw_opt_ft'::regclass;
SELECT attname, attfdwoptions FROM pg_attribute
  WHERE attrelid = 'afdw_opt_ft'::regclass AND attnum > 0 ORDER BY attnum;

-- An unknown table option: the hint lists the foreign table options.
CREATE FOREIGN TABLE afdw_opt_bad (a int) SERVER afdw_opt_srv OPTIONS (host 'h');
\set VERBOSITY terse
-- Server-only, user mapping and column options are not table options.
ALTER FOREIGN TABLE afdw_opt_ft OPTIONS (ADD host 'h');
ALTER FOREIGN TABLE afdw_opt_ft OPTIONS (ADD keep_connections 'off');
ALTER FOREIGN TABLE afdw_opt_ft OPTIONS (ADD fdw_startup_cost '1');
ALTER FOREIGN TABLE afdw_opt_ft OPTIONS (ADD max_connections '1');
ALTER FOREIGN TABLE afdw_opt_ft OPTIONS (ADD user 'u');
ALTER FOREIGN TABLE afdw_opt_ft OPTIONS (ADD column_name 'c');
-- Bad values at table level.
CREATE FOREIGN TABLE afdw_opt_bad (a int) SERVER afdw_opt_srv OPTIONS (fetch_size '0');
ALTER FOREIGN TABLE afdw_opt_ft OPTIONS (SET fetch_size '0');
ALTER FOREIGN TABLE afdw_opt_ft OPTIONS (SET fetch_size '-5');
ALTER FOREIGN TABLE afdw_opt_ft OPTIONS (SET fetch_size 'abc');
ALTER FOREIGN TABLE afdw_opt_ft OPTIONS (SET fetch_size '1099511627776');
ALTER FOREIGN TABLE afdw_opt_ft OPTIONS (SET async_capable 'maybe');
ALTER FOREIGN TABLE afdw_opt_ft OPTIONS (ADD fetch_mode 'copy');
\set VERBOSITY default
SELECT cmd, afdw_opt_try(cmd) FROM (VALUES
  ('ALTER FOREIGN TABLE afdw_opt_ft OPTIONS (ADD host ''h'')'),
  ('ALTER FOREIGN TABLE afdw_opt_ft OPTIONS (SET fetch_size ''abc'')')
) v(cmd) ORDER BY cmd;

-- An unknown column option: the hint lists the column options.
ALTER FOREIGN TABLE afdw_opt_ft ALTER COLUMN b OPTIONS (ADD table_name 't');
\set VERBOSITY terse
ALTER FOREIGN TABLE afdw_opt_ft ALTER COLUMN b OPTIONS (ADD fetch_size '10');
ALTER FOREIGN TABLE afdw_opt_ft ALTER COLUMN b OPTIONS (ADD colname 'v');
CREATE FOREIGN TABLE afdw_opt_bad (a int OPTIONS (schema_name 's')) SERVER afdw_opt_srv;
ALTER FOREIGN TABLE afdw_opt_ft ADD COLUMN c int OPTIONS (host 'h');
\set VERBOSITY default
SELECT afdw_opt_try('ALTER FOREIGN TABLE afdw_opt_ft ALTER COLUMN b OPTIONS (ADD table_name ''t'')');

-- No afdw_opt_bad was created, and the failed ALTERs changed nothing.
SELECT relname FROM pg_class WHERE relname LIKE 'afdw_opt%' ORDER BY 1;
SELECT afdw_opt_sorted(ftoptions) FROM pg_foreign_table
  WHERE ftrelid = 'afdw_opt_ft'::regclass;
SELECT attname, attfdwoptions FROM pg_attribute
  WHERE attrelid = 'afdw_opt_ft'::regclass AND attnum > 0 ORDER BY attnum;

-- Table and column options move through ADD, SET and DROP.
ALTER FOREIGN TABLE afdw_opt_ft OPTIONS (SET fetch_size '1000', DROP async_capable);
ALTER FOREIGN TABLE afdw_opt_ft OPTIONS (ADD async_capable 'on', SET table_name 'T1');
ALTER FOREIGN TABLE afdw_opt_ft ALTER COLUMN b OPTIONS (ADD column_name 'v');
ALTER FOREIGN TABLE afdw_opt_ft ALTER COLUMN a OPTIONS (SET column_name 'ID');
ALTER FOREIGN TABLE afdw_opt_ft ADD COLUMN c numeric OPTIONS (column_name 'n');
SELECT afdw_opt_sorted(ftoptions) FROM pg_foreign_table
  WHERE ftrelid = 'afdw_opt_ft'::regclass;
SELECT attname, attfdwoptions FROM pg_attribute
  WHERE attrelid = 'afdw_opt_ft'::regclass AND attnum > 0 ORDER BY attnum;
ALTER FOREIGN TABLE afdw_opt_ft OPTIONS (DROP fetch_size, DROP async_capable,
                                         SET table_name 't1');
ALTER FOREIGN TABLE afdw_opt_ft ALTER COLUMN a OPTIONS (DROP column_name);
SELECT afdw_opt_sorted(ftoptions) FROM pg_foreign_table
  WHERE ftrelid = 'afdw_opt_ft'::regclass;
SELECT attname, attfdwoptions FROM pg_attribute
  WHERE attrelid = 'afdw_opt_ft'::regclass AND attnum > 0 ORDER BY attnum;
DROP FOREIGN TABLE afdw_opt_ft;

-- The options take effect.  A server like loopback, with its own
-- application_name and keep_connections off, so that its connection is
-- closed at the end of each transaction; a table on it whose columns have
-- other remote names, read in batches of 3 rows without async.
DO $$
BEGIN
  EXECUTE (SELECT format('CREATE SERVER afdw_opt_loop FOREIGN DATA WRAPPER async_fdw
                          OPTIONS (%s, application_name %L, keep_connections %L)',
                         string_agg(format('%I %L', split_part(o, '=', 1),
                                           substr(o, strpos(o, '=') + 1)), ', '),
                         'afdw_options_test', 'off')
             FROM pg_foreign_server, unnest(srvoptions) o
            WHERE srvname = 'loopback'
              AND split_part(o, '=', 1) IN ('host', 'port', 'dbname'));
END
$$;
CREATE USER MAPPING FOR CURRENT_USER SERVER afdw_opt_loop;
CREATE FOREIGN TABLE afdw_opt_ft2 (
    k int OPTIONS (column_name 'id'),
    val text OPTIONS (column_name 'v'),
    num numeric OPTIONS (column_name 'n'))
  SERVER afdw_opt_loop
  OPTIONS (schema_name 'remote', table_name 't1', fetch_size '3',
           async_capable 'false');
BEGIN;
SELECT k, val, num FROM afdw_opt_ft2 WHERE k <= 7 ORDER BY k;
SELECT (SELECT count(*) FROM afdw_opt_ft2 f JOIN remote.t1 r
          ON f.k = r.id AND f.val = r.v AND f.num = r.n) AS matching,
       (SELECT count(*) FROM remote.t1) AS remote_rows;
-- The remote session carries the server's application_name.
SELECT count(*) FROM pg_stat_activity WHERE application_name = 'afdw_options_test';
COMMIT;
-- After the transaction, the remote session goes away (waiting up to 30s
-- for it to exit).
DO $$
DECLARE
  n int;
BEGIN
  FOR i IN 1 .. 300 LOOP
    PERFORM pg_stat_clear_snapshot();
    SELECT count(*) INTO n FROM pg_stat_activity
     WHERE application_name = 'afdw_options_test';
    EXIT WHEN n = 0;
    PERFORM pg_sleep(0.1);
  END LOOP;
  RAISE NOTICE 'remote sessions left: %', n;
END
$$;
-- A column_name that does not exist remotely fails in the remote query.
ALTER FOREIGN TABLE afdw_opt_ft2 ALTER COLUMN val OPTIONS (SET column_name 'nosuch');
\set VERBOSITY terse
SELECT val FROM afdw_opt_ft2 WHERE k = 1;
\set VERBOSITY default
ALTER FOREIGN TABLE afdw_opt_ft2 ALTER COLUMN val OPTIONS (SET column_name 'v');
SELECT val FROM afdw_opt_ft2 WHERE k = 1;
DROP FOREIGN TABLE afdw_opt_ft2;
DROP USER MAPPING FOR CURRENT_USER SERVER afdw_opt_loop;
DROP SERVER afdw_opt_loop;

--
-- The wrapper itself takes no options.
--
ALTER FOREIGN DATA WRAPPER async_fdw OPTIONS (x 'y');
\set VERBOSITY terse
ALTER FOREIGN DATA WRAPPER async_fdw OPTIONS (ADD fetch_size '10');
ALTER FOREIGN DATA WRAPPER async_fdw OPTIONS (ADD host 'h');
\set VERBOSITY default
SELECT afdw_opt_try('ALTER FOREIGN DATA WRAPPER async_fdw OPTIONS (x ''y'')');
SELECT fdwoptions FROM pg_foreign_data_wrapper WHERE fdwname = 'async_fdw';

--
-- Clean up.
--
DROP USER MAPPING FOR CURRENT_USER SERVER afdw_opt_srv;
DROP SERVER afdw_opt_srv;
DROP FUNCTION afdw_opt_try(text);
DROP FUNCTION afdw_opt_sorted(text[]);
SELECT srvname FROM pg_foreign_server ORDER BY 1;
SELECT count(*) FROM pg_roles WHERE rolname = 'regress_afdw_user';

--
-- max_connections is bounded: each scan start walks the pool's slots.
--
CREATE SERVER afdw_opt_maxconn FOREIGN DATA WRAPPER async_fdw
  OPTIONS (max_connections '256');
ALTER SERVER afdw_opt_maxconn OPTIONS (SET max_connections '1');
ALTER SERVER afdw_opt_maxconn OPTIONS (SET max_connections '257');
ALTER SERVER afdw_opt_maxconn OPTIONS (SET max_connections '2147483647');
CREATE SERVER afdw_opt_maxconn2 FOREIGN DATA WRAPPER async_fdw
  OPTIONS (max_connections '1000000');
SELECT srvname, srvoptions FROM pg_foreign_server
  WHERE srvname LIKE 'afdw_opt_maxconn%';
DROP SERVER afdw_opt_maxconn;

--
-- A bad option value fails with the SQLSTATE postgres_fdw 15 gives it, so
-- that code catching these errors keeps working after a switch of wrapper.
-- Each case runs through both wrappers side by side; "same" must be true.
--
SELECT NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'postgres_fdw')
  AS afdw_opt_drop_pgfdw \gset
CREATE EXTENSION IF NOT EXISTS postgres_fdw;
-- The SQLSTATE of CMD's error, or "ok"; a CMD that succeeds is undone, so
-- each case starts from the same objects.
CREATE FUNCTION afdw_opt_state(cmd text) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE cmd;
  RAISE EXCEPTION USING ERRCODE = 'ZZ001';
EXCEPTION WHEN others THEN
  RETURN CASE WHEN SQLSTATE = 'ZZ001' THEN 'ok' ELSE SQLSTATE END;
END
$$;
-- One statement per kind of object; %1$s is the wrapper, %2$s its prefix.
CREATE FUNCTION afdw_opt_cmd(kind text, fdw text, opt text, val text)
RETURNS text LANGUAGE sql AS $$
  SELECT format(CASE kind
    WHEN 'server' THEN
      'CREATE SERVER afdw_opt_cmp_new FOREIGN DATA WRAPPER %1$s OPTIONS (%3$I %4$L)'
    WHEN 'alter server' THEN
      'ALTER SERVER afdw_opt_cmp_%2$s OPTIONS (ADD %3$I %4$L)'
    WHEN 'table' THEN
      'ALTER FOREIGN TABLE afdw_opt_cmp_%2$s_ft OPTIONS (ADD %3$I %4$L)'
    WHEN 'column' THEN
      'ALTER FOREIGN TABLE afdw_opt_cmp_%2$s_ft ALTER COLUMN c OPTIONS (ADD %3$I %4$L)'
    WHEN 'user mapping' THEN
      'CREATE USER MAPPING FOR regress_afdw_opt_cmp SERVER afdw_opt_cmp_%2$s OPTIONS (%3$I %4$L)'
    END, fdw, CASE fdw WHEN 'async_fdw' THEN 'a' ELSE 'p' END, opt, val)
$$;
CREATE SERVER afdw_opt_cmp_a FOREIGN DATA WRAPPER async_fdw;
CREATE SERVER afdw_opt_cmp_p FOREIGN DATA WRAPPER postgres_fdw;
CREATE FOREIGN TABLE afdw_opt_cmp_a_ft (c int) SERVER afdw_opt_cmp_a;
CREATE FOREIGN TABLE afdw_opt_cmp_p_ft (c int) SERVER afdw_opt_cmp_p;
CREATE ROLE regress_afdw_opt_cmp;
GRANT USAGE ON FOREIGN SERVER afdw_opt_cmp_a TO regress_afdw_opt_cmp;
GRANT USAGE ON FOREIGN SERVER afdw_opt_cmp_p TO regress_afdw_opt_cmp;
CREATE TEMP TABLE afdw_opt_cases (n serial, kind text, opt text, val text);
INSERT INTO afdw_opt_cases (kind, opt, val) VALUES
  ('server', 'fetch_size', '0'),
  ('server', 'fetch_size', '-5'),
  ('server', 'fetch_size', 'abc'),
  ('server', 'fetch_size', '1099511627776'),
  ('server', 'fetch_size', ''),
  ('alter server', 'fetch_size', '0'),
  ('alter server', 'fetch_size', 'abc'),
  ('table', 'fetch_size', '0'),
  ('table', 'fetch_size', '-5'),
  ('table', 'fetch_size', 'abc'),
  ('table', 'fetch_size', '1099511627776'),
  ('server', 'async_capable', 'maybe'),
  ('server', 'async_capable', ''),
  ('table', 'async_capable', 'maybe'),
  ('server', 'keep_connections', 'maybe'),
  ('alter server', 'keep_connections', '2'),
  ('user mapping', 'password_required', 'maybe'),
  ('server', 'fdw_startup_cost', '-1'),
  ('server', 'fdw_startup_cost', 'abc'),
  ('server', 'fdw_startup_cost', 'NaN'),
  ('server', 'fdw_tuple_cost', '-0.5'),
  ('server', 'fdw_tuple_cost', '1e400'),
  ('server', 'extensions', 'plpgsql,,plpgsql'),
  ('server', 'extensions', '"plpgsql'),
  ('server', 'no_such_option', '1'),
  ('server', 'column_name', 'c'),
  ('table', 'no_such_option', '1'),
  ('table', 'keep_connections', 'on'),
  ('column', 'no_such_option', '1'),
  ('column', 'table_name', 't'),
  ('user mapping', 'no_such_option', '1'),
  ('user mapping', 'fetch_size', '10'),
  -- Good values, for contrast.
  ('server', 'fetch_size', '100'),
  ('table', 'schema_name', 's'),
  ('column', 'column_name', 'c');
SELECT kind, opt, quote_literal(val) AS val,
       afdw_opt_state(afdw_opt_cmd(kind, 'postgres_fdw', opt, val)) AS postgres_fdw,
       afdw_opt_state(afdw_opt_cmd(kind, 'async_fdw', opt, val)) AS async_fdw,
       afdw_opt_state(afdw_opt_cmd(kind, 'postgres_fdw', opt, val)) =
       afdw_opt_state(afdw_opt_cmd(kind, 'async_fdw', opt, val)) AS same
  FROM afdw_opt_cases ORDER BY n;
-- A non-superuser may not turn password_required off: 42501 in both.
SET ROLE regress_afdw_opt_cmp;
SELECT afdw_opt_state(afdw_opt_cmd('user mapping', 'postgres_fdw', 'password_required', 'false'))
         AS postgres_fdw,
       afdw_opt_state(afdw_opt_cmd('user mapping', 'async_fdw', 'password_required', 'false'))
         AS async_fdw;
RESET ROLE;
-- Options postgres_fdw does not have: a word outside the set is 42601, as a
-- bad Boolean; an integer that does not parse or is out of range is 22023, as
-- a bad fetch_size.
SELECT opt, quote_literal(val) AS val,
       afdw_opt_state(afdw_opt_cmd('server', 'async_fdw', opt, val)) AS async_fdw
  FROM (VALUES ('fetch_mode', 'fast'), ('fetch_mode', ''),
               ('max_connections', '0'), ('max_connections', '257'),
               ('max_connections', 'many'), ('max_connections', '1099511627776'))
       v(opt, val);
-- The message still names the option and the value.
\set VERBOSITY terse
ALTER SERVER afdw_opt_cmp_a OPTIONS (ADD keep_connections 'maybe');
ALTER SERVER afdw_opt_cmp_a OPTIONS (ADD extensions 'plpgsql,,plpgsql');
\set VERBOSITY default
DROP TABLE afdw_opt_cases;
DROP FOREIGN TABLE afdw_opt_cmp_a_ft, afdw_opt_cmp_p_ft;
DROP SERVER afdw_opt_cmp_a;
DROP SERVER afdw_opt_cmp_p;
DROP ROLE regress_afdw_opt_cmp;
DROP FUNCTION afdw_opt_state(text);
DROP FUNCTION afdw_opt_cmd(text, text, text, text);
\if :afdw_opt_drop_pgfdw
DROP EXTENSION postgres_fdw;
\endif

-- idle_connections takes what max_connections takes; idle_timeout a number
-- of milliseconds from 0.  (22023, as for a bad fetch_size.)
\set VERBOSITY sqlstate
CREATE SERVER afdw_opt_bad FOREIGN DATA WRAPPER async_fdw OPTIONS (idle_connections '0');
CREATE SERVER afdw_opt_bad FOREIGN DATA WRAPPER async_fdw OPTIONS (idle_connections '257');
CREATE SERVER afdw_opt_bad FOREIGN DATA WRAPPER async_fdw OPTIONS (idle_timeout '-1');
CREATE SERVER afdw_opt_bad FOREIGN DATA WRAPPER async_fdw OPTIONS (idle_timeout '1s');
CREATE SERVER afdw_opt_bad FOREIGN DATA WRAPPER async_fdw OPTIONS (idle_timeout '');
\set VERBOSITY default
CREATE SERVER afdw_opt_bad FOREIGN DATA WRAPPER async_fdw OPTIONS (idle_timeout '2147483648');
CREATE SERVER afdw_opt_idle FOREIGN DATA WRAPPER async_fdw
  OPTIONS (idle_connections '256', idle_timeout '0');
ALTER SERVER afdw_opt_idle OPTIONS (SET idle_connections '1', SET idle_timeout '2147483647');
DROP SERVER afdw_opt_idle;

-- use_scram_passthrough (postgres_fdw 18's), on a server or a user mapping:
-- a boolean from PostgreSQL 18 on (test/t/019_scram_passthrough.pl uses
-- it); refused before, 0A000 with the version it needs.  The keys it
-- passes are not options on any version.
CREATE SERVER afdw_opt_scram FOREIGN DATA WRAPPER async_fdw;
CREATE FUNCTION afdw_opt_scram(cmd text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE cmd;
  RETURN CASE WHEN current_setting('server_version_num')::int >= 180000
              THEN 'as expected' ELSE 'accepted before 18' END;
EXCEPTION WHEN OTHERS THEN
  IF current_setting('server_version_num')::int < 180000 AND SQLSTATE = '0A000'
     AND SQLERRM = 'option "use_scram_passthrough" requires PostgreSQL 18 or later' THEN
    RETURN 'as expected';
  END IF;
  RETURN SQLSTATE || ': ' || SQLERRM;
END
$$;
SELECT afdw_opt_scram('ALTER SERVER afdw_opt_scram OPTIONS (ADD use_scram_passthrough ''true'')') AS server,
       afdw_opt_scram('CREATE USER MAPPING FOR CURRENT_USER SERVER afdw_opt_scram
                       OPTIONS (use_scram_passthrough ''false'')') AS mapping;
\set VERBOSITY sqlstate
CREATE SERVER afdw_opt_bad FOREIGN DATA WRAPPER async_fdw OPTIONS (use_scram_passthrough 'maybe');
\set VERBOSITY terse
ALTER SERVER afdw_opt_scram OPTIONS (ADD scram_client_key 'x');
ALTER SERVER afdw_opt_scram OPTIONS (ADD scram_server_key 'x');
\set VERBOSITY default
DROP FUNCTION afdw_opt_scram(text);
SET client_min_messages = warning;
DROP SERVER afdw_opt_scram CASCADE;
RESET client_min_messages;
