#!/bin/bash
# test/bench/callgrind_paths.sh
#   Coordinator instructions (callgrind) of three paths through the installed
#   async_fdw, at its defaults, against a remote server on loopback:
#   stream  one stream of 100,000 rows of one foreign table
#           (SELECT count(*), sum(v) FROM (SELECT * FROM ft OFFSET 0) s)
#   lookup  200 single-row lookups by primary key (SELECT * FROM ft WHERE id = k)
#   copy    COPY of 100,000 rows into a foreign table (psql \copy, FROM STDIN)
#   Each figure is the difference between a session that runs the path after
#   a warm-up (the same statement once; for copy, a COPY of 1,000 rows) and
#   one that runs the warm-up alone: caches and connections warm, session
#   start and exit cancelled out.  Median of RUNS such pairs.
#
#   PG_CONFIG=pg_config  PORT_BASE=56250  (see cg_common.sh)
#   RUNS=3  ROWS=100000  LOOKUPS=200
#
# Example: PG_CONFIG=/opt/pgB/usr/lib/postgresql/15/bin/pg_config \
#            PORT_BASE=56250 bash test/bench/callgrind_paths.sh
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=test/bench/cg_common.sh
. "$HERE/cg_common.sh"
RUNS=${RUNS:-3}
ROWS=${ROWS:-100000}
LOOKUPS=${LOOKUPS:-200}

init_cluster remote "$REMOTE_PORT"
init_cluster coord "$COORD_PORT"
start_cluster remote
start_cluster coord
psql_at "$REMOTE_PORT" <<SQL
CREATE TABLE t (id int PRIMARY KEY, v int);
INSERT INTO t SELECT g, g % 1000 FROM generate_series(1, $ROWS) g;
CREATE TABLE c (id int, v int);
VACUUM ANALYZE t;
SQL
psql_at "$COORD_PORT" <<SQL
CREATE EXTENSION async_fdw;
CREATE SERVER loopback FOREIGN DATA WRAPPER async_fdw
  OPTIONS (host '$WORK/sock', port '$REMOTE_PORT', dbname 'postgres');
CREATE USER MAPPING FOR CURRENT_USER SERVER loopback;
CREATE FOREIGN TABLE ft (id int, v int) SERVER loopback OPTIONS (table_name 't');
CREATE FOREIGN TABLE ftc (id int, v int) SERVER loopback OPTIONS (table_name 'c');
SQL
seq 1 "$ROWS" | awk '{ print $1 "\t" $1 % 1000 }' >"$WORK/copy_big.tsv"
seq 1 1000 | awk '{ print $1 "\t" $1 % 1000 }' >"$WORK/copy_small.tsv"
chmod 644 "$WORK"/*.tsv
stop_cluster coord

stream_sql='SELECT count(*), sum(v) FROM (SELECT * FROM ft OFFSET 0) s;'
echo "$stream_sql" >"$WORK/stream_a.sql"
{ echo "$stream_sql"; echo "$stream_sql"; } >"$WORK/stream_b.sql"
echo "SELECT * FROM ft WHERE id = 1;" >"$WORK/lookup_a.sql"
{
	echo "SELECT * FROM ft WHERE id = 1;"
	for i in $(seq "$LOOKUPS"); do echo "SELECT * FROM ft WHERE id = $(( (i * 7919) % ROWS + 1 ));"; done
} >"$WORK/lookup_b.sql"
echo "\\copy ftc FROM '$WORK/copy_small.tsv'" >"$WORK/copy_a.sql"
{ cat "$WORK/copy_a.sql"; echo "\\copy ftc FROM '$WORK/copy_big.tsv'"; } >"$WORK/copy_b.sql"

start_cluster_callgrind coord "$COORD_PORT"
echo "async_fdw: $(md5sum "$("$PG_CONFIG" --pkglibdir)/async_fdw.so" | cut -c1-12) (md5 of the installed async_fdw.so)"
echo
echo "| path | coordinator instructions (median of $RUNS) | all runs |"
echo "| --- | ---: | --- |"
for path in stream lookup copy; do
	runs=()
	for _ in $(seq "$RUNS"); do
		a=$(cg_session "$COORD_PORT" "$WORK/${path}_a.sql")
		b=$(cg_session "$COORD_PORT" "$WORK/${path}_b.sql")
		runs+=($(( $(cg_total "$b") - $(cg_total "$a") )))
	done
	echo "| $path | $(median "${runs[@]}") | ${runs[*]} |"
done
stop_cluster coord
