--
-- shippable_exprs: CASE expressions and subscripts in WHERE conditions are
-- evaluated remotely when the remote server computes the same thing, and
-- the rows are those of the same query on the remote table
--
CREATE TABLE remote.se (id int, k int, t text, arr int[], j jsonb);
INSERT INTO remote.se
  SELECT g, g % 5, CASE WHEN g % 6 = 0 THEN NULL ELSE 'v' || (g % 4) END,
         ARRAY[g, g % 3, NULL], jsonb_build_object('a', g % 7)
    FROM generate_series(1, 60) g;
CREATE FOREIGN TABLE ft_se (id int, k int, t text, arr int[], j jsonb)
  SERVER loopback OPTIONS (schema_name 'remote', table_name 'se');

-- check_exprs(condition): the scan's remote SQL and local filter, and
-- whether the foreign table and the remote table return the same rows.
CREATE FUNCTION check_exprs(cond text) RETURNS TABLE (plan text) LANGUAGE plpgsql AS $$
DECLARE
  l text;
  diff bigint;
  cnt bigint;
BEGIN
  FOR l IN EXECUTE 'EXPLAIN (VERBOSE, COSTS OFF) SELECT id FROM ft_se WHERE ' || cond LOOP
    IF l ~ 'Remote SQL|Filter' THEN
      plan := btrim(l);
      RETURN NEXT;
    END IF;
  END LOOP;
  EXECUTE format('SELECT count(*) FROM ((SELECT * FROM ft_se WHERE %s EXCEPT ALL SELECT * FROM remote.se WHERE %s)
                  UNION ALL (SELECT * FROM remote.se WHERE %s EXCEPT ALL SELECT * FROM ft_se WHERE %s)) s',
                 cond, cond, cond, cond) INTO diff;
  EXECUTE format('SELECT count(*) FROM ft_se WHERE %s', cond) INTO cnt;
  plan := format('rows: %s, differences: %s', cnt, diff);
  RETURN NEXT;
END
$$;

-- Searched CASE, with and without ELSE.
SELECT * FROM check_exprs('CASE WHEN id > 50 THEN id END < 55');
SELECT * FROM check_exprs('CASE WHEN k = 0 THEN t = ''v1'' WHEN k = 1 THEN true ELSE false END');
-- Simple CASE, on an expression and on a column, WHEN values of columns.
SELECT * FROM check_exprs('id > CASE mod(id, 4) WHEN 0 THEN 1 WHEN 2 THEN 30 ELSE 50 END');
SELECT * FROM check_exprs('CASE t WHEN ''v1'' THEN true ELSE id < 5 END');
SELECT * FROM check_exprs('CASE k WHEN id THEN true ELSE id < 3 END');
-- Nested CASE: a searched one as a simple one's value and as a result.
SELECT * FROM check_exprs('CASE CASE WHEN k > 0 THEN k END WHEN 2 THEN 601 WHEN k THEN k ELSE 0 END > 3');
SELECT * FROM check_exprs('CASE k WHEN 1 THEN CASE WHEN id > 30 THEN 1 ELSE 0 END ELSE 0 END = 1');
-- A CASE with a NULL result and IS NULL.
SELECT * FROM check_exprs('(CASE WHEN t IS NULL THEN NULL ELSE id END) IS NULL');
-- Subscripts of arrays: of a column, of an ARRAY[...], slices, NULL elements.
SELECT * FROM check_exprs('arr[2] = 1');
SELECT * FROM check_exprs('id = (ARRAY[id, k, 3])[1] AND id < 4');
SELECT * FROM check_exprs('(ARRAY[id, k, 3])[k + 1] = 3');
SELECT * FROM check_exprs('arr[3] IS NULL AND arr[1:2] = ARRAY[7, 1]');
SELECT * FROM check_exprs('arr[:1] = ARRAY[9] OR arr[2:] = ARRAY[2, NULL]::int[] AND id < 10');
-- = ANY over an array of columns and expressions.
SELECT * FROM check_exprs('id = ANY (ARRAY[k, 1, id + 0]) AND id < 6');
-- Subscripts of jsonb, a built-in subscripting too.
SELECT * FROM check_exprs('j[''a''] = ''3''::jsonb');
-- Kept local: a volatile function inside CASE and inside a subscript.
SELECT * FROM check_exprs('CASE WHEN random() < 2 THEN id END = 4');
SELECT * FROM check_exprs('arr[(random() * 0)::int + 1] = 5');
-- Kept local: a CASE whose result has a collation but the default.
SELECT * FROM check_exprs('(CASE WHEN k = 1 THEN t COLLATE "C" ELSE ''v2'' END) < ''v2''');
-- Text search configurations: a built-in one (simple) is sent by its
-- qualified name; one made later, by initdb's scripts (english, which a user
-- may have altered) or locally (which the remote server may not have) is
-- not.
CREATE TEXT SEARCH CONFIGURATION public.se_search (COPY = pg_catalog.english);
SELECT * FROM check_exprs('length(to_tsvector(''english''::regconfig, t)) > 0 AND id < 5');
SELECT * FROM check_exprs('to_tsvector(''simple'', t) @@ to_tsquery(''simple'', ''v1'')');
SELECT * FROM check_exprs('length(to_tsvector(''se_search''::regconfig, t)) > 0 AND id < 5');
DROP TEXT SEARCH CONFIGURATION public.se_search;

-- Collations.  A foreign column declared with a collation is assumed to
-- have it remotely too: conditions using it (and the default one) are sent,
-- another collation named by COLLATE, or given to a constant, is not.
CREATE TABLE remote.sc (id int, c text COLLATE "C", d text);
INSERT INTO remote.sc
  SELECT g, (ARRAY['foo', 'Foo', 'bar', 'B', 'a'])[g % 5 + 1], (ARRAY['x', 'X', 'foo'])[g % 3 + 1]
    FROM generate_series(1, 30) g;
CREATE FOREIGN TABLE ft_sc (id int, c text COLLATE "C", d text)
  SERVER loopback OPTIONS (schema_name 'remote', table_name 'sc');
CREATE FUNCTION check_coll(cond text) RETURNS TABLE (plan text) LANGUAGE plpgsql AS $$
DECLARE
  l text;
  diff bigint;
  cnt bigint;
BEGIN
  FOR l IN EXECUTE 'EXPLAIN (VERBOSE, COSTS OFF) SELECT id FROM ft_sc WHERE ' || cond LOOP
    IF l ~ 'Remote SQL|Filter' THEN
      plan := btrim(l);
      RETURN NEXT;
    END IF;
  END LOOP;
  EXECUTE format('SELECT count(*) FROM ((SELECT * FROM ft_sc WHERE %s EXCEPT ALL SELECT * FROM remote.sc WHERE %s)
                  UNION ALL (SELECT * FROM remote.sc WHERE %s EXCEPT ALL SELECT * FROM ft_sc WHERE %s)) s',
                 cond, cond, cond, cond) INTO diff;
  EXECUTE format('SELECT count(*) FROM ft_sc WHERE %s', cond) INTO cnt;
  plan := format('rows: %s, differences: %s', cnt, diff);
  RETURN NEXT;
END
$$;
SELECT * FROM check_coll('c = ''foo''');
SELECT * FROM check_coll('c COLLATE "C" = ''foo''');
SELECT * FROM check_coll('c < ''a''');
SELECT * FROM check_coll('upper(c) = ''FOO'' AND c <> ''foo''');
SELECT * FROM check_coll('c = ANY (ARRAY[''foo'', ''B''])');
SELECT * FROM check_coll('CASE WHEN id > 10 THEN c ELSE ''zzz'' END < ''b''');
SELECT * FROM check_coll('c > d');
SELECT * FROM check_coll('d = ''foo''');
-- Kept local.
SELECT * FROM check_coll('c COLLATE "POSIX" = ''foo''');
SELECT * FROM check_coll('c = ''foo'' COLLATE "C"');
SELECT * FROM check_coll('d COLLATE "C" < ''a''');
SELECT * FROM check_coll('d = ''foo'' COLLATE "C"');
DROP FUNCTION check_coll(text);
DROP FOREIGN TABLE ft_sc;
DROP TABLE remote.sc;
DROP FUNCTION check_exprs(text);
DROP FOREIGN TABLE ft_se;
DROP TABLE remote.se;
