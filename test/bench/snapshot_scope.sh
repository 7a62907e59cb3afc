#!/bin/bash
# test/bench/snapshot_scope.sh
#   What async_fdw.snapshot_scope costs and spares REPEATABLE READ
#   transactions (issue 38), the two values in turns in one run, with the
#   coordinator preloaded (the commit fence on), for SHARDS_LIST shard
#   counts: accounts of 1000, 100 a shard, one partition a shard.
#   - transfers between shards 1 and 2 in REPEATABLE READ transactions
#     (BEGIN; UPDATE on shard 1; UPDATE on shard 2; COMMIT), 4 pgbench
#     clients: the share of transactions retried after 40001, and the
#     transactions per second;
#   - one client, a transaction touching one row of shard 1: a REPEATABLE
#     READ write, a REPEATABLE READ read, and a READ COMMITTED write (which
#     the setting does not touch), latency in ms.
#   Medians of RUNS runs of SECONDS_EACH seconds; the total is checked.
#
#   PG_CONFIG=pg_config  the installation (async_fdw installed in it)
#   PORT_BASE=56800      coordinator; shards PORT_BASE + 1 ...
#   SHARDS_LIST="2 4" RUNS=3 SECONDS_EACH=4 KEEP=1
#
# Run as root (servers run as postgres) or as the owner of the binaries.
PORT_BASE=${PORT_BASE:-56800}
SHARDS_LIST=${SHARDS_LIST:-2 4}
RUNS=${RUNS:-3}
SECONDS_EACH=${SECONDS_EACH:-4}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=cg_common.sh
source "$HERE/cg_common.sh"

CONF="$LOOPBACK_CONF
max_prepared_transactions = 60
max_connections = 120"

# bench SCOPE SCRIPT CLIENTS: pgbench's output lines of SCRIPT.
bench() {
	as_pg env PGOPTIONS="-c async_fdw.snapshot_scope=$1" "$BINDIR/pgbench" -n -h "$WORK/sock" \
		-p "$PORT_BASE" -U postgres -c "$3" -j 1 -T "$SECONDS_EACH" --max-tries 1000 \
		-f "$WORK/$2.sql" postgres 2>/dev/null
}
med() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

echo "| shards | measure | partitioned_tables | servers_read |"
echo "| ---: | --- | ---: | ---: |"
for shards in $SHARDS_LIST; do
	start_shards "$shards" "$CONF" "$CONF
shared_preload_libraries = 'async_fdw'"
	psql_at "$PORT_BASE" -c "CREATE EXTENSION async_fdw" \
		-c "CREATE TABLE accts (id int, bal int) PARTITION BY RANGE (id)" >/dev/null
	for s in $(seq "$shards"); do
		lo=$(((s - 1) * 100 + 1)) hi=$((s * 100))
		psql_at $((PORT_BASE + s)) -c "CREATE TABLE accts_$s (id int PRIMARY KEY, bal int)" \
			-c "INSERT INTO accts_$s SELECT g, 1000 FROM generate_series($lo, $hi) g" >/dev/null
		psql_at "$PORT_BASE" \
			-c "CREATE SERVER v$s FOREIGN DATA WRAPPER async_fdw OPTIONS (host '127.0.0.1', port '$((PORT_BASE + s))', dbname 'postgres')" \
			-c "CREATE USER MAPPING FOR postgres SERVER v$s OPTIONS (user 'postgres')" \
			-c "CREATE FOREIGN TABLE accts_$s PARTITION OF accts FOR VALUES FROM ($lo) TO ($((hi + 1))) SERVER v$s" >/dev/null
	done
	printf '%s\n' '\set a random(1, 100)' '\set b random(101, 200)' \
		'BEGIN ISOLATION LEVEL REPEATABLE READ;' 'UPDATE accts SET bal = bal - 1 WHERE id = :a;' \
		'UPDATE accts SET bal = bal + 1 WHERE id = :b;' 'COMMIT;' >"$WORK/transfer.sql"
	printf '%s\n' '\set a random(1, 100)' 'BEGIN ISOLATION LEVEL REPEATABLE READ;' \
		'UPDATE accts SET bal = bal WHERE id = :a;' 'COMMIT;' >"$WORK/rr_write.sql"
	printf '%s\n' '\set a random(1, 100)' 'BEGIN ISOLATION LEVEL REPEATABLE READ;' \
		'SELECT bal FROM accts WHERE id = :a;' 'COMMIT;' >"$WORK/rr_read.sql"
	printf '%s\n' '\set a random(1, 100)' 'UPDATE accts SET bal = bal WHERE id = :a;' >"$WORK/rc_write.sql"
	chmod 644 "$WORK"/*.sql
	for scope in partitioned_tables servers_read; do : >"$WORK/res_$scope"; done
	for _ in $(seq "$RUNS"); do
		for scope in partitioned_tables servers_read; do
			out=$(bench "$scope" transfer 4)
			retried=$(echo "$out" | awk '/number of transactions retried/ { gsub(/[(%)]/, "", $6); print $6 }')
			tps=$(echo "$out" | awk '/^tps/ { printf "%.0f", $3 }')
			lat=()
			for f in rr_write rr_read rc_write; do
				lat+=("$(bench "$scope" "$f" 1 | awk '/^latency average/ { print $4 }')")
			done
			echo "$retried $tps ${lat[*]}" >>"$WORK/res_$scope"
		done
	done
	col() { awk -v c="$1" '{ print $c }' "$WORK/res_$2" | med; }
	echo "| $shards | RR transfers between shards 1 and 2, 4 clients: retried after 40001, % | $(col 1 partitioned_tables) | $(col 1 servers_read) |"
	echo "| $shards | the same, transactions per second | $(col 2 partitioned_tables) | $(col 2 servers_read) |"
	echo "| $shards | RR write of one row, one client, ms | $(col 3 partitioned_tables) | $(col 3 servers_read) |"
	echo "| $shards | RR read of one row, one client, ms | $(col 4 partitioned_tables) | $(col 4 servers_read) |"
	echo "| $shards | READ COMMITTED write of one row, one client, ms | $(col 5 partitioned_tables) | $(col 5 servers_read) |"
	total=$(psql_at "$PORT_BASE" -c "SELECT sum(bal) FROM accts")
	[ "$total" = $((shards * 100000)) ] || { echo "the total is $total, not $((shards * 100000))" >&2; exit 1; }
	for d in "$WORK"/data_*; do as_pg "$BINDIR/pg_ctl" -D "$d" -m fast -w stop >/dev/null; done
	rm -rf "$WORK"/data_* "$WORK"/*.log
done
