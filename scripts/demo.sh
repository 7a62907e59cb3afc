#!/usr/bin/env bash
# scripts/demo.sh
#   README command 1, the main job: on a fresh Debian 12 machine, install
#   what is needed, build and install async_fdw, start a throwaway
#   coordinator and four shards on loopback, build a partitioned table whose
#   partitions are foreign tables on the shards, and run a query over it with
#   async_fdw and with postgres_fdw, showing the plan and the times.
#   Everything started is stopped and removed at the end.
#
# Environment:
#   DEMO_ROWS    rows in all (default 1000000)
#   DEMO_SHARDS  shards (default 4)
#   DEMO_PORT    first port (default 56400)
#   DEMO_RTT_MS  round trip added between the coordinator and each shard by
#                test/bench's latency proxy (default 0: none)
#   SKIP_DEPS=1  do not apt-get anything
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
rows=${DEMO_ROWS:-1000000}
nshards=${DEMO_SHARDS:-4}
port0=${DEMO_PORT:-56400}
rtt_ms=${DEMO_RTT_MS:-0}

# shellcheck source=scripts/common.sh
. "$here/scripts/common.sh"

choose_pg_major
run_in_pg_root scripts/demo.sh
need_packages postgresql-$pg_major postgresql-contrib postgresql-server-dev-$pg_major make gcc
find_pg

log "building and installing async_fdw"
make -C "$here" -s PG_CONFIG="$PG_CONFIG"
install_extension "$here"
choose_runuser

work=$(mktemp -d /tmp/async_fdw_demo.XXXXXX)
chmod 755 "$work"
chown "$runuser" "$work"
started=()
proxy_pid=
cleanup() {
	[ -n "$proxy_pid" ] && kill "$proxy_pid" 2>/dev/null
	for d in "${started[@]}"; do
		as_user pg_ctl -D "$d" -m immediate -w stop >/dev/null 2>&1 || true
	done
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# start_instance NAME PORT: a throwaway server on 127.0.0.1:PORT.
start_instance() {
	local dir=$work/$1
	as_user initdb -D "$dir" -A trust -U postgres --no-sync >/dev/null
	cat >> "$dir/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $2
unix_socket_directories = '$work'
fsync = off
synchronous_commit = off
shared_buffers = 256MB
jit = off
max_connections = 100
CONF
	as_user pg_ctl -D "$dir" -l "$dir.log" -w start >/dev/null
	started+=("$dir")
}

psql_at() { as_user psql -X -q -v ON_ERROR_STOP=1 -h "$work" -U postgres -p "$1" -d postgres "${@:2}"; }

log "starting a coordinator and $nshards shards on 127.0.0.1:$port0..$((port0 + nshards))"
start_instance coordinator "$port0"
per=$(( (rows + nshards - 1) / nshards ))
for i in $(seq 1 "$nshards"); do
	start_instance "shard$i" $((port0 + i))
	lo=$(( (i - 1) * per + 1 )); hi=$(( i * per < rows ? i * per : rows ))
	psql_at $((port0 + i)) <<SQL
CREATE TABLE items (a int, b int, c text);
INSERT INTO items SELECT g, g % 1000, md5(g::text) FROM generate_series($lo, $hi) g;
VACUUM ANALYZE items;
SQL
done

# The foreign servers reach shard i on port0 + i, or through the latency
# proxy on port0 + 100 + i when a round trip is to be added.
shard_port() { if [ "$rtt_ms" = 0 ]; then echo $((port0 + $1)); else echo $((port0 + 100 + $1)); fi; }
if [ "$rtt_ms" != 0 ]; then
	make -s -C "$here/test/bench" latency_proxy
	args=()
	for i in $(seq 1 "$nshards"); do
		args+=(--listen "127.0.0.1:$((port0 + 100 + i))" --target "127.0.0.1:$((port0 + i))")
	done
	"$here/test/bench/latency_proxy" --delay-us $((rtt_ms * 500)) "${args[@]}" &
	proxy_pid=$!
	sleep 0.5
	log "shards reached through a latency proxy: $rtt_ms ms round trip"
fi

log "creating partitioned tables over the shards (async_fdw and postgres_fdw)"
{
	echo "CREATE EXTENSION async_fdw; CREATE EXTENSION postgres_fdw;"
	for fdw in async_fdw postgres_fdw; do
		echo "CREATE TABLE items_${fdw} (a int, b int, c text) PARTITION BY RANGE (a);"
		for i in $(seq 1 "$nshards"); do
			lo=$(( (i - 1) * per + 1 )); hi=$(( i * per + 1 ))
			async=""
			[ "$fdw" = postgres_fdw ] && async=", async_capable 'true'"
			echo "CREATE SERVER ${fdw}_s$i FOREIGN DATA WRAPPER $fdw
				OPTIONS (host '127.0.0.1', port '$(shard_port "$i")', dbname 'postgres'$async);
			CREATE USER MAPPING FOR postgres SERVER ${fdw}_s$i OPTIONS (user 'postgres');
			CREATE FOREIGN TABLE items_${fdw}_$i PARTITION OF items_${fdw}
				FOR VALUES FROM ($lo) TO ($hi) SERVER ${fdw}_s$i OPTIONS (table_name 'items');"
		done
	done
} | psql_at "$port0"

query="SELECT count(*), sum(a), max(c) FROM (SELECT * FROM %s OFFSET 0) s"

log "the plan with async_fdw"
psql_at "$port0" -c "EXPLAIN (VERBOSE, COSTS OFF) $(printf "$query" items_async_fdw)"

log "the result, each way (must be identical)"
for t in items_async_fdw items_postgres_fdw; do
	printf '%-20s ' "$t"
	psql_at "$port0" -At -c "$(printf "$query" "$t")"
done

# time_query SETTINGS QUERY: median of 3 timed runs after one warm-up, in
# ms; QUERY is a table name for the scan query above.
time_query() {
	local q=$2 out
	case "$q" in *" "*) ;; *) q=$(printf "$query" "$q") ;; esac
	out=$(psql_at "$port0" -At <<SQL
$1
$q;
\timing on
$q;
$q;
$q;
SQL
)
	echo "$out" | sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p' | sort -n | sed -n 2p
}

log "timing $rows rows over $nshards shards (median of 3 runs, ms)"
printf '%-34s %10s\n' "configuration" "median ms"
printf '%-34s %10s\n' "async_fdw, async append" "$(time_query "SET enable_async_append = on;" items_async_fdw)"
printf '%-34s %10s\n' "async_fdw, async append off" "$(time_query "SET enable_async_append = off;" items_async_fdw)"
printf '%-34s %10s\n' "postgres_fdw, async_capable" "$(time_query "SET enable_async_append = on;" items_postgres_fdw)"
printf '%-34s %10s\n' "postgres_fdw, async append off" "$(time_query "SET enable_async_append = off;" items_postgres_fdw)"

# Pushed work (issue 13's queries): async_fdw has every shard compute a
# partial aggregate, sort and limit, or join its co-located partitions, all
# at once; postgres_fdw at its best settings (async_capable, fetch_size
# 10000, partitionwise aggregation and join off or on: both are shown).
# "@" in a query stands for the wrapper's tables.
for i in $(seq 1 "$nshards"); do
	psql_at $((port0 + i)) -c "CREATE TABLE items2 AS SELECT a, a % 7 AS d FROM items" \
		-c "VACUUM ANALYZE items2" >/dev/null
	echo "ALTER SERVER postgres_fdw_s$i OPTIONS (ADD fetch_size '10000');"
done | psql_at "$port0"
{
	for fdw in async_fdw postgres_fdw; do
		echo "CREATE TABLE items2_${fdw} (a int, d int) PARTITION BY RANGE (a);"
		for i in $(seq 1 "$nshards"); do
			lo=$(( (i - 1) * per + 1 )); hi=$(( i * per + 1 ))
			echo "CREATE FOREIGN TABLE items2_${fdw}_$i PARTITION OF items2_${fdw}
				FOR VALUES FROM ($lo) TO ($hi) SERVER ${fdw}_s$i OPTIONS (table_name 'items2');"
		done
	done
	echo "ANALYZE items_async_fdw, items2_async_fdw, items_postgres_fdw, items2_postgres_fdw;"
} | psql_at "$port0"

# time_new_session SETTINGS QUERY: median of 5 first queries of new sessions, in ms.
time_new_session() {
	for _ in 1 2 3 4 5; do
		psql_at "$port0" -At <<SQL | sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p'
$1
\timing on
$2;
SQL
	done | sort -n | sed -n 3p
}

# time_shards_alone QUERY: median of 3 runs of QUERY on every shard at once,
# directly, in ms: what the shards need, the limit for a coordinator.
time_shards_alone() {
	for _ in 1 2 3; do
		local t0 t1 pids=()
		t0=$(date +%s%N)
		for i in $(seq 1 "$nshards"); do
			psql_at $((port0 + i)) -At -c "$1" >/dev/null &
			pids+=($!)
		done
		wait "${pids[@]}"
		t1=$(date +%s%N)
		echo $(( (t1 - t0) / 1000 ))
	done | sort -n | sed -n 2p | awk '{ printf "%.1f", $1 / 1000 }'
}

for query in "SELECT count(*), sum(a), max(c) FROM items_@" \
	"SELECT b, count(*), avg(a) FROM items_@ GROUP BY b ORDER BY b" \
	"SELECT * FROM items_@ ORDER BY c DESC LIMIT 10" \
	"SELECT count(*) FROM items_@ JOIN items2_@ USING (a)"; do
	log "pushed work: ${query//_@/}"
	[ "$(psql_at "$port0" -At -c "${query//@/async_fdw}" | md5sum)" = \
		"$(psql_at "$port0" -At -c "${query//@/postgres_fdw}" | md5sum)" ] ||
		{ echo "different results from the two wrappers" >&2; exit 1; }
	psql_at "$port0" -c "EXPLAIN (COSTS OFF) ${query//@/async_fdw}" | sed -n '1,6p'
	printf '%-50s %12s %14s\n' "configuration" "warm ms" "new session ms"
	printf '%-50s %12s %14s\n' "async_fdw (default settings)" \
		"$(time_query "" "${query//@/async_fdw}")" "$(time_new_session "" "${query//@/async_fdw}")"
	for pw in off on; do
		set="SET enable_partitionwise_aggregate = $pw; SET enable_partitionwise_join = $pw;"
		printf '%-50s %12s %14s\n' "postgres_fdw, partitionwise aggregate/join $pw" \
			"$(time_query "$set" "${query//@/postgres_fdw}")" \
			"$(time_new_session "$set" "${query//@/postgres_fdw}")"
	done
done
log "the first aggregate on the $nshards shards alone, all at once (direct, no coordinator)"
printf '%-50s %12s\n' "shards alone" "$(time_shards_alone "SELECT count(*), sum(a), max(c) FROM items")"

log "done; stopping every instance"
