--
-- planner_nested: the planner hook keeps its state per planning, so a
-- planning nested in another (a function folded to a constant while the
-- outer query is planned, planning its own query through SPI) leaves the
-- outer planning's state, and the session's settings, as they were
--
CREATE TABLE remote.pn1 (id int, v int);
CREATE TABLE remote.pn2 (id int, v int);
INSERT INTO remote.pn1 SELECT g, g % 7 FROM generate_series(1, 50) g;
INSERT INTO remote.pn2 SELECT g, g % 7 FROM generate_series(51, 100) g;
CREATE TABLE pn (id int, v int) PARTITION BY RANGE (id);
CREATE FOREIGN TABLE pn_1 PARTITION OF pn FOR VALUES FROM (1) TO (51)
  SERVER loopback OPTIONS (schema_name 'remote', table_name 'pn1');
CREATE FOREIGN TABLE pn_2 PARTITION OF pn FOR VALUES FROM (51) TO (101)
  SERVER loopback2 OPTIONS (schema_name 'remote', table_name 'pn2');
-- A server that refuses connections; with use_remote_estimate, planning a
-- query over its table fails once the table is sized.
CREATE SERVER pn_refused FOREIGN DATA WRAPPER async_fdw
  OPTIONS (host '127.0.0.1', port '1', dbname 'none', use_remote_estimate 'true');
CREATE USER MAPPING FOR CURRENT_USER SERVER pn_refused;
CREATE FOREIGN TABLE pn_dead (id int, v int) SERVER pn_refused;
-- Folded while the outer query is planned: its own query is planned then.
CREATE FUNCTION pn_nested(k int) RETURNS int IMMUTABLE LANGUAGE plpgsql AS $$
BEGIN
  RETURN (SELECT count(*) FROM remote.pn1 WHERE id <= k);
END
$$;

SET enable_partitionwise_aggregate = off;
-- The hook turns partitionwise aggregation on for the outer query, and the
-- nested planning does not end that: each partition is aggregated remotely.
EXPLAIN (COSTS OFF)
  SELECT v, count(*) + pn_nested(3) FROM pn GROUP BY v ORDER BY v;
SELECT v, count(*) + pn_nested(3) FROM pn GROUP BY v ORDER BY v;
SHOW enable_partitionwise_aggregate;
-- The outer planning fails after the nested one ended and after the first
-- foreign partition was sized (a partition on the refused server): the
-- session's settings are still off afterwards.
ALTER TABLE pn ATTACH PARTITION pn_dead FOR VALUES FROM (101) TO (201);
SELECT v, count(*) + pn_nested(3) FROM pn GROUP BY v;
SHOW enable_partitionwise_aggregate;
-- The same without a nested planning.
SELECT v, count(*) FROM pn GROUP BY v;
SHOW enable_partitionwise_aggregate;
ALTER TABLE pn DETACH PARTITION pn_dead;
RESET enable_partitionwise_aggregate;

DROP FUNCTION pn_nested(int);
DROP FOREIGN TABLE pn_dead;
DROP USER MAPPING FOR CURRENT_USER SERVER pn_refused;
DROP SERVER pn_refused;
DROP TABLE pn;
DROP TABLE remote.pn1, remote.pn2;
