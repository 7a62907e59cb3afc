--
-- import: IMPORT FOREIGN SCHEMA, with postgres_fdw's options and defaults.
--
CREATE SCHEMA import_src;
CREATE TYPE import_src.mood AS ENUM ('sad', 'ok');
CREATE TABLE import_src.t1 (
  id int NOT NULL,
  name varchar(20) COLLATE "C" DEFAULT 'none',
  price numeric(10, 2) DEFAULT 0,
  doubled int GENERATED ALWAYS AS (id * 2) STORED,
  "Mixed Case" text,
  m import_src.mood,
  gone int);
ALTER TABLE import_src.t1 DROP COLUMN gone;
INSERT INTO import_src.t1 (id, name, price, "Mixed Case", m)
  VALUES (1, 'a', 1.5, 'x', 'ok'), (2, NULL, 2, 'y', 'sad');
CREATE VIEW import_src.v1 AS SELECT id, name FROM import_src.t1;
CREATE TABLE import_src.p (id int, v text) PARTITION BY RANGE (id);
CREATE TABLE import_src.p1 PARTITION OF import_src.p FOR VALUES FROM (0) TO (10);
INSERT INTO import_src.p VALUES (1, 'one');
CREATE TABLE import_src.nocols ();
-- The enum must exist locally too, under the same schema-qualified name.
CREATE SCHEMA import_dst;

-- The imported tables and columns, with what the options keep.
CREATE FUNCTION import_columns(nsp text) RETURNS TABLE (tab text, col text, typ text,
    notnull bool, def text, gen "char", coll text, opts text[]) LANGUAGE sql AS $$
  SELECT c.relname::text, a.attname::text, format_type(a.atttypid, a.atttypmod),
         a.attnotnull, pg_get_expr(d.adbin, d.adrelid), a.attgenerated,
         CASE WHEN a.attcollation <> t.typcollation THEN co.collname::text END,
         a.attfdwoptions
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0
    LEFT JOIN pg_attrdef d ON d.adrelid = c.oid AND d.adnum = a.attnum
    LEFT JOIN pg_type t ON t.oid = a.atttypid
    LEFT JOIN pg_collation co ON co.oid = a.attcollation
   WHERE n.nspname = nsp ORDER BY 1, a.attnum
$$;

-- Defaults: NOT NULL, collations and generated columns, no defaults;
-- partitions left out; the remote type's schema-qualified name.
IMPORT FOREIGN SCHEMA import_src FROM SERVER loopback INTO import_dst;
SELECT * FROM import_columns('import_dst');
SELECT c.relname, ft.ftoptions FROM pg_foreign_table ft JOIN pg_class c ON c.oid = ft.ftrelid
  JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'import_dst' ORDER BY 1;
SELECT id, name, price, doubled, "Mixed Case", m FROM import_dst.t1 ORDER BY id;
SELECT * FROM import_dst.v1 ORDER BY id;
SELECT * FROM import_dst.p;

-- Every option the other way; LIMIT TO names a partition; EXCEPT.
CREATE SCHEMA import_dst2;
IMPORT FOREIGN SCHEMA import_src LIMIT TO (t1, p1) FROM SERVER loopback INTO import_dst2
  OPTIONS (import_default 'true', import_generated 'false', import_collate 'false',
           import_not_null 'false');
SELECT * FROM import_columns('import_dst2');
CREATE SCHEMA import_dst3;
IMPORT FOREIGN SCHEMA import_src EXCEPT (t1, nocols) FROM SERVER loopback INTO import_dst3;
SELECT tab, col FROM import_columns('import_dst3');
-- A schema with nothing to import: nothing, and no error.
IMPORT FOREIGN SCHEMA import_src LIMIT TO (no_such_table) FROM SERVER loopback INTO import_dst3;
SELECT count(*) FROM import_columns('import_dst3');

-- Errors: a missing remote schema, an unknown option, a bad value, a
-- table that exists already.
IMPORT FOREIGN SCHEMA no_such_schema FROM SERVER loopback INTO import_dst3;
IMPORT FOREIGN SCHEMA import_src FROM SERVER loopback INTO import_dst3 OPTIONS (import_everything 'true');
IMPORT FOREIGN SCHEMA import_src FROM SERVER loopback INTO import_dst3 OPTIONS (import_default 'maybe');
IMPORT FOREIGN SCHEMA import_src LIMIT TO (v1) FROM SERVER loopback INTO import_dst3;

DROP SCHEMA import_dst, import_dst2, import_dst3 CASCADE;
DROP SCHEMA import_src CASCADE;
DROP FUNCTION import_columns(text);
