#!/usr/bin/env bash
# scripts/package_test.sh
#   Build the Debian package postgresql-<major>-async-fdw from a copy of this
#   tree (debian/, PostgreSQL's Debian tooling), install it with apt in a
#   clean Debian root that never had async_fdw, and try it as a user would:
#   a throwaway server on loopback, CREATE EXTENSION, a partitioned table
#   whose two partitions are foreign tables on two loopback shards (two
#   databases of that server), a query over both, DROP EXTENSION; then
#   remove the package and check that its files are gone.  The package is
#   never installed on this machine itself.  Exits non-zero on any failure.
#   Root only (debootstrap, chroot, mount).
#
#   The build: on this machine when its Debian release ships the major (15
#   on Debian 12); else in the Debian root that scripts/pgroot.sh keeps for
#   the major (trixie for 17, forky for 18), where this script runs again
#   with PKG_OUT set, installs the build's packages on first use and leaves
#   the .deb in a directory of this machine mounted there.
#
#   The clean root: a minimal Debian root of the release that ships the
#   major (bookworm for 15, trixie for 17, forky for 18), made once with
#   debootstrap from the Debian mirror of this machine's apt sources, with
#   apt's package lists and the server's packages downloaded but NOT
#   installed, cached as PGROOT_DIR/<release>-pkg.  Each run works on a
#   throwaway overlay of it (a copy where overlayfs is not available), so
#   every run starts clean and apt resolves the package's dependencies
#   itself.
#
# Environment:
#   PG_MAJOR       the major to package and test: 15, 17 or 18 (default 15)
#   PKG_TEST_PORT  port of the throwaway server (default 55442)
#   PGROOT_DIR     where the cached roots live, the build roots of
#                  scripts/pgroot.sh too (default /var/tmp/async_fdw-roots)
#   SKIP_DEPS=1    do not apt-get anything on this machine (the build root
#                  still gets the build's packages)
#   KEEP_TEST_DIR=1  keep the work directory (build, logs) at the end
#   PKG_OUT        build the package only and copy the .deb into this
#                  directory: what the run in a build root is given
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
port=${PKG_TEST_PORT:-55442}
start=$SECONDS

# shellcheck source=scripts/common.sh
. "$here/scripts/common.sh"
step() { log "[$((SECONDS - start)) s] $*"; }

if [ "$(id -u)" -ne 0 ]; then
	echo "package_test.sh: needs root (debootstrap, chroot, mount)" >&2
	exit 1
fi
PG_MAJOR=${PG_MAJOR:-15}
choose_pg_major
case "$pg_major" in
	15) suite=bookworm ;;
	17) suite=trixie ;;
	18) suite=forky ;;
esac
pkg=postgresql-$pg_major-async-fdw

work=$(mktemp -d /tmp/async_fdw_pkg.XXXXXX)
chmod 755 "$work"
root=$work/root
mounted=()
cleanup() {
	local i
	if [ -d "$root/tmp/pkgtest/data" ] && [ -f "$root/tmp/pkgtest/data/postmaster.pid" ]; then
		chroot "$root" runuser -u postgres -- "/usr/lib/postgresql/$pg_major/bin/pg_ctl" \
			-D /tmp/pkgtest/data -m immediate -w stop >/dev/null 2>&1 || true
	fi
	for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
		umount -l "${mounted[$i]}" 2>/dev/null || true
	done
	if [ -z "${KEEP_TEST_DIR:-}" ]; then rm -rf "$work"; else echo "kept $work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# 1. Build the package from a copy of the tree (the build writes into it).
build_packages=(dpkg-dev debhelper fakeroot postgresql-server-dev-all
	"postgresql-server-dev-$pg_major" libpq-dev gcc make)
build_deb() {	# build_deb: build $pkg in $work, set deb to its file
	step "building $pkg with dpkg-buildpackage (a copy of the tree in $work/async-fdw)"
	mkdir -p "$work/async-fdw"
	tar -C "$here" --exclude=.git --exclude='*.o' --exclude='*.so' --exclude='*.bc' \
		--exclude='./build-*' -cf - . | tar -C "$work/async-fdw" -xf -
	(
		cd "$work/async-fdw"
		# debian/control for the majors of debian/pgversions this machine supports.
		pg_buildext updatecontrol
		dpkg-buildpackage -us -uc -b
	) >"$work/build.log" 2>&1 </dev/null || {
		echo "package_test.sh: the package build failed; the end of its log:" >&2
		tail -n 40 "$work/build.log" >&2
		exit 1
	}
	deb=$(ls "$work"/"$pkg"_*.deb)
}
if [ -n "${PKG_OUT:-}" ]; then
	# The run in a build root: the package only, left for the run outside.
	need_packages "${build_packages[@]}"
	build_deb
	cp "$deb" "$PKG_OUT/"
	step "built $(basename "$deb"), copied to $PKG_OUT"
	exit 0
elif host_ships_pg "$pg_major"; then
	need_packages "${build_packages[@]}" debootstrap
	build_deb
else
	# This script again, in the Debian root of scripts/pgroot.sh for the
	# major (its own release and mounts); $work/out is its PKG_OUT.
	need_packages debootstrap
	step "building $pkg in a Debian $suite root that ships PostgreSQL $pg_major (scripts/pgroot.sh)"
	mkdir -p "$work/out"
	env -u SKIP_DEPS -u PGROOT_SUITE PGROOT_OUT="$work/out" PKG_OUT=/build/out \
		bash "$here/scripts/pgroot.sh" "$pg_major" bash scripts/package_test.sh
	deb=$(ls "$work/out/$pkg"_*.deb)
fi
step "built $(basename "$deb"): $(dpkg-deb -f "$deb" Depends)"
dpkg -c "$deb" | awk '{ print $NF }' | grep -E '\.(so|control|sql)$'

# 2. The clean root, made once: no PostgreSQL installed, its packages and
# the package lists in place so that apt resolves the .deb's dependencies.
dir=${PGROOT_DIR:-/var/tmp/async_fdw-roots}
base=$dir/$suite-pkg
in_root() { chroot "$1" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
	DEBIAN_FRONTEND=noninteractive "${@:2}" </dev/null; }
make_base() {
	local mirror tmp=$base.partial script=() host_suite
	mirror=$(host_mirror) || {
		echo "package_test.sh: no Debian mirror found in /etc/apt/sources*" >&2
		exit 1
	}
	[ -e "/usr/share/debootstrap/scripts/$suite" ] || script=(/usr/share/debootstrap/scripts/sid)
	step "making a clean Debian $suite root in $base (from $mirror; once)"
	rm -rf "$tmp"
	mkdir -p "$dir"
	debootstrap --variant=minbase "$suite" "$tmp" "$mirror" "${script[@]}" >"$dir/$suite-pkg.log" 2>&1 || {
		echo "package_test.sh: debootstrap failed; the end of $dir/$suite-pkg.log:" >&2
		tail -n 30 "$dir/$suite-pkg.log" >&2
		exit 1
	}
	# The host's own sources (with its security archive, whose point releases
	# a package built here may need) when it runs the same release.
	host_suite=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
	if [ "$host_suite" = "$suite" ]; then
		rm -f "$tmp/etc/apt/sources.list"
		cp /etc/apt/sources.list.d/*.sources "$tmp/etc/apt/sources.list.d/" 2>/dev/null || true
		[ ! -f /etc/apt/sources.list ] || cp /etc/apt/sources.list "$tmp/etc/apt/sources.list"
	fi
	# No service starts in the root (postgresql's package would start its
	# default cluster).
	printf '#!/bin/sh\nexit 101\n' >"$tmp/usr/sbin/policy-rc.d"
	chmod 755 "$tmp/usr/sbin/policy-rc.d"
	cp /etc/resolv.conf "$tmp/etc/resolv.conf" 2>/dev/null || true
	root_apt_conf "$tmp"
	{
		in_root "$tmp" apt-get update -qq &&
			in_root "$tmp" apt-get install -y -qq --download-only "postgresql-$pg_major"
	} >>"$dir/$suite-pkg.log" 2>&1 || {
		echo "package_test.sh: apt in the new root failed; the end of $dir/$suite-pkg.log:" >&2
		tail -n 30 "$dir/$suite-pkg.log" >&2
		exit 1
	}
	touch "$tmp/.async_fdw_pkg_base"
	mv "$tmp" "$base"
}
[ -e "$base/.async_fdw_pkg_base" ] || make_base

# 3. A throwaway overlay of the clean root.
step "a throwaway copy of the clean $suite root"
mkdir -p "$root" "$work/upper" "$work/ovl"
if mount -t overlay overlay -o "lowerdir=$base,upperdir=$work/upper,workdir=$work/ovl" "$root" 2>/dev/null; then
	mounted+=("$root")
else
	echo "(no overlayfs: copying the root)"
	cp -a "$base/." "$root/"
fi
mount_in() {	# mount_in TARGET MOUNT-ARGS...
	local target=$root$1
	shift
	mkdir -p "$target"
	mount "$@" "$target"
	mounted+=("$target")
}
mount_in /proc -t proc proc
mount_in /dev --bind /dev
mount_in /dev/shm -t tmpfs -o mode=1777 shm
cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true

so=/usr/lib/postgresql/$pg_major/lib/async_fdw.so
control=/usr/share/postgresql/$pg_major/extension/async_fdw.control
if [ -e "$root$so" ] || [ -e "$root/usr/lib/postgresql/$pg_major/bin/postgres" ]; then
	echo "package_test.sh: the root is not clean (PostgreSQL or async_fdw installed): remove $base" >&2
	exit 1
fi

# 4. Install the package with apt, which brings the server it depends on.
step "apt-get install ./$(basename "$deb") in the clean root"
cp "$deb" "$root/tmp/"
# dpkg without fsync: the root is thrown away.  The package of the server
# creates its default cluster (<major>/main), as on a user's machine; it is
# not started (policy-rc.d) and not used.
install_deb() {
	in_root "$root" apt-get install -y -q --no-install-recommends -o Dpkg::Options::=--force-unsafe-io \
		"/tmp/$(basename "$deb")"
}
if ! install_deb >"$work/install.log" 2>&1; then
	# The clean root's package lists are those of the day it was made; the
	# package asks for a server at least as new as the one it was built
	# against.  Once more with today's lists (the throwaway copy's only).
	tail -n 5 "$work/install.log"
	step "apt-get install failed: once more after apt-get update in the throwaway root"
	root_apt_conf "$root"
	{ in_root "$root" apt-get update -qq && install_deb; } >"$work/install.log" 2>&1 || {
		echo "package_test.sh: apt-get install failed:" >&2
		tail -n 40 "$work/install.log" >&2
		exit 1
	}
fi
grep -E '^(Setting up|Unpacking) ' "$work/install.log" | grep -E "postgresql|async" || true
for f in "$so" "$control"; do
	[ -f "$root$f" ] || { echo "package_test.sh: $f not installed" >&2; exit 1; }
done

# 5. A throwaway server as the root's postgres user, on loopback.
bindir=/usr/lib/postgresql/$pg_major/bin
as_pg() { in_root "$root" runuser -u postgres -- "$@"; }
mkdir -p "$root/tmp/pkgtest"
chroot "$root" chown postgres /tmp/pkgtest
step "starting a throwaway server on 127.0.0.1:$port"
as_pg "$bindir/initdb" -D /tmp/pkgtest/data -A trust -U postgres --no-sync >/dev/null
cat >>"$root/tmp/pkgtest/data/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '/tmp/pkgtest'
fsync = off
CONF
as_pg "$bindir/pg_ctl" -D /tmp/pkgtest/data -l /tmp/pkgtest/server.log -w start >/dev/null || {
	echo "package_test.sh: the server did not start:" >&2
	tail -n 20 "$root/tmp/pkgtest/server.log" >&2
	exit 1
}
run_sql() {	# run_sql DATABASE SQL: run SQL there, print unaligned tuples
	printf '%s\n' "$2" | chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 \
		runuser -u postgres -- "$bindir/psql" -X -q -At -v ON_ERROR_STOP=1 \
		-h /tmp/pkgtest -p "$port" -U postgres -d "$1" -f -
}

# 6. Two shards (databases s1 and s2 of the server), reached over TCP on
# loopback, and a partitioned table whose partitions are their tables.
step "CREATE EXTENSION async_fdw and a table over two loopback shards"
run_sql postgres "CREATE DATABASE s1; CREATE DATABASE s2; CREATE DATABASE coord;"
run_sql s1 "CREATE TABLE items (id int PRIMARY KEY, v int);
INSERT INTO items SELECT i, i % 10 FROM generate_series(1, 1000) i;"
run_sql s2 "CREATE TABLE items (id int PRIMARY KEY, v int);
INSERT INTO items SELECT i, i % 10 FROM generate_series(1001, 3000) i;"
run_sql coord "CREATE EXTENSION async_fdw;
CREATE SERVER shard1 FOREIGN DATA WRAPPER async_fdw OPTIONS (host '127.0.0.1', port '$port', dbname 's1');
CREATE SERVER shard2 FOREIGN DATA WRAPPER async_fdw OPTIONS (host '127.0.0.1', port '$port', dbname 's2');
CREATE USER MAPPING FOR postgres SERVER shard1;
CREATE USER MAPPING FOR postgres SERVER shard2;
CREATE TABLE items (id int, v int) PARTITION BY RANGE (id);
CREATE FOREIGN TABLE items_1 PARTITION OF items FOR VALUES FROM (1) TO (1001) SERVER shard1 OPTIONS (table_name 'items');
CREATE FOREIGN TABLE items_2 PARTITION OF items FOR VALUES FROM (1001) TO (3001) SERVER shard2 OPTIONS (table_name 'items');"

fail() { echo "package_test.sh: $*" >&2; exit 1; }
version=$(run_sql coord "SELECT extversion FROM pg_extension WHERE extname = 'async_fdw';")
want_version=$(sed -n "s/^default_version = '\(.*\)'/\1/p" "$here/async_fdw.control")
echo "extension version: $version"
[ "$version" = "$want_version" ] || fail "CREATE EXTENSION installed $version, not $want_version"

# The scan of both partitions, asynchronously (two Async Foreign Scans).
plan=$(run_sql coord "EXPLAIN (COSTS OFF) SELECT id, v FROM items WHERE v = 3;")
echo "$plan"
[ "$(grep -c 'Async Foreign Scan on' <<<"$plan")" -eq 2 ] ||
	fail "the plan does not scan both shards asynchronously"
got=$(run_sql coord "SELECT count(*), sum(id), min(id), max(id) FROM (SELECT id, v FROM items WHERE v = 3) s;")
want=$(run_sql s1 "SELECT count(*), sum(id), min(id), max(id) FROM generate_series(1, 3000) id WHERE id % 10 = 3;")
echo "rows over both shards (count|sum|min|max): $got (expected $want)"
[ "$got" = "$want" ] || fail "wrong result over the two shards: $got, expected $want"
got=$(run_sql coord "SELECT count(*), sum(v) FROM items;")
echo "count(*), sum(v) over both shards: $got (expected 3000|13500)"
[ "$got" = "3000|13500" ] || fail "wrong aggregate over the two shards: $got"

step "DROP EXTENSION async_fdw"
run_sql coord "SET client_min_messages = warning; DROP EXTENSION async_fdw CASCADE;"
left=$(run_sql coord "SELECT count(*) FROM pg_foreign_data_wrapper WHERE fdwname = 'async_fdw';")
[ "$left" = 0 ] || fail "DROP EXTENSION left the foreign data wrapper"
as_pg "$bindir/pg_ctl" -D /tmp/pkgtest/data -m fast -w stop >/dev/null

# 7. Remove the package: its files must be gone.
step "apt-get remove $pkg"
in_root "$root" apt-get remove -y -q "$pkg" >"$work/remove.log" 2>&1 || {
	tail -n 20 "$work/remove.log" >&2
	fail "apt-get remove failed"
}
for f in "$so" "$control"; do
	[ ! -e "$root$f" ] || fail "$f is still there after apt-get remove"
done
! in_root "$root" dpkg -s "$pkg" 2>/dev/null | grep -q '^Status: install ok installed' ||
	fail "$pkg is still installed"
echo "$so and $control are gone"

step "package test passed in $((SECONDS - start)) s"
