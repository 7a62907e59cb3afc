#!/bin/bash
# test/bench/replicated_writes.sh
#   The cost of a write to a replicated foreign table (option copies, issue
#   37): one client, autocommit, a one-row INSERT, a one-row UPDATE by key
#   sent whole, and the same UPDATE row by row (its value from a local
#   plpgsql function: by ctid, and in the replicated table by its declared
#   key), into a table kept on COPIES servers (the table's own and the
#   others, written one after another and committed in two phases), against
#   the same statements into a foreign table of one server (async_fdw and
#   postgres_fdw, one-phase commit) and into a local table.  pgbench
#   latencies, medians of RUNS runs of SECONDS seconds, in turns.
#
#   PG_CONFIG=pg_config  the installation (async_fdw installed in it)
#   PORT_BASE=56600      coordinator; shard k on PORT_BASE + k
#   COPIES=3 RUNS=3 SECONDS_EACH=5 RTT_NOTE=""  KEEP=1
#
# Run as root (servers run as postgres) or as the owner of the binaries.
PORT_BASE=${PORT_BASE:-56600}
COPIES=${COPIES:-3}
RUNS=${RUNS:-3}
SECONDS_EACH=${SECONDS_EACH:-5}
# shellcheck source=cg_common.sh
source "$(dirname "${BASH_SOURCE[0]}")/cg_common.sh"

CONF="$LOOPBACK_CONF
max_prepared_transactions = 20"
COORD=$PORT_BASE
start_shards "$COPIES" "$CONF"
for k in $(seq 1 "$COPIES"); do
	psql_at $((PORT_BASE + k)) -c "CREATE TABLE dim (k int PRIMARY KEY, name text, v int)" \
		-c "INSERT INTO dim SELECT g, 'name ' || g, 0 FROM generate_series(1, 1000) g" \
		-c "CREATE TABLE one (k int PRIMARY KEY, name text, v int)" \
		-c "INSERT INTO one SELECT g, 'name ' || g, 0 FROM generate_series(1, 1000) g" >/dev/null
done
others=$(seq 2 "$COPIES" | sed 's/^/s/' | paste -sd, | sed 's/,/, /g')
{
	echo "CREATE EXTENSION async_fdw; CREATE EXTENSION postgres_fdw;"
	for k in $(seq 1 "$COPIES"); do
		echo "CREATE SERVER s$k FOREIGN DATA WRAPPER async_fdw
			OPTIONS (host '127.0.0.1', port '$((PORT_BASE + k))', dbname 'postgres');
		CREATE USER MAPPING FOR postgres SERVER s$k OPTIONS (user 'postgres');"
	done
	echo "CREATE SERVER p1 FOREIGN DATA WRAPPER postgres_fdw
		OPTIONS (host '127.0.0.1', port '$((PORT_BASE + 1))', dbname 'postgres');
	CREATE USER MAPPING FOR postgres SERVER p1 OPTIONS (user 'postgres');
	CREATE FOREIGN TABLE rep (k int, name text, v int) SERVER s1
		OPTIONS (table_name 'dim', copies '$others');
	ALTER FOREIGN TABLE rep ALTER COLUMN k OPTIONS (ADD key 'true');
	CREATE FUNCTION one() RETURNS int LANGUAGE plpgsql AS 'BEGIN RETURN 1; END';
	CREATE FOREIGN TABLE afdw_one (k int, name text, v int) SERVER s1 OPTIONS (table_name 'one');
	CREATE FOREIGN TABLE pfdw_one (k int, name text, v int) SERVER p1 OPTIONS (table_name 'one');
	CREATE TABLE local_one (k int PRIMARY KEY, name text, v int);
	INSERT INTO local_one SELECT g, 'name ' || g, 0 FROM generate_series(1, 1000) g;"
} | psql_at "$COORD" -f - >/dev/null
[ -z "$(psql_at "$COORD" -c "SELECT * FROM async_fdw_check_copies('rep')")" ] || {
	echo "the copies disagree" >&2
	exit 1
}

# latency TABLE KIND: pgbench's average latency (ms) of one client writing
# TABLE for SECONDS_EACH seconds; KIND insert (new keys), update (sent
# whole) or rowwise (an UPDATE row by row).
latency() {
	local script=$WORK/$1_$2.sql
	if [ "$2" = insert ]; then
		printf '%s\n' "INSERT INTO $1 VALUES (1000000 + :client_id * 10000000 + (random() * 1000000000)::int % 10000000, 'x', 0) ON CONFLICT DO NOTHING;" >"$script"
	elif [ "$2" = update ]; then
		printf '%s\n' '\set k random(1, 1000)' "UPDATE $1 SET v = v + 1 WHERE k = :k;" >"$script"
	else
		printf '%s\n' '\set k random(1, 1000)' "UPDATE $1 SET v = v + one() WHERE k = :k;" >"$script"
	fi
	chmod 644 "$script"
	as_pg "$BINDIR/pgbench" -n -h "$WORK/sock" -p "$COORD" -U postgres -c 1 -T "$SECONDS_EACH" -f "$script" postgres 2>/dev/null |
		sed -n 's/^latency average = \([0-9.]*\) ms/\1/p'
}

tables="local_one pfdw_one afdw_one rep"
for _ in $(seq "$RUNS"); do
	for t in $tables; do
		for kind in insert update rowwise; do
			latency "$t" "$kind" >>"$WORK/lat_${t}_$kind"
		done
	done
done
# The copies still agree row for row.
sums=$(for k in $(seq 1 "$COPIES"); do psql_at $((PORT_BASE + k)) -c "SELECT count(*), sum(v), sum(k::bigint) FROM dim"; done | sort -u | wc -l)
[ "$sums" = 1 ] || {
	echo "the copies differ after the run" >&2
	exit 1
}

median_of() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
echo "| one client, autocommit, medians of $RUNS x ${SECONDS_EACH} s (ms) | INSERT one row | UPDATE one row by key | the UPDATE row by row |"
echo "| --- | ---: | ---: | ---: |"
for t in $tables; do
	case $t in
		local_one) name="local table" ;;
		pfdw_one) name="postgres_fdw, one server" ;;
		afdw_one) name="async_fdw, one server" ;;
		rep) name="async_fdw, replicated on $COPIES servers (two-phase commit)" ;;
	esac
	echo "| $name | $(median_of <"$WORK/lat_${t}_insert") | $(median_of <"$WORK/lat_${t}_update") | $(median_of <"$WORK/lat_${t}_rowwise") |"
done
