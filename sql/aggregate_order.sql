--
-- aggregate_order: aggregates with DISTINCT or ORDER BY inside, and the
-- ordered-set and hypothetical-set aggregates (WITHIN GROUP), computed by
-- the remote server whole, the groups sorted remotely by such an
-- aggregate's result.  Every result is compared, in order, with the same
-- query on the remote table itself.
--
CREATE TABLE remote.ao1 (id int, g int, a int, t text, v varchar(10));
INSERT INTO remote.ao1
  SELECT x, x % 4, CASE WHEN x % 7 = 0 THEN NULL ELSE (x * 37) % 23 END,
         't' || (x % 9), 'v' || (x % 5)
    FROM generate_series(1, 120) x;
CREATE FOREIGN TABLE ao1 (id int, g int, a int, t text, v varchar(10))
  SERVER loopback OPTIONS (schema_name 'remote', table_name 'ao1');
ANALYZE ao1;

-- 1. ORDER BY inside the aggregate, the groups sorted by its array.
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT array_agg(a ORDER BY a DESC), g FROM ao1 WHERE id < 40 GROUP BY g ORDER BY 1;
SELECT rows_in_order($$SELECT array_agg(a ORDER BY a DESC), g FROM ao1 WHERE id < 40 GROUP BY g ORDER BY 1$$,
               $$SELECT array_agg(a ORDER BY a DESC), g FROM remote.ao1 WHERE id < 40 GROUP BY g ORDER BY 1$$);
-- A column ordered by another.
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT g, array_agg(t ORDER BY id DESC) FROM ao1 WHERE id < 30 GROUP BY g ORDER BY 2 DESC;
SELECT rows_in_order($$SELECT g, array_agg(t ORDER BY id DESC) FROM ao1 WHERE id < 30 GROUP BY g ORDER BY 2 DESC$$,
               $$SELECT g, array_agg(t ORDER BY id DESC) FROM remote.ao1 WHERE id < 30 GROUP BY g ORDER BY 2 DESC$$);

-- 2. DISTINCT, and DISTINCT with ORDER BY, NULLs last or first.
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT array_agg(DISTINCT a % 5) FROM ao1 GROUP BY g ORDER BY 1;
SELECT rows_in_order($$SELECT array_agg(DISTINCT a % 5) FROM ao1 GROUP BY g ORDER BY 1$$,
               $$SELECT array_agg(DISTINCT a % 5) FROM remote.ao1 GROUP BY g ORDER BY 1$$);
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT array_agg(DISTINCT a % 5 ORDER BY a % 5 DESC NULLS LAST) FROM ao1 GROUP BY g ORDER BY 1;
SELECT rows_in_order($$SELECT array_agg(DISTINCT a % 5 ORDER BY a % 5 DESC NULLS LAST) FROM ao1 GROUP BY g ORDER BY 1$$,
               $$SELECT array_agg(DISTINCT a % 5 ORDER BY a % 5 DESC NULLS LAST) FROM remote.ao1 GROUP BY g ORDER BY 1$$);
SELECT rows_in_order($$SELECT array_agg(DISTINCT a % 5 ORDER BY a % 5 NULLS FIRST) FROM ao1 GROUP BY g ORDER BY 1 DESC$$,
               $$SELECT array_agg(DISTINCT a % 5 ORDER BY a % 5 NULLS FIRST) FROM remote.ao1 GROUP BY g ORDER BY 1 DESC$$);

-- 3. Ordered-set aggregates with their direct arguments, FILTER, HAVING.
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT g, percentile_cont(g / 10::numeric) WITHIN GROUP (ORDER BY a),
         percentile_disc(0.5) WITHIN GROUP (ORDER BY t DESC),
         mode() WITHIN GROUP (ORDER BY v) FILTER (WHERE id > 10)
    FROM ao1 GROUP BY g
    HAVING percentile_cont(0.25) WITHIN GROUP (ORDER BY id) < 100 ORDER BY g;
SELECT rows_in_order($$SELECT g, percentile_cont(g / 10::numeric) WITHIN GROUP (ORDER BY a),
         percentile_disc(0.5) WITHIN GROUP (ORDER BY t DESC),
         mode() WITHIN GROUP (ORDER BY v) FILTER (WHERE id > 10)
    FROM ao1 GROUP BY g
    HAVING percentile_cont(0.25) WITHIN GROUP (ORDER BY id) < 100 ORDER BY g$$,
               $$SELECT g, percentile_cont(g / 10::numeric) WITHIN GROUP (ORDER BY a),
         percentile_disc(0.5) WITHIN GROUP (ORDER BY t DESC),
         mode() WITHIN GROUP (ORDER BY v) FILTER (WHERE id > 10)
    FROM remote.ao1 GROUP BY g
    HAVING percentile_cont(0.25) WITHIN GROUP (ORDER BY id) < 100 ORDER BY g$$);
-- An array of fractions (a direct argument), an ungrouped aggregate.
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT percentile_disc(ARRAY[0.1, 0.5, 0.9]) WITHIN GROUP (ORDER BY a NULLS FIRST) FROM ao1;
SELECT rows_in_order($$SELECT percentile_disc(ARRAY[0.1, 0.5, 0.9]) WITHIN GROUP (ORDER BY a NULLS FIRST) FROM ao1$$,
               $$SELECT percentile_disc(ARRAY[0.1, 0.5, 0.9]) WITHIN GROUP (ORDER BY a NULLS FIRST) FROM remote.ao1$$);

-- 4. Hypothetical-set aggregates, of one and of several arguments.
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT g, rank(10) WITHIN GROUP (ORDER BY a), dense_rank('t3', 5) WITHIN GROUP (ORDER BY t, a DESC)
    FROM ao1 GROUP BY g ORDER BY g;
SELECT rows_in_order($$SELECT g, rank(10) WITHIN GROUP (ORDER BY a), dense_rank('t3', 5) WITHIN GROUP (ORDER BY t, a DESC)
    FROM ao1 GROUP BY g ORDER BY g$$,
               $$SELECT g, rank(10) WITHIN GROUP (ORDER BY a), dense_rank('t3', 5) WITHIN GROUP (ORDER BY t, a DESC)
    FROM remote.ao1 GROUP BY g ORDER BY g$$);
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT id, rank(id, g) WITHIN GROUP (ORDER BY id, g) FROM ao1 GROUP BY id, g HAVING id = 6 ORDER BY 1;
SELECT rows_in_order($$SELECT id, rank(id, g) WITHIN GROUP (ORDER BY id, g) FROM ao1 GROUP BY id, g HAVING id = 6 ORDER BY 1$$,
               $$SELECT id, rank(id, g) WITHIN GROUP (ORDER BY id, g) FROM remote.ao1 GROUP BY id, g HAVING id = 6 ORDER BY 1$$);

-- 5. Stay local: a collation but the default inside the aggregate.
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT g, percentile_disc(0.5) WITHIN GROUP (ORDER BY t COLLATE "C") FROM ao1 GROUP BY g;
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT g, array_agg(t ORDER BY t COLLATE "C") FROM ao1 GROUP BY g;
-- A WITHIN GROUP sorted by another operator than its type's default ASC or
-- DESC stays local; an ORDER BY inside a plain aggregate is sent with USING.
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT g, percentile_disc(0.5) WITHIN GROUP (ORDER BY t USING ~<~) FROM ao1 GROUP BY g;
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT g, array_agg(t ORDER BY t USING ~>~) FROM ao1 GROUP BY g;
SELECT rows_in_order($$SELECT g, array_agg(t ORDER BY t USING ~>~) FROM ao1 GROUP BY g ORDER BY g$$,
               $$SELECT g, array_agg(t ORDER BY t USING ~>~) FROM remote.ao1 GROUP BY g ORDER BY g$$);

-- 6. Never partial: over a partitioned table with async_fdw partitions
-- the ordered-set aggregate is computed locally (both partitions read
-- the same remote table).
CREATE TABLE ao (id int, g int, a int, t text, v varchar(10)) PARTITION BY RANGE (id);
CREATE FOREIGN TABLE ao_p1 PARTITION OF ao FOR VALUES FROM (1) TO (61)
  SERVER loopback OPTIONS (schema_name 'remote', table_name 'ao1');
CREATE FOREIGN TABLE ao_p2 PARTITION OF ao FOR VALUES FROM (61) TO (1000)
  SERVER loopback2 OPTIONS (schema_name 'remote', table_name 'ao1');
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT g, percentile_cont(0.5) WITHIN GROUP (ORDER BY a), array_agg(DISTINCT g) FROM ao GROUP BY g ORDER BY g;
SELECT rows_in_order($$SELECT g, percentile_cont(0.5) WITHIN GROUP (ORDER BY a), array_agg(DISTINCT g) FROM ao GROUP BY g ORDER BY g$$,
               $$SELECT g, percentile_cont(0.5) WITHIN GROUP (ORDER BY a), array_agg(DISTINCT g)
                   FROM (SELECT * FROM remote.ao1 UNION ALL SELECT * FROM remote.ao1) s GROUP BY g ORDER BY g$$);

DROP TABLE ao;
DROP FOREIGN TABLE ao1;
DROP TABLE remote.ao1;
