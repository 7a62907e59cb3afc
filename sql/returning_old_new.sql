--
-- returning_old_new: an UPDATE or DELETE whose RETURNING reads OLD or NEW
-- (PostgreSQL 18) is no direct modification: its rows change one by one,
-- also when the target is joined remotely with other tables (the join is
-- a scan then, with its SELECT).  Before 18 OLD and NEW are no names
-- there (returning_old_new_1.out).
--
CREATE SCHEMA ron;
CREATE TABLE ron.t (id int PRIMARY KEY, v text);
CREATE TABLE ron.u (id int, w text);
INSERT INTO ron.t SELECT g, 'v' || g FROM generate_series(1, 10) g;
INSERT INTO ron.u SELECT g, 'w' || g FROM generate_series(1, 10) g;
CREATE FOREIGN TABLE ron_t (id int, v text) SERVER loopback
  OPTIONS (schema_name 'ron', table_name 't');
CREATE FOREIGN TABLE ron_u (id int, w text) SERVER loopback
  OPTIONS (schema_name 'ron', table_name 'u');

BEGIN;
EXPLAIN (VERBOSE, COSTS OFF)
  UPDATE ron_t SET v = v || '!' FROM ron_u
   WHERE ron_t.id = ron_u.id AND ron_u.id <= 3 RETURNING old.v, new.v, ron_u.w;
UPDATE ron_t SET v = v || '!' FROM ron_u
 WHERE ron_t.id = ron_u.id AND ron_u.id <= 3 RETURNING old.v, new.v, ron_u.w;
DELETE FROM ron_t USING ron_u
 WHERE ron_t.id = ron_u.id AND ron_u.id = 4 RETURNING old.*, new.*;
UPDATE ron_t SET v = 'x' WHERE id = 5 RETURNING old, new;
ROLLBACK;
-- Without OLD and NEW the same join is the remote UPDATE ... FROM.
BEGIN;
EXPLAIN (VERBOSE, COSTS OFF)
  UPDATE ron_t SET v = v || '?' FROM ron_u
   WHERE ron_t.id = ron_u.id AND ron_u.id <= 3 RETURNING ron_t.v, ron_u.w;
UPDATE ron_t SET v = v || '?' FROM ron_u
 WHERE ron_t.id = ron_u.id AND ron_u.id <= 3 RETURNING ron_t.v, ron_u.w;
ROLLBACK;
SELECT * FROM ron_t ORDER BY id;

DROP FOREIGN TABLE ron_t, ron_u;
DROP SCHEMA ron CASCADE;
