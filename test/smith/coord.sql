--
-- test/smith/coord.sql: the coordinator's objects (run in database coord by
-- run.sh, with psql variables host and port of the shards' server).
--
-- Local reference tables ref_* hold the data; the same rows go through
-- async_fdw into the foreign tables and partitions on shard1 and shard2:
--   items      hash-partitioned, 4 foreign partitions (2 per shard)
--   events     range-partitioned: a local partition (before 2023), 2023
--              sub-partitioned by hash (one foreign partition per shard),
--              2024 on shard1, 2025 on shard2, a foreign default on shard2
--   orders     plain foreign table on shard1 (fetch_size 13, a renamed column)
--   customers  plain foreign table on shard2
--   dim_small  a small foreign table on shard1 (20 rows: its keys are sent)
--   dim_local  the same 20 rows in a local table
-- and views that join them on their keys, where the key filters apply,
-- aggregate them, or hold subqueries that may be shipped.  sqlsmith runs as
-- the role smith, which may read and write these (its statements are
-- rolled back) and nothing else: not the reference tables, so that its
-- statements go to async_fdw.
--
\set ON_ERROR_STOP on
CREATE EXTENSION async_fdw;
CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy');

CREATE SERVER shard1 FOREIGN DATA WRAPPER async_fdw
	OPTIONS (host :'host', port :'port', dbname 'shard1', fetch_mode 'auto',
		max_connections '4');
CREATE SERVER shard2 FOREIGN DATA WRAPPER async_fdw
	OPTIONS (host :'host', port :'port', dbname 'shard2', fetch_mode 'auto',
		max_connections '4');
-- The shards trust loopback connections: no password.
CREATE USER MAPPING FOR PUBLIC SERVER shard1
	OPTIONS (user 'smith', password_required 'false');
CREATE USER MAPPING FOR PUBLIC SERVER shard2
	OPTIONS (user 'smith', password_required 'false');

-- The reference data: every column type of the shards, NULLs in each.
CREATE TABLE ref_items (
	id bigint PRIMARY KEY,
	k integer,
	grp smallint,
	price numeric(12, 2),
	f8 double precision,
	f4 real,
	name text,
	tag varchar(20),
	code char(3),
	flag boolean,
	d date,
	ts timestamp,
	at timestamptz,
	iv interval,
	uid uuid,
	js jsonb,
	arr integer[],
	tags text[],
	ip inet,
	m mood,
	b bytea,
	cname text COLLATE "C"
);
INSERT INTO ref_items
SELECT g,
	CASE WHEN g % 13 = 0 THEN NULL ELSE (g * 7919) % 1000 END,
	CASE WHEN g % 17 = 0 THEN NULL ELSE g % 20 + 1 END,
	CASE WHEN g % 11 = 0 THEN NULL ELSE (g * 37) % 100000 / 100.0 END,
	CASE WHEN g % 19 = 0 THEN NULL WHEN g % 97 = 0 THEN 'NaN'::float8
		WHEN g % 89 = 0 THEN '-Infinity'::float8 ELSE round((sin(g) * 1000)::numeric, 3)::float8 END,
	CASE WHEN g % 23 = 0 THEN NULL ELSE (g % 1000) / 8.0 END,
	CASE WHEN g % 9 = 0 THEN NULL WHEN g % 61 = 0 THEN '' ELSE 'name ' || (g * 31) % 500 END,
	CASE WHEN g % 7 = 0 THEN NULL ELSE 'tag' || g % 50 END,
	CASE WHEN g % 29 = 0 THEN NULL ELSE chr(65 + g % 26) || chr(65 + g % 7) END,
	CASE WHEN g % 5 = 0 THEN NULL ELSE g % 3 = 0 END,
	CASE WHEN g % 31 = 0 THEN NULL ELSE date '2022-01-01' + (g * 3) % 1500 END,
	CASE WHEN g % 37 = 0 THEN NULL ELSE timestamp '2022-01-01' + g * interval '37 min 13 s' END,
	CASE WHEN g % 41 = 0 THEN NULL ELSE timestamptz '2022-01-01 00:00+00' + g * interval '63 min' END,
	CASE WHEN g % 43 = 0 THEN NULL ELSE (g % 100) * interval '1 hour' + (g % 7) * interval '1 day' END,
	CASE WHEN g % 47 = 0 THEN NULL ELSE md5(g::text)::uuid END,
	CASE WHEN g % 53 = 0 THEN NULL
		ELSE jsonb_build_object('g', g, 'even', g % 2 = 0, 'a', jsonb_build_array(g % 3, 'x' || g % 5)) END,
	CASE WHEN g % 59 = 0 THEN NULL
		ELSE ARRAY[g % 10, CASE WHEN g % 4 = 0 THEN NULL ELSE g % 7 END] END,
	CASE WHEN g % 67 = 0 THEN NULL ELSE ARRAY['t' || g % 4, 't' || g % 6] END,
	CASE WHEN g % 71 = 0 THEN NULL ELSE ('10.' || g % 256 || '.' || (g / 256) % 256 || '.1')::inet END,
	CASE WHEN g % 73 = 0 THEN NULL ELSE (ARRAY['sad', 'ok', 'happy'])[1 + g % 3]::mood END,
	CASE WHEN g % 79 = 0 THEN NULL ELSE decode(md5(g::text), 'hex') END,
	CASE WHEN g % 83 = 0 THEN NULL ELSE 'C' || g % 300 END
FROM generate_series(1, 4000) g;

CREATE TABLE ref_events (
	id bigint NOT NULL PRIMARY KEY,
	d date,
	kind text,
	n integer,
	amount numeric,
	note varchar(40),
	flag boolean
);
-- d from 2021-06 to 2026-05: every partition of events has rows, and the
-- NULLs go to the default one.
INSERT INTO ref_events
SELECT g,
	CASE WHEN g % 41 = 0 THEN NULL ELSE date '2021-06-01' + (g * 7) % 1800 END,
	CASE WHEN g % 15 = 0 THEN NULL ELSE (ARRAY['click', 'view', 'buy', 'refund'])[1 + g % 4] END,
	CASE WHEN g % 21 = 0 THEN NULL ELSE (g * 13) % 500 + 1 END,
	CASE WHEN g % 10 = 0 THEN NULL ELSE (g * 101) % 10000 / 7.0 END,
	CASE WHEN g % 3 = 0 THEN NULL ELSE 'event ' || g END,
	CASE WHEN g % 6 = 0 THEN NULL ELSE g % 4 = 1 END
FROM generate_series(1, 3000) g;

CREATE TABLE ref_orders (
	id integer PRIMARY KEY,
	cust_id integer,
	dim_id integer,
	qty integer,
	total numeric(14, 2),
	status text,
	placed timestamptz,
	comment text
);
INSERT INTO ref_orders
SELECT g,
	CASE WHEN g % 25 = 0 THEN NULL ELSE (g * 17) % 500 + 1 END,
	CASE WHEN g % 33 = 0 THEN NULL ELSE g % 20 + 1 END,
	CASE WHEN g % 12 = 0 THEN NULL ELSE g % 9 END,
	CASE WHEN g % 14 = 0 THEN NULL ELSE (g * 991) % 100000 / 100.0 END,
	CASE WHEN g % 16 = 0 THEN NULL ELSE (ARRAY['new', 'paid', 'sent', 'done', 'lost'])[1 + g % 5] END,
	CASE WHEN g % 18 = 0 THEN NULL ELSE timestamptz '2023-03-01 12:00+00' + g * interval '5 h 7 min' END,
	CASE WHEN g % 2 = 0 THEN NULL ELSE repeat('o', g % 30) END
FROM generate_series(1, 3000) g;

CREATE TABLE ref_customers (
	id integer PRIMARY KEY,
	name text,
	region varchar(10),
	created date,
	score double precision
);
INSERT INTO ref_customers
SELECT g,
	CASE WHEN g % 20 = 0 THEN NULL ELSE 'customer ' || g END,
	CASE WHEN g % 9 = 0 THEN NULL ELSE (ARRAY['north', 'south', 'east', 'west'])[1 + g % 4] END,
	CASE WHEN g % 11 = 0 THEN NULL ELSE date '2020-01-01' + g * 3 END,
	CASE WHEN g % 13 = 0 THEN NULL ELSE g / 3.0 END
FROM generate_series(1, 500) g;

CREATE TABLE ref_dim (
	id integer PRIMARY KEY,
	label text,
	weight double precision
);
INSERT INTO ref_dim
SELECT g, CASE WHEN g = 7 THEN NULL ELSE 'dim ' || g END,
	CASE WHEN g % 5 = 0 THEN NULL ELSE g * 1.25 END
FROM generate_series(1, 20) g;

-- The local dimension table.
CREATE TABLE dim_local (LIKE ref_dim INCLUDING ALL);
INSERT INTO dim_local SELECT * FROM ref_dim;

-- The hash-partitioned table: four foreign partitions, two per shard.
CREATE TABLE items (LIKE ref_items) PARTITION BY HASH (id);
CREATE FOREIGN TABLE items_p0 PARTITION OF items FOR VALUES WITH (MODULUS 4, REMAINDER 0)
	SERVER shard1 OPTIONS (table_name 'items_p0');
CREATE FOREIGN TABLE items_p1 PARTITION OF items FOR VALUES WITH (MODULUS 4, REMAINDER 1)
	SERVER shard1 OPTIONS (table_name 'items_p1');
CREATE FOREIGN TABLE items_p2 PARTITION OF items FOR VALUES WITH (MODULUS 4, REMAINDER 2)
	SERVER shard2 OPTIONS (table_name 'items_p2');
CREATE FOREIGN TABLE items_p3 PARTITION OF items FOR VALUES WITH (MODULUS 4, REMAINDER 3)
	SERVER shard2 OPTIONS (table_name 'items_p3');

-- The range-partitioned table, one level sub-partitioned by hash.
CREATE TABLE events (LIKE ref_events) PARTITION BY RANGE (d);
CREATE TABLE events_old PARTITION OF events FOR VALUES FROM (MINVALUE) TO ('2023-01-01');
CREATE INDEX ON events_old (d);
CREATE TABLE events_2023 PARTITION OF events FOR VALUES FROM ('2023-01-01') TO ('2024-01-01')
	PARTITION BY HASH (id);
CREATE FOREIGN TABLE events_2023_h0 PARTITION OF events_2023
	FOR VALUES WITH (MODULUS 2, REMAINDER 0) SERVER shard1;
CREATE FOREIGN TABLE events_2023_h1 PARTITION OF events_2023
	FOR VALUES WITH (MODULUS 2, REMAINDER 1) SERVER shard2;
CREATE FOREIGN TABLE events_2024 PARTITION OF events
	FOR VALUES FROM ('2024-01-01') TO ('2025-01-01') SERVER shard1;
CREATE FOREIGN TABLE events_2025 PARTITION OF events
	FOR VALUES FROM ('2025-01-01') TO ('2026-01-01') SERVER shard2;
CREATE FOREIGN TABLE events_default PARTITION OF events DEFAULT SERVER shard2;

-- Plain foreign tables.
CREATE FOREIGN TABLE orders (
	id integer NOT NULL,
	cust_id integer,
	dim_id integer,
	qty integer,
	total numeric(14, 2),
	status text,
	placed timestamptz,
	comment text OPTIONS (column_name 'note')
) SERVER shard1 OPTIONS (table_name 'orders', fetch_size '13');
CREATE FOREIGN TABLE customers (
	id integer NOT NULL,
	name text,
	region varchar(10),
	created date,
	score double precision
) SERVER shard2 OPTIONS (schema_name 'public', table_name 'customers');
CREATE FOREIGN TABLE dim_small (
	id integer NOT NULL,
	label text,
	weight double precision
) SERVER shard1;

-- Fill the shards through async_fdw.
INSERT INTO items SELECT * FROM ref_items;
INSERT INTO events SELECT * FROM ref_events;
INSERT INTO orders SELECT * FROM ref_orders;
INSERT INTO customers SELECT * FROM ref_customers;
INSERT INTO dim_small SELECT * FROM ref_dim;

-- Joins on keys, where a small table's keys or a hash join's keys are sent
-- to the large scans, and partitionwise joins and aggregates.
CREATE VIEW v_orders_dim AS
	SELECT o.id, o.cust_id, o.qty, o.total, o.status, d.id AS dim_id, d.label, d.weight
	FROM orders o JOIN dim_small d ON o.dim_id = d.id;
CREATE VIEW v_items_dim AS
	SELECT i.id, i.k, i.grp, i.price, i.name, i.at, d.label, d.weight
	FROM items i JOIN dim_small d ON i.grp = d.id;
CREATE VIEW v_orders_local_dim AS
	SELECT o.id, o.cust_id, o.total, o.placed, l.label
	FROM orders o JOIN dim_local l ON o.dim_id = l.id;
CREATE VIEW v_events_customers AS
	SELECT e.id, e.d, e.kind, e.amount, c.name, c.region, c.score
	FROM events e JOIN customers c ON e.n = c.id;
CREATE VIEW v_items_self AS
	SELECT a.id, a.k, a.name, b.price, b.d, b.tags
	FROM items a JOIN items b ON a.id = b.id;
CREATE VIEW v_items_by_grp AS
	SELECT grp, count(*) AS n, sum(price) AS total, avg(f8) AS avg_f8, max(name) AS max_name
	FROM items GROUP BY grp;
CREATE VIEW v_orders_in AS
	SELECT * FROM orders
	WHERE cust_id IN (SELECT id FROM customers WHERE region = 'north');
CREATE VIEW v_orders_not_in AS
	SELECT * FROM orders
	WHERE dim_id NOT IN (SELECT id FROM dim_small WHERE weight > 5);
CREATE VIEW v_items_local_in AS
	SELECT i.id, i.grp, i.f8, i.js, i.m FROM items i
	WHERE i.grp IN (SELECT id FROM dim_local WHERE weight > 3);
CREATE VIEW v_events_by_kind AS
	SELECT kind, count(*) AS n, sum(amount) AS total, min(d) AS first, max(note) AS last_note
	FROM events GROUP BY kind;
CREATE VIEW v_union AS
	SELECT id, d, 'events' AS src FROM events_2024
	UNION ALL SELECT id, d, 'items' FROM items_p1
	UNION ALL SELECT id, placed::date, 'orders' FROM orders;

-- sqlsmith sees the foreign tables, the views and the two local tables
-- among them (dim_local, events_old); the reference tables are check.sql's.
GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO smith;
REVOKE ALL ON async_fdw_prepared_xacts, ref_items, ref_events, ref_orders, ref_customers, ref_dim
	FROM smith;

-- A database-wide ANALYZE skips foreign tables: name them.
ANALYZE;
ANALYZE items_p0, items_p1, items_p2, items_p3, events_2023_h0, events_2023_h1,
	events_2024, events_2025, events_default, orders, customers, dim_small;
