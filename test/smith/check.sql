--
-- test/smith/check.sql: whether the foreign tables still hold the rows of
-- their reference tables (sqlsmith's statements are rolled back: none may
-- stay).  One row per table whose rows differ; none when all agree.
--
WITH pairs(name, remote, local) AS (VALUES
	('items',
	 (SELECT count(*) || ' ' || md5(string_agg(t::text, '|' ORDER BY id)) FROM items t),
	 (SELECT count(*) || ' ' || md5(string_agg(t::text, '|' ORDER BY id)) FROM ref_items t)),
	('events',
	 (SELECT count(*) || ' ' || md5(string_agg(t::text, '|' ORDER BY id)) FROM events t),
	 (SELECT count(*) || ' ' || md5(string_agg(t::text, '|' ORDER BY id)) FROM ref_events t)),
	('orders',
	 (SELECT count(*) || ' ' || md5(string_agg(t::text, '|' ORDER BY id)) FROM orders t),
	 (SELECT count(*) || ' ' || md5(string_agg(t::text, '|' ORDER BY id)) FROM ref_orders t)),
	('customers',
	 (SELECT count(*) || ' ' || md5(string_agg(t::text, '|' ORDER BY id)) FROM customers t),
	 (SELECT count(*) || ' ' || md5(string_agg(t::text, '|' ORDER BY id)) FROM ref_customers t)),
	('dim_small',
	 (SELECT count(*) || ' ' || md5(string_agg(t::text, '|' ORDER BY id)) FROM dim_small t),
	 (SELECT count(*) || ' ' || md5(string_agg(t::text, '|' ORDER BY id)) FROM ref_dim t)))
SELECT 'data differs: ' || name || ': foreign ' || remote || ', reference ' || local
FROM pairs WHERE remote IS DISTINCT FROM local;
