#!/bin/bash
# test/bench/oltp_write.sh
#   Single-row writes through the coordinator, one pgbench client each:
#   an autocommit UPDATE and DELETE (+ INSERT back) by key, through async_fdw
#   (whose statement carries the remote COMMIT), through async_fdw inside
#   BEGIN ... COMMIT (the statement and the COMMIT in two messages, as an
#   autocommit write was sent before), through postgres_fdw, and on the shard
#   directly (the limit), at each injected round-trip time: transactions per
#   second and mean latency, the median of several runs.  A throwaway
#   coordinator and one shard (plus a latency proxy per RTT > 0) on
#   loopback, stopped at the end.
#
#   BINDIR=/usr/lib/postgresql/15/bin  PostgreSQL binaries (async_fdw and
#                                      postgres_fdw installed for them)
#   PORT_BASE=57400  coordinator; shard +1, proxies +10, +11, ...
#   ROWS=100000      rows of the table
#   RTTS="0 1"       round-trip times in ms
#   RUNS=3           runs per figure (the median is printed)
#   SECONDS_EACH=5   length of a run
#
# Run as root (servers run as postgres) or as the owner of the binaries.
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
BINDIR=${BINDIR:-/usr/lib/postgresql/15/bin}
PORT_BASE=${PORT_BASE:-57400}
ROWS=${ROWS:-100000}
RTTS=${RTTS:-0 1}
RUNS=${RUNS:-3}
SECONDS_EACH=${SECONDS_EACH:-5}
WORK=$(mktemp -d /tmp/oltp_write.XXXXXX)
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
	CREATE TABLE acc (id int PRIMARY KEY, bal int, note text);
	INSERT INTO acc SELECT g, 0, 'n' || g FROM generate_series(1, $ROWS) g;" -c 'VACUUM ANALYZE acc'
psql_c $COORD -c "CREATE EXTENSION async_fdw; CREATE EXTENSION postgres_fdw;"

# The scripts: KIND is the table (a_acc: async_fdw, p_acc: postgres_fdw,
# acc: the shard itself), BLOCK wraps the statement in BEGIN ... COMMIT.
script() {	# script NAME TABLE BLOCK
	local f=$WORK/$1.sql b="" e=""
	if [ "$3" = 1 ]; then b="BEGIN;"; e="COMMIT;"; fi
	case $1 in
	update*) printf '\\set id random(1, %s)\n%s\nUPDATE %s SET bal = bal + 1 WHERE id = :id;\n%s\n' \
		"$ROWS" "$b" "$2" "$e" > "$f" ;;
	delete*) printf '\\set id random(1, %s)\n%s\nDELETE FROM %s WHERE id = :id;\n%s\nINSERT INTO %s VALUES (:id, 0, '"'"'x'"'"') ON CONFLICT DO NOTHING;\n' \
		"$ROWS" "$b" "$2" "$e" "$2" > "$f" ;;
	esac
	chmod 644 "$f"
}

median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

echo "| RTT ms | statement | async_fdw | async_fdw in BEGIN ... COMMIT | postgres_fdw | shard directly |"
echo "| ---: | --- | ---: | ---: | ---: | ---: |"
k=0
for r in $RTTS; do
	port=$SHARD
	if [ "$(awk -v r="$r" 'BEGIN { print (r > 0) }')" = 1 ]; then
		port=$((PORT_BASE + 10 + k))
		"$HERE/latency_proxy" --delay-us "$(awk -v r="$r" 'BEGIN { printf "%d", r * 500 }')" \
			--listen 127.0.0.1:$port --target 127.0.0.1:$SHARD >/dev/null 2>&1 &
		PIDS+=($!)
		sleep 0.3
	fi
	k=$((k + 1))
	psql_c $COORD -c "
		DROP SERVER IF EXISTS sa CASCADE; DROP SERVER IF EXISTS sp CASCADE;
		CREATE SERVER sa FOREIGN DATA WRAPPER async_fdw OPTIONS (host '127.0.0.1', port '$port', dbname 'postgres');
		CREATE SERVER sp FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host '127.0.0.1', port '$port', dbname 'postgres');
		CREATE USER MAPPING FOR postgres SERVER sa OPTIONS (user 'postgres');
		CREATE USER MAPPING FOR postgres SERVER sp OPTIONS (user 'postgres');
		CREATE FOREIGN TABLE a_acc (id int, bal int, note text) SERVER sa OPTIONS (table_name 'acc');
		CREATE FOREIGN TABLE p_acc (id int, bal int, note text) SERVER sp OPTIONS (table_name 'acc');"
	for stmt in update delete; do
		row="| $r | $stmt |"
		for v in async block postgres shard; do
			case $v in
			async) script "$stmt-$v" a_acc 0; p=$COORD ;;
			block) script "$stmt-$v" a_acc 1; p=$COORD ;;
			postgres) script "$stmt-$v" p_acc 0; p=$COORD ;;
			shard) script "$stmt-$v" acc 0; p=$port ;;
			esac
			tps=$(for i in $(seq "$RUNS"); do
				as_pg "$BINDIR/pgbench" -n -h 127.0.0.1 -U postgres -p "$p" -c 1 -T "$SECONDS_EACH" \
					-f "$WORK/$stmt-$v.sql" postgres 2>/dev/null |
					awk '/^tps/ { print $3 }'
			done | median)
			row="$row $(awk -v t="$tps" 'BEGIN { printf "%.0f tps, %.3f ms", t, 1000 / t }') |"
		done
		echo "$row"
	done
done
