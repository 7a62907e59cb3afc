/* async_fdw--1.0.sql: install script of async_fdw 1.0 */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION async_fdw" to load this file. \quit

CREATE FUNCTION async_fdw_handler()
RETURNS fdw_handler
AS 'MODULE_PATHNAME'
LANGUAGE C STRICT;

CREATE FUNCTION async_fdw_validator(text[], oid)
RETURNS void
AS 'MODULE_PATHNAME'
LANGUAGE C STRICT;

CREATE FOREIGN DATA WRAPPER async_fdw
  HANDLER async_fdw_handler
  VALIDATOR async_fdw_validator;

COMMENT ON FOREIGN DATA WRAPPER async_fdw
  IS 'foreign data wrapper for remote PostgreSQL servers with asynchronous, concurrent scans';
