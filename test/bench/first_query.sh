#!/bin/bash
# test/bench/first_query.sh
#   The fixed cost of a pushed query (issue 37, item 4): `SELECT count(*),
#   sum(a), max(c)` over SHARDS shards of ROWS rows each, on loopback, as a
#   new session's first query through async_fdw, against the shards
#   computing their parts alone, each in a new session, all at once (the
#   slowest shard).  Also the second query of each session, and the
#   coordinator's first query after `LOAD 'async_fdw'` and after an
#   `EXPLAIN` of it (library and planning out of the way).  Medians of
#   RUNS, in turns; \timing (the sessions' own connections excluded).
#
#   PG_CONFIG=pg_config  the installation (async_fdw installed in it)
#   PORT_BASE=56500      coordinator; shard k on PORT_BASE + k
#   ROWS=250000 SHARDS=4 RUNS=9  PRELOAD=1: async_fdw in
#   shared_preload_libraries of the coordinator  KEEP=1
#   POOLER=1: the coordinator reaches each shard through a pgbouncer in
#   session mode (port PORT_BASE + 10 + k, server option pooler 'session'),
#   which keeps the shards' sessions from one coordinator session to the
#   next
#
# Run as root (servers run as postgres) or as the owner of the binaries.
PORT_BASE=${PORT_BASE:-56500}
ROWS=${ROWS:-250000}
SHARDS=${SHARDS:-4}
RUNS=${RUNS:-9}
# shellcheck source=cg_common.sh
source "$(dirname "${BASH_SOURCE[0]}")/cg_common.sh"

SETTINGS_CONF=$LOOPBACK_CONF
COORD_CONF=$SETTINGS_CONF
[ -n "${PRELOAD:-}" ] && COORD_CONF="$COORD_CONF
shared_preload_libraries = 'async_fdw'"

COORD=$PORT_BASE
start_shards "$SHARDS" "$SETTINGS_CONF" "$COORD_CONF"
for k in $(seq 1 "$SHARDS"); do
	psql_at $((PORT_BASE + k)) -c "CREATE TABLE items AS
		SELECT g AS a, g % 1000 AS b, 'c' || g AS c
		  FROM generate_series($(((k - 1) * ROWS + 1)), $((k * ROWS))) g" \
		-c "VACUUM ANALYZE items" >/dev/null &
done
wait
# pgbouncer k: a session-mode pgbouncer in front of shard k.
pgbouncer() {
	local dir=$WORK/pgbouncer$1
	mkdir -p "$dir"
	echo '"postgres" ""' >"$dir/userlist.txt"
	cat >"$dir/pgbouncer.ini" <<INI
[databases]
postgres = host=127.0.0.1 port=$((PORT_BASE + $1)) dbname=postgres
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $((PORT_BASE + 10 + $1))
unix_socket_dir =
auth_type = trust
auth_file = $dir/userlist.txt
pool_mode = session
logfile = $dir/pgbouncer.log
pidfile = $dir/pgbouncer.pid
INI
	chown -R postgres "$dir" 2>/dev/null || true
	as_pg /usr/sbin/pgbouncer -d "$dir/pgbouncer.ini"
}
server_port=$PORT_BASE
server_opts=""
if [ -n "${POOLER:-}" ]; then
	for k in $(seq 1 "$SHARDS"); do pgbouncer "$k"; done
	trap 'for k in $(seq 1 "$SHARDS"); do kill "$(cat "$WORK/pgbouncer$k/pgbouncer.pid")" 2>/dev/null; done; cg_cleanup' EXIT
	server_port=$((PORT_BASE + 10))
	server_opts=", pooler 'session'"
fi
{
	echo "CREATE EXTENSION async_fdw;"
	echo "CREATE TABLE items (a int, b int, c text) PARTITION BY RANGE (a);"
	for k in $(seq 1 "$SHARDS"); do
		echo "CREATE SERVER s$k FOREIGN DATA WRAPPER async_fdw
			OPTIONS (host '127.0.0.1', port '$((server_port + k))', dbname 'postgres'$server_opts);
		CREATE USER MAPPING FOR postgres SERVER s$k OPTIONS (user 'postgres');
		CREATE FOREIGN TABLE items_$k PARTITION OF items
			FOR VALUES FROM ($(((k - 1) * ROWS + 1))) TO ($((k * ROWS + 1)))
			SERVER s$k OPTIONS (table_name 'items');"
	done
	echo "ANALYZE items;"
} | psql_at "$COORD" -f - >/dev/null

Q="SELECT count(*), sum(a), max(c) FROM items"
# Rows first: the coordinator's equal the shards' combined.
want=$(for k in $(seq 1 "$SHARDS"); do psql_at $((PORT_BASE + k)) -c "SELECT count(*), sum(a), max(c) FROM items"; done |
	awk -F'|' '{ n += $1; s += $2; if ($3 > m) m = $3 } END { printf "%d|%.0f|%s\n", n, s, m }')
got=$(psql_at "$COORD" -c "$Q")
if [ "$got" != "$want" ]; then
	echo "WRONG ROWS: $got (shards: $want)" >&2
	exit 1
fi

# timed PORT SQL...: a new session on PORT running the SQLs, each timed: "ms ms ...".
timed() {
	local port=$1
	shift
	{ echo "\\timing on"; for s in "$@"; do echo "$s;"; done; } |
		psql_at "$port" -f - | sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p' | paste -sd' '
}

for r in $(seq "$RUNS"); do
	for k in $(seq 1 "$SHARDS"); do
		timed $((PORT_BASE + k)) "$Q" "$Q" >"$WORK/s_$k" &
	done
	wait
	# the slowest shard, first and second query
	paste "$WORK"/s_* | awk '{ f = 0; s = 0; for (i = 1; i <= NF; i += 2) { if ($i > f) f = $i; if ($(i + 1) > s) s = $(i + 1) } print f, s }' >>"$WORK/shards"
	timed "$COORD" "$Q" "$Q" >>"$WORK/coord"
	timed "$COORD" "LOAD 'async_fdw'" "$Q" >>"$WORK/load"
	timed "$COORD" "EXPLAIN $Q" "$Q" >>"$WORK/explain"
done

median_of() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
col() { awk -v c="$2" '{ print $c }' "$WORK/$1" | median_of; }
s1=$(col shards 1)
c1=$(col coord 1)
echo "| $SHARDS shards of $ROWS rows, medians of $RUNS (ms)${PRELOAD:+, preloaded}${POOLER:+, through pgbouncer (session)} | first query | second query |"
echo "| --- | ---: | ---: |"
echo "| shards alone, all at once (slowest) | $s1 | $(col shards 2) |"
echo "| coordinator, new session | $c1 | $(col coord 2) |"
echo "| coordinator, after LOAD (LOAD / query) | $(col load 1) | $(col load 2) |"
echo "| coordinator, after EXPLAIN (EXPLAIN / query) | $(col explain 1) | $(col explain 2) |"
awk -v c="$c1" -v s="$s1" 'BEGIN { printf "\nfirst query: coordinator / shards alone = %.2fx\n", c / s }'
