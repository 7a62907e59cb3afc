#!/usr/bin/env bash
# test/smith/run.sh
#   Random SQL against async_fdw with sqlsmith (Debian package `sqlsmith`).
#
#   Builds async_fdw with assertions (-DUSE_ASSERT_CHECKING) and installs
#   it, starts one throwaway PostgreSQL cluster (shared_preload_libraries =
#   'async_fdw') with three databases: coord, the coordinator, and shard1
#   and shard2, the shards, reached by async_fdw over TCP on 127.0.0.1 as
#   separate servers would be.  One cluster rather than three: a third of
#   the memory and start-up on a shared 2-core machine, one log to read,
#   and a crash of any backend shows there; the databases share nothing
#   that async_fdw's connections would not share with separate servers.
#   shard.sql makes the shards' tables, coord.sql the coordinator's
#   (hash- and range-partitioned tables of foreign partitions, one level
#   sub-partitioned, plain foreign tables, a local dimension table, views
#   joining them on their keys, and reference copies of all the data in
#   local tables).  Then, for each configuration, sqlsmith sends random
#   statements to coord as the role smith (each runs in a transaction that
#   sqlsmith rolls back; statement_timeout 1s), check.sql verifies that the
#   foreign tables still hold the reference rows, and report.py reads the
#   server's log: crashes (a backend terminated by a signal) and assertion
#   failures (TRAP) with the statement that caused them, internal errors
#   (XX000, "cache lookup failed", "unrecognized node type", ...), errors
#   of the remote SQL async_fdw wrote (class 42 on a shard), leak warnings,
#   and the counts of errors by SQLSTATE, on the coordinator and on the
#   shards.  The shards' pg_stat_statements give what the remote side ran
#   (COPY streams, cursors, key filters) so that each configuration shows
#   it covered what it names.
#
#   PG_MAJOR=17 bash test/smith/run.sh     (from the project's root)
#   On a host whose Debian release lacks PG_MAJOR (17 and 18 on Debian 12)
#   it runs itself in a Debian root through scripts/pgroot.sh (set
#   PGROOT_DIR there: its default is /var/tmp/async_fdw-roots); root only,
#   since it installs packages and the extension.  Exits non-zero on a
#   crash, an assertion failure, a PANIC or rows changed by a rolled-back
#   statement; errors of any other kind are only reported.
#
# Environment:
#   PG_MAJOR        15, 17 or 18: required, since the build is installed
#                   into that server (on the host for 15, in a root else)
#   SMITH_QUERIES   statements per configuration (default 3000)
#   SMITH_TIME      seconds per configuration at most (default 120)
#   SMITH_SEED      sqlsmith's seed of the first configuration; the n-th
#                   (from 0) uses SMITH_SEED + n (default 1)
#   SMITH_PORT      the cluster's port on 127.0.0.1 (default 56200)
#   SMITH_CONFIGS   the configurations, separated by spaces, each
#                   MODE[/MODE2]:MINROWS[:CONNS]: the fetch_mode of both
#                   shard servers (or of shard1/shard2), the setting
#                   async_fdw.key_filter_min_rows of the role smith, and
#                   the servers' max_connections (default 4; 1 makes all
#                   the scans of a server share one connection)
#                   (default "auto:10000 auto:1 stream:1 cursor:1
#                   stream/cursor:10000")
#   SMITH_OUT       where the results go (default /tmp/async_fdw-smith,
#                   emptied first): report.txt, and per configuration the
#                   server log's part, sqlsmith's output, coverage, report
#   SMITH_KEEP=1    keep the cluster's directory
#   SMITH_SQL       a file of SQL (a path relative to the project's root) that
#                   psql runs as smith in each configuration instead of
#                   sqlsmith: a finding's statement, run again; its output
#                   is in psql.out and printed
#   SMITH_LOG_STATEMENTS=1  log every statement of the three databases
#                   (log_statement = all): what async_fdw sent, for SMITH_SQL
#
# How long: the defaults (5 x 3000 statements) take about 3 minutes on two
# cores, of which half a minute of build and set-up: sqlsmith sends 70 to
# 100 statements a second here (6 x 15000 took 19 minutes).
set -euo pipefail

here=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=scripts/common.sh
. "$here/scripts/common.sh"

queries=${SMITH_QUERIES:-3000}
limit=${SMITH_TIME:-120}
seed=${SMITH_SEED:-1}
port=${SMITH_PORT:-56200}
configs=${SMITH_CONFIGS:-auto:10000 auto:1 stream:1 cursor:1 stream/cursor:10000}
out=${SMITH_OUT:-/tmp/async_fdw-smith}

if [ -z "${PG_MAJOR:-}" ]; then
	echo "run.sh: set PG_MAJOR (15, 17 or 18): the build is installed into that server" >&2
	exit 2
fi
choose_pg_major
if [ -z "${PGROOT_INSIDE:-}" ] && ! host_ships_pg "$pg_major"; then
	# pgroot.sh passes only its own variables into the root: ours go on the
	# command line, the results through its PGROOT_OUT mount.
	log "PostgreSQL $pg_major is not in this machine's Debian release: running in a Debian root"
	rm -rf "$out"
	mkdir -p "$out"
	PGROOT_OUT=$out exec bash "$here/scripts/pgroot.sh" "$pg_major" env \
		SMITH_QUERIES="$queries" SMITH_TIME="$limit" SMITH_SEED="$seed" SMITH_PORT="$port" \
		SMITH_CONFIGS="$configs" SMITH_OUT=/build/out SMITH_KEEP="${SMITH_KEEP:-}" \
		SMITH_SQL="${SMITH_SQL:-}" SMITH_LOG_STATEMENTS="${SMITH_LOG_STATEMENTS:-}" \
		bash test/smith/run.sh
fi

need_packages "postgresql-$pg_major" "postgresql-server-dev-$pg_major" sqlsmith make gcc python3
find_pg

# 1. Build with assertions, install.
log "building async_fdw with assertions"
make -C "$here" -s clean PG_CONFIG="$PG_CONFIG"
make -C "$here" -s PG_CONFIG="$PG_CONFIG" COPT="-Wall -Wextra -DUSE_ASSERT_CHECKING"
install_extension "$here"

# 2. The cluster, run by an unprivileged user.
choose_runuser
work=$(mktemp -d /tmp/async_fdw_smith.XXXXXX)
chmod 755 "$work"
data=$work/data
sock=$work/sock
mkdir -p "$sock"
chown -R "$runuser" "$work"
if [ "$out" != /build/out ]; then rm -rf "$out"; fi
mkdir -p "$out"
serverlog=$work/server.log

stop_server() {
	if [ -f "$data/postmaster.pid" ]; then
		as_user pg_ctl -D "$data" -m immediate -w stop >/dev/null 2>&1 || true
	fi
}
cleanup() {
	stop_server
	if [ -f "$serverlog" ]; then cp "$serverlog" "$out/server.log"; fi
	if [ -z "${SMITH_KEEP:-}" ]; then rm -rf "$work"; else echo "kept $work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

log "starting a cluster on 127.0.0.1:$port (databases coord, shard1, shard2)"
as_user initdb -D "$data" -A trust -U postgres --no-sync >/dev/null
cat >>"$data/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$sock'
shared_preload_libraries = 'async_fdw, pg_stat_statements'
max_connections = 60
max_prepared_transactions = 10
fsync = off
autovacuum = off
jit = off
log_min_messages = warning
log_min_error_statement = error
# %q: the postmaster's lines have no database, application or SQLSTATE.
log_line_prefix = '%m [%p] %q<%d|%a|%e> '
# The whole statement in "Failed process was running" after a crash.
track_activity_query_size = 65536
pg_stat_statements.max = 20000
CONF
as_user pg_ctl -D "$data" -l "$serverlog" -w start >/dev/null

psql_as() {	# psql_as DATABASE PSQL-ARGS...: as the superuser
	local db=$1
	shift
	as_user env PGAPPNAME=smith-harness psql -X -q -v ON_ERROR_STOP=1 -h "$sock" -p "$port" \
		-U postgres -d "$db" "$@"
}

log "making the shards and the coordinator"
psql_as postgres -c "CREATE ROLE smith LOGIN" -c "CREATE DATABASE coord" \
	-c "CREATE DATABASE shard1" -c "CREATE DATABASE shard2" \
	-c "CREATE EXTENSION pg_stat_statements"
psql_as shard1 -f "$here/test/smith/shard.sql"
psql_as shard2 -f "$here/test/smith/shard.sql"
psql_as coord -v host=127.0.0.1 -v port="$port" -f "$here/test/smith/coord.sql"
psql_as shard1 -c ANALYZE
psql_as shard2 -c ANALYZE
mismatch=$(psql_as coord -At -f "$here/test/smith/check.sql")
if [ -n "${SMITH_LOG_STATEMENTS:-}" ]; then
	for db in coord shard1 shard2; do
		psql_as postgres -c "ALTER DATABASE $db SET log_statement = 'all'"
	done
fi
if [ -n "$mismatch" ]; then
	echo "$mismatch"
	log "the foreign tables do not hold the reference rows after loading"
	exit 1
fi

# 3. sqlsmith in each configuration.
status=0
n=0
dirs=()
for cfg in $configs; do
	IFS=: read -r modes minrows conns <<<"$cfg"
	conns=${conns:-4}
	mode1=${modes%%/*}
	mode2=${modes##*/}
	name=$n-${modes/\//-}-keys$minrows
	if [ "$conns" != 4 ]; then name=$name-conns$conns; fi
	dir=$out/$name
	mkdir -p "$dir"
	dirs+=("$dir")
	log "configuration $name: fetch_mode $mode1 (shard1) $mode2 (shard2), key_filter_min_rows $minrows, max_connections $conns, seed $((seed + n)), $queries statements, ${limit}s at most"
	psql_as coord -c "ALTER SERVER shard1 OPTIONS (SET fetch_mode '$mode1', SET max_connections '$conns')" \
		-c "ALTER SERVER shard2 OPTIONS (SET fetch_mode '$mode2', SET max_connections '$conns')" \
		-c "ALTER ROLE smith IN DATABASE coord SET async_fdw.key_filter_min_rows = $minrows"
	psql_as postgres -c "SELECT pg_stat_statements_reset()" >/dev/null
	start=$(stat -c %s "$serverlog")
	t0=$(date +%s)
	rc=0
	if [ -n "${SMITH_SQL:-}" ]; then
		as_user env PGAPPNAME=smith-sql psql -X -e -h "$sock" -p "$port" -U smith -d coord \
			-f "$here/$SMITH_SQL" >"$dir/psql.out" 2>&1 || rc=$?
		cat "$dir/psql.out"
		echo "psql exit status $rc after $(($(date +%s) - t0))s" >>"$dir/psql.out"
	else
		# SIGINT: sqlsmith prints its report and exits 1.
		timeout -s INT -k 30 "$limit" sqlsmith --target="host=$sock port=$port dbname=coord user=smith" \
			--seed=$((seed + n)) --max-queries="$queries" --exclude-catalog --verbose \
			>"$dir/sqlsmith.out" 2>"$dir/sqlsmith.err" || rc=$?
		echo "sqlsmith exit status $rc after $(($(date +%s) - t0))s" >>"$dir/sqlsmith.err"
	fi
	# After a crash the server takes a moment to be back.
	for _ in $(seq 1 60); do
		as_user pg_isready -q -h "$sock" -p "$port" && break
		sleep 1
	done
	mismatch=$(psql_as coord -At -f "$here/test/smith/check.sql" 2>&1) || true
	tail -c +$((start + 1)) "$serverlog" >"$dir/server.log"
	{
		echo "fetch_mode $mode1 (shard1) $mode2 (shard2), async_fdw.key_filter_min_rows $minrows, max_connections $conns, seed $((seed + n))"
		echo "remote statements run by the shards (pg_stat_statements):"
		psql_as postgres -f "$here/test/smith/coverage.sql" 2>&1 || true
	} >"$dir/coverage.txt"
	if [ -n "$mismatch" ]; then
		echo "$mismatch" >"$dir/data_check.txt"
		status=1
	fi
	python3 "$here/test/smith/report.py" "$dir" >"$dir/report.txt" || status=1
	cat "$dir/report.txt"
	n=$((n + 1))
done

# 4. All configurations together.
python3 "$here/test/smith/report.py" "${dirs[@]}" >"$out/report.txt" || status=1
log "all configurations (also in $out/report.txt)"
cat "$out/report.txt"
exit $status
