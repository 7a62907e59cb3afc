--
-- orderby: ORDER BY sent to the remote server when it sorts exactly as the
-- local one would: a plain column of a built-in type, its type's default
-- operator class, the default collation.  Every ordered result is compared
-- with the same query on the local table holding the same rows.
--
CREATE TABLE remote.ob (id int, a int, t text, c text, n numeric, f float8);
INSERT INTO remote.ob
  SELECT g, CASE WHEN g % 7 = 0 THEN NULL ELSE (g * 37) % 101 END,
         CASE WHEN g % 11 = 0 THEN NULL ELSE 'x' || ((g * 13) % 50) END,
         CASE g % 4 WHEN 0 THEN 'a' WHEN 1 THEN 'B' WHEN 2 THEN 'b' ELSE 'A' END,
         CASE WHEN g % 5 = 0 THEN NULL ELSE (g * 0.37) % 9 END,
         CASE WHEN g % 13 = 0 THEN 'NaN'::float8 WHEN g % 17 = 0 THEN NULL
              ELSE ((g * 7) % 23) - 11.5 END
    FROM generate_series(1, 600) g;
CREATE TABLE ob_local AS SELECT * FROM remote.ob;
CREATE FOREIGN TABLE ob (id int, a int, t text, c text COLLATE "C", n numeric, f float8)
  SERVER loopback OPTIONS (schema_name 'remote', table_name 'ob');

-- Pushed: ascending and descending, NULLS FIRST and LAST, several keys.
EXPLAIN (VERBOSE, COSTS OFF) SELECT id, a FROM ob ORDER BY a, id;
EXPLAIN (VERBOSE, COSTS OFF) SELECT id, a, t FROM ob ORDER BY a DESC NULLS LAST, t NULLS FIRST, id DESC;
SELECT rows_in_order('SELECT id, a FROM ob ORDER BY a, id', 'SELECT id, a FROM ob_local ORDER BY a, id');
SELECT rows_in_order('SELECT id, a, t FROM ob ORDER BY a DESC NULLS LAST, t NULLS FIRST, id DESC',
               'SELECT id, a, t FROM ob_local ORDER BY a DESC NULLS LAST, t NULLS FIRST, id DESC');
SELECT rows_in_order('SELECT id, n, f FROM ob ORDER BY f DESC, n, id', 'SELECT id, n, f FROM ob_local ORDER BY f DESC, n, id');
SELECT rows_in_order('SELECT id, t FROM ob WHERE a > 50 ORDER BY t DESC, id', 'SELECT id, t FROM ob_local WHERE a > 50 ORDER BY t DESC, id');

-- The same in each fetch mode, the stream binary or text.
ALTER FOREIGN TABLE ob OPTIONS (ADD fetch_mode 'stream');
SELECT rows_in_order('SELECT id, a, n FROM ob ORDER BY a DESC, n, id', 'SELECT id, a, n FROM ob_local ORDER BY a DESC, n, id');
SELECT rows_in_order('SELECT id, t FROM ob ORDER BY t, id DESC', 'SELECT id, t FROM ob_local ORDER BY t, id DESC');
ALTER FOREIGN TABLE ob OPTIONS (SET fetch_mode 'cursor', ADD fetch_size '7');
SELECT rows_in_order('SELECT id, a, n FROM ob ORDER BY a DESC, n, id', 'SELECT id, a, n FROM ob_local ORDER BY a DESC, n, id');
ALTER FOREIGN TABLE ob OPTIONS (DROP fetch_mode, DROP fetch_size);

-- Under a LIMIT the remote server sorts, and the LIMIT replaces the local
-- Limit node (final_limit.sql).
EXPLAIN (VERBOSE, COSTS OFF) SELECT id, a FROM ob ORDER BY a DESC, id LIMIT 5;
SELECT id, a FROM ob ORDER BY a DESC, id LIMIT 5;
SELECT id, a FROM ob_local ORDER BY a DESC, id LIMIT 5;

-- The LIMIT and the OFFSET go to the remote server too when nothing
-- between the scan and the Limit can drop rows; no local Limit is left.
EXPLAIN (VERBOSE, COSTS OFF) SELECT id, a FROM ob ORDER BY a DESC, id LIMIT 5 OFFSET 3;
SELECT id, a FROM ob ORDER BY a DESC, id LIMIT 5 OFFSET 3;
SELECT id, a FROM ob_local ORDER BY a DESC, id LIMIT 5 OFFSET 3;
EXPLAIN (VERBOSE, COSTS OFF) SELECT id FROM ob WHERE a > 90 LIMIT 3;
SELECT count(*) FROM (SELECT id FROM ob WHERE a > 90 LIMIT 3) s;
ALTER FOREIGN TABLE ob OPTIONS (ADD fetch_mode 'stream');
SELECT rows_in_order('SELECT id, a, n FROM ob ORDER BY n DESC NULLS LAST, id LIMIT 17',
               'SELECT id, a, n FROM ob_local ORDER BY n DESC NULLS LAST, id LIMIT 17');
ALTER FOREIGN TABLE ob OPTIONS (DROP fetch_mode);
-- The LIMIT not sent (the ORDER BY still is where it can be): WITH TIES, a
-- condition checked locally, a join, row locks, a query with parameters, a
-- LIMIT that is a parameter, an order sorted locally.
EXPLAIN (VERBOSE, COSTS OFF) SELECT id, a FROM ob ORDER BY a DESC FETCH FIRST 5 ROWS WITH TIES;
SELECT count(*) FROM (SELECT id, a FROM ob ORDER BY a DESC NULLS LAST FETCH FIRST 5 ROWS WITH TIES) s;
SELECT count(*) FROM (SELECT id, a FROM ob_local ORDER BY a DESC NULLS LAST FETCH FIRST 5 ROWS WITH TIES) s;
EXPLAIN (VERBOSE, COSTS OFF) SELECT id, a FROM ob WHERE a::text::int > 3 ORDER BY a, id LIMIT 5;
EXPLAIN (VERBOSE, COSTS OFF) SELECT ob.id, l.a FROM ob JOIN ob_local l USING (id) ORDER BY ob.id LIMIT 5;
EXPLAIN (VERBOSE, COSTS OFF) SELECT id FROM ob ORDER BY id LIMIT 5 FOR UPDATE;
PREPARE ob_par(int) AS SELECT id, a FROM ob WHERE a > $1 ORDER BY a, id LIMIT 3;
SET plan_cache_mode = force_generic_plan;
EXPLAIN (VERBOSE, COSTS OFF) EXECUTE ob_par(50);
EXECUTE ob_par(50);
RESET plan_cache_mode;
DEALLOCATE ob_par;
SELECT id, a FROM ob_local WHERE a > 50 ORDER BY a, id LIMIT 3;
SELECT sum((SELECT id FROM ob WHERE ob.a > g ORDER BY a, id LIMIT 1)) FROM generate_series(1, 30) g;
SELECT sum((SELECT id FROM ob_local WHERE ob_local.a > g ORDER BY a, id LIMIT 1)) FROM generate_series(1, 30) g;
PREPARE ob_lim(int) AS SELECT id, a FROM ob ORDER BY a, id LIMIT $1;
SET plan_cache_mode = force_generic_plan;
EXPLAIN (VERBOSE, COSTS OFF) EXECUTE ob_lim(3);
EXECUTE ob_lim(3);
RESET plan_cache_mode;
DEALLOCATE ob_lim;
EXPLAIN (VERBOSE, COSTS OFF) SELECT id, a FROM ob ORDER BY a + 1, id LIMIT 5;

-- Sorted locally: a column with a collation other than the default, an
-- expression.  An operator other than the type's default ones, built in
-- (or of a listed extension: final_limit.sql), is sent with USING.
EXPLAIN (VERBOSE, COSTS OFF) SELECT id, c FROM ob ORDER BY c, id;
SELECT rows_in_order('SELECT id, c FROM ob ORDER BY c, id', 'SELECT id, c FROM ob_local ORDER BY c COLLATE "C", id');
EXPLAIN (VERBOSE, COSTS OFF) SELECT id, a FROM ob ORDER BY a + 1, id;
EXPLAIN (VERBOSE, COSTS OFF) SELECT id, t FROM ob ORDER BY t USING ~<~, id;
SELECT rows_in_order('SELECT id, t FROM ob ORDER BY t USING ~<~, id', 'SELECT id, t FROM ob_local ORDER BY t USING ~<~, id');

-- A partitioned table of foreign partitions: each partition sorts, a
-- Merge Append merges, and the partitions' queries start together.
CREATE VIEW remote.ob1 AS SELECT * FROM remote.ob WHERE id <= 200;
CREATE VIEW remote.ob2 AS SELECT * FROM remote.ob WHERE id > 200 AND id <= 400;
CREATE VIEW remote.ob3 AS SELECT * FROM remote.ob WHERE id > 400;
CREATE TABLE obp (id int, a int, t text) PARTITION BY RANGE (id);
CREATE FOREIGN TABLE obp1 PARTITION OF obp FOR VALUES FROM (1) TO (201)
  SERVER loopback OPTIONS (schema_name 'remote', table_name 'ob1');
CREATE FOREIGN TABLE obp2 PARTITION OF obp FOR VALUES FROM (201) TO (401)
  SERVER loopback OPTIONS (schema_name 'remote', table_name 'ob2');
CREATE FOREIGN TABLE obp3 PARTITION OF obp FOR VALUES FROM (401) TO (601)
  SERVER loopback2 OPTIONS (schema_name 'remote', table_name 'ob3');
EXPLAIN (VERBOSE, COSTS OFF) SELECT id, a FROM obp ORDER BY a, id;
SELECT rows_in_order('SELECT id, a FROM obp ORDER BY a, id', 'SELECT id, a FROM ob_local ORDER BY a, id');
SELECT rows_in_order('SELECT id, a, t FROM obp ORDER BY t DESC NULLS LAST, a, id',
               'SELECT id, a, t FROM ob_local ORDER BY t DESC NULLS LAST, a, id');
EXPLAIN (VERBOSE, COSTS OFF) SELECT id, a FROM obp ORDER BY a DESC, id LIMIT 4;
SELECT id, a FROM obp ORDER BY a DESC, id LIMIT 4;
SELECT id, a FROM ob_local ORDER BY a DESC, id LIMIT 4;

DROP TABLE obp;
DROP FOREIGN TABLE ob;
DROP TABLE ob_local;
DROP VIEW remote.ob1, remote.ob2, remote.ob3;
DROP TABLE remote.ob;
