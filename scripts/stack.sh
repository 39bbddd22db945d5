#!/usr/bin/env bash
# junban's local stack without Docker: Redis (AOF on), PostgreSQL and the local SQS emulator.
#
#   scripts/stack.sh up      start what is missing (idempotent), write .junban/stack.env
#   scripts/stack.sh down    stop only what `up` started, by PID
#   scripts/stack.sh status  say what answers where
#
# REDIS_URL / DATABASE_URL / AWS_ENDPOINT_URL_SQS, when set and answering, are used as they are.
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

pid_alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

redis_answers() { redis-cli -u "$1" ping 2>/dev/null | grep -q PONG; }

ensure_pkg() { # ensure_pkg COMMAND DEBIAN-PACKAGE...
  command -v "$1" >/dev/null 2>&1 && return 0
  log "installing ${*:2} (apt-get)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null && apt-get install -y -qq "${@:2}" >/dev/null
}

up_redis() {
  if [ -n "${REDIS_URL:-}" ] && redis_answers "$REDIS_URL"; then
    log "redis: using $REDIS_URL"; return
  fi
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
  redis_answers "$REDIS_URL" || { log "redis did not start, see $state/redis.log"; exit 1; }
  log "redis: started on $port (AOF on)"
}

pg_answers() { psql "$1" -Atqc 'select 1' >/dev/null 2>&1; }

up_postgres() {
  local url="${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/junban?sslmode=disable}"
  local admin="${url%/*}/postgres?sslmode=disable"
  if ! pg_answers "$admin"; then
    ensure_pkg pg_ctlcluster postgresql
    local ver; ver=$(ls /etc/postgresql | sort -V | tail -n1)
    log "postgresql: starting cluster $ver/main"
    pg_ctlcluster --skip-systemctl-redirect "$ver" main start || true
    echo "$ver" >"$state/postgres.started"
    for _ in $(seq 100); do pg_answers "$admin" && break; sleep 0.2; done
    pg_answers "$admin" || { log "postgresql did not answer at $admin"; exit 1; }
  else
    log "postgresql: using ${admin%%\?*}"
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
  if [ ! -d "$root/localsqs/node_modules/local-aws-sqs" ]; then
    log "sqs: npm ci (local-aws-sqs, pinned)"
    (cd "$root/localsqs" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
  fi
  local port; port=$(free_port)
  nohup node "$root/localsqs/server.mjs" "$port" >"$state/sqs.log" 2>&1 &
  echo $! >"$state/sqs.pid"
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

stop_pid() { # stop_pid NAME PIDFILE
  if pid_alive "$2"; then
    kill "$(cat "$2")" 2>/dev/null || true
    for _ in $(seq 50); do pid_alive "$2" || break; sleep 0.1; done
    log "$1: stopped"
  fi
  rm -f "$2"
}

case "${1:-status}" in
up)
  up_redis
  up_postgres
  up_sqs
  write_env
  ;;
down)
  stop_pid sqs "$state/sqs.pid"
  stop_pid redis "$state/redis.pid"
  if [ -f "$state/postgres.started" ]; then
    pg_ctlcluster --skip-systemctl-redirect "$(cat "$state/postgres.started")" main stop || true
    rm -f "$state/postgres.started"
    log "postgresql: stopped the cluster that up started"
  fi
  rm -f "$envfile"
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
