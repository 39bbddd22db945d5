#!/usr/bin/env bash
# junban's local stack without Docker: Redis (AOF on), PostgreSQL and the local SQS emulator.
#
#   scripts/stack.sh up      start what is missing (idempotent), write .junban/stack.env
#   scripts/stack.sh down    stop only what `up` started, by PID
#   scripts/stack.sh status  say what answers where
#
# REDIS_URL / DATABASE_URL / AWS_ENDPOINT_URL_SQS, when set and answering, are used as they are.
# PostgreSQL otherwise: the machine's cluster on 5432, started if it is down; when that does
# not answer either (not installed, or its authentication is not trust, as after a plain
# apt-get install), a private cluster with trust authentication on a free port.
# A failed `up` stops what that run started, and nothing else.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
state="$root/.junban"
envfile="$state/stack.env"
mkdir -p "$state"

log() { printf 'stack: %s\n' "$*" >&2; }

free_port() {
  python3 - <<'EOF' 2>/dev/null || node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'
import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()
EOF
}

# The previous run's endpoints, so `up` twice reuses what is already there.
# Variables already set in the environment win over the file.
if [ -f "$envfile" ]; then
  while IFS='=' read -r k v; do
    case "$k" in ''|\#*) continue ;; esac
    [ -n "${!k:-}" ] || export "$k=$v"
  done <"$envfile"
fi

# pid_alive PIDFILE WORD: the process the file names runs and its command line holds WORD
# (a pidfile left from before a reboot may name someone else's process by now).
pid_alive() {
  [ -f "$1" ] || return 1
  local pid; pid=$(cat "$1")
  kill -0 "$pid" 2>/dev/null && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "$2"
}

redis_answers() { timeout 5 redis-cli -u "$1" ping 2>/dev/null | grep -q PONG; }

ensure_pkg() { # ensure_pkg COMMAND DEBIAN-PACKAGE...
  command -v "$1" >/dev/null 2>&1 && return 0
  log "installing ${*:2} (apt-get)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null && apt-get install -y -qq "${@:2}" >/dev/null
}

up_redis() {
  if [ -n "${REDIS_URL:-}" ] && redis_answers "$REDIS_URL"; then
    log "redis: using $REDIS_URL"
    # The wait lists hold events whose SQS messages are deleted: say so when that Redis
    # would lose them in a restart (CONFIG may be disabled on a managed one: then quiet).
    if timeout 5 redis-cli -u "$REDIS_URL" config get appendonly 2>/dev/null | grep -qx no; then
      log "redis: WARNING: $REDIS_URL runs without AOF (appendonly no): a restart loses queued events"
    fi
    return
  fi
  # Never two servers on one AOF directory: stop ours if it lives but does not answer.
  stop_pid redis "$state/redis.pid" redis-server
  ensure_pkg redis-server redis-server
  ensure_pkg redis-cli redis-tools
  local port; port=$(free_port)
  mkdir -p "$state/redis"
  # The wait lists hold events whose SQS messages are already deleted: AOF is required.
  redis-server --port "$port" --bind 127.0.0.1 --daemonize yes \
    --appendonly yes --appendfsync everysec --save "" \
    --dir "$state/redis" --pidfile "$state/redis.pid" --logfile "$state/redis.log"
  REDIS_URL="redis://127.0.0.1:$port/0"
  for _ in $(seq 50); do redis_answers "$REDIS_URL" && break; sleep 0.1; done
  started+=(redis)
  redis_answers "$REDIS_URL" || { log "redis did not start, see $state/redis.log"; exit 1; }
  log "redis: started on $port (AOF on)"
}

pg_answers() { PGCONNECT_TIMEOUT=3 timeout 10 psql "$1" -Atqc 'select 1' >/dev/null 2>&1; }

pg_wait() { # pg_wait URL: up to 20 s
  for _ in $(seq 100); do pg_answers "$1" && return 0; sleep 0.2; done
  return 1
}

# start_machine_cluster: start the machine's cluster on 5432 if it is down; the marker
# makes `down` stop it again. A running cluster is never touched.
start_machine_cluster() {
  command -v pg_lsclusters >/dev/null 2>&1 || return 1
  local ver name status
  read -r ver name status < <(pg_lsclusters --no-header 2>/dev/null | awk '$3 == 5432 { print $1, $2, $4; exit }') || return 1
  [ "${status:-}" = down ] || return 1
  log "postgresql: starting the machine's cluster $ver/$name on 5432"
  pg_ctlcluster --skip-systemctl-redirect "$ver" "$name" start || return 1
  echo "$ver $name" >"$state/postgres.started"
  started+=(pg-machine)
}

stop_machine_cluster() {
  [ -f "$state/postgres.started" ] || return 0
  local ver name; read -r ver name <"$state/postgres.started" || true
  pg_ctlcluster --skip-systemctl-redirect "$ver" "${name:-main}" stop || true
  rm -f "$state/postgres.started"
  log "postgresql: stopped the machine's cluster that up started"
}

# as_postgres CMD...: PostgreSQL refuses to run as root; root runs it as the postgres user.
as_postgres() {
  if [ "$(id -u)" = 0 ]; then (cd /tmp && runuser -u postgres -- "$@"); else "$@"; fi
}

# start_private_cluster: initdb with trust authentication into a directory of its own
# (under /tmp, which the postgres user can reach), on a free port. Sets url.
start_private_cluster() {
  ensure_pkg pg_ctlcluster postgresql
  local bin; bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1)
  [ -x "$bin/initdb" ] || { log "postgresql: no initdb under /usr/lib/postgresql/*/bin"; return 1; }
  local dir port; dir=$(mktemp -d /tmp/junban-pg.XXXXXX); port=$(free_port)
  [ "$(id -u)" != 0 ] || chown postgres: "$dir"
  echo "$bin $dir" >"$state/postgres.private"
  started+=(pg-private)
  log "postgresql: starting a private cluster on $port (data in $dir)"
  as_postgres "$bin/initdb" -D "$dir/data" -U postgres -A trust -E UTF8 --no-sync >"$state/postgres-initdb.log" 2>&1 ||
    { log "postgresql: initdb failed, see $state/postgres-initdb.log"; return 1; }
  as_postgres "$bin/pg_ctl" -D "$dir/data" -l "$dir/log" -w -t 60 \
    -o "-p $port -k $dir -c listen_addresses=127.0.0.1" start >/dev/null ||
    { log "postgresql: the private cluster did not start, see $dir/log"; return 1; }
  url="postgres://postgres@127.0.0.1:$port/junban?sslmode=disable"
}

# private_running: the recorded private cluster's server runs (answering or not).
private_running() {
  [ -f "$state/postgres.private" ] || return 1
  local bin dir; read -r bin dir <"$state/postgres.private" || return 1
  [ -d "$dir/data" ] && as_postgres "$bin/pg_ctl" -D "$dir/data" status >/dev/null 2>&1
}

# stop_private_cluster: stop the recorded private cluster and remove its data; a server
# that does not stop keeps its directory and record.
stop_private_cluster() {
  [ -f "$state/postgres.private" ] || return 0
  local bin dir; read -r bin dir <"$state/postgres.private" || true
  if private_running; then
    as_postgres "$bin/pg_ctl" -D "$dir/data" -m fast -w -t 60 stop >/dev/null 2>&1 ||
      { log "postgresql: the private cluster in $dir did not stop; left in place"; return 1; }
    log "postgresql: stopped the private cluster"
  fi
  rm -rf "$dir"
  rm -f "$state/postgres.private"
}

up_postgres() {
  ensure_pkg psql postgresql-client
  local url="${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/junban?sslmode=disable}"
  local admin="${url%/*}/postgres?sslmode=disable"
  if pg_answers "$admin"; then
    log "postgresql: using ${admin%%\?*}"
  elif private_running; then
    # Ours, running but not answering now (busy: all connections taken, or starting up):
    # wait for it, never replace it (that would drop its data under other runs' feet).
    pg_wait "$admin" || { log "postgresql: the private cluster runs but does not answer at ${admin%%\?*}"; exit 1; }
    log "postgresql: using ${admin%%\?*}"
  else
    stop_private_cluster # one left from before that no longer runs: only its files are left
    url="postgres://postgres@127.0.0.1:5432/junban?sslmode=disable"
    admin="${url%/*}/postgres?sslmode=disable"
    if ! { pg_answers "$admin" || { start_machine_cluster && pg_wait "$admin"; }; }; then
      log "postgresql: nothing answers at ${admin%%\?*} with trust authentication"
      start_private_cluster || exit 1
      admin="${url%/*}/postgres?sslmode=disable"
      pg_wait "$admin" || { log "postgresql did not answer at $admin"; exit 1; }
    fi
  fi
  for db in junban junban_test; do
    psql "$admin" -Atqc "select 1 from pg_database where datname='$db'" | grep -q 1 ||
      psql "$admin" -qc "create database $db" >/dev/null
  done
  DATABASE_URL="${url%/*}/junban?sslmode=disable"
  JUNBAN_TEST_DATABASE_URL="${url%/*}/junban_test?sslmode=disable"
}

sqs_answers() {
  curl -fsS -m 2 -X POST -H 'Content-Type: application/x-amz-json-1.0' \
    -H 'X-Amz-Target: AmazonSQS.ListQueues' -d '{}' "$1/" >/dev/null 2>&1
}

up_sqs() {
  if [ -n "${AWS_ENDPOINT_URL_SQS:-}" ] && sqs_answers "$AWS_ENDPOINT_URL_SQS"; then
    log "sqs: using $AWS_ENDPOINT_URL_SQS"; return
  fi
  ensure_pkg node nodejs
  ensure_pkg npm npm
  ensure_pkg curl curl
  if [ ! -d "$root/localsqs/node_modules/local-aws-sqs" ]; then
    log "sqs: npm ci (local-aws-sqs, pinned)"
    (cd "$root/localsqs" && timeout 600 npm ci --no-audit --no-fund --loglevel=error >/dev/null)
  fi
  stop_pid sqs "$state/sqs.pid" server.mjs
  local port; port=$(free_port)
  nohup node "$root/localsqs/server.mjs" "$port" >"$state/sqs.log" 2>&1 &
  echo $! >"$state/sqs.pid"
  started+=(sqs)
  AWS_ENDPOINT_URL_SQS="http://127.0.0.1:$port"
  for _ in $(seq 100); do sqs_answers "$AWS_ENDPOINT_URL_SQS" && break; sleep 0.1; done
  sqs_answers "$AWS_ENDPOINT_URL_SQS" || { log "sqs did not start, see $state/sqs.log"; exit 1; }
  log "sqs: started local-aws-sqs on $port"
}

write_env() {
  cat >"$envfile" <<EOF
# Written by scripts/stack.sh; read by every junban binary for variables not set in the environment.
REDIS_URL=$REDIS_URL
DATABASE_URL=$DATABASE_URL
JUNBAN_TEST_DATABASE_URL=$JUNBAN_TEST_DATABASE_URL
AWS_ENDPOINT_URL_SQS=$AWS_ENDPOINT_URL_SQS
AWS_REGION=${AWS_REGION:-us-east-1}
AWS_ACCESS_KEY_ID=${AWS_ACCESS_KEY_ID:-local}
AWS_SECRET_ACCESS_KEY=${AWS_SECRET_ACCESS_KEY:-local}
# local-aws-sqs answers a long poll only when its wait ends, even when a message arrived
# meanwhile (real SQS answers at once): short polls keep local latency low.
JUNBAN_SQS_WAIT_SECONDS=${JUNBAN_SQS_WAIT_SECONDS:-1}
EOF
  log "wrote $envfile"
}

stop_pid() { # stop_pid NAME PIDFILE WORD: only a process whose command line holds WORD
  if pid_alive "$2" "$3"; then
    kill "$(cat "$2")" 2>/dev/null || true
    for _ in $(seq 50); do pid_alive "$2" "$3" || break; sleep 0.1; done
    if pid_alive "$2" "$3"; then
      kill -KILL "$(cat "$2")" 2>/dev/null || true
      log "$1: killed (it did not stop within 5 s)"
    else
      log "$1: stopped"
    fi
  fi
  rm -f "$2"
}

down() {
  stop_pid sqs "$state/sqs.pid" server.mjs
  stop_pid redis "$state/redis.pid" redis-server
  stop_private_cluster || true
  stop_machine_cluster
  rm -f "$envfile"
}

# undo_up: after a failed up, stop what that run started (started), nothing else.
started=()
undo_up() {
  local what
  for what in "${started[@]}"; do
    case "$what" in
    redis) stop_pid redis "$state/redis.pid" redis-server ;;
    sqs) stop_pid sqs "$state/sqs.pid" server.mjs ;;
    pg-private) stop_private_cluster || true ;;
    pg-machine) stop_machine_cluster ;;
    esac
  done
}

case "${1:-status}" in
up)
  # free_port needs python3 or node; node comes with the emulator, later.
  command -v python3 >/dev/null 2>&1 || command -v node >/dev/null 2>&1 || ensure_pkg python3 python3
  ensure_pkg gcc gcc # make test runs go test -race, which needs cgo
  trap 'rc=$?; if [ "$rc" != 0 ]; then log "up failed: stopping what it started"; undo_up; fi' EXIT
  up_redis
  up_postgres
  up_sqs
  write_env
  trap - EXIT
  ;;
down)
  down
  ;;
status)
  [ -f "$envfile" ] || { echo "no stack (run: make stack)"; exit 1; }
  rc=0
  if redis_answers "$REDIS_URL"; then echo "redis      up    $REDIS_URL"; else echo "redis      DOWN  $REDIS_URL"; rc=1; fi
  if pg_answers "$DATABASE_URL"; then echo "postgresql up    $DATABASE_URL"; else echo "postgresql DOWN  $DATABASE_URL"; rc=1; fi
  if sqs_answers "$AWS_ENDPOINT_URL_SQS"; then echo "sqs        up    $AWS_ENDPOINT_URL_SQS"; else echo "sqs        DOWN  $AWS_ENDPOINT_URL_SQS"; rc=1; fi
  exit $rc
  ;;
*) echo "usage: $0 up|down|status" >&2; exit 2 ;;
esac
