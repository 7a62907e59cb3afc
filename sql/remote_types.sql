--
-- remote_types: foreign tables whose local column types differ from the
-- remote ones.  A condition is shipped only where its meaning cannot depend
-- on the remote type; every answer is the one postgres_fdw gives, checked
-- by running each condition through both wrappers over the same remote
-- table.
--
CREATE EXTENSION IF NOT EXISTS postgres_fdw;
CALL afdw_test_server('pg_loopback', 'postgres_fdw');
CREATE USER MAPPING FOR CURRENT_USER SERVER pg_loopback;

-- The remote table: an enum, a char(6), an int4[], two texts and an int.
CREATE TYPE remote.rt_mood AS ENUM ('sad', 'ok', 'happy');
CREATE TABLE remote.rtypes (
    id    int,
    e     remote.rt_mood,
    ch    char(6),
    ai    int4[],
    etx   text,
    etx2  text,
    v     int
);
INSERT INTO remote.rtypes
SELECT g, (ARRAY['sad', 'ok', 'happy'])[g % 3 + 1]::remote.rt_mood,
       CASE WHEN g % 500 = 0 THEN 'ab' ELSE 'cd' || g END,
       ARRAY[g % 5, g % 7],
       (ARRAY['sad', 'ok', 'happy'])[g % 3 + 1],
       (ARRAY['happy', 'sad', 'ok'])[g % 5 % 3 + 1],
       g
  FROM generate_series(1, 1000) g;

-- Local types: text for the enum and the char(6), int8[] for the int4[],
-- an enum (not in the texts' order) for the texts, a domain for the int.
CREATE TYPE afdw_lmood AS ENUM ('ok', 'sad', 'happy');
CREATE DOMAIN afdw_small AS int CHECK (VALUE <= 600);
CREATE FOREIGN TABLE ft_rtypes (
    id int, e text, ch text, ai int8[], etx afdw_lmood, etx2 afdw_lmood,
    v afdw_small
) SERVER loopback OPTIONS (schema_name 'remote', table_name 'rtypes');
CREATE FOREIGN TABLE pg_rtypes (
    id int, e text, ch text, ai int8[], etx afdw_lmood, etx2 afdw_lmood,
    v afdw_small
) SERVER pg_loopback OPTIONS (schema_name 'remote', table_name 'rtypes');

-- The answer of each wrapper to a query: the ids it returns, or its error.
CREATE FUNCTION afdw_answer(tab text, cond text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  ids int[];
BEGIN
  EXECUTE format('SELECT array_agg(id ORDER BY id) FROM %I WHERE %s', tab, cond)
    INTO ids;
  RETURN format('%s rows %s', coalesce(cardinality(ids), 0),
                left(coalesce(ids::text, ''), 40));
EXCEPTION WHEN OTHERS THEN
  RETURN format('ERROR %s: %s', SQLSTATE, SQLERRM);
END
$$;
CREATE FUNCTION afdw_compare(cond text, OUT same bool, OUT async_fdw text,
                             OUT postgres_fdw text)
LANGUAGE plpgsql AS $$
BEGIN
  async_fdw := afdw_answer('ft_rtypes', cond);
  postgres_fdw := afdw_answer('pg_rtypes', cond);
  same := async_fdw = postgres_fdw;
END
$$;

-- The remote SQL of each case.
-- A text column over a remote enum: the constant goes without a cast, so
-- the remote column's type decides.
EXPLAIN (VERBOSE, COSTS OFF) SELECT id FROM ft_rtypes WHERE e = 'ok';
EXPLAIN (VERBOSE, COSTS OFF) SELECT id FROM ft_rtypes WHERE 'ok' = e;
-- A text column over a remote char(6): compared the char(n) way, trailing
-- spaces ignored.
EXPLAIN (VERBOSE, COSTS OFF) SELECT id FROM ft_rtypes WHERE ch = 'ab  ';
-- An int8[] over a remote int4[].
EXPLAIN (VERBOSE, COSTS OFF) SELECT id FROM ft_rtypes WHERE ai @> ARRAY[1::int8];
-- An enum over remote texts: the local enum's order is not the remote
-- text's, nor does the remote side know the enum: evaluated locally.
EXPLAIN (VERBOSE, COSTS OFF) SELECT id FROM ft_rtypes WHERE etx < etx2;
EXPLAIN (VERBOSE, COSTS OFF) SELECT id FROM ft_rtypes WHERE enum_cmp(etx, etx2) < 0;
EXPLAIN (VERBOSE, COSTS OFF) SELECT id FROM ft_rtypes WHERE etx = 'ok';
EXPLAIN (VERBOSE, COSTS OFF) SELECT id FROM ft_rtypes WHERE etx IS NULL;
-- A domain over a remote int: evaluated locally, so that its CHECK sees
-- every remote value.
EXPLAIN (VERBOSE, COSTS OFF) SELECT id FROM ft_rtypes WHERE v > 600;
EXPLAIN (VERBOSE, COSTS OFF) SELECT id FROM ft_rtypes WHERE v::int > 600;
-- Other constants keep their casts: a constant of another type than the
-- column's, one compared with an expression, a NULL, an array in ANY.
EXPLAIN (VERBOSE, COSTS OFF) SELECT id FROM ft_rtypes WHERE id = 5::int8;
EXPLAIN (VERBOSE, COSTS OFF) SELECT id FROM ft_rtypes WHERE e::varchar(3) = 'ok';
EXPLAIN (VERBOSE, COSTS OFF) SELECT id FROM ft_rtypes WHERE e IS DISTINCT FROM 'ok';
EXPLAIN (VERBOSE, COSTS OFF) SELECT id FROM ft_rtypes WHERE e IN ('ok', 'sad');
EXPLAIN (VERBOSE, COSTS OFF) SELECT id FROM ft_rtypes WHERE e = 'ok' OR ch = 'ab';

-- The answers, side by side: every line the same.
SELECT cond, (afdw_compare(cond)).* FROM (VALUES
  ('e = ''ok'''),
  ('''ok'' = e'),
  ('e <> ''sad'''),
  ('ch = ''ab  '''),
  ('ch = ''ab'''),
  ('ch <> ''ab'' AND id < 10'),
  ('ai @> ARRAY[1::int8]'),
  ('ai = ''{1,1}'''),
  ('etx < etx2'),
  ('etx = ''ok'' AND id < 20'),
  ('enum_cmp(etx, etx2) < 0'),
  ('etx > ''ok'''),
  ('v > 600'),
  ('v < 10'),
  ('v::int > 990'),
  ('id = 5::int8'),
  ('e IN (''ok'', ''sad'')'),
  ('e IS DISTINCT FROM ''ok'''),
  ('e::varchar(3) = ''ok''')
) c(cond) ORDER BY cond COLLATE "C";

-- A parameter is sent with its type's cast, as with postgres_fdw: the
-- remote side compares text with the enum, and has no such operator.
SET plan_cache_mode = force_generic_plan;
PREPARE afdw_q(text) AS SELECT count(*) FROM ft_rtypes WHERE e = $1;
EXPLAIN (VERBOSE, COSTS OFF) EXECUTE afdw_q('ok');
PREPARE pg_q(text) AS SELECT count(*) FROM pg_rtypes WHERE e = $1;
SELECT afdw_answer('ft_rtypes', 'e = (SELECT ''ok'')') AS async_fdw,
       afdw_answer('pg_rtypes', 'e = (SELECT ''ok'')') AS postgres_fdw;
\set VERBOSITY terse
EXECUTE afdw_q('ok');
EXECUTE pg_q('ok');
\set VERBOSITY default
DEALLOCATE afdw_q;
DEALLOCATE pg_q;
RESET plan_cache_mode;

--
-- The extensions option: objects of the extensions it names may be
-- shipped, others that are not built in may not.
--
CREATE EXTENSION IF NOT EXISTS citext;
CREATE TABLE remote.cit (id int, c citext);
INSERT INTO remote.cit VALUES (1, 'Abc'), (2, 'aBC'), (3, 'xyz');
CREATE FOREIGN TABLE ft_cit (id int, c citext)
  SERVER loopback OPTIONS (schema_name 'remote', table_name 'cit');
CREATE FOREIGN TABLE pg_cit (id int, c citext)
  SERVER pg_loopback OPTIONS (schema_name 'remote', table_name 'cit');
-- Not listed: evaluated locally.
EXPLAIN (VERBOSE, COSTS OFF) SELECT id FROM ft_cit WHERE c = 'ABC';
SELECT id FROM ft_cit WHERE c = 'ABC' ORDER BY id;
-- Listed: shipped, with the operator and functions named with their schema.
ALTER SERVER loopback OPTIONS (ADD extensions 'citext');
ALTER SERVER pg_loopback OPTIONS (ADD extensions 'citext');
EXPLAIN (VERBOSE, COSTS OFF) SELECT id FROM ft_cit WHERE c = 'ABC';
EXPLAIN (VERBOSE, COSTS OFF) SELECT id FROM pg_cit WHERE c = 'ABC';
SELECT id FROM ft_cit WHERE c = 'ABC' ORDER BY id;
EXPLAIN (VERBOSE, COSTS OFF) SELECT id FROM ft_cit WHERE strpos(c, 'B'::citext) = 2;
SELECT id FROM ft_cit WHERE strpos(c, 'B'::citext) = 2 ORDER BY id;
SELECT id FROM pg_cit WHERE strpos(c, 'B'::citext) = 2 ORDER BY id;
-- An array of citext is no object of the extension (with postgres_fdw
-- neither).
EXPLAIN (VERBOSE, COSTS OFF) SELECT id FROM ft_cit WHERE c IN ('ABC', 'XYZ');
EXPLAIN (VERBOSE, COSTS OFF) SELECT id FROM pg_cit WHERE c IN ('ABC', 'XYZ');
SELECT id FROM ft_cit WHERE c IN ('ABC', 'XYZ') ORDER BY id;
-- Still not shipped: types that are no extension's.
EXPLAIN (VERBOSE, COSTS OFF) SELECT id FROM ft_rtypes WHERE etx < etx2;
-- The option's values: a list of names, quoted where needed; names not
-- installed are warned of; anything else is refused.
ALTER SERVER loopback OPTIONS (SET extensions ' "citext" , plpgsql');
EXPLAIN (VERBOSE, COSTS OFF) SELECT id FROM ft_cit WHERE c = 'ABC';
ALTER SERVER loopback OPTIONS (SET extensions 'citext, no_such_extension');
ALTER SERVER loopback OPTIONS (SET extensions 'citext,,plpgsql');
ALTER SERVER loopback OPTIONS (SET extensions 'citext plpgsql');
ALTER SERVER loopback OPTIONS (SET extensions '');
EXPLAIN (VERBOSE, COSTS OFF) SELECT id FROM ft_cit WHERE c = 'ABC';
ALTER FOREIGN TABLE ft_cit OPTIONS (ADD extensions 'citext');
ALTER SERVER loopback OPTIONS (DROP extensions);
ALTER SERVER pg_loopback OPTIONS (DROP extensions);

-- Clean up.
DROP FOREIGN TABLE ft_cit, pg_cit, ft_rtypes, pg_rtypes;
DROP TABLE remote.cit, remote.rtypes;
DROP EXTENSION citext;
DROP FUNCTION afdw_compare(text);
DROP FUNCTION afdw_answer(text, text);
DROP TYPE remote.rt_mood, afdw_lmood;
DROP DOMAIN afdw_small;
DROP USER MAPPING FOR CURRENT_USER SERVER pg_loopback;
DROP SERVER pg_loopback;

--
-- Types whose values are objects named by OIDs (regclass, regtype, ...):
-- an OID means one object on the remote server and another, or none,
-- here.  Such columns are read as names, in every read: a binary stream
-- would hand over the remote OID.  A second database plays the remote
-- server; it has a table of the same name as one here, with another OID.
--
CREATE EXTENSION IF NOT EXISTS dblink;
CREATE DATABASE afdw_regdb;
SELECT dblink_connect('regdb', format('host=%s port=%s dbname=afdw_regdb',
  coalesce(nullif(current_setting('unix_socket_directories'), ''), 'localhost'),
  current_setting('port')));
SELECT dblink_exec('regdb', $$
  CREATE TABLE afdw_twin (x int);
  CREATE TABLE afdw_regs (id int, r regclass, ra regclass[], t regtype, n int);
  INSERT INTO afdw_regs VALUES
    (1, 'afdw_twin', ARRAY['afdw_twin'::regclass, 'pg_class'::regclass], 'int4', 1);
  CREATE VIEW afdw_regs_q AS SELECT *, current_query() AS q FROM afdw_regs$$);
CREATE TABLE afdw_twin (x int);
SELECT (SELECT o FROM dblink('regdb', 'SELECT ''afdw_twin''::regclass::oid') AS t(o oid))
       <> 'afdw_twin'::regclass::oid AS oids_differ;
CALL afdw_test_server('regdb', dbname => 'afdw_regdb');
CALL afdw_test_server('pg_regdb', 'postgres_fdw', dbname => 'afdw_regdb');
CREATE USER MAPPING FOR CURRENT_USER SERVER regdb;
CREATE USER MAPPING FOR CURRENT_USER SERVER pg_regdb;
CREATE FOREIGN TABLE ft_regs (id int, r regclass, ra regclass[], t regtype, n int, q text)
  SERVER regdb OPTIONS (schema_name 'public', table_name 'afdw_regs_q',
                        fetch_mode 'stream');
CREATE FOREIGN TABLE pg_regs (id int, r regclass, ra regclass[], t regtype, n int, q text)
  SERVER pg_regdb OPTIONS (schema_name 'public', table_name 'afdw_regs_q');
-- The names find the local table of that name, every time (the first
-- stream of a table checks the remote types, the next ones could be in
-- binary format).
SELECT id, r, r = 'afdw_twin'::regclass AS r_local, ra,
       ra = ARRAY['afdw_twin'::regclass, 'pg_class'::regclass] AS ra_local, t,
       q LIKE '%FORMAT binary%' AS binary
  FROM ft_regs;
SELECT id, r, r = 'afdw_twin'::regclass AS r_local, ra,
       ra = ARRAY['afdw_twin'::regclass, 'pg_class'::regclass] AS ra_local, t,
       q LIKE '%FORMAT binary%' AS binary
  FROM ft_regs;
SELECT id, r, r = 'afdw_twin'::regclass AS r_local, ra,
       ra = ARRAY['afdw_twin'::regclass, 'pg_class'::regclass] AS ra_local, t
  FROM pg_regs;
-- Without those columns the stream is binary (after its type check).
SELECT id, n, q LIKE '%FORMAT binary%' AS binary FROM ft_regs;
SELECT id, n, q LIKE '%FORMAT binary%' AS binary FROM ft_regs;
SELECT dblink_disconnect('regdb');
DROP FOREIGN TABLE ft_regs, pg_regs;
DROP USER MAPPING FOR CURRENT_USER SERVER regdb;
DROP USER MAPPING FOR CURRENT_USER SERVER pg_regdb;
DROP SERVER regdb, pg_regdb;
DROP TABLE afdw_twin;
DROP DATABASE afdw_regdb WITH (FORCE);
DROP EXTENSION dblink;
