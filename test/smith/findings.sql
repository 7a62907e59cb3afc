--
-- test/smith/findings.sql: the internal errors (XX000) and remote errors
-- that sqlsmith's runs found, reduced, each beside the same expression
-- without async_fdw.  Run it as sqlsmith's role in each configuration:
--   PG_MAJOR=17 SMITH_SQL=test/smith/findings.sql SMITH_CONFIGS=auto:1 bash test/smith/run.sh
-- Every statement fails; the log shows with which SQLSTATE.
--
SET statement_timeout = '10s';

-- XX000 invalid INTERVAL typmod: 0x57 (PostgreSQL's AdjustIntervalForTypmod
-- for a typmod it cannot decode), with or without a foreign table.
SELECT pg_catalog.interval(interval '1 hour', 87);
SELECT pg_catalog.interval(iv, 87) FROM items WHERE iv IS NOT NULL LIMIT 1;

-- XX000 unrecognized interval typmod: 31 (the same function).
SELECT pg_catalog.interval(interval '1 hour', 31);
SELECT pg_catalog.interval((SELECT avg(iv) FROM items_p2), 31);

-- XX000 failed to find conversion function from unknown to text: a
-- subquery's column of type unknown (unknownin()) sorted in a window.
SELECT count(*) OVER (ORDER BY s.c1) FROM (SELECT pg_catalog.unknownin(NULL::cstring) AS c1) s;
SELECT count(*) OVER (ORDER BY s.c1)
FROM (SELECT pg_catalog.unknownin(NULL::cstring) AS c1 FROM v_items_dim) s;

-- XX000 unsupported object class: 0 (pg_identify_object_as_address of
-- class 0).
SELECT pg_catalog.pg_identify_object_as_address(0, 0, 0);

-- 42601 invalid range bound flags, raised on a shard when the condition is
-- shipped, and locally the same.
SELECT int4range(1, 2, 'view');
SELECT count(*) FROM items WHERE int4range(k, k, cname) <= int4range(k, k);

-- XX000 could not open relation with OID 0 (satisfies_hash_partition of
-- relation 0).
SELECT pg_catalog.satisfies_hash_partition(0, 4, 0, 1);

-- XX000 cache lookup failed for operator class 0, for text search
-- configuration 25.
SELECT pg_catalog.amvalidate(0);
SELECT pg_catalog.websearch_to_tsquery(25::regconfig, 'a');

-- async_fdw: 25P02 "current transaction is aborted" instead of the remote
-- error.  The UPDATE of events goes to every foreign partition at executor
-- start; events_2025's fails on shard2 (division by zero).  The RETURNING
-- subquery is run at the first row returned (by the local partition
-- events_old, or by events_2023_h0 on shard1), on shard2's connection, where
-- the remote transaction has already failed: the statement fails with
-- 25P02 before the UPDATE's own error is read.  postgres_fdw, and
-- async_fdw without the subquery, report 22012 division by zero.
BEGIN;
UPDATE events SET n = n / (CASE WHEN d >= '2025-01-01' AND d < '2026-01-01' THEN 0 ELSE 1 END)
RETURNING (SELECT grp FROM items_p2 LIMIT 1);
ROLLBACK;
-- The same without the local partition (pruned by the WHERE).
BEGIN;
UPDATE events SET n = n / (CASE WHEN d >= '2025-01-01' AND d < '2026-01-01' THEN 0 ELSE 1 END)
WHERE d >= '2023-01-01'
RETURNING (SELECT grp FROM items_p2 LIMIT 1);
ROLLBACK;
-- The same without the subquery: 22012, as expected.
BEGIN;
UPDATE events SET n = n / (CASE WHEN d >= '2025-01-01' AND d < '2026-01-01' THEN 0 ELSE 1 END)
RETURNING n;
ROLLBACK;
