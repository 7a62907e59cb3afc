/* async_fdw--1.2--1.3.sql: update of async_fdw 1.2 to 1.3, whether a connection's server can prepare */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION async_fdw UPDATE TO '1.3'" to load this file. \quit

-- async_fdw_get_connections gains can_prepare: whether the server of the
-- connection takes PREPARE TRANSACTION (its max_prepared_transactions is
-- not 0), NULL until the session has found out.  Under two_phase_commit
-- auto, a transaction that wrote to a server that cannot prepare commits
-- as postgres_fdw does.  A function's columns cannot change in place.
DROP FUNCTION async_fdw_get_connections ();
CREATE FUNCTION async_fdw_get_connections (
    OUT server_name text,
    OUT valid boolean,
    OUT user_name text,
    OUT slot integer,
    OUT in_use boolean,
    OUT mode text,
    OUT remote_pid integer,
    OUT opened_at timestamptz,
    OUT can_prepare boolean)
RETURNS SETOF record
AS 'MODULE_PATHNAME'
LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;
