/* async_fdw--1.0--1.1.sql: update of async_fdw 1.0 to 1.1, the operations functions and the connection budget */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION async_fdw UPDATE TO '1.1'" to load this file. \quit

-- They act on the calling backend's own connections only, so, as with
-- postgres_fdw's functions, every user may call them (no REVOKE).  PARALLEL
-- RESTRICTED: a parallel worker has connections of its own, not the
-- leader's.

CREATE FUNCTION async_fdw_get_connections (
    OUT server_name text,
    OUT valid boolean,
    OUT user_name text,
    OUT slot integer,
    OUT in_use boolean,
    OUT mode text,
    OUT remote_pid integer,
    OUT opened_at timestamptz)
RETURNS SETOF record
AS 'MODULE_PATHNAME'
LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION async_fdw_disconnect (server_name text)
RETURNS boolean
AS 'MODULE_PATHNAME'
LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION async_fdw_disconnect_all ()
RETURNS boolean
AS 'MODULE_PATHNAME'
LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;

-- The connection budget of each async_fdw server of the database, as all
-- backends use it: figures about the whole server, readable by everyone
-- as pg_stat_activity's counts are.
CREATE FUNCTION async_fdw_connection_budget (
    OUT server_name text,
    OUT budget integer,
    OUT held integer,
    OUT idle_expiring integer,
    OUT waiting integer)
RETURNS SETOF record
AS 'MODULE_PATHNAME'
LANGUAGE C STRICT VOLATILE PARALLEL SAFE;
