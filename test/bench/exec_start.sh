#!/bin/bash
# test/bench/exec_start.sh
#   Executor start with many foreign partitions: a partitioned table whose
#   partitions are async_fdw foreign tables of one loopback server (empty
#   remote tables), queried whole (`SELECT * FROM p<N>`, an asynchronous
#   Append of N foreign scans).  For each N it prints
#   - the wall time of the query: `EXPLAIN (ANALYZE, TIMING OFF, SUMMARY ON)`,
#     "Execution Time" (start, run and end of the executor), median of RUNS;
#   - the same of `SELECT * FROM p<N> LIMIT 0`: the Limit never asks the
#     Append for a row, so no remote query is sent and the figure is the
#     executor's start and end;
#   - callgrind instruction counts of the coordinator backend per query:
#     the whole query, standard_ExecutorStart and afdwBeginForeignScan
#     (inclusive), each the difference between a session running the query
#     1 + CG_RUNS times and one running it once (caches and connections
#     warm), divided by CG_RUNS.
#   With CHECK=1 it fails when ExecutorStart's instructions per partition at
#   the largest N exceed MAX_RATIO times those at the smallest N (a start
#   that grows faster than the number of partitions).
#
#   PG_CONFIG=pg_config  PORT_BASE=56250  (see cg_common.sh)
#   PARTS="64 1024"  RUNS=7  CG_RUNS=3  CHECK=  MAX_RATIO=1.3
#
# Example: PG_CONFIG=/opt/pgB/usr/lib/postgresql/15/bin/pg_config \
#            PORT_BASE=56250 bash test/bench/exec_start.sh
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=test/bench/cg_common.sh
. "$HERE/cg_common.sh"
PARTS=${PARTS:-64 1024}
RUNS=${RUNS:-7}
CG_RUNS=${CG_RUNS:-3}
MAX_RATIO=${MAX_RATIO:-1.3}
# shellcheck disable=SC2086  # PARTS is a list
maxn=$(printf '%s\n' $PARTS | sort -n | tail -1)

init_cluster remote "$REMOTE_PORT"
init_cluster coord "$COORD_PORT"
start_cluster remote
start_cluster coord

psql_at "$REMOTE_PORT" <<SQL
DO \$\$ BEGIN
  FOR i IN 1..$maxn LOOP
    EXECUTE format('CREATE TABLE r_%s (id int PRIMARY KEY, v int)', i);
  END LOOP;
END \$\$;
SQL
psql_at "$COORD_PORT" <<SQL
CREATE EXTENSION async_fdw;
CREATE SERVER loopback FOREIGN DATA WRAPPER async_fdw
  OPTIONS (host '$WORK/sock', port '$REMOTE_PORT', dbname 'postgres');
CREATE USER MAPPING FOR CURRENT_USER SERVER loopback;
SQL
for n in $PARTS; do
	psql_at "$COORD_PORT" <<SQL
CREATE TABLE p$n (id int, v int) PARTITION BY RANGE (id);
DO \$\$ BEGIN
  FOR i IN 1..$n LOOP
    EXECUTE format('CREATE FOREIGN TABLE p${n}_%s PARTITION OF p$n
                    FOR VALUES FROM (%s) TO (%s) SERVER loopback
                    OPTIONS (table_name ''r_%s'')', i, i * 10, i * 10 + 10, i);
  END LOOP;
END \$\$;
SQL
	async=$(psql_at "$COORD_PORT" -c "EXPLAIN (COSTS OFF) SELECT * FROM p$n" | grep -c 'Async Foreign Scan' || true)
	async0=$(psql_at "$COORD_PORT" -c "EXPLAIN (COSTS OFF) SELECT * FROM p$n LIMIT 0" | grep -c 'Async Foreign Scan' || true)
	echo "p$n: $n partitions, $async async foreign scans in the plan ($async0 under LIMIT 0)"
done

echo
echo "| partitions | query | execution ms (median of $RUNS) | all runs |"
echo "| ---: | --- | ---: | --- |"
for n in $PARTS; do
	for q in "SELECT * FROM p$n" "SELECT * FROM p$n LIMIT 0"; do
		{
			echo "$q;"
			for _ in $(seq "$RUNS"); do echo "EXPLAIN (ANALYZE, TIMING OFF, SUMMARY ON) $q;"; done
		} >"$WORK/wall.sql"
		chmod 644 "$WORK/wall.sql"
		mapfile -t ms < <(psql_at "$COORD_PORT" -f "$WORK/wall.sql" | sed -n 's/^Execution Time: \([0-9.]*\) ms/\1/p')
		echo "| $n | \`$q\` | $(median "${ms[@]}") | ${ms[*]} |"
	done
done
stop_cluster coord

start_cluster_callgrind coord "$COORD_PORT"
echo
echo "Coordinator instructions per query (callgrind, $CG_RUNS queries after one):"
echo
echo "| partitions | query | standard_ExecutorStart | per partition | afdwBeginForeignScan | per partition |"
echo "| ---: | ---: | ---: | ---: | ---: | ---: |"
declare -A per_part
for n in $PARTS; do
	echo "SELECT * FROM p$n;" >"$WORK/one.sql"
	a=$(cg_session "$COORD_PORT" "$WORK/one.sql")
	for _ in $(seq "$CG_RUNS"); do echo "SELECT * FROM p$n;"; done >>"$WORK/one.sql"
	b=$(cg_session "$COORD_PORT" "$WORK/one.sql")
	tot=$(( ($(cg_total "$b") - $(cg_total "$a")) / CG_RUNS ))
	st=$(( ($(cg_inclusive "$b" standard_ExecutorStart) - $(cg_inclusive "$a" standard_ExecutorStart)) / CG_RUNS ))
	bf=$(( ($(cg_inclusive "$b" afdwBeginForeignScan) - $(cg_inclusive "$a" afdwBeginForeignScan)) / CG_RUNS ))
	per_part[$n]=$((st / n))
	echo "| $n | $tot | $st | $((st / n)) | $bf | $((bf / n)) |"
done
stop_cluster coord

if [ -n "${CHECK:-}" ]; then
	# shellcheck disable=SC2086
	minn=$(printf '%s\n' $PARTS | sort -n | head -1)
	if awk -v a="${per_part[$minn]}" -v b="${per_part[$maxn]}" -v r="$MAX_RATIO" 'BEGIN { exit !(b > a * r) }'; then
		echo "FAIL: ExecutorStart per partition ${per_part[$maxn]} at $maxn partitions, ${per_part[$minn]} at $minn (more than ${MAX_RATIO}x)"
		exit 1
	fi
	echo "ok: ExecutorStart per partition ${per_part[$maxn]} at $maxn partitions, ${per_part[$minn]} at $minn (at most ${MAX_RATIO}x)"
fi
