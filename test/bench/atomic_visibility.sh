#!/bin/bash
# test/bench/atomic_visibility.sh
#   The cost of the commit fence (async_fdw.atomic_visibility, issue 38),
#   measured side by side with the setting on and off in one run: 200
#   accounts on 2 shards (ids 1-100 on shard 1, 101-200 on shard 2) behind
#   latency relays of RTTS milliseconds (0: direct), the coordinator
#   preloaded, two-phase commit on the shards.
#   - transfers per second: pgbench, 4 and 32 clients, BEGIN; UPDATE on
#     shard 1; UPDATE on shard 2; COMMIT;
#   - latency of a single-server lookup by key and of a 2-shard read
#     (sum over both), one client, alone and while 4 clients transfer.
#   Medians of RUNS runs of SECONDS_EACH seconds; the total is checked at
#   the end of each RTT.
#
#   PG_CONFIG=pg_config  the installation (async_fdw installed in it)
#   PORT_BASE=56700      coordinator; shards PORT_BASE + 1, 2; relays above
#   RTTS="0 1" RUNS=3 SECONDS_EACH=5 KEEP=1
#
# Run as root (servers run as postgres) or as the owner of the binaries.
PORT_BASE=${PORT_BASE:-56700}
RTTS=${RTTS:-0 1}
RUNS=${RUNS:-3}
SECONDS_EACH=${SECONDS_EACH:-5}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=cg_common.sh
source "$HERE/cg_common.sh"

make -s -C "$HERE" latency_proxy
PIDS=()
stop_relays() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap 'stop_relays; cg_cleanup' EXIT

CONF="$LOOPBACK_CONF
max_prepared_transactions = 60
max_connections = 120"
COORD=$PORT_BASE
start_shards 2 "$CONF" "$CONF
shared_preload_libraries = 'async_fdw'"
psql_at $((PORT_BASE + 1)) -c "CREATE TABLE accts_1 (id int PRIMARY KEY, bal int)" \
	-c "INSERT INTO accts_1 SELECT g, 1000 FROM generate_series(1, 100) g" >/dev/null
psql_at $((PORT_BASE + 2)) -c "CREATE TABLE accts_2 (id int PRIMARY KEY, bal int)" \
	-c "INSERT INTO accts_2 SELECT g, 1000 FROM generate_series(101, 200) g" >/dev/null
psql_at "$COORD" -c "CREATE EXTENSION async_fdw" \
	-c "CREATE TABLE accts (id int, bal int) PARTITION BY RANGE (id)" >/dev/null

scripts() {
	printf '%s\n' '\set a random(1, 100)' '\set b random(101, 200)' 'BEGIN;' \
		'UPDATE accts SET bal = bal - 1 WHERE id = :a;' \
		'UPDATE accts SET bal = bal + 1 WHERE id = :b;' 'COMMIT;' >"$WORK/transfer.sql"
	printf '%s\n' '\set a random(1, 200)' 'SELECT bal FROM accts WHERE id = :a;' >"$WORK/lookup.sql"
	printf '%s\n' 'SELECT sum(bal) FROM accts;' >"$WORK/sum.sql"
	chmod 644 "$WORK"/*.sql
}
scripts

# bench SETTING SCRIPT CLIENTS: pgbench's "tps latency" of SCRIPT.
bench() {
	as_pg env PGOPTIONS="-c async_fdw.atomic_visibility=$1" "$BINDIR/pgbench" -n -h "$WORK/sock" \
		-p "$COORD" -U postgres -c "$3" -j "$(($3 < 4 ? $3 : 4))" -T "$SECONDS_EACH" \
		--max-tries 100 -f "$WORK/$2.sql" postgres 2>/dev/null |
		awk '/^latency average/ { l = $4 } /^tps/ { t = $3 } END { print t, l }'
}

# loaded SETTING SCRIPT: SCRIPT's "tps latency" with one client while 4
# clients transfer.
loaded() {
	as_pg env PGOPTIONS="-c async_fdw.atomic_visibility=$1" "$BINDIR/pgbench" -n -h "$WORK/sock" \
		-p "$COORD" -U postgres -c 4 -j 2 -T $((SECONDS_EACH + 1)) --max-tries 100 \
		-f "$WORK/transfer.sql" postgres >/dev/null 2>&1 &
	local bg=$!
	sleep 0.5
	bench "$1" "$2" 1
	wait "$bg"
}

med() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

echo "| RTT ms | measure | fence on | fence off | on / off |"
echo "| ---: | --- | ---: | ---: | ---: |"
k=0
for r in $RTTS; do
	p1=$((PORT_BASE + 1)) p2=$((PORT_BASE + 2))
	if [ "$(awk -v r="$r" 'BEGIN { print (r > 0) }')" = 1 ]; then
		for s in 1 2; do
			port=$((PORT_BASE + 10 + 2 * k + s))
			"$HERE/latency_proxy" --delay-us "$(awk -v r="$r" 'BEGIN { printf "%d", r * 500 }')" \
				--listen 127.0.0.1:$port --target 127.0.0.1:$((PORT_BASE + s)) >/dev/null 2>&1 &
			PIDS+=($!)
			eval "p$s=$port"
		done
		sleep 0.3
	fi
	k=$((k + 1))
	psql_at "$COORD" -c "DROP SERVER IF EXISTS v1 CASCADE" -c "DROP SERVER IF EXISTS v2 CASCADE" \
		-c "CREATE SERVER v1 FOREIGN DATA WRAPPER async_fdw OPTIONS (host '127.0.0.1', port '$p1', dbname 'postgres')" \
		-c "CREATE SERVER v2 FOREIGN DATA WRAPPER async_fdw OPTIONS (host '127.0.0.1', port '$p2', dbname 'postgres')" \
		-c "CREATE USER MAPPING FOR postgres SERVER v1 OPTIONS (user 'postgres')" \
		-c "CREATE USER MAPPING FOR postgres SERVER v2 OPTIONS (user 'postgres')" \
		-c "CREATE FOREIGN TABLE accts_1 PARTITION OF accts FOR VALUES FROM (1) TO (101) SERVER v1" \
		-c "CREATE FOREIGN TABLE accts_2 PARTITION OF accts FOR VALUES FROM (101) TO (201) SERVER v2" >/dev/null 2>&1
	for m in "transfer 4" "transfer 32" "lookup 1" "sum 1" "lookup loaded" "sum loaded"; do
		set -- $m
		for s in on off; do : >"$WORK/res_$s"; done
		for _ in $(seq "$RUNS"); do
			for s in on off; do
				if [ "$2" = loaded ]; then loaded "$s" "$1"; else bench "$s" "$1" "$2"; fi >>"$WORK/res_$s"
			done
		done
		if [ "$1" = transfer ]; then
			what="transfers per second, $2 clients"
			on=$(awk '{ printf "%.0f\n", $1 }' "$WORK/res_on" | med)
			off=$(awk '{ printf "%.0f\n", $1 }' "$WORK/res_off" | med)
		else
			if [ "$1" = lookup ]; then what="lookup by key, one server, ms"; else what="sum over 2 shards, ms"; fi
			if [ "$2" = loaded ]; then what="$what, while 4 clients transfer"; fi
			on=$(awk '{ print $2 }' "$WORK/res_on" | med)
			off=$(awk '{ print $2 }' "$WORK/res_off" | med)
		fi
		echo "| $r | $what | $on | $off | $(awk -v a="$on" -v b="$off" 'BEGIN { printf "%.2f", a / b }') |"
	done
	total=$(psql_at "$COORD" -c "SELECT sum(bal) FROM accts")
	[ "$total" = 200000 ] || { echo "the total is $total, not 200000" >&2; exit 1; }
done
