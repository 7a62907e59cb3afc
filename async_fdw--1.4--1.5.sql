/* async_fdw--1.4--1.5.sql: update of async_fdw 1.4 to 1.5, a check of a replicated table's copies */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION async_fdw UPDATE TO '1.5'" to load this file. \quit

-- async_fdw_check_copies: for a foreign table with option copies, a row
-- for each server of its copies that lacks the remote table, one of its
-- columns, or has a column of another type; no row when they agree.
CREATE FUNCTION async_fdw_check_copies (
    IN foreign_table regclass,
    OUT server_name text,
    OUT column_name text,
    OUT local_type text,
    OUT remote_type text,
    OUT problem text)
RETURNS SETOF record
AS 'MODULE_PATHNAME'
LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;
