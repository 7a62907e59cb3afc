/* async_fdw--1.5--1.6.sql: update of async_fdw 1.5 to 1.6, whether commits and reads of several servers are fenced */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION async_fdw UPDATE TO '1.6'" to load this file. \quit

-- async_fdw_get_connections gains commit_fence: whether the backend's
-- commits on several servers, and its reads of several servers, go through
-- the commit fence ('on'), or why not ('not preloaded': async_fdw is not
-- in shared_preload_libraries; 'turned off': async_fdw.atomic_visibility).
-- A function's columns cannot change in place.
DROP FUNCTION async_fdw_get_connections (boolean);
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
    OUT can_prepare boolean,
    OUT commit_fence text)
RETURNS SETOF record
AS 'MODULE_PATHNAME'
LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;
