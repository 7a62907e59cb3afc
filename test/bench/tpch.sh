#!/usr/bin/env bash
# test/bench/tpch.sh
#   The TPC-H-shaped scenario (issue 26): 22 analytic query shapes over
#   eight generated tables, orders and lineitem co-located over the shards,
#   through postgres_fdw (sync and async_capable) and async_fdw, against
#   local copies on the coordinator.  Starts the throwaway coordinator,
#   shards and latency proxies with run.sh's functions, runs tpch.py, and
#   stops everything at the end, also on Ctrl-C.  See test/bench/README.md;
#   `tpch.sh --help` lists the options.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=run.sh
source "$HERE/run.sh"
COMMAND_LINE="test/bench/tpch.sh${*:+ $*}"
START_TIME=$(date +%s)

# tpch_usage: print the options and exit with the given status.
tpch_usage() {
	cat <<USAGE
usage: test/bench/tpch.sh [options]

  --sf X                 scale factor (default 0.1: about 600,000 lineitem rows)
  --rtt MS,MS,...        injected round-trip times in ms (default 0)
  --runs N               timed runs per query and wrapper after one warm-up,
                         median reported, >= 1 (default 3)
  --timeout S            per-query statement_timeout in s (default 120)
  --fetch-size N         fetch_size of every server (default 10000)
  --queries N,N,...      only these query numbers (default all 22)
  --fdws LIST            of postgres_fdw_sync,postgres_fdw_async,async_fdw (default all)
  --afdw-partitionwise   also set enable_partitionwise_join/aggregate for async_fdw
                         (postgres_fdw always has them on)
  --copies               the layout with replicated tables: async_fdw's six small
                         tables declare their copies on every shard (option
                         copies), so each partition joins them on its own shard
  --shard-parallel N|auto|own
                         max_parallel_workers_per_gather on the shards: auto (the
                         default) gives each its share of the cores, cores/shards - 1
                         and at least 0, as for instances sharing one machine; own
                         leaves the shards' default (2)
  --shards N             shard instances (default 4)
  --port-base N          first port to use (default 57000; uses N .. N+20*(rtts+1)+shards)
  --results DIR          output folder (default test/bench/results)
  --keep                 keep the throwaway folder (data, server logs) at the end
  -h, --help             this text
USAGE
	exit "$1"
}

# tpch_options: read the command line into the variables run.sh's
# functions use (SHARDS, RTT, OPT_PORT_BASE, ...) and tpch.py's.
tpch_options() {
	SF=0.1 RTT=0 RUNS=3 TIMEOUT=120 FETCH_SIZE=10000 QUERIES="" OPT_FDWS=""
	AFDW_PW=0 COPIES=0 SHARD_PARALLEL=auto SHARDS=4 OPT_PORT_BASE=57000 OPT_RESULTS="$HERE/results"
	while [ $# -gt 0 ]; do
		case "$1" in
		--sf) SF=${2:?}; shift ;;
		--rtt) RTT=${2:?}; shift ;;
		--runs) RUNS=${2:?}; shift ;;
		--timeout) TIMEOUT=${2:?}; shift ;;
		--fetch-size) FETCH_SIZE=${2:?}; shift ;;
		--queries) QUERIES=${2:?}; shift ;;
		--fdws) OPT_FDWS=${2:?}; shift ;;
		--afdw-partitionwise) AFDW_PW=1 ;;
		--copies) COPIES=1 ;;
		--shard-parallel) SHARD_PARALLEL=${2:?}; shift ;;
		--shards) SHARDS=${2:?}; shift ;;
		--port-base) OPT_PORT_BASE=${2:?}; shift ;;
		--results) OPT_RESULTS=${2:?}; shift ;;
		--keep) KEEP=1 ;;
		-h | --help) tpch_usage 0 ;;
		*) echo "tpch.sh: unknown option $1" >&2; tpch_usage 2 ;;
		esac
		shift
	done
	[[ $SF =~ ^[0-9]+(\.[0-9]+)?$ ]] && awk -v s="$SF" 'BEGIN { exit !(s >= 0.001) }' ||
		die "--sf: a number >= 0.001"
	[[ $RTT =~ ^[0-9]+(\.[0-9]+)?(,[0-9]+(\.[0-9]+)?)*$ ]] || die "--rtt: numbers of ms"
	[[ $RUNS =~ ^[1-9][0-9]*$ ]] || die "--runs: a positive integer"
	[[ $TIMEOUT =~ ^[1-9][0-9]*$ ]] || die "--timeout: a positive integer"
	[[ $SHARD_PARALLEL =~ ^(auto|own|[0-9]+)$ ]] || die "--shard-parallel: a number of workers, auto or own"
	[[ $FETCH_SIZE =~ ^[1-9][0-9]*$ ]] || die "--fetch-size: a positive integer"
	[[ -z $QUERIES || $QUERIES =~ ^([1-9]|1[0-9]|2[0-2])(,([1-9]|1[0-9]|2[0-2]))*$ ]] ||
		die "--queries: numbers 1 to 22 separated by commas"
	[[ $SHARDS =~ ^[0-9]+$ ]] && [ "$SHARDS" -ge 1 ] && [ "$SHARDS" -le 16 ] || die "--shards: 1 to 16"
	[[ $OPT_PORT_BASE =~ ^[0-9]+$ ]] || die "--port-base: a port number"
	# the shards run on this machine together: a parallel worker of one
	# takes a core from another (postgres_fdw's cursors never plan one)
	if [ "$SHARD_PARALLEL" = auto ]; then
		SHARD_PARALLEL=$(($(nproc) / SHARDS - 1))
		[ "$SHARD_PARALLEL" -ge 0 ] || SHARD_PARALLEL=0
	elif [ "$SHARD_PARALLEL" = own ]; then
		SHARD_PARALLEL=-1
	fi
	# what run.sh's functions read; proxies at base + 20 k + shard, so that
	# a run at two RTTs fits in 60 ports
	SCENARIOS="" MODES=default PROXY_PORT_STEP=20
	choose_fdws
}

# tpch_main: the whole run.
tpch_main() {
	tpch_options "$@"
	trap cleanup EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	ensure_packages
	build_proxy
	plan_ports
	start_cluster
	start_proxies
	log "TPC-H shape: scale factor $SF, RTT $RTT ms, $RUNS runs, timeout $TIMEOUT s, fdws ${FDWS:-none}"
	"$PYTHON" "$HERE/tpch.py" \
		--work "$WORK" --bindir "$BINDIR" --results "$OPT_RESULTS" \
		--coord-port "$COORD_PORT" --shard-ports "$(IFS=,; echo "${SHARD_PORTS[*]}")" \
		--proxies "$PROXY_SPEC" --rtt "$RTT" --runs "$RUNS" --sf "$SF" \
		--timeout "$TIMEOUT" --fetch-size "$FETCH_SIZE" --fdws "$FDWS" \
		--queries "$QUERIES" --afdw-partitionwise "$AFDW_PW" --copies "$COPIES" --shard-parallel "$SHARD_PARALLEL" \
		--command "$COMMAND_LINE" --setup-seconds "$(($(date +%s) - START_TIME))"
	log "done in $(($(date +%s) - START_TIME)) s"
}

tpch_main "$@"
