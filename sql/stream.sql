--
-- stream: scans read to the end stream their rows with COPY ... TO STDOUT;
-- scans that may stop early or are rescanned with new parameters use a
-- cursor; a stream abandoned early is cancelled remotely
--
CREATE TABLE remote.st (id int, v text);
INSERT INTO remote.st SELECT g, 'v' || g FROM generate_series(1, 5000) g;
CREATE FOREIGN TABLE ft_st (id int, v text) SERVER loopback
  OPTIONS (schema_name 'remote', table_name 'st');
CREATE TEMP TABLE st_keys AS SELECT g AS k FROM generate_series(1, 20) g;
ANALYZE st_keys;

-- fetch_mode auto (the default) chooses per scan.
EXPLAIN (VERBOSE, COSTS OFF) SELECT count(*) FROM ft_st;
EXPLAIN (VERBOSE, COSTS OFF) SELECT id FROM ft_st LIMIT 5;
EXPLAIN (VERBOSE, COSTS OFF) SELECT k FROM st_keys WHERE EXISTS (SELECT 1 FROM ft_st WHERE v = 'v' || k);
SET enable_hashjoin = off;
SET enable_mergejoin = off;
SET enable_material = off;
SET enable_memoize = off;
EXPLAIN (VERBOSE, COSTS OFF) SELECT k, v FROM st_keys JOIN ft_st ON id = k;
RESET enable_hashjoin;
RESET enable_mergejoin;
RESET enable_material;
RESET enable_memoize;
-- The option on the table or the server forces a mode.
ALTER FOREIGN TABLE ft_st OPTIONS (ADD fetch_mode 'cursor');
EXPLAIN (VERBOSE, COSTS OFF) SELECT count(*) FROM ft_st;
ALTER FOREIGN TABLE ft_st OPTIONS (SET fetch_mode 'stream');
EXPLAIN (VERBOSE, COSTS OFF) SELECT id FROM ft_st LIMIT 5;

-- Streams return the same rows as the table, with batches of any size.
SELECT count(*), sum(id), min(v), max(v) FROM ft_st;
ALTER FOREIGN TABLE ft_st OPTIONS (ADD fetch_size '7');
SELECT count(*), sum(id), min(v), max(v) FROM ft_st;
ALTER FOREIGN TABLE ft_st OPTIONS (DROP fetch_size);
SELECT count(*), sum(id), min(v), max(v) FROM remote.st;

-- A stream stopped early by a LIMIT is cancelled: the same transaction goes
-- on, and nothing runs remotely afterwards.  (OFFSET 0 keeps the LIMIT from
-- the remote query, so that the scan is stopped early.)
BEGIN;
SELECT count(*) FROM (SELECT id FROM (SELECT id FROM ft_st OFFSET 0) o LIMIT 5) s;
SELECT count(*) FROM (SELECT id FROM (SELECT id FROM ft_st OFFSET 0) o LIMIT 4999) s;
SELECT count(*), sum(id) FROM ft_st;
SAVEPOINT sp;
SELECT count(*) FROM (SELECT id FROM (SELECT id FROM ft_st OFFSET 0) o LIMIT 3) s;
ROLLBACK TO SAVEPOINT sp;
SELECT count(*) FROM (SELECT id FROM (SELECT id FROM ft_st OFFSET 0) o LIMIT 3) s;
RELEASE SAVEPOINT sp;
SELECT count(*), sum(id) FROM ft_st;
COMMIT;
SELECT count(*) FROM afdw_remote_states() s WHERE s <> 'idle';

-- Rescanned streams: the first rescan abandons the stream, later ones use
-- a cursor; the rows are right every time.
SET enable_hashjoin = off;
SET enable_mergejoin = off;
SET enable_material = off;
SET enable_memoize = off;
SELECT count(*), sum(f.id) FROM st_keys k, ft_st f WHERE f.id <= k.k;
SELECT count(*), sum(f.id) FROM st_keys k, remote.st f WHERE f.id <= k.k;
SELECT k.k, (SELECT max(id) FROM ft_st WHERE id < k.k * 100) FROM st_keys k WHERE k.k <= 3 ORDER BY 1;
RESET enable_hashjoin;
RESET enable_mergejoin;
RESET enable_material;
RESET enable_memoize;

-- Errors in a stream: a remote error, a value the local type refuses.
CREATE VIEW remote.st_bad AS SELECT id, 1 / (id - 4000) AS x FROM remote.st;
CREATE FOREIGN TABLE ft_st_bad (id int, x int) SERVER loopback
  OPTIONS (schema_name 'remote', table_name 'st_bad', fetch_mode 'stream');
SELECT count(*), sum(x) FROM (SELECT x FROM ft_st_bad OFFSET 0) s;
CREATE FOREIGN TABLE ft_st_conv (id int, v int) SERVER loopback
  OPTIONS (schema_name 'remote', table_name 'st', fetch_mode 'stream');
SELECT sum(v) FROM (SELECT v FROM ft_st_conv OFFSET 0) s;
SELECT count(*) FROM ft_st;
SELECT count(*) FROM afdw_remote_states() s WHERE s <> 'idle';

-- Text that needs escaping in COPY's format comes back unchanged.
CREATE TABLE remote.st_text (id int, t text);
INSERT INTO remote.st_text VALUES (1, E'tab\there'), (2, E'new\nline'), (3, E'back\\slash'),
  (4, E'cr\rx'), (5, '\N'), (6, NULL), (7, ''), (8, E'\\N'), (9, E'bell\x07 del\x7f');
CREATE FOREIGN TABLE ft_st_text (id int, t text) SERVER loopback
  OPTIONS (schema_name 'remote', table_name 'st_text', fetch_mode 'stream');
SELECT f.id, f.t IS NOT DISTINCT FROM r.t AS same, f.t IS NULL AS is_null
  FROM ft_st_text f JOIN remote.st_text r USING (id) ORDER BY 1;

-- Binary format.  The first stream of a table also asks the remote server
-- for the types of the table's columns, after the COPY in the same
-- message; when they are the local types, later streams are in binary
-- format, each column cast to the local type.  current_query() shows the
-- remote query; a change to the foreign table asks again.
CREATE VIEW remote.st_q AS
  SELECT s.id, s.v, current_query() AS q FROM remote.st s WHERE s.id <= 3;
CREATE FOREIGN TABLE ft_st_q (id int, v text, q text) SERVER loopback
  OPTIONS (schema_name 'remote', table_name 'st_q', fetch_mode 'stream');
CREATE VIEW st_q_format AS
  SELECT id, v, q LIKE '%FORMAT binary%' AS binary, q LIKE '%pg_attribute%' AS checked
  FROM ft_st_q ORDER BY id;
SELECT * FROM st_q_format;
SELECT * FROM st_q_format;
SELECT DISTINCT q FROM ft_st_q;
ALTER FOREIGN TABLE ft_st_q OPTIONS (ADD fetch_size '2');
SELECT * FROM st_q_format;
SELECT * FROM st_q_format;
-- Receive functions read text in the client encoding: when it is not the
-- database's, streams stay in text format.
SET client_encoding = 'LATIN1';
SELECT * FROM st_q_format;
RESET client_encoding;
SELECT * FROM st_q_format;
-- Text escapes in binary format are bytes like any other.
CREATE VIEW remote.st_text_q AS SELECT t.*, current_query() AS q FROM remote.st_text t;
CREATE FOREIGN TABLE ft_st_text_q (id int, t text, q text) SERVER loopback
  OPTIONS (schema_name 'remote', table_name 'st_text_q', fetch_mode 'stream');
SELECT count(t) FROM (SELECT t FROM ft_st_text_q OFFSET 0) s;
SELECT f.id, f.t IS NOT DISTINCT FROM r.t AS same, f.t IS NULL AS is_null,
       f.q LIKE '%FORMAT binary%' AS binary
  FROM ft_st_text_q f JOIN remote.st_text r USING (id) ORDER BY 1;

-- Remote types that differ from the local ones keep the text format, and
-- with it the local input functions' rules: char(5) keeps its blanks in a
-- text column, and a numeric with a fraction is no integer.
CREATE TABLE remote.st_other (id int, c char(5), n numeric, b bigint);
INSERT INTO remote.st_other VALUES (1, 'ab', 1, 10), (2, 'abcde', 2, 20);
CREATE VIEW remote.st_other_q AS SELECT o.*, current_query() AS q FROM remote.st_other o;
CREATE FOREIGN TABLE ft_st_other (id int, c text, n int, b int, q text) SERVER loopback
  OPTIONS (schema_name 'remote', table_name 'st_other_q', fetch_mode 'stream');
SELECT id, format('[%s]', c) AS c, n, b, q LIKE '%FORMAT binary%' AS binary
  FROM ft_st_other ORDER BY id;
SELECT id, format('[%s]', c) AS c, n, b, q LIKE '%FORMAT binary%' AS binary
  FROM ft_st_other ORDER BY id;
INSERT INTO remote.st_other VALUES (3, 'x', 1.5, 30);
SELECT id, n FROM ft_st_other ORDER BY id;
-- A text stream read to its end in one batch and rescanned is read again
-- from memory; its lines are split apart only in a copy.
SET enable_hashjoin = off;
SET enable_mergejoin = off;
SET enable_material = off;
SET enable_memoize = off;
EXPLAIN (COSTS OFF)
  SELECT k.k, count(o.id) FROM st_keys k
    JOIN ft_st_other o ON o.id <= k.k + (random() * 0)::int
  WHERE k.k <= 3 GROUP BY k.k;
SELECT k.k, string_agg(format('%s [%s]', o.id, o.c), ', ' ORDER BY o.id) AS rows
  FROM st_keys k JOIN ft_st_other o ON o.id <= k.k + (random() * 0)::int
  WHERE k.k <= 3 GROUP BY k.k ORDER BY 1;
RESET enable_hashjoin;
RESET enable_mergejoin;
RESET enable_material;
RESET enable_memoize;

-- Short text values of a binary stream are used where they lie in the
-- received row, behind a one-byte header; longer ones are copied.  Lengths
-- around that limit, over batches of three rows, then a stream read again
-- from memory by a nested loop: its one batch must be left as it came.
CREATE TABLE remote.st_len (id int, t text);
INSERT INTO remote.st_len SELECT n, repeat(chr(97 + n % 26), n)
  FROM unnest(ARRAY[0, 1, 2, 125, 126, 127, 128, 1000, 100000]) n;
INSERT INTO remote.st_len VALUES (-1, NULL);
CREATE VIEW remote.st_len_q AS SELECT t.*, current_query() AS q FROM remote.st_len t;
CREATE FOREIGN TABLE ft_st_len (id int, t text, q text) SERVER loopback
  OPTIONS (schema_name 'remote', table_name 'st_len_q', fetch_mode 'stream', fetch_size '3');
SELECT count(t) FROM (SELECT t FROM ft_st_len OFFSET 0) s;
SELECT f.id, length(f.t), md5(f.t) IS NOT DISTINCT FROM md5(r.t) AS same,
       f.q LIKE '%FORMAT binary%' AS binary
  FROM ft_st_len f JOIN remote.st_len r USING (id) ORDER BY 1;
SELECT id, length(t), left(t, 3) FROM ft_st_len WHERE id BETWEEN 125 AND 128 ORDER BY 1;
ALTER FOREIGN TABLE ft_st_len OPTIONS (SET fetch_size '100', SET table_name 'st_len_short');
CREATE VIEW remote.st_len_short AS
  SELECT t.*, current_query() AS q FROM remote.st_len t WHERE id < 1000;
SELECT count(t) FROM (SELECT t FROM ft_st_len OFFSET 0) s;
SET enable_hashjoin = off;
SET enable_mergejoin = off;
SET enable_material = off;
SET enable_memoize = off;
SELECT k.k, count(f.id), sum(length(f.t)),
       string_agg(md5(f.t), ',' ORDER BY f.id) =
         (SELECT string_agg(md5(t), ',' ORDER BY id) FROM remote.st_len WHERE id < 1000) AS same,
       bool_and(f.q LIKE '%FORMAT binary%') AS binary
  FROM st_keys k JOIN ft_st_len f ON f.id <= k.k * 1000 + (random() * 0)::int
  WHERE k.k <= 3 GROUP BY k.k ORDER BY 1;
RESET enable_hashjoin;
RESET enable_mergejoin;
RESET enable_material;
RESET enable_memoize;

-- A remote column whose type changes after the check: the cast to the
-- local type keeps the binary data readable, and a value out of the local
-- type's range is an error.
CREATE TABLE remote.st_alt (id int, v int);
INSERT INTO remote.st_alt VALUES (1, 100), (2, 200);
CREATE FOREIGN TABLE ft_st_alt (id int, v int) SERVER loopback
  OPTIONS (schema_name 'remote', table_name 'st_alt', fetch_mode 'stream');
SELECT sum(v) FROM (SELECT v FROM ft_st_alt OFFSET 0) s;
SELECT sum(v) FROM (SELECT v FROM ft_st_alt OFFSET 0) s;
ALTER TABLE remote.st_alt ALTER COLUMN v TYPE bigint;
SELECT sum(v) FROM (SELECT v FROM ft_st_alt OFFSET 0) s;
INSERT INTO remote.st_alt VALUES (3, 1099511627776);
SELECT sum(v) FROM (SELECT v FROM ft_st_alt OFFSET 0) s;
SELECT count(*) FROM afdw_remote_states() s WHERE s <> 'idle';

-- Streams of one Append that share a connection take turns: past
-- max_connections, every partition still streams, each after the sibling
-- whose stream holds the connection.  Four partitions, two connections.
CREATE TABLE remote.turn (id int, v text);
INSERT INTO remote.turn SELECT g, 'v' || g FROM generate_series(1, 4000) g;
CREATE TABLE st_turn (id int, v text, q text, pid int) PARTITION BY RANGE (id);
DO $$
BEGIN
  FOR i IN 1..4 LOOP
    EXECUTE format('CREATE VIEW remote.turn_q%s AS
                    SELECT t.*, current_query() AS q, pg_backend_pid() AS pid
                    FROM remote.turn t WHERE id > %s AND id <= %s',
                   i, (i - 1) * 1000, i * 1000);
    EXECUTE format('CREATE FOREIGN TABLE st_turn%s PARTITION OF st_turn
                    FOR VALUES FROM (%s) TO (%s) SERVER loopback
                    OPTIONS (schema_name ''remote'', table_name ''turn_q%s'')',
                   i, (i - 1) * 1000 + 1, i * 1000 + 1, i);
  END LOOP;
END
$$;
ALTER SERVER loopback OPTIONS (ADD max_connections '2');
SET statement_timeout = '60s';
EXPLAIN (COSTS OFF) SELECT count(*) FROM st_turn;
SELECT count(*), sum(id), count(DISTINCT pid) AS connections,
       bool_and(q LIKE '%COPY%') AS all_streamed
  FROM st_turn;
-- Without the asynchronous Append, scans that share a connection read with
-- cursors.
SET enable_async_append = off;
SELECT count(*), sum(id), count(DISTINCT pid) AS connections,
       bool_or(q LIKE '%COPY%') AS any_streamed
  FROM st_turn;
RESET enable_async_append;
-- Scans of two Appends sharing the connections are not siblings: cursors.
-- (Partition by partition, each pair would join remotely in one stream.)
SET async_fdw.partitionwise_join = off;
SELECT count(*), bool_or(a.q LIKE '%COPY%') OR bool_or(b.q LIKE '%COPY%') AS any_streamed
  FROM st_turn a JOIN st_turn b USING (id);
RESET async_fdw.partitionwise_join;
-- A LIMIT over streams forced on, with siblings still waiting for their
-- turn: the streams stop, and the connections serve the next query.  (OFFSET
-- 0 keeps the LIMIT local.)
ALTER SERVER loopback OPTIONS (ADD fetch_mode 'stream');
SELECT count(*) FROM (SELECT id FROM (SELECT id FROM st_turn OFFSET 0) o LIMIT 1500) s;
SELECT count(*), sum(id), bool_and(q LIKE '%COPY%') AS all_streamed FROM st_turn;
ALTER SERVER loopback OPTIONS (DROP fetch_mode);
-- The Append rescanned by a nested loop: the same rows every time.
SET enable_hashjoin = off;
SET enable_mergejoin = off;
SET enable_material = off;
SET enable_memoize = off;
EXPLAIN (VERBOSE, COSTS OFF)
  SELECT k.k, count(t.id) FROM st_keys k, st_turn t
  WHERE k.k <= 3 AND t.id % 1000 <= k.k + (random() * 0)::int GROUP BY k.k;
SELECT k.k, count(t.id), sum(t.id) FROM st_keys k, st_turn t
  WHERE k.k <= 3 AND t.id % 1000 <= k.k + (random() * 0)::int GROUP BY k.k ORDER BY 1;
RESET enable_hashjoin;
RESET enable_mergejoin;
RESET enable_material;
RESET enable_memoize;
RESET statement_timeout;
ALTER SERVER loopback OPTIONS (DROP max_connections);
SELECT count(*) FROM afdw_remote_states() s WHERE s <> 'idle';
DROP TABLE st_turn;
DO $$
BEGIN
  FOR i IN 1..4 LOOP
    EXECUTE format('DROP VIEW remote.turn_q%s', i);
  END LOOP;
END
$$;
DROP TABLE remote.turn;

DROP VIEW st_q_format;
DROP FOREIGN TABLE ft_st, ft_st_bad, ft_st_conv, ft_st_text, ft_st_q, ft_st_text_q,
  ft_st_other, ft_st_alt, ft_st_len;
DROP VIEW remote.st_bad, remote.st_q, remote.st_text_q, remote.st_other_q,
  remote.st_len_q, remote.st_len_short;
DROP TABLE remote.st, remote.st_text, remote.st_other, remote.st_alt, remote.st_len, st_keys;
