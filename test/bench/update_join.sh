#!/bin/bash
# test/bench/update_join.sh
#   UPDATE ... FROM joining two foreign tables of one shard, async_fdw against
#   postgres_fdw, at each injected round-trip time: median wall time of
#   several runs.  A throwaway coordinator and one shard (plus a latency proxy
#   per RTT > 0) on loopback, stopped at the end.
#
#   BINDIR=/usr/lib/postgresql/15/bin  PostgreSQL binaries (async_fdw and
#                                      postgres_fdw installed for them)
#   PORT_BASE=57300  coordinator; shard +1, proxies +10, +11, ...
#   ROWS=50000       rows of each table; the UPDATE changes a tenth of them
#   RTTS="0 1"       round-trip times in ms
#   RUNS=5           timed runs per figure (the median is printed)
#
# Run as root (servers run as postgres) or as the owner of the binaries.
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
BINDIR=${BINDIR:-/usr/lib/postgresql/15/bin}
PORT_BASE=${PORT_BASE:-57300}
ROWS=${ROWS:-50000}
RTTS=${RTTS:-0 1}
RUNS=${RUNS:-5}
WORK=$(mktemp -d /tmp/update_join.XXXXXX)
chmod 777 "$WORK"
PIDS=()

as_pg() { if [ "$(id -u)" = 0 ]; then su postgres -s /bin/bash -c "$(printf '%q ' "$@")"; else "$@"; fi; }
psql_c() { as_pg "$BINDIR/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -U postgres -p "$1" -d postgres "${@:2}"; }

cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	for d in coord shard; do
		[ -d "$WORK/$d" ] && as_pg "$BINDIR/pg_ctl" -D "$WORK/$d" -m immediate -w stop >/dev/null 2>&1 || true
	done
	rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

make -s -C "$HERE" latency_proxy
COORD=$PORT_BASE
SHARD=$((PORT_BASE + 1))
for d in coord shard; do
	as_pg "$BINDIR/initdb" -D "$WORK/$d" -A trust -U postgres -E UTF8 --locale=C --no-sync >/dev/null
	port=$([ $d = coord ] && echo $COORD || echo $SHARD)
	printf "port = %s\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '%s'\nfsync = off\nshared_buffers = 128MB\n" \
		"$port" "$WORK" >> "$WORK/$d/postgresql.conf"
	as_pg "$BINDIR/pg_ctl" -D "$WORK/$d" -l "$WORK/$d.log" -w start >/dev/null
done

psql_c $SHARD -c "
	CREATE TABLE t (id int PRIMARY KEY, b int, c text);
	CREATE TABLE s (id int PRIMARY KEY, k int);
	INSERT INTO t SELECT g, g % 1000, 'c' || g FROM generate_series(1, $ROWS) g;
	INSERT INTO s SELECT g, g % 10 FROM generate_series(1, $ROWS) g;" -c 'VACUUM ANALYZE t' -c 'VACUUM ANALYZE s'
psql_c $COORD -c "CREATE EXTENSION async_fdw; CREATE EXTENSION postgres_fdw;"

k=0
for r in $RTTS; do
	port=$SHARD
	if [ "$(awk -v r="$r" 'BEGIN { print (r > 0) }')" = 1 ]; then
		port=$((PORT_BASE + 10 + k))
		"$HERE/latency_proxy" --delay-us "$(awk -v r="$r" 'BEGIN { printf "%d", r * 500 }')" \
			--listen "127.0.0.1:$port" --target "127.0.0.1:$SHARD" >/dev/null 2>&1 &
		PIDS+=($!)
		sleep 0.5
	fi
	for w in async_fdw postgres_fdw; do
		psql_c $COORD -c "
			CREATE SERVER ${w}_$k FOREIGN DATA WRAPPER $w OPTIONS (host '127.0.0.1', port '$port', dbname 'postgres');
			CREATE USER MAPPING FOR postgres SERVER ${w}_$k;
			CREATE FOREIGN TABLE ${w}_t$k (id int, b int, c text) SERVER ${w}_$k OPTIONS (table_name 't');
			CREATE FOREIGN TABLE ${w}_s$k (id int, k int) SERVER ${w}_$k OPTIONS (table_name 's');"
	done
	k=$((k + 1))
done

median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

echo "| RTT (ms) | FDW | median ms ($RUNS runs, $((ROWS / 10)) rows updated of $ROWS) | remote statement |"
echo "| --- | --- | --- | --- |"
k=0
for r in $RTTS; do
	# One session; the wrappers' runs alternate (the remote table's state
	# changes with each UPDATE), after a first run of each (the connection,
	# catalog caches) not counted.
	args=(-c '\timing on')
	for i in $(seq $((RUNS + 1))); do
		for w in async_fdw postgres_fdw; do
			args+=(-c "UPDATE ${w}_t$k t SET b = t.b + s.k FROM ${w}_s$k s WHERE t.id = s.id AND s.k = 3")
		done
	done
	psql_c $COORD "${args[@]}" | awk '/^Time:/ { print $2 }' > "$WORK/times"
	n=0
	for w in async_fdw postgres_fdw; do
		n=$((n + 1))
		plan=$(psql_c $COORD -At -c "EXPLAIN (VERBOSE, COSTS OFF) UPDATE ${w}_t$k t SET b = t.b + s.k FROM ${w}_s$k s WHERE t.id = s.id AND s.k = 3" |
			grep -m1 'Remote SQL' | sed 's/^ *Remote SQL: //' | cut -c1-40)
		med=$(awk -v n=$n 'NR > 2 && (NR - n) % 2 == 0' "$WORK/times" | median)
		echo "| $r | $w | $med | \`$plan...\` |"
	done
	k=$((k + 1))
done
