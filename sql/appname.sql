--
-- appname: the application_name of remote sessions, from the server's
-- application_name option and the async_fdw.application_name setting, with
-- their % escapes, compared with postgres_fdw's
--
CREATE EXTENSION IF NOT EXISTS postgres_fdw;
SET application_name = 'appname_test';

-- What the remote session shows in pg_stat_activity.
CREATE VIEW remote.my_activity AS
  SELECT application_name AS app FROM pg_stat_activity
  WHERE pid = pg_backend_pid();
CALL afdw_test_server('app_afdw', options => 'fdw_startup_cost ''100''');
CALL afdw_test_server('app_pgfdw', 'postgres_fdw', 'fdw_startup_cost ''100''');
CREATE USER MAPPING FOR CURRENT_USER SERVER app_afdw;
CREATE USER MAPPING FOR CURRENT_USER SERVER app_pgfdw;

-- The setting (defined once async_fdw is loaded, here by the validator):
-- empty by default, for any user.
SHOW async_fdw.application_name;
SELECT name, setting, context, vartype FROM pg_settings
  WHERE name = 'async_fdw.application_name';

CREATE FOREIGN TABLE app_afdw (app text)
  SERVER app_afdw OPTIONS (schema_name 'remote', table_name 'my_activity');
CREATE FOREIGN TABLE app_pgfdw (app text)
  SERVER app_pgfdw OPTIONS (schema_name 'remote', table_name 'my_activity');

-- The values of this session that the escapes stand for, masked so that
-- the output does not depend on them (the wrappers' own names are left
-- alone: the user may well be called postgres).
CREATE FUNCTION app_mask(app text) RETURNS text LANGUAGE sql AS $$
  SELECT CASE WHEN app IN ('async_fdw', 'postgres_fdw') THEN app ELSE
         replace(replace(replace(replace(app,
           (SELECT to_hex(trunc(extract(epoch FROM backend_start))::bigint) || '.' ||
                   to_hex(pid)
              FROM pg_stat_activity WHERE pid = pg_backend_pid()), '<session>'),
           pg_backend_pid()::text, '<pid>'),
           current_database(), '<db>'),
           session_user, '<user>') END
$$;

-- One case: give both servers the application_name option SRVOPT (none if
-- NULL) and both wrappers' settings SETTING, make both open new
-- connections (an ALTER SERVER drops the old ones), and show what the
-- remote sessions of async_fdw and postgres_fdw are called.
CREATE FUNCTION app_case(srvopt text, setting text,
                         OUT afdw text, OUT pgfdw text) LANGUAGE plpgsql AS $$
DECLARE
  srv text;
BEGIN
  PERFORM set_config('async_fdw.application_name', setting, true);
  PERFORM set_config('postgres_fdw.application_name', setting, true);
  FOREACH srv IN ARRAY ARRAY['app_afdw', 'app_pgfdw'] LOOP
    IF EXISTS (SELECT FROM pg_foreign_server
               WHERE srvname = srv
                 AND srvoptions::text LIKE '%application_name=%') THEN
      EXECUTE format('ALTER SERVER %I OPTIONS (DROP application_name)', srv);
    END IF;
    IF srvopt IS NOT NULL THEN
      EXECUTE format('ALTER SERVER %I OPTIONS (ADD application_name %L)', srv, srvopt);
    END IF;
    EXECUTE format('ALTER SERVER %I OPTIONS (SET fdw_startup_cost %L)', srv, '100');
  END LOOP;
  SELECT app_mask(app) INTO afdw FROM app_afdw;
  SELECT app_mask(app) INTO pgfdw FROM app_pgfdw;
END
$$;

-- Each case is a statement of its own: a connection that a transaction used
-- is only replaced after it.
-- Neither: each wrapper's own name.
SELECT * FROM app_case(NULL, '');
-- The server's option, with escapes of fixed value.
SELECT *, afdw = pgfdw AS same FROM app_case('srv_%u_%d_%%_end', '');
SELECT *, afdw = pgfdw AS same FROM app_case('%a', '');
-- The setting wins over the server's option.
SELECT *, afdw = pgfdw AS same FROM app_case('srv', 'set_%u_%a');
SELECT *, afdw = pgfdw AS same FROM app_case(NULL, 'set_%d_%%');
-- A setting empty once expanded gives way to the server's option, a
-- server option empty once expanded to the wrapper's name.
SELECT *, afdw = pgfdw AS same FROM app_case('srv', '%x');
SELECT * FROM app_case('%x%', '%');
-- Unknown escapes and a trailing % are dropped; there is no padding.
SELECT *, afdw = pgfdw AS same FROM app_case('a%xb%-10u|%5p|%Z|%', '');
-- The local process and session.
SELECT *, afdw = pgfdw AS same FROM app_case('p=%p;c=%c', '');
-- The remote server cuts the name at 63 bytes.
SELECT *, afdw = pgfdw AS same FROM app_case(repeat('abcdefghij', 8) || '%u', '');

-- %C: the cluster_name, empty unless set.
SELECT afdw = 'C=' || current_setting('cluster_name') || ';' AS cluster_ok,
       afdw = pgfdw AS same
  FROM app_case('C=%C;', '');

-- A change of the setting affects new connections only.
SELECT afdw FROM app_case('srv', 'first');
SELECT app FROM app_afdw;
SET async_fdw.application_name = 'second';
SELECT app FROM app_afdw;
ALTER SERVER app_afdw OPTIONS (SET fdw_startup_cost '100');
SELECT app FROM app_afdw;
RESET async_fdw.application_name;

-- Clean up.
DROP FUNCTION app_case(text, text);
DROP FUNCTION app_mask(text);
DROP FOREIGN TABLE app_afdw, app_pgfdw;
DROP USER MAPPING FOR CURRENT_USER SERVER app_afdw;
DROP USER MAPPING FOR CURRENT_USER SERVER app_pgfdw;
DROP SERVER app_afdw;
DROP SERVER app_pgfdw;
DROP VIEW remote.my_activity;
DROP EXTENSION postgres_fdw;
RESET application_name;
