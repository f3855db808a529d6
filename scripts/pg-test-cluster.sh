#!/usr/bin/env bash
# A private PostgreSQL cluster for tests and benchmarks (issue 14, "Real database in CI").
#
# Installs PostgreSQL from the distribution's packages when no server binaries are found (as root: `apt-get update`
# once, then `apt-get install postgresql`), creates a cluster in a fresh temporary directory owned by an
# unprivileged user (PostgreSQL refuses to run as root: `postgres` when it exists, else a `pgtest` user made here),
# listening on 127.0.0.1 on a free port with its unix socket inside that directory, password authentication only
# (md5, not SCRAM: tests open hundreds of connections and SCRAM's key stretching costs ~80 ms of CPU per connection).
# It never touches any other cluster on the machine.
#
# Usage:
#   scripts/pg-test-cluster.sh run [--] COMMAND [ARG...]
#       starts a cluster, runs COMMAND with ACP_ORCHESTRATOR_TEST_PG (a postgres:// URL) and
#       ACP_ORCHESTRATOR_TEST_PG_DIR in its environment, stops and removes the cluster, exits with COMMAND's status.
#   scripts/pg-test-cluster.sh start
#       starts a cluster and prints `export NAME=value` lines for it (eval them); stop it with `stop`.
#   scripts/pg-test-cluster.sh stop DIR        stops the cluster in DIR and removes DIR.
#   scripts/pg-test-cluster.sh pause DIR       stops the server of DIR, keeping its data (a database that went away).
#   scripts/pg-test-cluster.sh resume DIR      starts the server of DIR again, on the same port.
# Logs go to stderr and DIR/server.log; stdout carries only the `export` lines of `start`.
set -euo pipefail

log() { printf 'pg-test-cluster: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

# The directory holding initdb/pg_ctl/postgres, newest major version first; empty when none is installed.
find_bindir() {
  local dir
  if command -v pg_config >/dev/null 2>&1; then
    dir="$(pg_config --bindir 2>/dev/null || true)"
    if [[ -n "$dir" && -x "$dir/initdb" && -x "$dir/pg_ctl" ]]; then printf '%s\n' "$dir"; return; fi
  fi
  for dir in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -t/ -k4 -n -r); do
    if [[ -x "$dir/initdb" && -x "$dir/pg_ctl" ]]; then printf '%s\n' "$dir"; return; fi
  done
  dir="$(dirname "$(command -v initdb 2>/dev/null || echo /nonexistent/initdb)")"
  if [[ -x "$dir/initdb" && -x "$dir/pg_ctl" ]]; then printf '%s\n' "$dir"; fi
}

ensure_installed() {
  BINDIR="$(find_bindir)"
  if [[ -n "$BINDIR" ]]; then return; fi
  [[ "$(id -u)" == 0 ]] || die "PostgreSQL is not installed and installing it needs root (apt-get install postgresql)."
  command -v apt-get >/dev/null 2>&1 || die "PostgreSQL is not installed and apt-get is not available."
  log "installing PostgreSQL from the distribution's packages"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql >&2
  BINDIR="$(find_bindir)"
  [[ -n "$BINDIR" ]] || die "PostgreSQL was installed but initdb/pg_ctl were not found."
}

# Runs a command as the cluster's unprivileged user (directly when this script is not root).
RUN_USER=""
as_user() {
  if [[ -n "$RUN_USER" ]]; then
    runuser -u "$RUN_USER" -- "$@"
  else
    "$@"
  fi
}

choose_user() {
  if [[ "$(id -u)" != 0 ]]; then RUN_USER=""; return; fi
  if id -u postgres >/dev/null 2>&1; then
    RUN_USER=postgres
  else
    id -u pgtest >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin pgtest
    RUN_USER=pgtest
  fi
}

free_port() {
  node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{process.stdout.write(String(s.address().port));s.close();});'
}

# Reads a value saved by `start` in DIR/cluster.env.
setting() { sed -n "s/^$2=//p" "$1/cluster.env"; }

start_cluster() {
  ensure_installed
  choose_user
  local dir port password url
  dir="$(mktemp -d "${TMPDIR:-/tmp}/acp-pg.XXXXXX")"
  chmod 700 "$dir"
  [[ -z "$RUN_USER" ]] || chown "$RUN_USER" "$dir"
  password="$(node -e 'process.stdout.write(require("crypto").randomBytes(18).toString("hex"))')"
  printf '%s\n' "$password" >"$dir/pwfile"
  [[ -z "$RUN_USER" ]] || chown "$RUN_USER" "$dir/pwfile"
  as_user "$BINDIR/initdb" -D "$dir/data" -U acp --pwfile="$dir/pwfile" --auth=md5 \
    --encoding=UTF8 --locale=C --no-sync >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; die "initdb failed"; }
  rm -f "$dir/pwfile"
  port="$(free_port)"
  cat >>"$dir/data/postgresql.conf" <<EOF
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$dir'
max_connections = 300
shared_buffers = 128MB
logging_collector = off
EOF
  printf 'BINDIR=%s\nRUN_USER=%s\nPORT=%s\n' "$BINDIR" "$RUN_USER" "$port" >"$dir/cluster.env"
  server_start "$dir"
  url="postgres://acp:${password}@127.0.0.1:${port}/postgres"
  as_user env PGPASSWORD="$password" "$BINDIR/psql" -q -h 127.0.0.1 -p "$port" -U acp -d postgres \
    -c "SET password_encryption = 'md5'" -c "ALTER ROLE acp PASSWORD '$password'" -c "CREATE DATABASE acp_test" >&2
  url="postgres://acp:${password}@127.0.0.1:${port}/acp_test"
  printf 'URL=%s\n' "$url" >>"$dir/cluster.env"
  log "PostgreSQL $("$BINDIR/postgres" --version | awk '{print $3}') running on 127.0.0.1:$port (data in $dir, user ${RUN_USER:-$(id -un)})"
  CLUSTER_DIR="$dir"
  CLUSTER_URL="$url"
}

server_start() {
  local dir="$1"
  BINDIR="$(setting "$dir" BINDIR)"
  RUN_USER="$(setting "$dir" RUN_USER)"
  as_user "$BINDIR/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start >/dev/null ||
    { cat "$dir/server.log" >&2; die "the server did not start"; }
}

server_stop() {
  local dir="$1"
  BINDIR="$(setting "$dir" BINDIR)"
  RUN_USER="$(setting "$dir" RUN_USER)"
  as_user "$BINDIR/pg_ctl" -D "$dir/data" -m fast -w -t 60 stop >/dev/null 2>&1 || true
}

stop_cluster() {
  local dir="$1"
  [[ -f "$dir/cluster.env" ]] || die "$dir is not a cluster made by this script."
  server_stop "$dir"
  rm -rf "$dir"
  log "stopped and removed $dir"
}

command="${1:-}"
[[ $# -gt 0 ]] && shift
case "$command" in
  run)
    [[ "${1:-}" == "--" ]] && shift
    [[ $# -gt 0 ]] || die "usage: $0 run [--] COMMAND [ARG...]"
    start_cluster
    trap 'stop_cluster "$CLUSTER_DIR"' EXIT
    trap 'exit 130' INT TERM
    status=0
    ACP_ORCHESTRATOR_TEST_PG="$CLUSTER_URL" ACP_ORCHESTRATOR_TEST_PG_DIR="$CLUSTER_DIR" "$@" || status=$?
    exit "$status"
    ;;
  start)
    start_cluster
    printf 'export ACP_ORCHESTRATOR_TEST_PG=%q\nexport ACP_ORCHESTRATOR_TEST_PG_DIR=%q\n' "$CLUSTER_URL" "$CLUSTER_DIR"
    ;;
  stop) stop_cluster "${1:?usage: $0 stop DIR}" ;;
  pause) server_stop "${1:?usage: $0 pause DIR}" ;;
  resume) server_start "${1:?usage: $0 resume DIR}" ;;
  *) die "usage: $0 run [--] COMMAND... | start | stop DIR | pause DIR | resume DIR" ;;
esac
