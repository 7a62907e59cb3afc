/* async_fdw--1.3--1.4.sql: update of async_fdw 1.3 to 1.4, async_fdw_get_connections as postgres_fdw 18's */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION async_fdw UPDATE TO '1.4'" to load this file. \quit

-- async_fdw_get_connections takes postgres_fdw 18's argument and first
-- columns, in its order: check_conn (whether to check that each server
-- still holds its end, shown in closed), server_name, user_name, valid,
-- used_in_xact, closed and remote_backend_pid (1.3's remote_pid); then
-- async_fdw's own.  A function's columns cannot change in place.
DROP FUNCTION async_fdw_get_connections ();
CREATE FUNCTION async_fdw_get_connections (
    IN check_conn boolean DEFAULT false,
    OUT server_name text,
    OUT user_name text,
    OUT valid boolean,
    OUT used_in_xact boolean,
    OUT closed boolean,
    OUT remote_backend_pid integer,
    OUT slot integer,
    OUT in_use boolean,
    OUT mode text,
    OUT opened_at timestamptz,
    OUT can_prepare boolean)
RETURNS SETOF record
AS 'MODULE_PATHNAME'
LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;
