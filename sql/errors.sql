--
-- errors: remote errors keep their SQLSTATE, message, detail and hint, and
-- say which remote SQL failed; local failures name the table and column
--
\set VERBOSITY default
-- show_error(query): the SQLSTATE and the fields of the error QUERY raises.
CREATE FUNCTION show_error(query text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
  st text; msg text; det text; hnt text; ctx text;
BEGIN
  EXECUTE query;
  RETURN NEXT 'no error';
EXCEPTION WHEN OTHERS THEN
  GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
    det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT, ctx = PG_EXCEPTION_CONTEXT;
  RETURN NEXT 'sqlstate: ' || st;
  RETURN NEXT 'message: ' || msg;
  RETURN NEXT 'detail: ' || coalesce(det, '');
  RETURN NEXT 'hint: ' || coalesce(hnt, '');
  RETURN NEXT 'context: ' || regexp_replace(coalesce(ctx, ''), E'\nPL/pgSQL function.*$', '');
END
$$;

-- A remote error with detail and hint, raised by a remote function.
CREATE FUNCTION remote.raiser(int) RETURNS int LANGUAGE plpgsql AS $$
BEGIN
  IF $1 = 3 THEN
    RAISE EXCEPTION 'value % is not allowed', $1
      USING ERRCODE = 'check_violation', DETAIL = 'Three is reserved.',
            HINT = 'Pick another number.';
  END IF;
  RETURN $1;
END
$$;
CREATE VIEW remote.raising AS SELECT remote.raiser(g) AS x FROM generate_series(1, 5) g;
CREATE FOREIGN TABLE ft_raising (x int) SERVER loopback
  OPTIONS (schema_name 'remote', table_name 'raising');
SELECT * FROM ft_raising;
SELECT * FROM show_error('SELECT * FROM ft_raising');

-- A remote error in a pushed-down condition.
SELECT * FROM show_error('SELECT * FROM ft1 WHERE 100 / (id - 10) > 1');

-- A missing remote table, a missing remote column.
CREATE FOREIGN TABLE ft_missing (a int) SERVER loopback
  OPTIONS (schema_name 'remote', table_name 'no_such_table');
SELECT * FROM ft_missing;
SELECT * FROM show_error('SELECT * FROM ft_missing');
CREATE FOREIGN TABLE ft_badcol (id int, nope int) SERVER loopback
  OPTIONS (schema_name 'remote', table_name 't1');
SELECT nope FROM ft_badcol;
SELECT id FROM ft_badcol WHERE id = 1;

-- A remote value the local type cannot read.
CREATE TABLE remote.conv (id int, txt text, big bigint);
INSERT INTO remote.conv VALUES (1, '12', 5), (2, 'twelve', 5000000000);
CREATE FOREIGN TABLE ft_conv (id int, txt int, big int) SERVER loopback
  OPTIONS (schema_name 'remote', table_name 'conv');
SELECT id, txt FROM ft_conv WHERE id = 1;
SELECT id, txt FROM ft_conv;
SELECT * FROM show_error('SELECT id, txt FROM ft_conv');
SELECT id, big FROM ft_conv;
-- The same for bigint, whose text values are read without a function call
-- but with int8in's rules and messages.
CREATE TABLE remote.conv8 (id int, txt text, huge numeric);
INSERT INTO remote.conv8 VALUES (1, '-9223372036854775808', 9223372036854775807),
  (2, NULL, NULL), (3, 'eight', 1), (4, ' 8 ', 9223372036854775808);
CREATE FOREIGN TABLE ft_conv8 (id int, txt bigint, huge bigint) SERVER loopback
  OPTIONS (schema_name 'remote', table_name 'conv8');
SELECT id, txt, huge FROM ft_conv8 WHERE id <= 2 ORDER BY id;
SELECT id, txt FROM ft_conv8 ORDER BY id;
SELECT id, txt FROM ft_conv8 WHERE id <> 3 ORDER BY id;
SELECT id, huge FROM ft_conv8 ORDER BY id;
-- Domain checks apply to remote values.
CREATE DOMAIN small_pos AS int CHECK (VALUE BETWEEN 1 AND 100);
CREATE FOREIGN TABLE ft_dom (id small_pos) SERVER loopback
  OPTIONS (schema_name 'remote', table_name 't1');
SELECT count(*) FROM ft_dom WHERE id <= 100;
SELECT sum(id) FROM ft_dom;

-- The session is still healthy after all these errors.
SELECT count(*) FROM ft1;
SELECT count(*) FROM afdw_remote_states() s WHERE s <> 'idle';

-- Writes to a table whose updatable option is false are refused clearly.
ALTER FOREIGN TABLE ft1 OPTIONS (ADD updatable 'false');
INSERT INTO ft1 VALUES (0, 'x', 0);
UPDATE ft1 SET v = 'y' WHERE id = 1;
DELETE FROM ft1 WHERE id = 1;
ALTER FOREIGN TABLE ft1 OPTIONS (DROP updatable);

DROP FOREIGN TABLE ft_raising, ft_missing, ft_badcol, ft_conv, ft_conv8, ft_dom;
DROP DOMAIN small_pos;
DROP VIEW remote.raising;
DROP FUNCTION remote.raiser(int);
DROP TABLE remote.conv, remote.conv8;
DROP FUNCTION show_error(text);
