# scripts/common.sh
#   Shell helpers shared by the README's commands: Debian packages, the
#   PostgreSQL installation, the unprivileged user servers run as.
#   Sourced, not run.

# log MESSAGE...: a visible step in the output.
log() { printf '\n=== %s\n' "$*"; }

# need_packages PACKAGE...: install the missing ones from Debian (root only),
# unless SKIP_DEPS is set.
need_packages() {
	[ -z "${SKIP_DEPS:-}" ] || return 0
	local need=() p
	for p in "$@"; do
		dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
	done
	[ ${#need[@]} -gt 0 ] || return 0
	if [ "$(id -u)" -ne 0 ]; then
		echo "missing packages: ${need[*]} (run as root to install them)" >&2
		return 1
	fi
	log "installing ${need[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq "${need[@]}" >/dev/null
}

# choose_pg_major: set pg_major, the PostgreSQL major version to build and
# test against: PG_MAJOR, else the newest one installed on this machine,
# else the one its Debian release ships.  15, 17 and 18 are supported.
choose_pg_major() {
	pg_major=${PG_MAJOR:-}
	if [ -z "$pg_major" ]; then
		pg_major=$(ls /usr/lib/postgresql 2>/dev/null | grep -E '^[0-9]+$' | sort -n | tail -n 1)
	fi
	if [ -z "$pg_major" ]; then
		pg_major=$(apt-cache depends postgresql 2>/dev/null |
			sed -n 's/.*Depends: postgresql-\([0-9][0-9]*\)$/\1/p' | head -n 1)
	fi
	case "$pg_major" in
		15 | 17 | 18) ;;
		*)
			echo "PostgreSQL ${pg_major:-(none found)} is not supported: set PG_MAJOR to 15, 17 or 18" >&2
			return 1
			;;
	esac
}

# host_ships_pg MAJOR: whether this machine has PostgreSQL MAJOR's server
# and headers, or its apt sources offer them.
host_ships_pg() {
	[ -x "/usr/lib/postgresql/$1/bin/postgres" ] && [ -x "/usr/lib/postgresql/$1/bin/pg_config" ] &&
		return 0
	apt-cache policy "postgresql-server-dev-$1" 2>/dev/null | grep -q 'Candidate: [0-9]'
}

# run_in_pg_root SCRIPT: unless already inside one, re-run SCRIPT (a path
# relative to the tree) in a Debian root of a release that ships pg_major
# (scripts/pgroot.sh) when this machine's release does not.  Returns when
# the host itself will do.
run_in_pg_root() {
	if [ -n "${PGROOT_INSIDE:-}" ] || host_ships_pg "$pg_major"; then
		return 0
	fi
	log "PostgreSQL $pg_major is not in this machine's Debian release: running $1 in a Debian root that ships it"
	exec bash "$here/scripts/pgroot.sh" "$pg_major" bash "$1"
}

# find_pg: set PG_CONFIG (exported) and bindir for PostgreSQL pg_major.
find_pg() {
	PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/$pg_major/bin/pg_config}
	[ -x "$PG_CONFIG" ] || PG_CONFIG=$(command -v pg_config)
	bindir=$("$PG_CONFIG" --bindir)
	export PG_CONFIG
}

# install_extension DIR: make install, as root or through sudo.
install_extension() {
	if [ "$(id -u)" -eq 0 ]; then
		make -C "$1" -s install PG_CONFIG="$PG_CONFIG"
	else
		sudo -n make -C "$1" -s install PG_CONFIG="$PG_CONFIG"
	fi
}

# choose_runuser: set runuser and define as_user CMD...: run a command as the
# unprivileged user the servers run as (postgres when we are root), with the
# PostgreSQL binaries first on PATH.
choose_runuser() {
	if [ "$(id -u)" -eq 0 ]; then
		runuser=postgres
		id "$runuser" >/dev/null 2>&1 || useradd --system --create-home "$runuser"
		as_user() { runuser -u "$runuser" -- env PATH="$bindir:$PATH" "$@"; }
	else
		runuser=$(id -un)
		as_user() { env PATH="$bindir:$PATH" "$@"; }
	fi
}

# root_apt_conf ROOT: let apt in the Debian root ROOT take a release whose
# Release file is past its Valid-Until date, as a mirror or snapshot that
# lags behind serves a testing release's (valid a week only).  Signatures
# are still checked.
root_apt_conf() {
	printf '// async_fdw scripts: a lagging mirror of a testing release\nAcquire::Check-Valid-Until "false";\n' \
		>"$1/etc/apt/apt.conf.d/99async-fdw-valid-until"
}

# host_mirror: the first Debian mirror of the host's apt sources (deb822
# .sources files or the one-line format), not its security archive.
host_mirror() {
	local f uri
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -f "$f" ] || continue
		uri=$(awk '/^URIs:/ { for (i = 2; i <= NF; i++) if ($i !~ /security/) { print $i; exit } }' "$f")
		if [ -n "$uri" ]; then echo "$uri"; return 0; fi
	done
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[ -f "$f" ] || continue
		uri=$(awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) { if ($i !~ /security/) { print $i; exit } else break } }' "$f")
		if [ -n "$uri" ]; then echo "$uri"; return 0; fi
	done
	return 1
}
