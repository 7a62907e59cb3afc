--
-- safety: defects of issue 10 (crashes, wrong rows, spurious errors), each
-- with the query that showed it
--

-- 1. An error while a batch with a grown line buffer is current: the buffer
-- lives in a context deleted before the scan's cleanup runs.
CREATE TABLE remote.huge (id int, t text);
INSERT INTO remote.huge VALUES (1, repeat('x', 9000000));
CREATE FOREIGN TABLE fhuge (id int, t int)
  SERVER loopback OPTIONS (schema_name 'remote', table_name 'huge');
SELECT id FROM fhuge;                   -- no t: fine
-- t is not an int: an error, not a crash (the message would hold 9 MB).
\set VERBOSITY sqlstate
SELECT * FROM fhuge;
SELECT * FROM fhuge;                    -- the same again, types known
ALTER FOREIGN TABLE fhuge OPTIONS (ADD fetch_mode 'cursor');
SELECT * FROM fhuge;
\set VERBOSITY default
-- The same, caught in a subtransaction.
CREATE FUNCTION afdw_try(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE q;
  RETURN 'ok';
EXCEPTION WHEN others THEN
  RETURN SQLSTATE || ': ' || left(SQLERRM, 60);
END
$$;
SELECT afdw_try('SELECT * FROM fhuge');
-- The backend is still there, and so is its pool.
SELECT count(*) FROM ft1;
DROP FOREIGN TABLE fhuge;
DROP TABLE remote.huge;
