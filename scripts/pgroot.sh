#!/usr/bin/env bash
# scripts/pgroot.sh MAJOR COMMAND...
#   Run COMMAND on a copy of this tree inside a Debian root whose release
#   ships PostgreSQL MAJOR, for a major version the host's release lacks
#   (Debian 12 ships 15 only; 13 "trixie" ships 17, 14 "forky" 18).
#
#   The root is made on first use with debootstrap, from the Debian mirror
#   the host's own apt sources name, with PostgreSQL MAJOR, its server
#   headers and what the tests need; later runs reuse it.  The tree is
#   copied to /build/async_fdw inside, COMMAND runs there as root (test.sh
#   and demo.sh start their servers as the root's postgres user), and
#   /proc, /dev and /dev/shm are mounted for it and unmounted after.
#   Root only.
#
# Environment:
#   PGROOT_DIR    where the roots live (default /var/tmp/async_fdw-roots)
#   PGROOT_SUITE  the Debian release to use instead of the one chosen below
#   PGROOT_OUT    a directory of this machine, mounted at /build/out in the
#                 root for what COMMAND leaves there (package_test.sh's .deb)
#   Passed into the root: PG_MAJOR, CI, EXTRA_CFLAGS, TEST_PORT, SKIP_TAP,
#   SKIP_DEPS, REGRESS_FILES, TAP_FILES, KEEP_TEST_DIR, PKG_OUT and DEMO_*.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/common.sh
. "$here/scripts/common.sh"
major=${1:?usage: pgroot.sh MAJOR COMMAND...}
shift
[ $# -gt 0 ] || set -- bash

if [ "$(id -u)" -ne 0 ]; then
	echo "pgroot.sh: a Debian root for PostgreSQL $major needs root (debootstrap, chroot, mount)" >&2
	exit 1
fi

# The oldest Debian release that ships MAJOR.
case "${PGROOT_SUITE:-$major}" in
	15) suite=bookworm ;;
	17) suite=trixie ;;
	18) suite=forky ;;
	[a-z]*) suite=$PGROOT_SUITE ;;
	*)
		echo "pgroot.sh: no Debian release known to ship PostgreSQL $major (15, 17 or 18; or set PGROOT_SUITE)" >&2
		exit 1
		;;
esac
dir=${PGROOT_DIR:-/var/tmp/async_fdw-roots}
root=$dir/$suite

make_root() {
	local mirror script=() tmp=$root.partial
	mirror=$(host_mirror) || {
		echo "pgroot.sh: no Debian mirror found in /etc/apt/sources*" >&2
		exit 1
	}
	if ! command -v debootstrap >/dev/null; then
		echo "=== installing debootstrap"
		DEBIAN_FRONTEND=noninteractive apt-get update -qq
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
	fi
	# A release newer than the host's debootstrap knows is built as sid is.
	if [ ! -e "/usr/share/debootstrap/scripts/$suite" ]; then
		script=(/usr/share/debootstrap/scripts/sid)
	fi
	echo "=== making a Debian $suite root for PostgreSQL $major in $root (from $mirror; once)"
	rm -rf "$tmp"
	mkdir -p "$dir"
	debootstrap --variant=minbase \
		--include="postgresql-$major,postgresql-server-dev-$major,libipc-run-perl,pgbouncer,make,gcc,libc6-dev,perl,procps" \
		"$suite" "$tmp" "$mirror" "${script[@]}" >"$dir/$suite.log" 2>&1 || {
		echo "pgroot.sh: debootstrap failed; the end of $dir/$suite.log:" >&2
		tail -n 30 "$dir/$suite.log" >&2
		exit 1
	}
	mv "$tmp" "$root"
}

[ -x "$root/usr/lib/postgresql/$major/bin/pg_config" ] || make_root
# apt-get update in the root (need_packages) works on a lagging mirror too.
root_apt_conf "$root"

mounted=()
cleanup() {
	local i
	for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
		umount -l "${mounted[$i]}" 2>/dev/null || true
	done
}
trap cleanup EXIT
trap 'exit 130' INT TERM
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
if [ -n "${PGROOT_OUT:-}" ]; then
	mount_in /build/out --bind "$PGROOT_OUT"
fi

# A fresh copy of the tree, as CI's clean clone would be.
rm -rf "$root/build/async_fdw"
mkdir -p "$root/build/async_fdw"
tar -C "$here" --exclude=.git --exclude='*.o' --exclude='*.so' --exclude='*.bc' -cf - . |
	tar -C "$root/build/async_fdw" -xf -

envs=(PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root
	LANG=C.UTF-8 PG_MAJOR="$major" PGROOT_INSIDE=1)
for v in CI EXTRA_CFLAGS TEST_PORT SKIP_TAP SKIP_DEPS REGRESS_FILES TAP_FILES KEEP_TEST_DIR PKG_OUT \
	$(compgen -v DEMO_ || true); do
	if [ -n "${!v+x}" ]; then envs+=("$v=${!v}"); fi
done
echo "=== in the Debian $suite root: PostgreSQL $(chroot "$root" "/usr/lib/postgresql/$major/bin/pg_config" --version)"
status=0
chroot "$root" /usr/bin/env -i "${envs[@]}" bash -c 'cd /build/async_fdw && exec "$@"' bash "$@" || status=$?
exit $status
