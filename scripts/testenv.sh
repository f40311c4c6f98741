#!/usr/bin/env bash
# testenv.sh: provision throw-away Postgres and Valkey/Redis servers for the
# integration tests, run a command with them, then tear everything down.
#
# Usage: scripts/testenv.sh -- <command...>
#   e.g. scripts/testenv.sh -- go test ./...
#
# Exported to the command (only for the services that came up):
#   SVC_TEST_POSTGRES_URL  postgres://svc@127.0.0.1:<port>/svc_test?sslmode=disable
#                          (role svc is a superuser; tests create more databases)
#   SVC_TEST_PG_BIN        directory holding pg_ctl, initdb, postgres, createdb
#   SVC_TEST_PG_DATA       the data directory (port, sockets and fast settings are
#                          written to its postgresql.conf, so a plain
#                          `pg_ctl -D "$SVC_TEST_PG_DATA" -w start` restarts it as-is)
#   SVC_TEST_PG_USER       "postgres" when the server runs as that user (we are
#                          root and Postgres refuses root); empty otherwise
#   SVC_TEST_PG_REPLICA_PORT  the port of a streaming standby of that server (made
#                          with pg_basebackup; every database created on the
#                          primary appears there under the same name; tests
#                          create lag with pg_wal_replay_pause())
#   SVC_TEST_PG_DURABILITY "fast" (fsync, synchronous_commit and full_page_writes
#                          off: the tests' default) or "durable" (all three on,
#                          Postgres's production defaults: set SVC_TESTENV_PG_DURABLE=1,
#                          as make bench does)
#   SVC_TEST_VALKEY_URL    redis://127.0.0.1:<port>/0
#   SVC_TEST_CHROMIUM      the headless browser the console tests drive
#                          (Debian's chromium; it is started by each test on
#                          loopback and stopped with it)
#
# Missing server binaries are installed with apt-get (Debian packages
# `postgresql`, `redis-server` and `chromium`). A service that cannot be installed or
# started is reported with a loud warning and left out; the tests decide what
# to do without it. Everything lives in a fresh mktemp -d directory that is
# removed on exit; the command's exit code is this script's exit code.
set -euo pipefail

log() { printf 'testenv: %s\n' "$*" >&2; }
loud() {
	{
		printf '\n'
		printf '!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!\n'
		printf '!!! testenv WARNING: %s\n' "$@"
		printf '!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!\n'
		printf '\n'
	} >&2
}

usage() {
	echo "usage: $0 -- <command...>" >&2
	exit 2
}

[[ $# -gt 0 ]] || usage
if [[ $1 == "--" ]]; then shift; fi
[[ $# -gt 0 ]] || usage

IS_ROOT=0
[[ $(id -u) -eq 0 ]] && IS_ROOT=1

# ---------------------------------------------------------------- helpers

# as_root runs a command with root rights (directly, or through sudo -n).
as_root() {
	if [[ $IS_ROOT -eq 1 ]]; then
		"$@"
	elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
		sudo -n "$@"
	else
		return 1
	fi
}

APT_UPDATED=0
# apt_install PACKAGE...: non-interactive, quiet install; output goes to a log
# that is shown only when the install fails.
apt_install() {
	if ! command -v apt-get >/dev/null 2>&1; then
		log "apt-get not available; cannot install $*"
		return 1
	fi
	local aptlog rc=0
	aptlog=$(mktemp)
	local -a opts=(-y -q -o Dpkg::Use-Pty=0 -o DPkg::Lock::Timeout=600)
	if [[ $APT_UPDATED -eq 0 ]]; then
		# Once per run. If it fails, the install below may still work from
		# package lists that are already there.
		APT_UPDATED=1
		log "apt-get update"
		if ! as_root env DEBIAN_FRONTEND=noninteractive apt-get "${opts[@]}" update >"$aptlog" 2>&1; then
			tail -n 20 "$aptlog" >&2
			log "apt-get update failed; trying the install anyway"
		fi
	fi
	log "apt-get install $*"
	as_root env DEBIAN_FRONTEND=noninteractive apt-get "${opts[@]}" install --no-install-recommends "$@" >"$aptlog" 2>&1 || rc=$?
	if [[ $rc -ne 0 ]]; then tail -n 20 "$aptlog" >&2; fi
	rm -f "$aptlog"
	return "$rc"
}

# free_port prints a TCP port on 127.0.0.1 that nothing listens on right now.
free_port() {
	if command -v python3 >/dev/null 2>&1 &&
		python3 -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()' 2>/dev/null; then
		return 0
	fi
	local p i
	for i in $(seq 1 200); do
		p=$((20000 + RANDOM % 40000))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"
			return 0
		fi
	done
	return 1
}

# find_pg_bin prints the directory holding initdb and pg_ctl (newest version).
find_pg_bin() {
	local d real
	if command -v pg_ctl >/dev/null 2>&1 && command -v initdb >/dev/null 2>&1; then
		real=$(readlink -f "$(command -v pg_ctl)")
		d=$(dirname "$real")
		if [[ -x $d/initdb && -x $d/postgres ]]; then
			echo "$d"
			return 0
		fi
	fi
	for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
		if [[ -x $d/initdb && -x $d/pg_ctl && -x $d/postgres ]]; then
			echo "$d"
			return 0
		fi
	done
	return 1
}

# ---------------------------------------------------------------- state + teardown

TMP=""
PG_BIN=""
PG_DATA=""
PG_USER=""
PG_STARTED=0
PG_STANDBY=""
REDIS_PID=""
CLEANED=0

# as_pg runs a command as the user that owns the Postgres data directory.
as_pg() {
	if [[ -n $PG_USER ]]; then
		runuser -u "$PG_USER" -- "$@"
	else
		"$@"
	fi
}

cleanup() {
	local rc=$?
	[[ $CLEANED -eq 1 ]] && return "$rc"
	CLEANED=1
	set +e
	if [[ $PG_STARTED -eq 1 && -n $PG_DATA && -d $PG_DATA ]]; then
		# The tests may have stopped or restarted the server: pg_ctl goes by
		# postmaster.pid, so it stops whatever runs on this data dir now.
		if [[ -f $PG_DATA/postmaster.pid ]]; then
			as_pg "$PG_BIN/pg_ctl" -D "$PG_DATA" -m immediate -w -t 30 stop >/dev/null 2>&1
		fi
		if [[ -f $PG_DATA/postmaster.pid ]]; then
			local pid
			pid=$(head -n 1 "$PG_DATA/postmaster.pid" 2>/dev/null)
			if [[ $pid =~ ^[0-9]+$ ]] && [[ $(readlink -f "/proc/$pid/exe" 2>/dev/null) == "$PG_BIN/postgres" ]]; then
				kill -KILL "$pid" 2>/dev/null
			fi
		fi
	fi
	if [[ -n $PG_STANDBY && -f $PG_STANDBY/postmaster.pid ]]; then
		as_pg "$PG_BIN/pg_ctl" -D "$PG_STANDBY" -m immediate -w -t 30 stop >/dev/null 2>&1
	fi
	if [[ -n $REDIS_PID ]]; then
		kill -TERM "$REDIS_PID" 2>/dev/null
		local i
		for i in $(seq 1 50); do
			kill -0 "$REDIS_PID" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$REDIS_PID" 2>/dev/null
		wait "$REDIS_PID" 2>/dev/null
	fi
	if [[ -n $TMP && -d $TMP ]]; then
		rm -rf "$TMP"
	fi
	return "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# The temp dir must be reachable by the postgres user when we run as root, so
# it goes under /tmp (world-traversable) in that case.
if [[ $IS_ROOT -eq 1 ]]; then
	TMP=$(mktemp -d /tmp/svc-testenv.XXXXXXXX)
else
	TMP=$(mktemp -d "${TMPDIR:-/tmp}/svc-testenv.XXXXXXXX")
fi

# ---------------------------------------------------------------- Postgres

start_postgres() {
	PG_BIN=$(find_pg_bin) || PG_BIN=""
	if [[ -z $PG_BIN ]]; then
		log "Postgres server binaries (initdb, pg_ctl) not found; installing Debian package postgresql"
		if ! apt_install postgresql; then
			loud "could not install Postgres (apt-get install postgresql failed)" \
				"integration tests run WITHOUT Postgres: SVC_TEST_POSTGRES_URL is NOT set"
			return 1
		fi
		PG_BIN=$(find_pg_bin) || PG_BIN=""
		if [[ -z $PG_BIN ]]; then
			loud "postgresql installed but initdb/pg_ctl still not found" \
				"integration tests run WITHOUT Postgres: SVC_TEST_POSTGRES_URL is NOT set"
			return 1
		fi
	fi

	PG_DATA=$TMP/pgdata
	mkdir -p "$PG_DATA"
	if [[ $IS_ROOT -eq 1 ]]; then
		PG_USER=postgres
		if ! id -u "$PG_USER" >/dev/null 2>&1; then
			log "creating system user $PG_USER"
			if ! useradd --system --user-group --no-create-home --home-dir /nonexistent \
				--shell /usr/sbin/nologin "$PG_USER"; then
				loud "could not create the postgres system user (Postgres refuses to run as root)" \
					"integration tests run WITHOUT Postgres: SVC_TEST_POSTGRES_URL is NOT set"
				return 1
			fi
		fi
		chown "$PG_USER:" "$TMP" "$PG_DATA"
	fi
	chmod 700 "$PG_DATA"

	if ! as_pg "$PG_BIN/initdb" -D "$PG_DATA" -A trust -U svc --encoding=UTF8 --locale=C --no-sync \
		>"$TMP/initdb.log" 2>&1; then
		tail -n 20 "$TMP/initdb.log" >&2
		loud "initdb failed" \
			"integration tests run WITHOUT Postgres: SVC_TEST_POSTGRES_URL is NOT set"
		return 1
	fi

	local port="" attempt durability=off
	SVC_TEST_PG_DURABILITY=fast
	if [[ ${SVC_TESTENV_PG_DURABLE:-0} == 1 ]]; then
		durability=on
		SVC_TEST_PG_DURABILITY=durable
	fi
	export SVC_TEST_PG_DURABILITY
	for attempt in 1 2 3; do
		port=$(free_port) || {
			loud "no free TCP port for Postgres" \
				"integration tests run WITHOUT Postgres: SVC_TEST_POSTGRES_URL is NOT set"
			return 1
		}
		# Also in postgresql.conf, so a test that stops the server can start it
		# again with a plain `pg_ctl -D $SVC_TEST_PG_DATA start`. The last
		# occurrence of a setting wins, so retries just append.
		cat >>"$PG_DATA/postgresql.conf" <<-EOF

			# written by scripts/testenv.sh (attempt $attempt)
			listen_addresses = '127.0.0.1'
			port = $port
			unix_socket_directories = '$TMP'
			fsync = $durability
			synchronous_commit = $durability
			full_page_writes = $durability
			max_connections = 300
		EOF
		if as_pg "$PG_BIN/pg_ctl" -D "$PG_DATA" -l "$TMP/postgres.log" -w -t 60 \
			-o "-k $TMP -h 127.0.0.1 -p $port -c fsync=$durability -c synchronous_commit=$durability -c full_page_writes=$durability -c max_connections=300" \
			start >/dev/null 2>&1; then
			PG_STARTED=1
			break
		fi
		# A server that did come up but missed the -w deadline must not linger.
		if [[ -f $PG_DATA/postmaster.pid ]]; then PG_STARTED=1; fi
		if grep -qi 'could not bind\|address already in use' "$TMP/postgres.log" 2>/dev/null &&
			[[ $PG_STARTED -eq 0 ]]; then
			log "port $port was taken; retrying"
			continue
		fi
		tail -n 20 "$TMP/postgres.log" >&2 || true
		loud "Postgres did not start (see log above)" \
			"integration tests run WITHOUT Postgres: SVC_TEST_POSTGRES_URL is NOT set"
		return 1
	done
	if [[ $PG_STARTED -eq 0 ]]; then
		loud "Postgres did not start: no free port after 3 attempts" \
			"integration tests run WITHOUT Postgres: SVC_TEST_POSTGRES_URL is NOT set"
		return 1
	fi

	if ! "$PG_BIN/createdb" -h 127.0.0.1 -p "$port" -U svc svc_test >"$TMP/createdb.log" 2>&1; then
		cat "$TMP/createdb.log" >&2
		loud "Postgres started but createdb svc_test failed" \
			"integration tests run WITHOUT Postgres: SVC_TEST_POSTGRES_URL is NOT set"
		return 1
	fi

	export SVC_TEST_POSTGRES_URL="postgres://svc@127.0.0.1:$port/svc_test?sslmode=disable"
	export SVC_TEST_PG_BIN="$PG_BIN"
	export SVC_TEST_PG_DATA="$PG_DATA"
	export SVC_TEST_PG_USER="$PG_USER"
	local ver
	ver=$("$PG_BIN/postgres" --version 2>/dev/null | awk '{print $3}')
	log "postgres $ver provisioned: $SVC_TEST_POSTGRES_URL (data $PG_DATA, bin $PG_BIN, user ${PG_USER:-$(id -un)})"
	start_standby "$port" || true
}

# start_standby makes a streaming standby of the primary on port $1.
start_standby() { # primary port
	local data=$TMP/pgstandby port
	if ! (cd "$TMP" && as_pg "$PG_BIN/pg_basebackup" -h 127.0.0.1 -p "$1" -U svc -D "$data" -R -X stream -c fast --no-sync) \
		>"$TMP/basebackup.log" 2>&1; then
		tail -n 20 "$TMP/basebackup.log" >&2
		loud "pg_basebackup failed" "replica tests run WITHOUT a standby: SVC_TEST_PG_REPLICA_PORT is NOT set"
		return 1
	fi
	chmod 700 "$data"
	port=$(free_port) || return 1
	cat >>"$data/postgresql.conf" <<-EOF

		# written by scripts/testenv.sh for the standby
		port = $port
		hot_standby = on
	EOF
	if ! as_pg "$PG_BIN/pg_ctl" -D "$data" -l "$TMP/standby.log" -w -t 60 -o "-p $port" start >/dev/null 2>&1; then
		tail -n 20 "$TMP/standby.log" >&2 || true
		[[ -f $data/postmaster.pid ]] && PG_STANDBY=$data
		loud "the Postgres standby did not start" "replica tests run WITHOUT a standby: SVC_TEST_PG_REPLICA_PORT is NOT set"
		return 1
	fi
	PG_STANDBY=$data
	export SVC_TEST_PG_REPLICA_PORT=$port
	log "postgres standby streaming from port $1 on port $port"
}

# ---------------------------------------------------------------- Valkey / Redis

redis_ping() { # port
	if command -v redis-cli >/dev/null 2>&1; then
		[[ $(redis-cli -h 127.0.0.1 -p "$1" ping 2>/dev/null) == PONG ]]
	else
		local line
		line=$( (exec 3<>"/dev/tcp/127.0.0.1/$1" && printf 'PING\r\n' >&3 &&
			read -r -t 2 l <&3 && printf '%s' "$l") 2>/dev/null) || true
		[[ $line == "+PONG"* ]]
	fi
}

start_redis() {
	if ! command -v redis-server >/dev/null 2>&1; then
		log "redis-server not found; installing Debian package redis-server"
		if ! apt_install redis-server || ! command -v redis-server >/dev/null 2>&1; then
			loud "could not install redis-server (apt-get install redis-server failed)" \
				"integration tests run WITHOUT Valkey: SVC_TEST_VALKEY_URL is NOT set"
			return 1
		fi
	fi

	local port attempt i
	for attempt in 1 2 3; do
		port=$(free_port) || break
		redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
			--dir "$TMP" --daemonize no --logfile "$TMP/redis.log" </dev/null >/dev/null 2>&1 &
		REDIS_PID=$!
		for i in $(seq 1 100); do
			if redis_ping "$port"; then
				export SVC_TEST_VALKEY_URL="redis://127.0.0.1:$port/0"
				log "redis $(redis-server --version | sed -n 's/.* v=\([^ ]*\).*/\1/p') provisioned: $SVC_TEST_VALKEY_URL (pid $REDIS_PID)"
				return 0
			fi
			kill -0 "$REDIS_PID" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$REDIS_PID" 2>/dev/null || true
		wait "$REDIS_PID" 2>/dev/null || true
		REDIS_PID=""
		log "redis-server on port $port did not answer PING (attempt $attempt)"
		tail -n 5 "$TMP/redis.log" >&2 2>/dev/null || true
	done
	loud "redis-server did not start" \
		"integration tests run WITHOUT Valkey: SVC_TEST_VALKEY_URL is NOT set"
	return 1
}

# find_chromium exports SVC_TEST_CHROMIUM, installing Debian's chromium
# when no browser is found.
find_chromium() {
	local b
	for b in chromium chromium-browser google-chrome; do
		if command -v "$b" >/dev/null 2>&1; then
			SVC_TEST_CHROMIUM=$(command -v "$b")
			export SVC_TEST_CHROMIUM
			log "browser: $SVC_TEST_CHROMIUM"
			return 0
		fi
	done
	log "chromium not found; installing Debian package chromium"
	if apt_install chromium && command -v chromium >/dev/null 2>&1; then
		SVC_TEST_CHROMIUM=$(command -v chromium)
		export SVC_TEST_CHROMIUM
		log "browser: $SVC_TEST_CHROMIUM"
		return 0
	fi
	loud "could not install chromium (apt-get install chromium failed)" \
		"console tests run WITHOUT a browser: SVC_TEST_CHROMIUM is NOT set"
	return 1
}

# Variables from the caller's environment must not leak into a run whose
# service failed to come up.
unset SVC_TEST_POSTGRES_URL SVC_TEST_PG_REPLICA_PORT SVC_TEST_PG_BIN SVC_TEST_PG_DATA SVC_TEST_PG_USER SVC_TEST_VALKEY_URL SVC_TEST_CHROMIUM

start_postgres || true
start_redis || true
find_chromium || true

# ---------------------------------------------------------------- run

# The command runs as a child that we wait for, so that a signal sent to this
# script alone is handled at once (bash defers traps while a foreground child
# runs). An asynchronous child would ignore SIGINT/SIGQUIT and read stdin from
# /dev/null; the subshell restores both. Ctrl-C reaches the child directly (it
# is in our process group); INT or TERM sent to this script is forwarded.
CHILD=""
forward() { # signal
	if [[ -n $CHILD ]]; then kill "-$1" "$CHILD" 2>/dev/null || true; fi
}
trap 'forward INT' INT
trap 'forward TERM' TERM
trap 'forward HUP' HUP

(
	trap - INT QUIT TERM HUP
	exec "$@"
) <&0 &
CHILD=$!
rc=0
while :; do
	rc=0
	wait "$CHILD" || rc=$?
	# wait returns early (status > 128) when a trapped signal arrives; go on
	# waiting while the child is still alive.
	kill -0 "$CHILD" 2>/dev/null || break
done
exit "$rc"
