#!/usr/bin/env bash
# scripts/test.sh
#   README command 2: install what the tests need, build and install async_fdw,
#   start a throwaway PostgreSQL server, run `make installcheck` (pg_regress and
#   the TAP tests), stop the server.  Exits non-zero on any failure.
#
# Environment:
#   EXTRA_CFLAGS   extra compiler flags (default: -Wall -Wextra -Werror)
#   TEST_PORT      port of the throwaway server (default: 55432)
#   SKIP_TAP=1     run pg_regress only
#   SKIP_DEPS=1    do not apt-get anything
#   REGRESS_FILES  run only these pg_regress files (e.g. "setup aggregate")
#   TAP_FILES      run only these TAP files (e.g. "test/t/005_differential.pl")
#   VALGRIND=1     run the server (every backend) under valgrind's memcheck;
#                  any error it reports fails the run (pg_regress only: the
#                  TAP tests start servers of their own).  About 20 times
#                  slower: pick files with REGRESS_FILES.
#   PRELOAD=1      the throwaway server preloads async_fdw (the connection
#                  budget and the commit fence are active); some expected
#                  outputs then differ (async_fdw_connection_budget's
#                  figures): meant with VALGRIND=1, to check those paths.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
port=${TEST_PORT:-55432}
cflags=${EXTRA_CFLAGS:--Wall -Wextra -Werror}

# shellcheck source=scripts/common.sh
. "$here/scripts/common.sh"

# 1. Dependencies (Debian 12 packages only).
# pgbouncer for test/t/008_pgbouncer.pl, which is skipped without it.
choose_pg_major
run_in_pg_root scripts/test.sh
need_packages postgresql-$pg_major postgresql-server-dev-$pg_major libipc-run-perl pgbouncer make gcc python3
if [ -n "${VALGRIND:-}" ]; then need_packages valgrind; fi
find_pg

# 2. Build and install.
log "building async_fdw (COPT=$cflags)"
make -C "$here" -s clean PG_CONFIG="$PG_CONFIG"
make -C "$here" -s PG_CONFIG="$PG_CONFIG" COPT="$cflags"
# Calls between files go down the folders and their orders, no circle
# (see src/README.md):
# scripts/check_layers.py reads the call graph from the bitcode the build
# wrote beside each object; a PostgreSQL built without LLVM writes none.
log "checking that calls between files go down the layers"
layers_rc=0
python3 "$here/scripts/check_layers.py" --self-test || exit 1
python3 "$here/scripts/check_layers.py" "$here/src" || layers_rc=$?
if [ "$layers_rc" -eq 2 ] && [ "${CI:-}" != true ]; then
	log "no bitcode or llvm-dis: the layer check is skipped"
elif [ "$layers_rc" -ne 0 ]; then
	exit 1
fi
# Every relative link of the documentation leads somewhere.
python3 "$here/scripts/check_links.py" "$here"
log "installing async_fdw"
install_extension "$here"

# 3. A throwaway server, run by an unprivileged user (PostgreSQL refuses root).
choose_runuser
work=$(mktemp -d /tmp/async_fdw_test.XXXXXX)
chmod 755 "$work"
data=$work/data
sock=$work/sock
mkdir -p "$sock"
# pg_regress and prove write into the tree they run in: give them a copy.
mkdir -p "$work/src"
tar -C "$here" --exclude=.git --exclude='*.o' --exclude='*.so' --exclude='*.bc' -cf - . | tar -C "$work/src" -xf -
chown -R "$runuser" "$work"

stop_server() {
	if [ -f "$data/postmaster.pid" ]; then
		as_user pg_ctl -D "$data" -m immediate -w stop >/dev/null 2>&1 || true
	fi
}

# valgrind_start: the server under memcheck, each process's report in
# $work/vg/<pid>.log, errors between the markers that valgrind_report
# counts.  Debian's server is not built with USE_VALGRIND, so memcheck sees
# palloc's blocks, not its chunks: it finds reads of uninitialised memory,
# invalid frees and reads or writes outside malloc'd blocks.
valgrind_start() {
	mkdir -p "$work/vg"
	chown "$runuser" "$work/vg"
	as_user valgrind --quiet --tool=memcheck --trace-children=yes --track-origins=yes \
		--read-var-info=no --num-callers=30 --error-markers=AFDW_VG_ERROR,AFDW_VG_END \
		--suppressions="$here/scripts/valgrind.supp" --log-file="$work/vg/%p.log" \
		postgres -D "$data" >"$work/server.log" 2>&1 &
	local pid=$!
	for _ in $(seq 1 600); do
		as_user pg_isready -q -h "$sock" -p "$port" && return 0
		kill -0 "$pid" 2>/dev/null || break
		sleep 1
	done
	cat "$work"/vg/*.log 2>/dev/null | head -n 20
	log "the server did not start under valgrind (see $work/server.log)"
	tail -n 20 "$work/server.log"
	exit 1
}

# valgrind_report: print every error valgrind reported; false if any.
valgrind_report() {
	local n
	n=$(cat "$work"/vg/*.log 2>/dev/null | grep -c '^==[0-9]*== AFDW_VG_ERROR' || true)
	if [ "$n" -eq 0 ]; then
		log "valgrind: no error in $(find "$work/vg" -name '*.log' | wc -l) processes"
		return 0
	fi
	log "valgrind: $n errors"
	for f in "$work"/vg/*.log; do
		grep -q 'AFDW_VG_ERROR' "$f" || continue
		echo "--- $f"
		sed -n '/AFDW_VG_ERROR/,/AFDW_VG_END/p' "$f" | head -n 400
	done
	return 1
}
cleanup() {
	stop_server
	if [ -z "${KEEP_TEST_DIR:-}" ]; then rm -rf "$work"; else echo "kept $work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

log "starting a throwaway server on 127.0.0.1:$port"
as_user initdb -D "$data" -A trust -U postgres --no-sync >/dev/null
cat >> "$data/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$sock'
fsync = off
max_connections = 100
max_prepared_transactions = 10
# No transaction of autovacuum's between two remote transactions that a test
# expects to see one snapshot (async.sql compares two servers' snapshots).
autovacuum = off
log_min_messages = warning
CONF
if [ -n "${PRELOAD:-}" ]; then
	echo "shared_preload_libraries = 'async_fdw'" >>"$data/postgresql.conf"
fi
if [ -n "${VALGRIND:-}" ]; then
	# a backend under valgrind takes seconds to start and to answer; JIT
	# would only load LLVM (whose loading glibc's loader reads past a
	# string, a known report of valgrind's)
	printf 'authentication_timeout = 600\njit = off\n' >>"$data/postgresql.conf"
	valgrind_start
else
	as_user pg_ctl -D "$data" -l "$work/server.log" -w start >/dev/null
fi

# 4. The tests.
status=0
log "make installcheck"
args=()
if [ -n "${SKIP_TAP:-}" ] || [ -n "${VALGRIND:-}" ]; then args+=("TAP_TESTS="); fi
if [ -n "${REGRESS_FILES:-}" ]; then args+=("REGRESS=$REGRESS_FILES"); fi
if [ -n "${TAP_FILES:-}" ]; then args+=("PROVE_TESTS=$TAP_FILES"); fi
if ! as_user PGHOST="$sock" PGPORT="$port" PGUSER=postgres \
	make -C "$work/src" installcheck PG_CONFIG="$PG_CONFIG" "${args[@]}"; then
	status=1
	# A TAP file's log: its failures with the diagnostics after each
	# (a differential test's report sits there, not at the end), then
	# its last lines.  They come first: a CI report may show only the start
	# and the end of this output.
	for f in "$work"/src/tmp_check/log/regress_log_*; do
		[ -f "$f" ] || continue
		grep "not ok" "$f" | grep -qv "# TODO" || continue
		log "$f (each failure with the 80 lines after it)"
		grep -n -A 80 "not ok" "$f" | head -n 400
		log "$f (last 30 lines)"
		tail -n 30 "$f"
	done
	# pg_regress reads sql/ and expected/ and writes results/ and
	# regression.diffs in the directory it runs in.
	if [ -f "$work/src/regression.diffs" ]; then
		log "regression.diffs"
		cat "$work/src/regression.diffs"
	fi
	log "server log (last 40 lines)"
	tail -n 40 "$work/server.log" || true
fi

if [ -n "${VALGRIND:-}" ]; then
	stop_server
	valgrind_report || status=1
fi

if [ $status -eq 0 ]; then log "all tests passed"; else log "TESTS FAILED"; fi
exit $status
