#!/bin/bash
# test/bench/q1.sh
#   A TPC-H Q1-shaped aggregate over a lineitem-like table spread over N
#   shards on loopback, against the shards computing their part alone
#   (issue 26).  It starts a throwaway coordinator and N shard servers,
#   generates the rows in SQL, and prints the median of RUNS timed runs of:
#     async_fdw     the query on a table partitioned into async_fdw tables
#     postgres_fdw  the same through postgres_fdw at its best
#                   (async_capable, partitionwise aggregation)
#     shards' SQL   async_fdw's remote SQL (from EXPLAIN VERBOSE) run on
#                   every shard at once: the slowest shard's time
#     shards' Q1    the plain query (final aggregates) on every shard at once
#     local         the query on one local table holding every row
#   and the ratios of async_fdw to each.  Each figure is timed in a new
#   session after one warm-up run there, the five in turns; the medians are
#   printed.  It checks that every FDW's rows equal the local table's, text
#   for text.
#
#   PG_CONFIG=pg_config  the installation (async_fdw installed in it)
#   PORT_BASE=56300      coordinator; shard k on PORT_BASE + k
#   ROWS=2000000 SHARDS=2 RUNS=5   KEEP=1 keeps the data directories
#
# Run as root (servers run as postgres) or as the owner of the binaries.
PORT_BASE=${PORT_BASE:-56300}
ROWS=${ROWS:-2000000}
SHARDS=${SHARDS:-2}
RUNS=${RUNS:-5}
# shellcheck source=cg_common.sh
source "$(dirname "${BASH_SOURCE[0]}")/cg_common.sh"

# The shards are reached over TCP on loopback, as in a cluster; one
# process per query everywhere, as in the shards' own Q1.
SETTINGS_CONF="$LOOPBACK_CONF
shared_buffers = 256MB
work_mem = 64MB"

# start_server NAME PORT: a new data directory, started.
start_server() {
	init_cluster "$1" "$2" "$SETTINGS_CONF"
	start_cluster "$1"
}

# The rows of orderkeys [LO, HI): the same values wherever they are made.
rows_sql() {
	cat <<SQL
SELECT i AS l_orderkey,
       (1 + i % 50)::numeric(15,2) AS l_quantity,
       ((900 + (i * 7919) % 100000) / 100.0 * (1 + i % 50))::numeric(15,2) AS l_extendedprice,
       ((i * 13) % 11 / 100.0)::numeric(15,2) AS l_discount,
       ((i * 17) % 9 / 100.0)::numeric(15,2) AS l_tax,
       (CASE WHEN i % 4 = 0 THEN 'A' WHEN i % 4 = 1 THEN 'R' ELSE 'N' END)::char(1) AS l_returnflag,
       (CASE WHEN i % 4 < 2 OR i % 7 = 0 THEN 'F' ELSE 'O' END)::char(1) AS l_linestatus,
       (date '1992-01-02' + ((i * 31) % 2525)::int) AS l_shipdate
  FROM generate_series($1::bigint, $2 - 1) AS i
SQL
}

COLS="l_orderkey bigint, l_quantity numeric(15,2), l_extendedprice numeric(15,2),
      l_discount numeric(15,2), l_tax numeric(15,2), l_returnflag char(1),
      l_linestatus char(1), l_shipdate date"

q1() {
	cat <<SQL
SELECT l_returnflag, l_linestatus,
       sum(l_quantity) AS sum_qty, sum(l_extendedprice) AS sum_base_price,
       sum(l_extendedprice * (1 - l_discount)) AS sum_disc_price,
       sum(l_extendedprice * (1 - l_discount) * (1 + l_tax)) AS sum_charge,
       avg(l_quantity) AS avg_qty, avg(l_extendedprice) AS avg_price,
       avg(l_discount) AS avg_disc, count(*) AS count_order
  FROM $1
 WHERE l_shipdate <= date '1998-12-01' - interval '90 day'
 GROUP BY l_returnflag, l_linestatus
 ORDER BY l_returnflag, l_linestatus
SQL
}

COORD=$PORT_BASE
pids=()
start_server coord "$COORD"
for k in $(seq 1 "$SHARDS"); do
	start_server "shard$k" $((PORT_BASE + k))
done

echo "loading $ROWS rows over $SHARDS shards..." >&2
for k in $(seq 1 "$SHARDS"); do
	lo=$(((k - 1) * ROWS / SHARDS)); hi=$((k * ROWS / SHARDS))
	psql_at $((PORT_BASE + k)) -c "CREATE TABLE lineitem AS $(rows_sql $lo $hi)" \
		-c "VACUUM ANALYZE lineitem" &
	pids+=($!)
done
psql_at "$COORD" -c "CREATE TABLE li_local AS $(rows_sql 0 "$ROWS")" -c "VACUUM ANALYZE li_local" &
pids+=($!)
for p in "${pids[@]}"; do wait "$p"; done

{
	echo "CREATE EXTENSION async_fdw; CREATE EXTENSION postgres_fdw;"
	echo "CREATE TABLE li_afdw ($COLS) PARTITION BY RANGE (l_orderkey);"
	echo "CREATE TABLE li_pfdw ($COLS) PARTITION BY RANGE (l_orderkey);"
	for k in $(seq 1 "$SHARDS"); do
		lo=$(((k - 1) * ROWS / SHARDS)); hi=$((k * ROWS / SHARDS))
		for f in afdw pfdw; do
			w=async_fdw; opts=""
			[ $f = pfdw ] && { w=postgres_fdw; opts=", async_capable 'true'"; }
			echo "CREATE SERVER ${f}_s$k FOREIGN DATA WRAPPER $w
				OPTIONS (host '127.0.0.1', port '$((PORT_BASE + k))', dbname 'postgres'$opts);
			CREATE USER MAPPING FOR postgres SERVER ${f}_s$k OPTIONS (user 'postgres');
			CREATE FOREIGN TABLE li_${f}_$k PARTITION OF li_$f FOR VALUES FROM ($lo) TO ($hi)
				SERVER ${f}_s$k OPTIONS (table_name 'lineitem');"
		done
	done
	echo "ANALYZE li_afdw; ANALYZE li_pfdw;"
} | psql_at "$COORD" -f - >/dev/null

SETTINGS="SET enable_partitionwise_aggregate = on; SET enable_partitionwise_join = on;"

# time_once PORT SQL: SQL run twice in a new session, the second timed: ms.
time_once() {
	{ echo "$SETTINGS"; echo "$2;"; echo "\\timing on"; echo "$2;"; } |
		psql_at "$1" -f - | sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p'
}

# time_shards SQL: SQL on every shard at once (each timed after a warm-up
# in its session): the slowest shard's ms.
time_shards() {
	local k
	for k in $(seq 1 "$SHARDS"); do
		time_once $((PORT_BASE + k)) "$1" >"$WORK/t_$k" &
	done
	wait
	cat "$WORK"/t_* | sort -n | tail -1
}

# median_of: the median of the numbers on stdin, one per line.
median_of() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# The rows first: every FDW's equal the local table's.
psql_at "$COORD" -c "$SETTINGS" -c "$(q1 li_local)" >"$WORK/local.out"
for f in afdw pfdw; do
	psql_at "$COORD" -c "$SETTINGS" -c "$(q1 li_$f)" >"$WORK/$f.out"
	if ! cmp -s "$WORK/local.out" "$WORK/$f.out"; then
		echo "WRONG ROWS through li_$f:" >&2
		diff "$WORK/local.out" "$WORK/$f.out" >&2 || true
		exit 1
	fi
done
echo "rows: async_fdw and postgres_fdw equal the local table's ($(wc -l <"$WORK/local.out") groups)" >&2

psql_at "$COORD" -c "$SETTINGS" -c "EXPLAIN (VERBOSE, COSTS OFF) $(q1 li_afdw)" >"$WORK/plan.txt"
REMOTE_SQL=$(sed -n 's/^ *Remote SQL: //p' "$WORK/plan.txt" | head -1)
if [ "$(sed -n 's/^ *Remote SQL: //p' "$WORK/plan.txt" | sort -u | wc -l)" != 1 ] ||
	! grep -q "GROUP BY" <<<"$REMOTE_SQL"; then
	echo "async_fdw did not push one grouped query to each shard:" >&2
	cat "$WORK/plan.txt" >&2
	exit 1
fi
echo "$REMOTE_SQL" >"$WORK/remote.sql"
echo "remote SQL: ${#REMOTE_SQL} characters (KEEP=1 keeps it in $WORK/remote.sql)" >&2

# The figures in turns, so that a change of the machine's load touches
# each alike.
for r in $(seq "$RUNS"); do
	time_once "$COORD" "$(q1 li_afdw)" >>"$WORK/afdw"
	time_once "$COORD" "$(q1 li_pfdw)" >>"$WORK/pfdw"
	time_shards "$REMOTE_SQL" >>"$WORK/sql"
	time_shards "$(q1 lineitem)" >>"$WORK/q1"
	time_once "$COORD" "$(q1 li_local)" >>"$WORK/local"
	echo "run $r of $RUNS done" >&2
done
t_afdw=$(median_of <"$WORK/afdw")
t_pfdw=$(median_of <"$WORK/pfdw")
t_sql=$(median_of <"$WORK/sql")
t_q1=$(median_of <"$WORK/q1")
t_local=$(median_of <"$WORK/local")

echo "| $ROWS rows, $SHARDS shards, median of $RUNS | ms | async_fdw / this |"
echo "| --- | ---: | ---: |"
for row in "async_fdw:$t_afdw" "postgres_fdw (async_capable):$t_pfdw" \
	"shards' SQL (async_fdw's remote SQL, all at once):$t_sql" \
	"shards' Q1 (plain aggregates, all at once):$t_q1" "local table:$t_local"; do
	awk -v n="${row%%:*}" -v t="${row##*:}" -v a="$t_afdw" \
		'BEGIN { printf "| %s | %.0f | %.2fx |\n", n, t, a / t }'
done
