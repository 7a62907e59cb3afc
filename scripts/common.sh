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

# find_pg: set PG_CONFIG (exported) and bindir for PostgreSQL 15.
find_pg() {
	PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
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
