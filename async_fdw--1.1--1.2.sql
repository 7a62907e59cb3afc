/* async_fdw--1.1--1.2.sql: update of async_fdw 1.1 to 1.2, two-phase commit */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION async_fdw UPDATE TO '1.2'" to load this file. \quit

-- The remote transactions that two-phase commit prepared, one row per
-- remote transaction, written within the local transaction that prepared
-- them: a row exists exactly when that local transaction committed, which
-- is how recovery decides between COMMIT PREPARED and ROLLBACK PREPARED.
-- Only async_fdw writes it (as the table's owner); nobody else may, since a
-- row would commit a remote transaction.
CREATE TABLE async_fdw_prepared_xacts (
    gid text PRIMARY KEY,
    server_id oid NOT NULL,
    user_mapping_id oid NOT NULL,
    prepared_at timestamptz NOT NULL DEFAULT now()
);
REVOKE ALL ON async_fdw_prepared_xacts FROM PUBLIC;

-- Finds, on every async_fdw server, the remote transactions that this
-- database's two-phase commits prepared and that are still in doubt:
-- commits those whose local transaction committed, rolls back those whose
-- local transaction aborted, leaves those still in progress, and deletes
-- the rows it no longer needs.  With dry_run, only says what it would do.
-- For superusers: it acts on the remote transactions of every user.
CREATE FUNCTION async_fdw_recover_prepared_transactions (
    dry_run boolean DEFAULT false,
    server text DEFAULT NULL,
    OUT server_name text,
    OUT gid text,
    OUT local_state text,
    OUT action text)
RETURNS SETOF record
AS 'MODULE_PATHNAME'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE;
REVOKE ALL ON FUNCTION async_fdw_recover_prepared_transactions (boolean, text) FROM PUBLIC;
