#!/bin/bash
# test/bench/cg_common.sh
#   Shared by exec_start.sh, callgrind_paths.sh and q1.sh (sourced, not
#   run): throwaway servers (a coordinator and remote servers), the
#   coordinator optionally under callgrind, and the instruction count of one
#   coordinator session.
#
#   PG_CONFIG=pg_config   the installation measured (async_fdw installed in it)
#   PORT_BASE=56250       coordinator; remote server PORT_BASE + 1
#
# Run as root (servers run as postgres) or as the owner of the binaries.
set -eu
PG_CONFIG=${PG_CONFIG:-pg_config}
BINDIR=$("$PG_CONFIG" --bindir)
PORT_BASE=${PORT_BASE:-56250}
# shellcheck disable=SC2034  # used by the scripts that source this file
COORD_PORT=$PORT_BASE
# shellcheck disable=SC2034
REMOTE_PORT=$((PORT_BASE + 1))
WORK=$(mktemp -d /tmp/afdw_cg.XXXXXX)
chmod 777 "$WORK"
mkdir -m 777 "$WORK/sock" "$WORK/cg"

as_pg() { if [ "$(id -u)" = 0 ]; then su postgres -s /bin/bash -c "$(printf '%q ' "$@")"; else "$@"; fi; }
# psql_at PORT ARGS...: psql on the server of PORT, unaligned, tuples only.
psql_at() { as_pg "$BINDIR/psql" -X -q -At -v ON_ERROR_STOP=1 -h "$WORK/sock" -U postgres -p "$1" -d postgres "${@:2}"; }

cg_cleanup() {
	for d in "$WORK"/data_*; do
		if [ -f "$d/postmaster.pid" ]; then
			as_pg "$BINDIR/pg_ctl" -D "$d" -m immediate -w stop >/dev/null 2>&1 || true
		fi
	done
	if [ -z "${KEEP:-}" ]; then rm -rf "$WORK"; else echo "kept $WORK" >&2; fi
}
trap cg_cleanup EXIT
trap 'exit 130' INT TERM

# init_cluster NAME PORT [SETTINGS]: a new data directory for a server on
# PORT, with SETTINGS (lines of postgresql.conf) after the defaults here.
init_cluster() {
	local data=$WORK/data_$1
	as_pg "$BINDIR/initdb" -D "$data" -A trust -U postgres --no-sync >/dev/null
	cat >>"$data/postgresql.conf" <<CONF
listen_addresses = ''
port = $2
unix_socket_directories = '$WORK/sock'
fsync = off
autovacuum = off
max_connections = 30
max_locks_per_transaction = 512
shared_buffers = 128MB
log_min_messages = warning
${3:-}
CONF
}

# Settings of servers reached over TCP on loopback, as in a cluster, one
# process per query (for init_cluster's SETTINGS, with more lines after).
# shellcheck disable=SC2034  # used by the scripts that source this file
LOOPBACK_CONF="listen_addresses = '127.0.0.1'
synchronous_commit = off
max_parallel_workers_per_gather = 0
jit = off"

# start_cluster NAME: start it with pg_ctl.
start_cluster() {
	as_pg "$BINDIR/pg_ctl" -D "$WORK/data_$1" -l "$WORK/$1.log" -w start >/dev/null
}

# start_shards N SETTINGS [COORD_SETTINGS]: a coordinator on PORT_BASE
# (COORD_SETTINGS, else SETTINGS) and N shards on PORT_BASE + 1 .. N,
# named coord and shard1 .. shardN, started.
start_shards() {
	local k
	init_cluster coord "$PORT_BASE" "${3:-$2}"
	start_cluster coord
	for k in $(seq 1 "$1"); do
		init_cluster "shard$k" $((PORT_BASE + k)) "$2"
		start_cluster "shard$k"
	done
}

# stop_cluster NAME
stop_cluster() {
	as_pg "$BINDIR/pg_ctl" -D "$WORK/data_$1" -m fast -w -t 600 stop >/dev/null
}

# start_cluster_callgrind NAME PORT: start it under callgrind, every process
# counted in $WORK/cg/cg.<pid>; waits until it accepts connections.
start_cluster_callgrind() {
	rm -f "$WORK"/cg/cg.*
	as_pg bash -c "exec valgrind --tool=callgrind --trace-children=yes --dump-instr=no \
		--callgrind-out-file=$WORK/cg/cg.%p $BINDIR/postgres -D $WORK/data_$1 \
		>$WORK/$1.cg.log 2>&1 &"
	for _ in $(seq 600); do
		as_pg "$BINDIR/pg_isready" -q -h "$WORK/sock" -p "$2" && return 0
		sleep 1
	done
	echo "server under callgrind did not start: see $WORK/$1.cg.log" >&2
	exit 1
}

# session_file PID: the callgrind file of the backend PID, once it has
# exited and written it.
session_file() {
	local f=$WORK/cg/cg.$1
	for _ in $(seq 300); do
		if [ -s "$f" ] && grep -q '^totals:' "$f"; then echo "$f"; return 0; fi
		sleep 1
	done
	echo "no callgrind output for backend $1" >&2
	exit 1
}

# cg_session PORT SQLFILE: run SQLFILE in one session of the callgrind server
# on PORT; prints the callgrind file of its backend.  SQLFILE's output is
# discarded; its first statement must not be needed (the pid query is added).
cg_session() {
	local out=$WORK/session.out
	{ echo 'SELECT pg_backend_pid();'; cat "$2"; } >"$WORK/session.sql"
	chmod 644 "$WORK/session.sql"
	psql_at "$1" -f "$WORK/session.sql" >"$out"
	session_file "$(head -1 "$out")"
}

# cg_total FILE: instructions of the whole process.
cg_total() { awk '/^totals:/ { print $2 }' "$1"; }

# cg_inclusive FILE FUNCTION: inclusive instructions of FUNCTION (0 if absent).
cg_inclusive() {
	callgrind_annotate --inclusive=yes --threshold=100 "$1" 2>/dev/null |
		awk -v f="$2" '{ n = $NF; sub(/ .*/, "", n) }
			$0 ~ ("[:]" f " ") || $0 ~ ("[:]" f "$") { gsub(/,/, "", $1); print $1; found = 1; exit }
			END { if (!found) print 0 }'
}

# median N...: the median of the numbers (the lower middle for an even count).
median() { printf '%s\n' "$@" | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
