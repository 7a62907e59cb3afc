#!/bin/bash
# test/bench/partitions.sh
#   Cost that grows with partitions rather than servers (issue 37, item 5):
#   the same ROWS rows over SHARDS shards on loopback, hash-partitioned
#   into SHARDS partitions and into PARTS (PARTS / SHARDS a shard), each
#   partition a foreign table on its shard.  For each layout it prints,
#   medians of RUNS:
#     new session   `SELECT count(*), sum(b)` as a new session's first
#                   query (\timing, the session's connection excluded)
#     warm          the same query again in that session
#     planning      `EXPLAIN` of it in a new session, then again (warm)
#     statements    remote statements one run sends (the shards' log)
#     lookup        a lookup by key (pruned to one partition; the remote
#                   tables and the local one have a primary key), pgbench,
#                   1 client, LOOKUP_SECONDS: mean latency
#   through async_fdw (also with async_fdw.combine_scans off: one remote
#   statement a partition), postgres_fdw (async_capable, partitionwise
#   aggregation on, as its documentation suggests) and a local table
#   partitioned the same way, all in the same run; and checks that every
#   wrapper's rows equal the local table's.
#
#   PG_CONFIG=pg_config  the installation (async_fdw installed in it)
#   PORT_BASE=56400      coordinator; shard k on PORT_BASE + k
#   ROWS=204800 SHARDS=4 PARTS=1024 RUNS=5 LOOKUP_SECONDS=5  KEEP=1
#
# Run as root (servers run as postgres) or as the owner of the binaries.
PORT_BASE=${PORT_BASE:-56400}
ROWS=${ROWS:-204800}
SHARDS=${SHARDS:-4}
PARTS=${PARTS:-1024}
RUNS=${RUNS:-5}
LOOKUP_SECONDS=${LOOKUP_SECONDS:-5}
# shellcheck source=cg_common.sh
source "$(dirname "${BASH_SOURCE[0]}")/cg_common.sh"

SETTINGS_CONF="$LOOPBACK_CONF
max_connections = 100
max_locks_per_transaction = 2048"

COORD=$PORT_BASE
start_shards "$SHARDS" "$SETTINGS_CONF"

# layout N: tables t<N>_<i> on the shards (partition i on shard 1 + i %
# SHARDS), and on the coordinator, hash-partitioned on id into N:
# a<N> (async_fdw), p<N> (postgres_fdw), l<N> (local).  Rows go in
# through async_fdw, which routes them, and are copied locally.
layout() {
	local n=$1 i k
	for k in $(seq 1 "$SHARDS"); do
		for i in $(seq 0 $((n - 1))); do
			[ $((1 + i % SHARDS)) = "$k" ] && echo "CREATE TABLE t${n}_$i (id int PRIMARY KEY, b int);"
		done | psql_at $((PORT_BASE + k)) -f - >/dev/null
	done
	{
		for t in a p l; do
			echo "CREATE TABLE $t$n (id int, b int) PARTITION BY HASH (id);"
			[ $t = l ] && echo "ALTER TABLE l$n ADD PRIMARY KEY (id);"
		done
		for i in $(seq 0 $((n - 1))); do
			k=$((1 + i % SHARDS))
			echo "CREATE FOREIGN TABLE a${n}_$i PARTITION OF a$n
				FOR VALUES WITH (MODULUS $n, REMAINDER $i) SERVER afdw_s$k
				OPTIONS (table_name 't${n}_$i');
			CREATE FOREIGN TABLE p${n}_$i PARTITION OF p$n
				FOR VALUES WITH (MODULUS $n, REMAINDER $i) SERVER pfdw_s$k
				OPTIONS (table_name 't${n}_$i');
			CREATE TABLE l${n}_$i PARTITION OF l$n
				FOR VALUES WITH (MODULUS $n, REMAINDER $i);"
		done
		echo "INSERT INTO a$n SELECT g, g % 1000 FROM generate_series(1, $ROWS) g;"
		echo "INSERT INTO l$n SELECT g, g % 1000 FROM generate_series(1, $ROWS) g;"
	} | psql_at "$COORD" -f - >/dev/null
	for k in $(seq 1 "$SHARDS"); do
		psql_at $((PORT_BASE + k)) -c "VACUUM ANALYZE" >/dev/null
	done
	psql_at "$COORD" -c "ANALYZE a$n" -c "ANALYZE p$n" -c "ANALYZE l$n" >/dev/null
}

{
	echo "CREATE EXTENSION async_fdw; CREATE EXTENSION postgres_fdw;"
	for k in $(seq 1 "$SHARDS"); do
		for f in afdw pfdw; do
			w=async_fdw; opts=""
			[ $f = pfdw ] && { w=postgres_fdw; opts=", async_capable 'true'"; }
			echo "CREATE SERVER ${f}_s$k FOREIGN DATA WRAPPER $w
				OPTIONS (host '127.0.0.1', port '$((PORT_BASE + k))', dbname 'postgres'$opts);
			CREATE USER MAPPING FOR postgres SERVER ${f}_s$k OPTIONS (user 'postgres');"
		done
	done
	# postgres_fdw's partitionwise aggregation, as its documentation
	# suggests; async_fdw turns it on for its own partitions itself.
	echo "ALTER DATABASE postgres SET enable_partitionwise_aggregate = on;"
} | psql_at "$COORD" -f - >/dev/null

echo "loading $ROWS rows in $SHARDS and in $PARTS partitions over $SHARDS shards..." >&2
layout "$SHARDS"
layout "$PARTS"

query() { echo "SELECT count(*), sum(b) FROM $1"; }
# async_fdw as it was before it combined small scans (issue 37, item 5)
OFF="SET async_fdw.combine_scans = off;"

# first_and_again PORT SQL [SET]: SQL twice in a new session, both timed
# (after the untimed SET, if any): "ms ms".
first_and_again() {
	{ echo "${3:-}"; echo "\\timing on"; echo "$2;"; echo "$2;"; } |
		psql_at "$1" -f - | sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p' | paste -sd' '
}

median_of() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# Rows first: each wrapper's equal the local table's.
for n in "$SHARDS" "$PARTS"; do
	want=$(psql_at "$COORD" -c "$(query "l$n")")
	for t in a p; do
		got=$(psql_at "$COORD" -c "$(query "$t$n")")
		if [ "$got" != "$want" ]; then
			echo "WRONG ROWS through $t$n: $got (local $want)" >&2
			exit 1
		fi
	done
done
echo "rows: both wrappers equal the local tables' at $SHARDS and $PARTS partitions" >&2

# statements TABLE [SET]: the remote statements of one run of the query
# on TABLE (after SET), counted in the shards' logs (log_statement = all
# meanwhile).
statements() {
	local k before after total=0
	for k in $(seq 1 "$SHARDS"); do
		psql_at $((PORT_BASE + k)) -c "ALTER SYSTEM SET log_statement = 'all'" \
			-c "SELECT pg_reload_conf()" >/dev/null
	done
	sleep 0.5
	before=$(cat "$WORK"/shard*.log | grep -c 'statement: ' || true)
	psql_at "$COORD" -c "${2:-SELECT}" -c "$(query "$1")" >/dev/null
	sleep 0.5
	after=$(cat "$WORK"/shard*.log | grep -c 'statement: ' || true)
	for k in $(seq 1 "$SHARDS"); do
		psql_at $((PORT_BASE + k)) -c "ALTER SYSTEM RESET log_statement" \
			-c "SELECT pg_reload_conf()" >/dev/null
	done
	total=$((after - before))
	echo "$total"
}

# lookup TABLE: mean latency in ms of a pruned lookup by key, pgbench.
lookup() {
	echo "\\set id random(1, $ROWS)
SELECT b FROM $1 WHERE id = :id;" >"$WORK/lookup.sql"
	chmod 644 "$WORK/lookup.sql"
	as_pg "$BINDIR/pgbench" -n -h "$WORK/sock" -U postgres -p "$COORD" -c 1 \
		-T "$LOOKUP_SECONDS" -f "$WORK/lookup.sql" postgres 2>/dev/null |
		sed -n 's/^latency average = \([0-9.]*\) ms.*/\1/p'
}

for r in $(seq "$RUNS"); do
	for n in "$SHARDS" "$PARTS"; do
		for t in a p l; do
			first_and_again "$COORD" "$(query "$t$n")" >>"$WORK/run_$t$n"
			first_and_again "$COORD" "EXPLAIN $(query "$t$n")" >>"$WORK/plan_$t$n"
		done
		first_and_again "$COORD" "$(query "a$n")" "$OFF" >>"$WORK/run_o$n"
	done
	echo "run $r of $RUNS done" >&2
done

col() { awk -v c="$2" '{ print $c }' "$WORK/$1" | median_of; }
echo "| $ROWS rows, $SHARDS shards, medians of $RUNS (ms) | table | new session | warm | EXPLAIN, new session | EXPLAIN, warm | remote statements | lookup |"
echo "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"
for n in "$SHARDS" "$PARTS"; do
	for t in a p l; do
		case $t in a) name=async_fdw ;; p) name="postgres_fdw (async_capable)" ;; l) name=local ;; esac
		stmts="-"
		[ $t != l ] && stmts=$(statements "$t$n")
		echo "| $name, $n partitions | $t$n | $(col "run_$t$n" 1) | $(col "run_$t$n" 2) | $(col "plan_$t$n" 1) | $(col "plan_$t$n" 2) | $stmts | $(lookup "$t$n") |"
	done
	echo "| async_fdw, combine_scans off, $n partitions | a$n | $(col "run_o$n" 1) | $(col "run_o$n" 2) | | | $(statements "a$n" "$OFF") | |"
done
