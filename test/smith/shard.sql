--
-- test/smith/shard.sql: the tables of one shard (run in databases shard1 and
-- shard2 by run.sh).  They stay empty here: the coordinator fills them
-- through async_fdw (coord.sql), each shard with the rows of its partitions.
-- Their columns are those of the coordinator's foreign tables.
--
CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy');

-- The partitions of the coordinator's hash-partitioned table items.
CREATE TABLE items_tmpl (
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
CREATE TABLE items_p0 (LIKE items_tmpl INCLUDING ALL);
CREATE TABLE items_p1 (LIKE items_tmpl INCLUDING ALL);
CREATE TABLE items_p2 (LIKE items_tmpl INCLUDING ALL);
CREATE TABLE items_p3 (LIKE items_tmpl INCLUDING ALL);
DROP TABLE items_tmpl;
CREATE INDEX ON items_p0 (k);
CREATE INDEX ON items_p1 (k);
CREATE INDEX ON items_p2 (k);
CREATE INDEX ON items_p3 (k);
CREATE INDEX ON items_p0 (at);
CREATE INDEX ON items_p1 (at);
CREATE INDEX ON items_p2 (at);
CREATE INDEX ON items_p3 (at);
CREATE INDEX ON items_p0 (name);
CREATE INDEX ON items_p2 (name);

-- The foreign partitions of the range-partitioned table events (one level
-- of it sub-partitioned by hash).
CREATE TABLE events_tmpl (
	id bigint NOT NULL,
	d date,
	kind text,
	n integer,
	amount numeric,
	note varchar(40),
	flag boolean
);
CREATE TABLE events_2023_h0 (LIKE events_tmpl);
CREATE TABLE events_2023_h1 (LIKE events_tmpl);
CREATE TABLE events_2024 (LIKE events_tmpl);
CREATE TABLE events_2025 (LIKE events_tmpl);
CREATE TABLE events_default (LIKE events_tmpl);
DROP TABLE events_tmpl;
CREATE INDEX ON events_2023_h0 (d);
CREATE INDEX ON events_2023_h1 (d);
CREATE INDEX ON events_2024 (d);
CREATE INDEX ON events_2025 (d);
CREATE INDEX ON events_2024 (n);
CREATE INDEX ON events_2025 (n);

-- Plain foreign tables: orders and dim_small on shard1, customers on shard2.
CREATE TABLE orders (
	id integer PRIMARY KEY,
	cust_id integer,
	dim_id integer,
	qty integer,
	total numeric(14, 2),
	status text,
	placed timestamptz,
	note text
);
CREATE INDEX ON orders (cust_id);
CREATE INDEX ON orders (dim_id);
CREATE TABLE customers (
	id integer PRIMARY KEY,
	name text,
	region varchar(10),
	created date,
	score double precision
);
CREATE TABLE dim_small (
	id integer PRIMARY KEY,
	label text,
	weight double precision
);

GRANT SELECT, INSERT, UPDATE, DELETE, TRUNCATE ON ALL TABLES IN SCHEMA public TO smith;
