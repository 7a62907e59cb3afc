--
-- mapping_isolation: the connections of different user mappings to one
-- server never share a remote transaction or a connection, also when a
-- scan of one mapping cannot join the snapshot of another's: each query
-- runs with its own mapping's remote user, as with postgres_fdw.
--
CREATE ROLE regress_map_a LOGIN;
CREATE ROLE regress_map_b LOGIN;
CREATE SCHEMA mi;
-- Many rows, each telling which remote user read it.
CREATE VIEW mi.who AS SELECT current_user::text AS u, g FROM generate_series(1, 20000) g;
GRANT USAGE ON SCHEMA mi TO regress_map_a, regress_map_b;
GRANT SELECT ON mi.who TO regress_map_a, regress_map_b;
CREATE FOREIGN TABLE ft_who (u text, g int)
  SERVER loopback OPTIONS (schema_name 'mi', table_name 'who', fetch_mode 'stream');
GRANT SELECT ON ft_who TO regress_map_a, regress_map_b;
CREATE USER MAPPING FOR regress_map_a SERVER loopback
  OPTIONS (user 'regress_map_a', password_required 'false');
CREATE USER MAPPING FOR regress_map_b SERVER loopback
  OPTIONS (user 'regress_map_b', password_required 'false');
-- Runs as regress_map_b, inside a query of regress_map_a.
CREATE FUNCTION mi.remote_user_of_b() RETURNS text LANGUAGE plpgsql
  SECURITY DEFINER AS $$ BEGIN RETURN (SELECT u FROM public.ft_who LIMIT 1); END $$;
ALTER FUNCTION mi.remote_user_of_b() OWNER TO regress_map_b;
GRANT EXECUTE ON FUNCTION mi.remote_user_of_b() TO regress_map_a;

-- The outer scan (regress_map_a's) streams and exported no snapshot when
-- the function's scan (regress_map_b's) starts: that scan opens its own
-- remote transaction on its own connection.
SET ROLE regress_map_a;
SELECT u AS outer_user, mi.remote_user_of_b() AS function_user FROM ft_who LIMIT 1;
BEGIN;
SELECT u AS outer_user, mi.remote_user_of_b() AS function_user FROM ft_who LIMIT 1;
COMMIT;
RESET ROLE;

DROP FUNCTION mi.remote_user_of_b();
DROP FOREIGN TABLE ft_who;
DROP USER MAPPING FOR regress_map_a SERVER loopback;
DROP USER MAPPING FOR regress_map_b SERVER loopback;
DROP SCHEMA mi CASCADE;
DROP ROLE regress_map_a;
DROP ROLE regress_map_b;
