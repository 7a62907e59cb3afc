--
-- prepared: parameterized scans (the inner side of a nested loop) run a
-- statement prepared once per remote session, with a LIMIT of
-- fetch_size + 1 rows; a rescan past it runs again with a cursor
--
CREATE TABLE remote.pr (id int, grp int, v text);
INSERT INTO remote.pr SELECT g, g % 10, 'v' || g FROM generate_series(1, 2000) g;
INSERT INTO remote.pr VALUES (0, NULL, 'null group');
CREATE VIEW remote.pr_q AS SELECT p.*, current_query() AS q FROM remote.pr p;
CREATE FOREIGN TABLE ft_pr (id int, grp int, v text, q text) SERVER loopback
  OPTIONS (schema_name 'remote', table_name 'pr_q', fetch_size '50');
CREATE TABLE pr_keys (k int);
INSERT INTO pr_keys VALUES (1), (7), (42), (1999), (NULL), (3000);
ANALYZE pr_keys;
SET enable_hashjoin = off;
SET enable_mergejoin = off;
SET enable_material = off;
SET enable_memoize = off;

-- Lookups: the first rescan prepares the statement, the others execute it.
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT k, id, v FROM pr_keys JOIN ft_pr ON id = k;
SELECT k, id, v, regexp_replace(q, 'afdw_s\d+', 'afdw_sN', 'g') AS remote_query
  FROM pr_keys JOIN ft_pr ON id = k ORDER BY k;
SELECT k, id, v FROM pr_keys JOIN remote.pr ON id = k ORDER BY k;
-- In a later transaction of the session, the statement is still there.
SELECT k, id, v, q LIKE '%PREPARE%' AS prepared_again
  FROM pr_keys JOIN ft_pr ON id = k ORDER BY k;

-- A rescan with more rows than fetch_size overflows the LIMIT: it runs
-- again with a cursor, and so do the later rescans; every row is there.
CREATE TABLE pr_groups (g int);
INSERT INTO pr_groups VALUES (3), (NULL), (5);
ANALYZE pr_groups;
SELECT g, count(*), sum(id), bool_or(q LIKE '%DECLARE%') AS cursor
  FROM pr_groups JOIN ft_pr ON grp = g GROUP BY g ORDER BY g;
SELECT g, count(*), sum(id)
  FROM pr_groups JOIN remote.pr ON grp = g GROUP BY g ORDER BY g;

-- A remote table that changes under the prepared statement: the EXECUTE
-- fails once, and the next scan prepares the statement again.
CREATE TABLE remote.pr2 (id int, v text);
INSERT INTO remote.pr2 VALUES (1, 'one'), (7, 'seven');
CREATE FOREIGN TABLE ft_pr2 (id int, v text) SERVER loopback
  OPTIONS (schema_name 'remote', table_name 'pr2');
SELECT k, v FROM pr_keys JOIN ft_pr2 ON id = k ORDER BY k;
ALTER TABLE remote.pr2 ALTER COLUMN v TYPE varchar(10);
SELECT k, v FROM pr_keys JOIN ft_pr2 ON id = k ORDER BY k;
SELECT k, v FROM pr_keys JOIN ft_pr2 ON id = k ORDER BY k;
SELECT count(*) FROM afdw_remote_states() s WHERE s <> 'idle';

RESET enable_hashjoin;
RESET enable_mergejoin;
RESET enable_material;
RESET enable_memoize;
DROP FOREIGN TABLE ft_pr, ft_pr2;
DROP VIEW remote.pr_q;
DROP TABLE remote.pr, remote.pr2, pr_keys, pr_groups;
