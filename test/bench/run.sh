#!/usr/bin/env bash
# test/bench/run.sh
#   The benchmark's one command: installs what it needs, builds the latency
#   proxy, starts a throwaway coordinator and N shards (plus one latency proxy
#   per round-trip time), runs bench.py to load data and measure async_fdw
#   against postgres_fdw, and stops everything it started, also on Ctrl-C.
#   See test/bench/README.md; `run.sh --help` lists the options.
set -euo pipefail

# async_fdw fetch modes to measure, one column each; "default" sets no
# fetch_mode option.  Adding a mode is a change of this line, e.g.
# ASYNC_FDW_MODES="default,stream,cursor" (or pass --modes).
ASYNC_FDW_MODES="default"

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
COMMAND_LINE="test/bench/run.sh${*:+ $*}"
START_TIME=$(date +%s)

# Defaults of the plain run, chosen to finish in under 10 minutes on a
# 2-core machine (see README): the whole matrix at 0 ms, and at RTT > 0 only
# DEF_RTT_SCENARIOS at fetch sizes >= DEF_SLOW_FETCH_LIMIT (at 1 ms and
# fetch_size 100 one query of 2M rows takes 7-25 s).  --full, or an explicit
# --scenarios / --fetch-sizes, lifts the matching restriction.
DEF_SCENARIOS="A,B,C,D,E,F,G"
DEF_FETCH="100,1000,10000"
DEF_RTT="0,1"
DEF_RUNS=3
DEF_ROWS=2000000
DEF_SHARDS=4
DEF_LOOKUP_SECONDS=3
DEF_CHECK_SECONDS=3
DEF_RTT_SCENARIOS="D,E"
DEF_SLOW_FETCH_LIMIT=1000
FULL_LOOKUP_SECONDS=5
# scenario L (64 clients) runs this long per figure unless --load-seconds
DEF_LOAD_SECONDS=20
# scenario W (writes): rows loaded and updated, postgres_fdw's batch_size
# sweep, the sample its row-by-row COPY loads (extrapolated to the rows),
# the pgbench duration of the latency figures
DEF_WRITE_ROWS=1000000
DEF_WRITE_BATCH_SIZES="100,1000,10000"
DEF_WRITE_COPY_SAMPLE=10000
DEF_WRITE_SECONDS=3
DEF_WRITES="copy,update,insert1,xact4"
# async_fdw.two_phase_commit settings W-insert1 and W-xact4 measure async_fdw
# at, one figure each ("none": one figure at its default)
DEF_WRITE_TWO_PHASE="off,on"

# --quick: under 2 minutes.
QUICK_SCENARIOS="A,D,E,G"
QUICK_FETCH="100,10000"
QUICK_ROWS=100000
QUICK_LOOKUP_SECONDS=1
QUICK_CHECK_SECONDS=2
QUICK_WRITE_ROWS=100000
QUICK_WRITE_COPY_SAMPLE=2000
QUICK_WRITE_SECONDS=1

PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
# where async_fdw counts as installed (overridable to test the skip path)
# (by default in the share directory of PG_CONFIG's installation)
if [ -z "${AFDW_CONTROL:-}" ] && [ -x "$PG_CONFIG" ]; then
	AFDW_CONTROL="$("$PG_CONFIG" --sharedir)/extension/async_fdw.control"
fi
AFDW_CONTROL=${AFDW_CONTROL:-/usr/share/postgresql/15/extension/async_fdw.control}

# Ports of the k-th latency proxy: base + PROXY_PORT_STEP * k + shard
# (tpch.sh packs them closer).
PROXY_PORT_STEP=${PROXY_PORT_STEP:-100}

# State for cleanup().
WORK=""
DATADIRS=()
PROXY_PIDS=()
KEEP=0

# usage: print the options and exit with the given status.
usage() {
	cat <<EOF
usage: test/bench/run.sh [options]

  --scenarios A,B,...    scenarios to run (default $DEF_SCENARIOS; at RTT > 0
                         only $DEF_RTT_SCENARIOS unless given explicitly); also L (64
                         clients under load), S (first query of a session) and
                         W (writes), run only when named, e.g. --scenarios L,S --no-lookups
                         or --scenarios W --no-lookups
  --fetch-sizes N,N,...  fetch_size values (default $DEF_FETCH; at RTT > 0
                         sizes below $DEF_SLOW_FETCH_LIMIT are skipped unless given explicitly)
  --rtt MS,MS,...        injected round-trip times in ms (default $DEF_RTT)
  --runs N               timed runs per figure, median reported, >= 3 (default $DEF_RUNS)
  --rows N               rows of the data set (default $DEF_ROWS)
  --shards N             shard instances (default $DEF_SHARDS)
  --fdws LIST            of postgres_fdw_sync,postgres_fdw_async,async_fdw
                         (default: all; async_fdw only if installed)
  --modes LIST           async_fdw fetch modes (default $ASYNC_FDW_MODES)
  --quick                small run, under 2 minutes ($QUICK_ROWS rows, scenarios
                         $QUICK_SCENARIOS, fetch $QUICK_FETCH)
  --full                 the whole matrix: every scenario and fetch size at
                         every RTT, lookups for $FULL_LOOKUP_SECONDS s (about 25 minutes)
  --no-lookups           skip the pgbench point lookups
  --no-raw               skip the raw COPY limit
  --lookup-seconds N     pgbench duration per lookup figure (default $DEF_LOOKUP_SECONDS)
  --load-seconds N       pgbench duration per load figure of scenario L (default $DEF_LOAD_SECONDS)
  --writes LIST          write tests of W: of $DEF_WRITES (default all)
  --write-rows N         rows W loads and updates (default $DEF_WRITE_ROWS; --quick $QUICK_WRITE_ROWS)
  --write-batch-sizes L  postgres_fdw batch_size values for INSERT ... SELECT
                         (default $DEF_WRITE_BATCH_SIZES)
  --write-afdw-batch-sizes L  async_fdw batch_size values for INSERT ... SELECT
                         (default: none, its own default)
  --write-copy-sample N  rows of postgres_fdw's row-by-row COPY, extrapolated
                         (default $DEF_WRITE_COPY_SAMPLE; --quick $QUICK_WRITE_COPY_SAMPLE)
  --write-seconds N      pgbench duration of W-insert1/W-xact4 (default $DEF_WRITE_SECONDS)
  --write-two-phase L    async_fdw.two_phase_commit settings of W-insert1/W-xact4,
                         of off,auto,on, or none for its default (default $DEF_WRITE_TWO_PHASE)
  --port-base N          first port to use (default 57000; uses N .. N+100*(rtts+1)+shards)
  --results DIR          output folder (default test/bench/results)
  --keep                 keep the throwaway folder (data, server logs) at the end
  -h, --help             this text
EOF
	exit "$1"
}

# die: print an error and exit (cleanup runs from the EXIT trap).
die() {
	echo "run.sh: $*" >&2
	exit 1
}

# log: a progress line.
log() {
	printf '== %s\n' "$*"
}

# as_pg: run a command as the unprivileged postgres user (PostgreSQL refuses
# root); when not root, run it as ourselves.
as_pg() {
	if [ "$(id -u)" -eq 0 ]; then
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}

# cleanup: stop every proxy and server this run started and remove the
# throwaway folder; runs on every exit, Ctrl-C and kill included.
cleanup() {
	local rc=$? pid dir
	trap - EXIT INT TERM
	set +e
	for pid in "${PROXY_PIDS[@]}"; do
		kill "$pid" 2>/dev/null
		for _ in 1 2 3 4 5 6 7 8 9 10; do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.2
		done
		kill -KILL "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
	done
	for dir in "${DATADIRS[@]}"; do
		if [ -f "$dir/postmaster.pid" ]; then
			as_pg "$BINDIR/pg_ctl" -D "$dir" -m fast -w -t 30 stop >/dev/null 2>&1 ||
				as_pg "$BINDIR/pg_ctl" -D "$dir" -m immediate -w -t 30 stop >/dev/null 2>&1
		fi
	done
	if [ -n "$WORK" ] && [ -d "$WORK" ]; then
		if [ "$KEEP" -eq 1 ]; then
			echo "run.sh: kept $WORK"
		else
			if [ "$rc" -ne 0 ]; then
				for dir in "${DATADIRS[@]}"; do
					grep -qE 'ERROR|FATAL|PANIC' "$dir/server.log" 2>/dev/null || continue
					echo "--- last errors in $dir/server.log" >&2
					grep -E 'ERROR|FATAL|PANIC' "$dir/server.log" | tail -n 5 >&2
				done
			fi
			rm -rf "$WORK"
		fi
	fi
	exit "$rc"
}

# parse_options: read the command line into the OPT_* variables.
parse_options() {
	OPT_SCENARIOS="" OPT_FETCH="" OPT_RTT="" OPT_RUNS="" OPT_ROWS="" OPT_SHARDS=""
	OPT_FDWS="" OPT_MODES="" OPT_QUICK=0 OPT_FULL=0 OPT_LOOKUPS=1 OPT_RAW=1
	OPT_LOOKUP_SECONDS="" OPT_PORT_BASE=57000 OPT_RESULTS="$HERE/results"
	OPT_LOAD_SECONDS=$DEF_LOAD_SECONDS
	OPT_WRITES=$DEF_WRITES OPT_WRITE_ROWS="" OPT_WRITE_BATCH_SIZES=$DEF_WRITE_BATCH_SIZES
	OPT_WRITE_COPY_SAMPLE="" OPT_WRITE_SECONDS="" OPT_WRITE_AFDW_BATCH_SIZES=""
	OPT_WRITE_TWO_PHASE=$DEF_WRITE_TWO_PHASE
	while [ $# -gt 0 ]; do
		case "$1" in
		--scenarios) OPT_SCENARIOS=${2:?}; shift ;;
		--fetch-sizes) OPT_FETCH=${2:?}; shift ;;
		--rtt) OPT_RTT=${2:?}; shift ;;
		--runs) OPT_RUNS=${2:?}; shift ;;
		--rows) OPT_ROWS=${2:?}; shift ;;
		--shards) OPT_SHARDS=${2:?}; shift ;;
		--fdws) OPT_FDWS=${2:?}; shift ;;
		--modes) OPT_MODES=${2:?}; shift ;;
		--lookup-seconds) OPT_LOOKUP_SECONDS=${2:?}; shift ;;
		--load-seconds) OPT_LOAD_SECONDS=${2:?}; shift ;;
		--writes) OPT_WRITES=${2:?}; shift ;;
		--write-rows) OPT_WRITE_ROWS=${2:?}; shift ;;
		--write-batch-sizes) OPT_WRITE_BATCH_SIZES=${2:?}; shift ;;
		--write-copy-sample) OPT_WRITE_COPY_SAMPLE=${2:?}; shift ;;
		--write-afdw-batch-sizes) OPT_WRITE_AFDW_BATCH_SIZES=${2:?}; shift ;;
		--write-seconds) OPT_WRITE_SECONDS=${2:?}; shift ;;
		--write-two-phase) OPT_WRITE_TWO_PHASE=${2:?}; shift ;;
		--port-base) OPT_PORT_BASE=${2:?}; shift ;;
		--results) OPT_RESULTS=${2:?}; shift ;;
		--quick) OPT_QUICK=1 ;;
		--full) OPT_FULL=1 ;;
		--no-lookups) OPT_LOOKUPS=0 ;;
		--no-raw) OPT_RAW=0 ;;
		--keep) KEEP=1 ;;
		-h | --help) usage 0 ;;
		*) echo "run.sh: unknown option $1" >&2; usage 2 ;;
		esac
		shift
	done
}

# settle_options: apply --quick/--full and the defaults to what was not
# given explicitly, then validate.
settle_options() {
	local q=$OPT_QUICK
	SCENARIOS=${OPT_SCENARIOS:-$([ "$q" -eq 1 ] && echo "$QUICK_SCENARIOS" || echo "$DEF_SCENARIOS")}
	FETCH=${OPT_FETCH:-$([ "$q" -eq 1 ] && echo "$QUICK_FETCH" || echo "$DEF_FETCH")}
	RTT=${OPT_RTT:-$DEF_RTT}
	RUNS=${OPT_RUNS:-$DEF_RUNS}
	ROWS=${OPT_ROWS:-$([ "$q" -eq 1 ] && echo "$QUICK_ROWS" || echo "$DEF_ROWS")}
	SHARDS=${OPT_SHARDS:-$DEF_SHARDS}
	MODES=${OPT_MODES:-$ASYNC_FDW_MODES}
	LOOKUP_SECONDS=$DEF_LOOKUP_SECONDS
	[ "$q" -eq 0 ] || LOOKUP_SECONDS=$QUICK_LOOKUP_SECONDS
	[ "$OPT_FULL" -eq 0 ] || LOOKUP_SECONDS=$FULL_LOOKUP_SECONDS
	LOOKUP_SECONDS=${OPT_LOOKUP_SECONDS:-$LOOKUP_SECONDS}
	CHECK_SECONDS=$([ "$q" -eq 1 ] && echo "$QUICK_CHECK_SECONDS" || echo "$DEF_CHECK_SECONDS")
	WRITE_ROWS=${OPT_WRITE_ROWS:-$([ "$q" -eq 1 ] && echo "$QUICK_WRITE_ROWS" || echo "$DEF_WRITE_ROWS")}
	WRITE_COPY_SAMPLE=${OPT_WRITE_COPY_SAMPLE:-$([ "$q" -eq 1 ] && echo "$QUICK_WRITE_COPY_SAMPLE" || echo "$DEF_WRITE_COPY_SAMPLE")}
	WRITE_SECONDS=${OPT_WRITE_SECONDS:-$([ "$q" -eq 1 ] && echo "$QUICK_WRITE_SECONDS" || echo "$DEF_WRITE_SECONDS")}
	# an explicit --fetch-sizes, --full or --quick runs exactly the sizes asked for
	if [ -n "$OPT_FETCH" ] || [ "$OPT_FULL" -eq 1 ] || [ "$q" -eq 1 ]; then
		SLOW_FETCH_LIMIT=0
	else
		SLOW_FETCH_LIMIT=$DEF_SLOW_FETCH_LIMIT
	fi
	if [ -n "$OPT_SCENARIOS" ] || [ "$OPT_FULL" -eq 1 ] || [ "$q" -eq 1 ]; then
		RTT_SCENARIOS=""
	else
		RTT_SCENARIOS=$DEF_RTT_SCENARIOS
	fi
	SCENARIOS=${SCENARIOS^^}

	[[ $SCENARIOS =~ ^[A-GLSW](,[A-GLSW])*$ ]] || die "--scenarios: letters A-G, L, S, W separated by commas"
	[[ $OPT_WRITES =~ ^(copy|update|insert1|xact4)(,(copy|update|insert1|xact4))*$ ]] ||
		die "--writes: of copy, update, insert1, xact4 separated by commas"
	[[ $WRITE_ROWS =~ ^[0-9]+$ ]] && [ "$WRITE_ROWS" -ge 16 ] || die "--write-rows: at least 16"
	[[ $OPT_WRITE_BATCH_SIZES =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || die "--write-batch-sizes: positive integers"
	[[ -z $OPT_WRITE_AFDW_BATCH_SIZES || $OPT_WRITE_AFDW_BATCH_SIZES =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] ||
		die "--write-afdw-batch-sizes: positive integers"
	[[ $WRITE_COPY_SAMPLE =~ ^[1-9][0-9]*$ ]] || die "--write-copy-sample: a positive integer"
	[[ $WRITE_SECONDS =~ ^[1-9][0-9]*$ ]] || die "--write-seconds: a positive integer"
	[[ $OPT_WRITE_TWO_PHASE =~ ^(none|(off|auto|on)(,(off|auto|on))*)$ ]] ||
		die "--write-two-phase: of off, auto, on separated by commas, or none"
	[ "$OPT_WRITE_TWO_PHASE" != none ] || OPT_WRITE_TWO_PHASE=""
	[[ $FETCH =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || die "--fetch-sizes: positive integers"
	[[ $RTT =~ ^[0-9]+(\.[0-9]+)?(,[0-9]+(\.[0-9]+)?)*$ ]] || die "--rtt: numbers of ms"
	[[ $RUNS =~ ^[0-9]+$ ]] && [ "$RUNS" -ge 3 ] || die "--runs: at least 3"
	[[ $ROWS =~ ^[0-9]+$ ]] && [ "$ROWS" -ge 16 ] || die "--rows: at least 16"
	[[ $SHARDS =~ ^[0-9]+$ ]] && [ "$SHARDS" -ge 1 ] && [ "$SHARDS" -le 16 ] || die "--shards: 1 to 16"
	[[ $LOOKUP_SECONDS =~ ^[1-9][0-9]*$ ]] || die "--lookup-seconds: a positive integer"
	[[ $OPT_LOAD_SECONDS =~ ^[1-9][0-9]*$ ]] || die "--load-seconds: a positive integer"
	[[ $OPT_PORT_BASE =~ ^[0-9]+$ ]] || die "--port-base: a port number"
	[[ $MODES =~ ^[A-Za-z0-9_]+(,[A-Za-z0-9_]+)*$ ]] || die "--modes: names separated by commas"
	choose_fdws
}

# choose_fdws: the FDWs to compare; async_fdw only when its extension is
# installed, with a notice otherwise.
choose_fdws() {
	local f out=()
	local want=${OPT_FDWS:-postgres_fdw_sync,postgres_fdw_async,async_fdw}
	AFDW_NOTE="installed, measured in mode(s) $MODES"
	for f in ${want//,/ }; do
		case "$f" in
		postgres_fdw_sync | postgres_fdw_async) out+=("$f") ;;
		async_fdw)
			if [ -f "$AFDW_CONTROL" ]; then
				out+=("$f")
			else
				echo "NOTICE: async_fdw is not installed ($AFDW_CONTROL missing): measuring postgres_fdw only." >&2
				echo "NOTICE: build and install it with 'make install' in the repository to include it." >&2
				AFDW_NOTE="not installed: not measured"
			fi
			;;
		*) die "--fdws: unknown FDW '$f' (postgres_fdw_sync, postgres_fdw_async, async_fdw)" ;;
		esac
	done
	[[ ,$want, == *,async_fdw,* ]] || AFDW_NOTE="not requested"
	FDWS=$(IFS=,; echo "${out[*]}")
}

# ensure_packages: install missing Debian packages (gcc, make, gnuplot,
# PostgreSQL 15 with postgres_fdw) and the postgres user.
ensure_packages() {
	local need=()
	command -v gcc >/dev/null || need+=(gcc)
	command -v make >/dev/null || need+=(make)
	command -v gnuplot >/dev/null || need+=(gnuplot-nox)
	command -v python3 >/dev/null || need+=(python3)
	[ -x /usr/lib/postgresql/15/bin/postgres ] || need+=(postgresql-15)
	[ -f /usr/share/postgresql/15/extension/postgres_fdw.control ] || need+=(postgresql-contrib)
	if [ ${#need[@]} -gt 0 ]; then
		[ "$(id -u)" -eq 0 ] || die "missing packages: ${need[*]} (run as root to install them)"
		log "installing ${need[*]}"
		export DEBIAN_FRONTEND=noninteractive
		apt-get update -qq
		apt-get install -y -qq "${need[@]}" >/dev/null
	fi
	if [ "$(id -u)" -eq 0 ] && ! id -u postgres >/dev/null 2>&1; then
		useradd --system --home-dir /var/lib/postgresql --shell /bin/bash postgres
	fi
	[ -x "$PG_CONFIG" ] || PG_CONFIG=$(command -v pg_config)
	BINDIR=$("$PG_CONFIG" --bindir)
	# Scenario L runs the coordinator with async_fdw preloaded (its shared
	# connection budget needs it), when the library is installed.
	PRELOAD=""
	if [[ ,$SCENARIOS, == *,L,* ]] && [[ ,$FDWS, == *,async_fdw,* ]] &&
		[ -f "$("$PG_CONFIG" --pkglibdir)/async_fdw.so" ]; then
		PRELOAD=async_fdw
	fi
	PYTHON=$(command -v /usr/bin/python3 || command -v python3)
}

# build_proxy: compile the latency injector (warnings are errors).
build_proxy() {
	make -s -C "$HERE" latency_proxy
	PROXY="$HERE/latency_proxy"
}

# port_busy: true if something listens on 127.0.0.1:$1.
port_busy() {
	(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# plan_ports: coordinator at the base port, shards after it, and for the
# k-th proxy (k = 1.. over 0 ms and every RTT) ports base + 100 k + shard.
plan_ports() {
	local i k r all=() rtts=()
	COORD_PORT=$OPT_PORT_BASE
	SHARD_PORTS=()
	for ((i = 1; i <= SHARDS; i++)); do SHARD_PORTS+=($((OPT_PORT_BASE + i))); done
	# a 0 ms proxy is always started: the proxy check reports its own overhead
	PROXY_RTTS=(0)
	for r in ${RTT//,/ }; do
		[ "$(awk -v r="$r" 'BEGIN { print (r == 0) }')" -eq 1 ] || PROXY_RTTS+=("$r")
	done
	all=("$COORD_PORT" "${SHARD_PORTS[@]}")
	for ((k = 1; k <= ${#PROXY_RTTS[@]}; k++)); do
		for ((i = 1; i <= SHARDS; i++)); do all+=($((OPT_PORT_BASE + PROXY_PORT_STEP * k + i))); done
	done
	for i in "${all[@]}"; do
		[ "$i" -lt 65536 ] || die "port $i out of range: lower --port-base"
		! port_busy "$i" || die "port $i is in use: pick another --port-base"
	done
}

# init_instance: initdb one data directory and write its settings.
init_instance() {
	local dir=$1 port=$2 role=$3
	as_pg "$BINDIR/initdb" -D "$dir" -A trust -U postgres -E UTF8 --locale=C --no-sync >/dev/null
	{
		echo "# benchmark settings (test/bench/run.sh)"
		echo "listen_addresses = '127.0.0.1'"
		echo "port = $port"
		echo "unix_socket_directories = ''"
		echo "fsync = off"
		echo "synchronous_commit = off"
		echo "full_page_writes = off"
		echo "wal_level = minimal"
		echo "max_wal_senders = 0"
		echo "max_wal_size = 8GB"
		echo "checkpoint_timeout = 1h"
		echo "autovacuum = off"
		echo "jit = off"
		echo "lc_messages = 'C'"
		if [ "$role" = coordinator ]; then
			echo "shared_buffers = 512MB"
			# room for scenario L's 64 clients plus the harness's own sessions
			echo "max_connections = 100"
			[ -z "$PRELOAD" ] || echo "shared_preload_libraries = '$PRELOAD'"
			# the FDW scans run in one process: keep the local floor comparable
			echo "max_parallel_workers_per_gather = 0"
		else
			echo "shared_buffers = 1GB"
			# async_fdw's two-phase commit (its default, auto, for a
			# transaction writing to several shards, as W-xact4) PREPAREs
			echo "max_prepared_transactions = 20"
			# scenario L measures against a shard limit of 200, as in issue 12
			if [[ ,$SCENARIOS, == *,L,* ]]; then
				echo "max_connections = 200"
			else
				echo "max_connections = 300"
			fi
		fi
	} >>"$dir/postgresql.conf"
}

# start_cluster: initdb (in parallel) and start the coordinator and shards.
start_cluster() {
	local i pids=() pid dirs=() ports=() roles=()
	WORK=$(mktemp -d /tmp/async_fdw_bench.XXXXXX)
	[ "$(id -u)" -ne 0 ] || chown postgres: "$WORK"
	dirs=("$WORK/coord") ports=("$COORD_PORT") roles=(coordinator)
	for ((i = 1; i <= SHARDS; i++)); do
		dirs+=("$WORK/shard$i") ports+=("${SHARD_PORTS[i - 1]}") roles+=(shard)
	done
	log "initdb: coordinator on port $COORD_PORT, $SHARDS shard(s) on ports ${SHARD_PORTS[*]} (in $WORK)"
	for i in "${!dirs[@]}"; do
		init_instance "${dirs[i]}" "${ports[i]}" "${roles[i]}" &
		pids+=($!)
	done
	for pid in "${pids[@]}"; do wait "$pid" || die "initdb failed"; done
	for i in "${!dirs[@]}"; do
		DATADIRS+=("${dirs[i]}")
		as_pg "$BINDIR/pg_ctl" -D "${dirs[i]}" -l "${dirs[i]}/server.log" -w -t 60 start >/dev/null ||
			die "could not start ${dirs[i]} (see its server.log)"
		as_pg "$BINDIR/psql" -X -q -h 127.0.0.1 -p "${ports[i]}" -U postgres -d postgres \
			-c "CREATE DATABASE bench" || die "CREATE DATABASE failed"
	done
}

# start_proxies: one latency_proxy per RTT (0 ms included), each relaying
# every shard; waits until each answers through the proxy.
start_proxies() {
	local k i r delay args port ports
	PROXY_SPEC=""
	for ((k = 1; k <= ${#PROXY_RTTS[@]}; k++)); do
		r=${PROXY_RTTS[k - 1]}
		delay=$(awk -v r="$r" 'BEGIN { printf "%d", r * 500 }')
		args=() ports=()
		for ((i = 1; i <= SHARDS; i++)); do
			port=$((OPT_PORT_BASE + PROXY_PORT_STEP * k + i))
			args+=(--listen "127.0.0.1:$port" --target "127.0.0.1:${SHARD_PORTS[i - 1]}")
			ports+=("$port")
		done
		"$PROXY" --delay-us "$delay" "${args[@]}" >"$WORK/proxy_$k.log" 2>&1 &
		PROXY_PIDS+=($!)
		for port in "${ports[@]}"; do
			for i in $(seq 50); do
				"$BINDIR/pg_isready" -q -h 127.0.0.1 -p "$port" -U postgres -d bench && break
				sleep 0.1
			done
			"$BINDIR/pg_isready" -q -h 127.0.0.1 -p "$port" -U postgres -d bench || die "proxy on port $port does not answer"
		done
		PROXY_SPEC+="$r=$(IFS=,; echo "${ports[*]}");"
	done
	log "latency proxies: RTT ${PROXY_RTTS[*]} ms (one-way delay = RTT/2), pids ${PROXY_PIDS[*]}"
}

# main: the whole run.
main() {
	parse_options "$@"
	trap cleanup EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	settle_options
	ensure_packages
	build_proxy
	plan_ports
	start_cluster
	start_proxies
	log "scenarios $SCENARIOS, fetch sizes $FETCH, RTT $RTT ms, $ROWS rows, $RUNS runs, fdws ${FDWS:-none}"
	[[ ,$SCENARIOS, != *,W,* ]] || log "writes $OPT_WRITES: $WRITE_ROWS rows, postgres_fdw batch_size $OPT_WRITE_BATCH_SIZES, COPY sample $WRITE_COPY_SAMPLE rows, pgbench $WRITE_SECONDS s"
	"$PYTHON" "$HERE/bench.py" \
		--work "$WORK" --bindir "$BINDIR" --results "$OPT_RESULTS" \
		--coord-port "$COORD_PORT" --shard-ports "$(IFS=,; echo "${SHARD_PORTS[*]}")" \
		--proxies "$PROXY_SPEC" \
		--scenarios "$SCENARIOS" --fetch-sizes "$FETCH" --rtt "$RTT" \
		--runs "$RUNS" --rows "$ROWS" --fdws "$FDWS" --modes "$MODES" \
		--lookups "$OPT_LOOKUPS" --lookup-seconds "$LOOKUP_SECONDS" \
		--check-seconds "$CHECK_SECONDS" --raw "$OPT_RAW" \
		--load-seconds "$OPT_LOAD_SECONDS" --preload "$PRELOAD" \
		--writes "$OPT_WRITES" --write-rows "$WRITE_ROWS" \
		--write-batch-sizes "$OPT_WRITE_BATCH_SIZES" --write-copy-sample "$WRITE_COPY_SAMPLE" \
		--write-seconds "$WRITE_SECONDS" --write-afdw-batch-sizes "$OPT_WRITE_AFDW_BATCH_SIZES" \
		--write-two-phase "$OPT_WRITE_TWO_PHASE" \
		--slow-fetch-limit "$SLOW_FETCH_LIMIT" --rtt-scenarios "$RTT_SCENARIOS" \
		--command "$COMMAND_LINE" \
		--afdw-note "$AFDW_NOTE" --setup-seconds "$(($(date +%s) - START_TIME))"
	log "done in $(($(date +%s) - START_TIME)) s"
}

# tpch.sh sources this file for its functions: run only when executed
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	main "$@"
fi
