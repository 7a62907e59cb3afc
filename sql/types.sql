--
-- types: values of every built-in type family read through async_fdw are
-- exactly the values of the underlying table, whatever the local session's
-- TimeZone, DateStyle, IntervalStyle, extra_float_digits and bytea_output.
--
-- The remote side is this same database (server loopback of setup), so the
-- foreign table's enum and domain are the very types of the remote table.
-- Every check compares the foreign table with the same query on the
-- underlying table; printed values only make the output readable.
--

-- An enum (labels with a space and a quote) and a domain with a CHECK.
CREATE TYPE afdw_mood AS ENUM ('sad', 'ok', 'happy', 'in between', 'it''s');
CREATE DOMAIN afdw_nonneg AS int CHECK (VALUE >= 0);

-- One column per type family, with and without type modifiers.
CREATE TABLE remote.types (
    id      int PRIMARY KEY,
    i2      int2,
    i4      int4,
    i8      int8,
    num     numeric,
    num_ps  numeric(12,4),
    f4      float4,
    f8      float8,
    t       text,
    vc      varchar,
    vc5     varchar(5),
    c1      char,
    c5      char(5),
    b       bytea,
    bo      bool,
    d       date,
    tm      time,
    ttz     timetz,
    ts      timestamp,
    ts3     timestamp(3),
    tstz    timestamptz,
    iv      interval,
    u       uuid,
    j       json,
    jb      jsonb,
    ip      inet,
    net     cidr,
    mac     macaddr,
    a_i4    int4[][],
    a_t     text[],
    a_f8    float8[],
    mood    afdw_mood,
    nn      afdw_nonneg
);

-- The values are typed in under fixed settings, in the session's zone.
SET TimeZone = 'America/New_York';
SET DateStyle = 'ISO, MDY';
SET IntervalStyle = 'postgres';

-- 1: ordinary values.
INSERT INTO remote.types VALUES
  (1, 42, 123456, 9876543210, 3.14159, 12345678.1234, 1.5, 2.25,
   'hello', 'world', 'abc', 'x', 'ab',
   '\x0102ff', true, '2021-03-04', '12:34:56', '12:34:56+02',
   '2021-03-04 05:06:07', '2021-03-04 05:06:07.891', '2021-03-04 05:06:07.123456',
   '1 year 2 mons 3 days 04:05:06',
   'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11',
   '{"a": 1, "b": [1, 2, 3]}', '{"a": 1, "b": [1, 2, 3]}',
   '192.168.1.5/24', '192.168.1.0/24', '08:00:2b:01:02:03',
   '{{1,2},{3,4}}', '{a,b,c}', '{1.5,2.5}', 'happy', 7);

-- 2: the largest values, and values that need every digit.
INSERT INTO remote.types VALUES
  (2, 32767, 2147483647, 9223372036854775807,
   '1e1000', 99999999.9999, 3.4028235e38, 1.7976931348623157e308,
   repeat('long text ', 10000), repeat('v', 10485), 'abcde', 'z', 'abcde',
   '\xffffffff', false, '5874897-12-31', '24:00:00', '23:59:59.999999-15:59',
   '294276-12-31 23:59:59.999999', '294276-12-31 23:59:59.999',
   '294276-12-30 23:59:59.999999+00',
   '178000000 years', 'ffffffff-ffff-ffff-ffff-ffffffffffff',
   '[1.5e30, 12345678901234567890.000]', '[1.5e30, 12345678901234567890.000]',
   '255.255.255.255', '255.255.255.255/32', 'ff:ff:ff:ff:ff:ff',
   '{{2147483647,-2147483648},{0,1}}', '{"x"}', '{1.7976931348623157e308}',
   'it''s', 2147483647);

-- 3: the smallest and negative values, BC dates, negative intervals.
INSERT INTO remote.types VALUES
  (3, -32768, -2147483648, -9223372036854775808,
   -0.000001, -99999999.9999, -1.17549435e-38, 5e-324,
   '', '', '', ' ', '',
   '\x', false, '4714-11-24 BC', '00:00:00', '00:00:00+15:59',
   '4714-11-24 00:00:00 BC', '0044-03-15 12:00:00.5 BC',
   '4714-11-24 00:00:00+00 BC',
   '-1 years -2 mons +3 days -04:05:06.789', '00000000-0000-0000-0000-000000000000',
   '[]', '{}', '0.0.0.0/0', '0.0.0.0/0', '00:00:00:00:00:00',
   '{}', '{}', '{}', 'sad', 0);

-- 4: NaN, infinities, minus zero, and values equal to others but printed
-- differently (numeric scale, json spacing and duplicate keys).
INSERT INTO remote.types VALUES
  (4, 0, 0, 0, 'NaN', '0.0000', 'NaN', '-0',
   'NULL', 'null', 'NULL', 'N', 'NULL',
   '\x00', true, 'infinity', '23:59:59.999999', '12:00:00-05:45',
   'infinity', '-infinity', '-infinity',
   '-1 mons +30 days', '01234567-89ab-cdef-0123-456789abcdef',
   '  { "k" : 1 ,  "k":2,"z" :null }  ', '{ "k" : 1 ,  "k":2,"z" :null }',
   '::1', '::1/128', '01:02:03:04:05:06',
   '[0:1][-1:0]={{1,2},{3,4}}', '{NULL,"NULL",null}', '{NaN,Infinity,-Infinity,-0,0}',
   'ok', NULL);
INSERT INTO remote.types (id, num, num_ps, f4, f8, d, ts, tstz, iv, j, jb)
  VALUES (5, 'Infinity', 1.5, 'Infinity', 'Infinity', '-infinity', '-infinity',
          'infinity', '0', 'null', 'null'),
         (6, '-Infinity', -0.00005, '-Infinity', '-Infinity', '2000-02-29',
          '2000-02-29 00:00:00', '2000-02-29 00:00:00+14', '1 mon', '"\u00e9"', '"\u00e9"'),
         (7, '1.500000', 0.00005, '-0', 0.1, '1999-12-31', '1999-12-31 23:59:59.999999',
          '1999-12-31 23:59:59.999999-12', '30 days', '1.0e+2', '1.0e+2'),
         (8, 1.0/3, 1.0/3, 1.0/3, 1.0/3, '1582-10-10', '1582-10-10 12:00:00',
          '1900-01-01 00:00:00+00', '-1 days +01:00:00', '[1, "two", {"3": [4]}]',
          '[1, "two", {"3": [4]}]');

-- 9: text that needs quoting, escaping or more than one byte per character.
INSERT INTO remote.types (id, t, vc, vc5, c1, c5, b, a_t, j, jb, mood) VALUES
  (9, E'tab\there\nnewline\r\\backslash ''quote'' "double" \u00e9\u65e5\u672c\U0001F418',
   E'\\x00 is not a byte', E'\u00e9\u00e9\u00e9\u00e9\u00e9', E'\u65e5', E'\u00e9 ',
   E'\\000\\001\\\\', E'{"a,b","c\\"d","e\\\\f","{g}"," h ","",NULL,"\u00e9"}',
   E'{"s": "tab\\tquote\\"\\u00e9\\u0000x"}', E'{"s": "tab\\tquote\\"\\u00e9"}',
   'in between');

-- 10: large values: a numeric with 1000 digits before and 16383 after the
-- point, 100000 characters of 2 and 4 bytes, every byte value then 100 kB
-- more in a bytea, a 3-D array.
INSERT INTO remote.types (id, num, t, b, a_i4, a_f8, ip, net, mac, u) VALUES
  (10, (repeat('9', 1000) || '.' || repeat('0', 16382) || '1')::numeric,
   repeat(E'\u00e9\U0001F418', 50000),
   (SELECT string_agg(set_byte('\x00'::bytea, 0, g), ''::bytea ORDER BY g)
      FROM generate_series(0, 255) g) || decode(repeat('00ff', 50000), 'hex'),
   '{{{1,2},{3,4}},{{5,NULL},{7,8}}}', '{{0.1,0.2},{NULL,1e-300}}',
   '2001:db8::ff00:42:8329/64', '2001:db8::/32', '08-00-2b-01-02-03',
   'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11');
-- 11: NULL in every column.
INSERT INTO remote.types (id) VALUES (11);
-- 12: a numeric of huge negative exponent, inet with host bits in IPv6.
INSERT INTO remote.types (id, num, num_ps, ip, net, a_i4) VALUES
  (12, '-1e-1000', '0.00015', '::ffff:1.2.3.4/100', '::ffff:0.0.0.0/96',
   '{{NULL,NULL},{NULL,NULL}}');

-- The foreign table: the same columns with the same types.
CREATE FOREIGN TABLE ft_types (
    id      int,
    i2      int2,
    i4      int4,
    i8      int8,
    num     numeric,
    num_ps  numeric(12,4),
    f4      float4,
    f8      float8,
    t       text,
    vc      varchar,
    vc5     varchar(5),
    c1      char,
    c5      char(5),
    b       bytea,
    bo      bool,
    d       date,
    tm      time,
    ttz     timetz,
    ts      timestamp,
    ts3     timestamp(3),
    tstz    timestamptz,
    iv      interval,
    u       uuid,
    j       json,
    jb      jsonb,
    ip      inet,
    net     cidr,
    mac     macaddr,
    a_i4    int4[][],
    a_t     text[],
    a_f8    float8[],
    mood    afdw_mood,
    nn      afdw_nonneg
) SERVER loopback OPTIONS (schema_name 'remote', table_name 'types');

--
-- The checks, as views and functions to run again under each setting.
--

-- Whole rows: the text of every row (each column through its output
-- function: it tells -0 from 0, 1.50 from 1.5, a json's spacing, a char's
-- padding) must be the same multiset on both sides.
CREATE VIEW afdw_types_rows AS
SELECT (SELECT count(*) FROM ft_types) AS fdw_rows,
       (SELECT count(*) FROM remote.types) AS remote_rows,
       (SELECT count(*) FROM (SELECT f::text FROM ft_types f
                              EXCEPT ALL
                              SELECT r::text FROM remote.types r) s) AS only_fdw,
       (SELECT count(*) FROM (SELECT r::text FROM remote.types r
                              EXCEPT ALL
                              SELECT f::text FROM ft_types f) s) AS only_remote;

-- Row by row and column by column: the ids of rows that differ, with the
-- names of the columns that differ, by the type's equality and by text.
-- json has no equality: its text is compared.
CREATE VIEW afdw_types_diff AS
SELECT id, differing FROM (
  SELECT coalesce(f.id, r.id) AS id, array_remove(ARRAY[
    CASE WHEN f.id IS NULL OR r.id IS NULL THEN 'row' END,
    CASE WHEN f.i2 IS DISTINCT FROM r.i2 THEN 'i2' END,
    CASE WHEN f.i4 IS DISTINCT FROM r.i4 THEN 'i4' END,
    CASE WHEN f.i8 IS DISTINCT FROM r.i8 THEN 'i8' END,
    CASE WHEN f.num IS DISTINCT FROM r.num THEN 'num' END,
    CASE WHEN f.num::text IS DISTINCT FROM r.num::text THEN 'num text' END,
    CASE WHEN f.num_ps IS DISTINCT FROM r.num_ps THEN 'num_ps' END,
    CASE WHEN f.num_ps::text IS DISTINCT FROM r.num_ps::text THEN 'num_ps text' END,
    CASE WHEN f.f4 IS DISTINCT FROM r.f4 THEN 'f4' END,
    CASE WHEN f.f4::text IS DISTINCT FROM r.f4::text THEN 'f4 text' END,
    CASE WHEN f.f8 IS DISTINCT FROM r.f8 THEN 'f8' END,
    CASE WHEN f.f8::text IS DISTINCT FROM r.f8::text THEN 'f8 text' END,
    CASE WHEN f.t IS DISTINCT FROM r.t THEN 't' END,
    CASE WHEN f.vc IS DISTINCT FROM r.vc THEN 'vc' END,
    CASE WHEN f.vc5 IS DISTINCT FROM r.vc5 THEN 'vc5' END,
    CASE WHEN f.c1 IS DISTINCT FROM r.c1 THEN 'c1' END,
    CASE WHEN f.c5 IS DISTINCT FROM r.c5 OR octet_length(f.c5) IS DISTINCT FROM octet_length(r.c5)
         OR format('%s', f.c5) IS DISTINCT FROM format('%s', r.c5) THEN 'c5' END,
    CASE WHEN f.b IS DISTINCT FROM r.b THEN 'b' END,
    CASE WHEN f.bo IS DISTINCT FROM r.bo THEN 'bo' END,
    CASE WHEN f.d IS DISTINCT FROM r.d THEN 'd' END,
    CASE WHEN f.tm IS DISTINCT FROM r.tm THEN 'tm' END,
    CASE WHEN f.ttz IS DISTINCT FROM r.ttz THEN 'ttz' END,
    CASE WHEN f.ts IS DISTINCT FROM r.ts THEN 'ts' END,
    CASE WHEN f.ts3 IS DISTINCT FROM r.ts3 THEN 'ts3' END,
    CASE WHEN f.tstz IS DISTINCT FROM r.tstz THEN 'tstz' END,
    CASE WHEN f.iv IS DISTINCT FROM r.iv THEN 'iv' END,
    CASE WHEN f.iv::text IS DISTINCT FROM r.iv::text THEN 'iv text' END,
    CASE WHEN f.u IS DISTINCT FROM r.u THEN 'u' END,
    CASE WHEN f.j::text IS DISTINCT FROM r.j::text THEN 'j' END,
    CASE WHEN f.jb IS DISTINCT FROM r.jb THEN 'jb' END,
    CASE WHEN f.ip IS DISTINCT FROM r.ip THEN 'ip' END,
    CASE WHEN f.net IS DISTINCT FROM r.net THEN 'net' END,
    CASE WHEN f.mac IS DISTINCT FROM r.mac THEN 'mac' END,
    CASE WHEN f.a_i4 IS DISTINCT FROM r.a_i4 THEN 'a_i4' END,
    CASE WHEN array_dims(f.a_i4) IS DISTINCT FROM array_dims(r.a_i4) THEN 'a_i4 dims' END,
    CASE WHEN f.a_t IS DISTINCT FROM r.a_t THEN 'a_t' END,
    CASE WHEN f.a_f8::text IS DISTINCT FROM r.a_f8::text THEN 'a_f8' END,
    CASE WHEN f.mood IS DISTINCT FROM r.mood THEN 'mood' END,
    CASE WHEN f.nn IS DISTINCT FROM r.nn THEN 'nn' END
  ], NULL) AS differing
  FROM ft_types f FULL JOIN remote.types r ON f.id = r.id
) s WHERE cardinality(differing) > 0;

-- One column at a time, so that the remote query fetches that column
-- only: the sorted texts of its values (NULLs included, as "()") must be
-- the same.  Returns the number of columns and those that differ.
CREATE FUNCTION afdw_types_columns(OUT ncols int, OUT differing text[])
LANGUAGE plpgsql AS $$
DECLARE
  c name;
  same bool;
BEGIN
  ncols := 0;
  differing := '{}';
  FOR c IN SELECT attname FROM pg_attribute
           WHERE attrelid = 'remote.types'::regclass AND attnum > 0
             AND NOT attisdropped ORDER BY attnum
  LOOP
    EXECUTE format(
      'SELECT (SELECT array_agg(ROW(%1$I)::text ORDER BY ROW(%1$I)::text) FROM public.ft_types)
              IS NOT DISTINCT FROM
              (SELECT array_agg(ROW(%1$I)::text ORDER BY ROW(%1$I)::text) FROM remote.types)',
      c) INTO same;
    ncols := ncols + 1;
    IF NOT same THEN
      differing := differing || c::text;
    END IF;
  END LOOP;
END
$$;

-- Rows that a condition selects, through the foreign table and directly:
-- the condition's constants travel to the remote server when it is
-- pushed down, so they must be printed in a form the remote side reads.
CREATE FUNCTION afdw_types_where(cond text, OUT fdw int[], OUT remote int[])
LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE format('SELECT array_agg(id ORDER BY id) FROM public.ft_types WHERE %s', cond)
    INTO fdw;
  EXECUTE format('SELECT array_agg(id ORDER BY id) FROM remote.types WHERE %s', cond)
    INTO remote;
END
$$;

-- All checks at once; every line must say 0 differences.
CREATE VIEW afdw_types_all AS
SELECT 'rows' AS "check", format('%s fdw, %s remote, %s only fdw, %s only remote',
                               fdw_rows, remote_rows, only_fdw, only_remote) AS result
  FROM afdw_types_rows
UNION ALL
SELECT 'row by row', format('%s differences', count(*)) FROM afdw_types_diff
UNION ALL
SELECT 'column by column', format('%s columns, %s differences: %s', ncols,
                                  cardinality(differing), differing)
  FROM afdw_types_columns()
UNION ALL
SELECT 'whole rows by id',
       format('%s differences',
              count(*) FILTER (WHERE ftext IS DISTINCT FROM rtext))
  FROM (SELECT id, f::text AS ftext FROM ft_types f) a
  FULL JOIN (SELECT id, r::text AS rtext FROM remote.types r) b USING (id);

--
-- Under the settings the values were typed in with.
--
SELECT * FROM afdw_types_all;
SELECT * FROM afdw_types_diff ORDER BY id;

-- A few values of each kind, to show them (read through async_fdw).
SELECT id, i2, i4, i8, num_ps, f4, f8, bo FROM ft_types ORDER BY id;
SELECT id, d, tm, ttz, ts, ts3 FROM ft_types ORDER BY id;
SELECT id, iv FROM ft_types ORDER BY id;
-- (Zone offsets before 1970 depend on the tzdata version: not printed.)
SELECT id, tstz FROM ft_types WHERE id IN (1, 2, 4, 5, 6, 7) ORDER BY id;
SELECT id, u, ip, net, mac, mood, nn FROM ft_types ORDER BY id;
SELECT id, num FROM ft_types WHERE id NOT IN (2, 10, 12) ORDER BY id;
SELECT id, j, jb FROM ft_types ORDER BY id;
SELECT id, a_i4, a_t, a_f8 FROM ft_types ORDER BY id;
SELECT id, vc5, c1, c5, octet_length(c5) AS c5_bytes, b FROM ft_types
  WHERE id <> 10 ORDER BY id;
-- Values too long to print: their sizes and digests, both sides.
SELECT f.id, length(f.t) AS t_len, md5(f.t) = md5(r.t) AS t_same,
       length(f.vc) AS vc_len, f.vc = r.vc AS vc_same,
       octet_length(f.b) AS b_len, md5(f.b) = md5(r.b) AS b_same,
       length(f.num::text) AS num_len, f.num::text = r.num::text AS num_same
  FROM ft_types f JOIN remote.types r ON f.id = r.id
  WHERE f.id IN (2, 10) ORDER BY f.id;
SELECT f.t = r.t AS t_same, f.t FROM ft_types f, remote.types r
  WHERE f.id = 9 AND r.id = 9;
-- Every byte value made it, in order.
SELECT count(*) AS bytes_in_order FROM ft_types f, generate_series(0, 255) g
  WHERE f.id = 10 AND get_byte(f.b, g) = g;

-- Single columns, the whole row as a value, and no column at all.
SELECT f.f8 FROM ft_types f ORDER BY f.f8::text COLLATE "C";
SELECT t FROM ft_types t WHERE id IN (1, 11) ORDER BY id;
SELECT (SELECT array_agg(t::text ORDER BY t.id) FROM ft_types t)
       IS NOT DISTINCT FROM
       (SELECT array_agg(t::text ORDER BY t.id) FROM remote.types t) AS whole_rows_same;
SELECT (SELECT count(*) FROM ft_types) AS fdw, (SELECT count(*) FROM remote.types) AS remote;

-- Conditions whose constants are of the types above.
SELECT cond, (afdw_types_where(cond)).* FROM (VALUES
  ('i8 = -9223372036854775808'),
  ('num = ''NaN'''),
  ('num_ps = 0.0001'),
  ('f8 = 0.1'),
  ('f8 = ''-0'''),
  ('f4 > 1e38'),
  ('t = E''\n'' OR t LIKE ''%\\%'''),
  ('c5 = ''ab'''),
  ('b = ''\x0102ff'''),
  ('d = ''4714-11-24 BC'''),
  ('d < ''2000-01-01'''),
  ('ts3 = ''2021-03-04 05:06:07.891'''),
  ('tstz = ''2021-03-04 05:06:07.123456-05'''),
  ('tstz < ''1900-01-01 00:00:00+00'''),
  ('tm = ''24:00:00'''),
  ('ttz = ''00:00:00+15:59'''),
  ('iv = ''-1 mons +30 days'''),
  ('iv > ''1 year'''),
  ('u = ''a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'''),
  ('jb @> ''{"a": 1}'''),
  ('ip << ''192.168.0.0/16'''),
  ('a_t[2] = ''NULL'''),
  ('a_i4 = ''{{1,2},{3,4}}'''),
  ('mood = ''it''''s'''),
  ('nn >= 7')
) v(cond) ORDER BY cond COLLATE "C";

--
-- Other local settings: the remote session prints values its own way and
-- the local side must read them the same, whatever it would print.
--
SET TimeZone = 'Asia/Kolkata';
SET DateStyle = 'SQL, DMY';
SET IntervalStyle = 'sql_standard';
SET extra_float_digits = 0;
SET bytea_output = 'escape';
SELECT * FROM afdw_types_all;
SELECT * FROM afdw_types_diff ORDER BY id;
-- The same values printed the local way: day before month, SQL-standard
-- intervals, rounded floats, escaped bytea, times in IST (+05:30).
SELECT id, f4, f8, d, ts3, iv FROM ft_types WHERE id <> 10 ORDER BY id;
SELECT id, tstz FROM ft_types WHERE id IN (1, 2, 4, 5, 6, 7) ORDER BY id;
SELECT (SELECT tstz FROM ft_types WHERE id = 8) = '1900-01-01 00:00:00+00' AS tstz_1900,
       (SELECT f8 FROM ft_types WHERE id = 7) = 0.1::float8 AS f8_exact,
       (SELECT f4 FROM ft_types WHERE id = 8) = (1.0/3)::float4 AS f4_exact,
       (SELECT iv FROM ft_types WHERE id = 3) = '-1 years -2 mons +3 days -04:05:06.789'::interval AS iv_mixed,
       (SELECT b FROM ft_types WHERE id = 9) AS b;
SELECT cond, (afdw_types_where(cond)).* FROM (VALUES
  ('d = ''24/11/4714 BC'''),
  ('ts = ''29/02/2000 00:00:00'''),
  ('tstz = ''04/03/2021 15:36:07.123456'''),
  ('tstz = ''2000-02-29 00:00:00+14'''),
  ('iv = ''-1-2 +3 -4:05:06.789'''),
  ('iv = ''-1 +1:00:00'''),
  ('f4 = (1.0/3)::float4'),
  ('f8 = 1.0/3'),
  ('b = ''\000\001\134''::bytea')
) v(cond) ORDER BY cond COLLATE "C";

-- Yet others: zones of +12:45 and -03:30, other date and interval styles,
-- floats rounded harder or printed with every digit.
SET TimeZone = 'Pacific/Chatham';
SET DateStyle = 'German';
SET IntervalStyle = 'iso_8601';
SET extra_float_digits = -15;
SELECT * FROM afdw_types_all;
SET TimeZone = 'America/St_Johns';
SET DateStyle = 'Postgres, YMD';
SET IntervalStyle = 'postgres_verbose';
SET extra_float_digits = 3;
SELECT * FROM afdw_types_all;
SELECT id, tstz, iv FROM ft_types WHERE id IN (1, 6, 7) ORDER BY id;

--
-- Small batches: fetch_size 1, 2, 11 (one fewer than the rows), 12 (all
-- of them, so the end shows only in an empty batch) and 13.
--
RESET TimeZone;
RESET DateStyle;
RESET IntervalStyle;
RESET extra_float_digits;
RESET bytea_output;
SET TimeZone = 'America/New_York';
ALTER FOREIGN TABLE ft_types OPTIONS (ADD fetch_size '2');
SELECT * FROM afdw_types_all;
SELECT * FROM afdw_types_diff ORDER BY id;
ALTER FOREIGN TABLE ft_types OPTIONS (SET fetch_size '1');
SELECT * FROM afdw_types_all;
ALTER FOREIGN TABLE ft_types OPTIONS (SET fetch_size '11');
SELECT * FROM afdw_types_all;
ALTER FOREIGN TABLE ft_types OPTIONS (SET fetch_size '12');
SELECT * FROM afdw_types_all;
ALTER FOREIGN TABLE ft_types OPTIONS (SET fetch_size '13');
SELECT * FROM afdw_types_all;
ALTER FOREIGN TABLE ft_types OPTIONS (DROP fetch_size);
-- The same in each fetch mode: streaming (COPY text format) and cursor,
-- under unusual local settings, in batches of several sizes.
SET TimeZone = 'Asia/Kolkata';
SET DateStyle = 'SQL, DMY';
SET IntervalStyle = 'sql_standard';
SET extra_float_digits = 0;
ALTER FOREIGN TABLE ft_types OPTIONS (ADD fetch_mode 'stream');
SELECT * FROM afdw_types_all;
SELECT * FROM afdw_types_diff ORDER BY id;
ALTER FOREIGN TABLE ft_types OPTIONS (ADD fetch_size '5');
SELECT * FROM afdw_types_all;
ALTER FOREIGN TABLE ft_types OPTIONS (SET fetch_mode 'cursor');
SELECT * FROM afdw_types_all;
SELECT * FROM afdw_types_diff ORDER BY id;
ALTER FOREIGN TABLE ft_types OPTIONS (DROP fetch_size, DROP fetch_mode);
-- Binary streams: a foreign table of the built-in columns only (the enum
-- and the domain keep ft_types in text format), over a remote view that
-- adds the remote query.  Its first stream also checks the remote column
-- types; the next ones are in binary format.
CREATE VIEW remote.types_q AS SELECT t.*, current_query() AS q FROM remote.types t;
CREATE FOREIGN TABLE ft_types_bin (
    id int, i2 int2, i4 int4, i8 int8, num numeric, num_ps numeric(12,4),
    f4 float4, f8 float8, t text, vc varchar, vc5 varchar(5), c1 char,
    c5 char(5), b bytea, bo bool, d date, tm time, ttz timetz,
    ts timestamp, ts3 timestamp(3), tstz timestamptz, iv interval, u uuid,
    j json, jb jsonb, ip inet, net cidr, mac macaddr, a_i4 int4[][],
    a_t text[], a_f8 float8[], q text
) SERVER loopback OPTIONS (schema_name 'remote', table_name 'types_q',
                           fetch_mode 'stream', fetch_size '3');
\set bin_cols 'id, i2, i4, i8, num, num_ps, f4, f8, t, vc, vc5, c1, c5, b, bo, d, tm, ttz, ts, ts3, tstz, iv, u, j, jb, ip, net, mac, a_i4, a_t, a_f8'
CREATE VIEW afdw_types_bin_rows AS
SELECT (SELECT count(*) FROM ft_types_bin) AS fdw_rows,
       (SELECT bool_and(q LIKE '%FORMAT binary%') FROM ft_types_bin) AS binary,
       (SELECT count(*) FROM (SELECT ROW(:bin_cols)::text FROM ft_types_bin
                              EXCEPT ALL
                              SELECT ROW(:bin_cols)::text FROM remote.types) s) AS only_fdw,
       (SELECT count(*) FROM (SELECT ROW(:bin_cols)::text FROM remote.types
                              EXCEPT ALL
                              SELECT ROW(:bin_cols)::text FROM ft_types_bin) s) AS only_remote;
-- Text format with the check, then binary (all of one query's streams
-- start before the check's answer, so the view runs twice).
SELECT count(id) FROM ft_types_bin;
SELECT * FROM afdw_types_bin_rows;
SELECT * FROM afdw_types_bin_rows;
-- One column at a time, binary.
SELECT count(*) FILTER (WHERE f.c5 IS DISTINCT FROM r.c5
                           OR octet_length(f.c5) IS DISTINCT FROM octet_length(r.c5)) AS c5,
       count(*) FILTER (WHERE f.f8::text IS DISTINCT FROM r.f8::text) AS f8,
       count(*) FILTER (WHERE f.tstz IS DISTINCT FROM r.tstz) AS tstz,
       count(*) FILTER (WHERE f.a_i4 IS DISTINCT FROM r.a_i4) AS a_i4
  FROM ft_types_bin f FULL JOIN remote.types r USING (id);
DROP VIEW afdw_types_bin_rows;
DROP FOREIGN TABLE ft_types_bin;
DROP VIEW remote.types_q;
RESET TimeZone;
RESET DateStyle;
RESET IntervalStyle;
RESET extra_float_digits;

--
-- Declared types that differ from the remote ones but take their values.
-- The local input function reads the remote value's text, which for
-- these columns gives what a local cast of the remote value gives.
--
CREATE FOREIGN TABLE ft_types_wide (
    id      int,
    i2      int8,
    i4      numeric,
    f4      float8,
    vc5     text,
    c5      varchar(5),
    mood    text,
    nn      int,
    jb      json,
    ttz     time
) SERVER loopback OPTIONS (schema_name 'remote', table_name 'types');
SELECT count(*) AS rows,
       count(*) FILTER (WHERE f.i2 IS NOT DISTINCT FROM r.i2::int8
                          AND f.i4 IS NOT DISTINCT FROM r.i4::numeric
                          AND f.vc5 IS NOT DISTINCT FROM r.vc5::text
                          AND f.mood IS NOT DISTINCT FROM r.mood::text
                          AND f.nn IS NOT DISTINCT FROM r.nn::int
                          AND f.jb::text IS NOT DISTINCT FROM r.jb::json::text
                          AND f.ttz IS NOT DISTINCT FROM r.ttz::time) AS same
  FROM ft_types_wide f JOIN remote.types r ON f.id = r.id;
-- Not so for two: a float4 read as float8 is the float8 nearest to the
-- float4's shortest text (not the float4's exact value), and a char(5)
-- read as varchar(5) keeps its padding (a cast strips it).
SELECT f.id, f.f4, r.f4::float8 AS f4_cast,
       f.f4 IS NOT DISTINCT FROM r.f4::text::float8 AS f4_as_text,
       f.c5 || '|' AS c5, r.c5::varchar(5) || '|' AS c5_cast,
       f.c5 IS NOT DISTINCT FROM
         CASE WHEN r.c5 IS NOT NULL THEN format('%s', r.c5)::varchar(5) END AS c5_as_text
  FROM ft_types_wide f JOIN remote.types r ON f.id = r.id
  ORDER BY f.id;
DROP FOREIGN TABLE ft_types_wide;

--
-- Remote values the local column cannot take: the error names the
-- foreign table and the column.
--
CREATE TABLE remote.types_conv (
    id int, word text, big int, neg int, nothing int, long text, j text,
    label text, amount numeric);
INSERT INTO remote.types_conv VALUES
  (1, '12', 12, 12, 12, 'ab', '{}', 'ok', 1.005),
  (2, 'abc', 100000, -1, NULL, 'abcdef', '{"a":', 'meh', 12345.678);
CREATE FOREIGN TABLE ft_tconv (
    id      int,
    word    int,
    big     int2,
    neg     afdw_nonneg,
    nothing afdw_nonneg,
    long    varchar(3),
    j       json,
    label   afdw_mood,
    amount  numeric(5,2)
) SERVER loopback OPTIONS (schema_name 'remote', table_name 'types_conv');
CREATE DOMAIN afdw_nonneg_notnull AS int NOT NULL;
CREATE FOREIGN TABLE ft_tconv2 (id int, nothing afdw_nonneg_notnull)
  SERVER loopback OPTIONS (schema_name 'remote', table_name 'types_conv');

-- Row 1 converts (its amount rounded to the column's scale, as a cast
-- would); the remote values are shown for comparison.
SELECT * FROM ft_tconv WHERE id = 1;
SELECT * FROM remote.types_conv WHERE id = 1;
-- Text that is no integer.
SELECT word FROM ft_tconv ORDER BY id;
-- An integer out of the range of int2.
SELECT big FROM ft_tconv ORDER BY id;
-- A value the domain's CHECK rejects.
SELECT neg FROM ft_tconv ORDER BY id;
-- A NULL is fine for a domain without NOT NULL, not for one with it.
SELECT id, nothing FROM ft_tconv ORDER BY id;
SELECT id, nothing FROM ft_tconv2 ORDER BY id;
-- Too long for varchar(3).
SELECT long FROM ft_tconv ORDER BY id;
-- Not JSON.
SELECT j FROM ft_tconv ORDER BY id;
-- Not a label of the enum.
SELECT label FROM ft_tconv ORDER BY id;
-- Too large for numeric(5,2).
SELECT amount FROM ft_tconv ORDER BY id;
-- A whole-row reference fails on the first bad column.
SELECT f FROM ft_tconv f ORDER BY id;
-- A remote timestamp at the top of the range is past the end of the range
-- of timestamptz in a zone west of UTC.
CREATE FOREIGN TABLE ft_tconv3 (id int, ts timestamptz)
  SERVER loopback OPTIONS (schema_name 'remote', table_name 'types');
SELECT id, ts FROM ft_tconv3 ORDER BY id;
-- The bad row in a later batch than the first.
ALTER FOREIGN TABLE ft_tconv OPTIONS (ADD fetch_size '1');
SELECT neg FROM ft_tconv ORDER BY id;
-- After the errors the connection still works.
SELECT count(*) FROM ft_tconv;
SELECT (SELECT count(*) FROM ft_types) AS fdw, (SELECT count(*) FROM remote.types) AS remote;

--
-- Clean up.
--
DROP FOREIGN TABLE ft_tconv, ft_tconv2, ft_tconv3;
DROP DOMAIN afdw_nonneg_notnull;
DROP TABLE remote.types_conv;
DROP VIEW afdw_types_all, afdw_types_diff, afdw_types_rows;
DROP FUNCTION afdw_types_columns();
DROP FUNCTION afdw_types_where(text);
DROP FOREIGN TABLE ft_types;
DROP TABLE remote.types;
DROP DOMAIN afdw_nonneg;
DROP TYPE afdw_mood;
RESET TimeZone;
RESET DateStyle;
