#!/usr/bin/env bash
# junban's local stack without Docker: Redis (AOF on), PostgreSQL and two SQS emulators.
#
#   scripts/stack.sh up      start what is missing (idempotent), write .junban/stack.env
#   scripts/stack.sh down    stop only what `up` started, by PID
#   scripts/stack.sh status  say what answers where
#   scripts/stack.sh other-sqs   print "NAME URL" of the emulator AWS_ENDPOINT_URL_SQS does
#                                not name (nothing when the SQS was given): `make test`
#
# REDIS_URL / DATABASE_URL / AWS_ENDPOINT_URL_SQS, when set and answering, are used as they are.
# DATABASE_URL keeps its database name and parameters; the test database is <name>_test
# with the same parameters (JUNBAN_TEST_DATABASE_URL, when set, is kept instead).
# PostgreSQL otherwise: the machine's cluster on 5432, started if it is down; when that does
# not answer either (not installed, or its authentication is not trust, as after a plain
# apt-get install), a private cluster with trust authentication on a free port.
# SQS otherwise: fauxqs and local-aws-sqs (both pinned, in memory, on 127.0.0.1), each on a
# free port; JUNBAN_LOCAL_SQS (fauxqs, the default, or local-aws-sqs) picks the one that
# AWS_ENDPOINT_URL_SQS names, and JUNBAN_SQS_ENDPOINT_FAUXQS / _LOCAL_AWS_SQS name both
# (`make test` runs the queue, e2e and DLQ tests on the second one too). On whatever SQS
# it uses, `junbanctl queues create` makes junban's queues, DLQs and redrive policies; on
# the emulators it starts, `queues create -fifo` makes their FIFO twins too (orders.fifo,
# orders-dlq.fifo, results.fifo, results-dlq.fifo), for a fleet pointed at those.
# SNS: fauxqs serves it on the same port, so AWS_ENDPOINT_URL_SNS names fauxqs when it is
# the SQS in use (local-aws-sqs has no SNS); with a given SQS, only an AWS_ENDPOINT_URL_SNS
# of the caller's own is written.
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

# What the caller set, before the previous run's file fills in the rest: a test database
# or an SQS endpoint of the caller's own is kept, the file's are derived again.
given_test_db=${JUNBAN_TEST_DATABASE_URL:-}
given_sqs=${AWS_ENDPOINT_URL_SQS:-}
given_sns=${AWS_ENDPOINT_URL_SNS:-}

# The previous run's endpoints, so `up` twice reuses what is already there.
# Variables already set in the environment win over the file.
if [ -f "$envfile" ]; then
  while IFS='=' read -r k v; do
    case "$k" in ''|\#*) continue ;; esac
    [ -n "${!k:-}" ] || export "$k=$v"
  done <"$envfile"
fi
# The file's choice stays until the caller names another.
backend=${JUNBAN_LOCAL_SQS:-fauxqs}
case "$backend" in
fauxqs | local-aws-sqs) ;;
*) log "JUNBAN_LOCAL_SQS=$backend: want fauxqs or local-aws-sqs"; exit 2 ;;
esac

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
  url="postgres://postgres@127.0.0.1:$port/${pg_name:-junban}?sslmode=disable"
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

# pg_split URL: sets pg_prefix (scheme://user@host:port), pg_name (the database, junban
# when the URL names none) and pg_query ("?params" or empty) of a postgres:// URL.
pg_split() {
  local url=$1 base rest
  case "$url" in
  postgres://* | postgresql://*) ;;
  *) log "postgresql: DATABASE_URL must be a postgres:// URL, got $(redact "${url%%\?*}")"; return 1 ;;
  esac
  base=${url%%\?*}
  pg_query=${url#"$base"}
  rest=${base#*://}
  if [[ $rest == */* ]]; then
    pg_name=${rest#*/} pg_prefix=${base%"/$pg_name"}
  else
    pg_name='' pg_prefix=$base
  fi
  [ -n "$pg_name" ] || pg_name=junban
  # It becomes an SQL identifier (created below): keep to what needs no quoting rules.
  if ! [[ $pg_name =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]]; then
    log "postgresql: database name '$pg_name' in DATABASE_URL: use letters, digits and _"
    return 1
  fi
}

# redact URL: the URL without its password, for the log.
redact() { sed -E 's#(://[^:/@]*):[^@/]*@#\1:***@#' <<<"$1"; }

up_postgres() {
  ensure_pkg psql postgresql-client
  local url="${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/junban?sslmode=disable}"
  local pg_prefix pg_name pg_query
  pg_split "$url" || exit 1
  local admin="$pg_prefix/postgres$pg_query"
  if pg_answers "$admin" || pg_answers "$url"; then
    log "postgresql: using $(redact "$pg_prefix")/$pg_name"
  elif private_running; then
    # Ours, running but not answering now (busy: all connections taken, or starting up):
    # wait for it, never replace it (that would drop its data under other runs' feet).
    pg_wait "$admin" || { log "postgresql: the private cluster runs but does not answer at $(redact "$pg_prefix")"; exit 1; }
    log "postgresql: using $(redact "$pg_prefix")/$pg_name"
  else
    stop_private_cluster # one left from before that no longer runs: only its files are left
    [ -z "${DATABASE_URL:-}" ] || log "postgresql: nothing answers at $(redact "$pg_prefix"); using a local cluster (database $pg_name, sslmode=disable)"
    # A local cluster has no TLS: the caller's parameters (sslmode=require) would fail there.
    pg_prefix=postgres://postgres@127.0.0.1:5432 pg_query='?sslmode=disable'
    url="$pg_prefix/$pg_name$pg_query"
    admin="$pg_prefix/postgres$pg_query"
    if ! { pg_answers "$admin" || { start_machine_cluster && pg_wait "$admin"; }; }; then
      log "postgresql: nothing answers at $pg_prefix with trust authentication"
      start_private_cluster || exit 1
      pg_split "$url" || exit 1
      admin="$pg_prefix/postgres$pg_query"
      pg_wait "$admin" || { log "postgresql did not answer at $pg_prefix"; exit 1; }
    fi
  fi
  local test_url="$pg_prefix/${pg_name}_test$pg_query"
  if [ -n "$given_test_db" ]; then
    test_url=$given_test_db
  fi
  # A managed server may refuse connections to its postgres database: create from the
  # caller's own then.
  local db via=$admin want=("$pg_name")
  pg_answers "$admin" || via=$url
  [ -n "$given_test_db" ] || want+=("${pg_name}_test")
  for db in "${want[@]}"; do
    psql "$via" -Atqc "select 1 from pg_database where datname='$db'" | grep -q 1 && continue
    psql "$via" -qc "create database \"$db\"" >/dev/null ||
      { log "postgresql: could not create database $db at $(redact "$pg_prefix")"; exit 1; }
  done
  DATABASE_URL="$pg_prefix/$pg_name$pg_query"
  JUNBAN_TEST_DATABASE_URL=$test_url
}

sqs_answers() {
  curl -fsS -m 2 -X POST -H 'Content-Type: application/x-amz-json-1.0' \
    -H 'X-Amz-Target: AmazonSQS.ListQueues' -d '{}' "$1/" >/dev/null 2>&1
}

# node22: a node binary of at least 22.5 (fauxqs needs node:sqlite): the machine's, or
# Node 22 from the npm package node (pinned in fauxqs/node22) when the machine's is older.
node22() {
  if node -e 'const [a, b] = process.versions.node.split(".").map(Number); process.exit(a > 22 || (a === 22 && b >= 5) ? 0 : 1)' 2>/dev/null; then
    command -v node
    return
  fi
  local dir="$root/fauxqs/node22"
  if [ ! -x "$dir/node_modules/.bin/node" ]; then
    log "sqs: node $(node --version 2>/dev/null) is older than fauxqs needs (22.5): npm ci (node 22, pinned)"
    (cd "$dir" && timeout 600 npm ci --no-audit --no-fund --loglevel=error >/dev/null) ||
      { log "sqs: npm ci in fauxqs/node22 failed"; return 1; }
  fi
  echo "$dir/node_modules/.bin/node"
}

# Each emulator: its folder (package.json, lock, server.mjs), its pidfile, the stack.env
# variable of its endpoint, and the word its command line holds (for pid_alive).
emu_dir() { case "$1" in fauxqs) echo "$root/fauxqs" ;; local-aws-sqs) echo "$root/localsqs" ;; esac; }
emu_var() { case "$1" in fauxqs) echo JUNBAN_SQS_ENDPOINT_FAUXQS ;; local-aws-sqs) echo JUNBAN_SQS_ENDPOINT_LOCAL_AWS_SQS ;; esac; }
emu_pid() { echo "$state/sqs-$1.pid"; }
emu_word() { case "$1" in fauxqs) echo "$root/fauxqs/server.mjs" ;; local-aws-sqs) echo "$root/localsqs/server.mjs" ;; esac; }

# up_emulator NAME: reuse the emulator this stack started when it answers, else start it
# on a free port. Sets the variable that emu_var NAME names.
up_emulator() {
  local name=$1 dir var pidf word ep port nodebin
  dir=$(emu_dir "$name") var=$(emu_var "$name") pidf=$(emu_pid "$name") word=$(emu_word "$name")
  ep=${!var:-}
  if [ -n "$ep" ] && pid_alive "$pidf" "$word" && sqs_answers "$ep"; then
    log "sqs: $name on ${ep##*:} (running)"
    return
  fi
  stop_pid "sqs $name" "$pidf" "$word" # ours, alive but not answering: never two
  if [ ! -f "$dir/node_modules/.package-lock.json" ]; then
    log "sqs: npm ci ($name, pinned)"
    (cd "$dir" && timeout 600 npm ci --no-audit --no-fund --loglevel=error >/dev/null) ||
      { log "sqs: npm ci in $dir failed"; exit 1; }
  fi
  if [ "$name" = fauxqs ]; then nodebin=$(node22) || exit 1; else nodebin=$(command -v node); fi
  port=$(free_port)
  nohup "$nodebin" --no-warnings "$word" "$port" >"$state/sqs-$name.log" 2>&1 &
  echo $! >"$pidf"
  started+=("sqs-$name")
  ep="http://127.0.0.1:$port"
  for _ in $(seq 100); do sqs_answers "$ep" && break; sleep 0.1; done
  sqs_answers "$ep" || { log "sqs: $name did not start, see $state/sqs-$name.log"; exit 1; }
  printf -v "$var" '%s' "$ep"
  log "sqs: started $name on $port"
}

# queues_create ENDPOINT [FLAG...]: junban's queues there (idempotent), with this
# checkout's junbanctl, built into .junban/bin once per run (go's build cache makes it
# quick); the flags go to queues create.
queues_create() {
  if [ -z "${queues_built:-}" ]; then
    command -v go >/dev/null 2>&1 || { log "sqs: go is needed to build junbanctl (queues create)"; exit 1; }
    (cd "$root" && timeout 600 go build -o "$state/bin/junbanctl" ./cmd/junbanctl) ||
      { log "sqs: go build ./cmd/junbanctl failed"; exit 1; }
    queues_built=1
  fi
  AWS_ENDPOINT_URL_SQS=$1 AWS_REGION=${AWS_REGION:-us-east-1} \
    AWS_ACCESS_KEY_ID=${AWS_ACCESS_KEY_ID:-local} AWS_SECRET_ACCESS_KEY=${AWS_SECRET_ACCESS_KEY:-local} \
    timeout 60 "$state/bin/junbanctl" queues create -quiet "${@:2}" >&2 ||
    { log "sqs: junbanctl queues create ${*:2} at $1 failed"; exit 1; }
}

up_sqs() {
  ensure_pkg curl curl
  if [ -n "$given_sqs" ] && sqs_answers "$given_sqs"; then
    log "sqs: using $given_sqs"
    AWS_ENDPOINT_URL_SQS=$given_sqs
    JUNBAN_SQS_ENDPOINT_FAUXQS='' JUNBAN_SQS_ENDPOINT_LOCAL_AWS_SQS=''
    queues_create "$AWS_ENDPOINT_URL_SQS"
    return
  fi
  [ -z "$given_sqs" ] || log "sqs: nothing answers at $given_sqs; starting the local emulators"
  ensure_pkg node nodejs
  ensure_pkg npm npm
  stop_pid sqs "$state/sqs.pid" server.mjs # an emulator of this script's older form
  local name var
  for name in fauxqs local-aws-sqs; do
    up_emulator "$name"
    var=$(emu_var "$name")
    queues_create "${!var}"
    queues_create "${!var}" -fifo
  done
  var=$(emu_var "$backend")
  AWS_ENDPOINT_URL_SQS=${!var}
  log "sqs: AWS_ENDPOINT_URL_SQS is $backend (JUNBAN_LOCAL_SQS)"
}

write_env() {
  local wait_note
  case "${given_sqs:+given}:$backend" in
  :local-aws-sqs) wait_note="# local-aws-sqs answers a long poll only when its wait ends, even when a message arrived
# meanwhile (real SQS and fauxqs answer at once): short polls keep local latency low." ;;
  :fauxqs) wait_note="# fauxqs answers a long poll as soon as a message arrives, but a poll whose caller went away
# (a worker that stopped) still takes the messages that arrive during its wait, hidden then
# for their visibility timeout: short polls keep that window at 1 s." ;;
  *) wait_note="# Short polls, as for the local emulators (set JUNBAN_SQS_WAIT_SECONDS=20 for real SQS)." ;;
  esac
  # fauxqs serves SNS on its SQS port (the query protocol on POST /); local-aws-sqs serves
  # no SNS, and a given SQS endpoint says nothing of one: then no line, and the tests that
  # need SNS skip on local-aws-sqs and fail elsewhere until AWS_ENDPOINT_URL_SNS is set.
  local sns_line=
  if [ -z "$given_sqs" ] && [ "$backend" = fauxqs ]; then
    sns_line="AWS_ENDPOINT_URL_SNS=$AWS_ENDPOINT_URL_SQS"
  elif [ -n "$given_sns" ]; then
    sns_line="AWS_ENDPOINT_URL_SNS=$given_sns"
  fi
  cat >"$envfile" <<EOF
# Written by scripts/stack.sh; junban binaries, junbanctl and tests read it, for variables not set in the environment, when JUNBAN_STACK_ENV names it (the Makefile sets it).
REDIS_URL=$REDIS_URL
DATABASE_URL=$DATABASE_URL
JUNBAN_TEST_DATABASE_URL=$JUNBAN_TEST_DATABASE_URL
AWS_ENDPOINT_URL_SQS=$AWS_ENDPOINT_URL_SQS
${sns_line:+$sns_line
}JUNBAN_LOCAL_SQS=$backend
JUNBAN_SQS_ENDPOINT_FAUXQS=${JUNBAN_SQS_ENDPOINT_FAUXQS:-}
JUNBAN_SQS_ENDPOINT_LOCAL_AWS_SQS=${JUNBAN_SQS_ENDPOINT_LOCAL_AWS_SQS:-}
AWS_REGION=${AWS_REGION:-us-east-1}
AWS_ACCESS_KEY_ID=${AWS_ACCESS_KEY_ID:-local}
AWS_SECRET_ACCESS_KEY=${AWS_SECRET_ACCESS_KEY:-local}
$wait_note
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
  stop_pid "sqs fauxqs" "$(emu_pid fauxqs)" "$(emu_word fauxqs)"
  stop_pid "sqs local-aws-sqs" "$(emu_pid local-aws-sqs)" "$(emu_word local-aws-sqs)"
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
    sqs-*) stop_pid "sqs ${what#sqs-}" "$(emu_pid "${what#sqs-}")" "$(emu_word "${what#sqs-}")" ;;
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
  if sqs_answers "$AWS_ENDPOINT_URL_SQS"; then echo "sqs        up    $AWS_ENDPOINT_URL_SQS (${JUNBAN_LOCAL_SQS:-given})"; else echo "sqs        DOWN  $AWS_ENDPOINT_URL_SQS"; rc=1; fi
  for name in fauxqs local-aws-sqs; do
    var=$(emu_var "$name")
    [ -n "${!var:-}" ] && [ "${!var}" != "$AWS_ENDPOINT_URL_SQS" ] || continue
    if sqs_answers "${!var}"; then echo "sqs        up    ${!var} ($name)"; else echo "sqs        DOWN  ${!var} ($name)"; rc=1; fi
  done
  exit $rc
  ;;
other-sqs)
  [ -f "$envfile" ] || { echo "no stack (run: make stack)" >&2; exit 1; }
  for name in fauxqs local-aws-sqs; do
    var=$(emu_var "$name")
    if [ -n "${!var:-}" ] && [ "${!var}" != "$AWS_ENDPOINT_URL_SQS" ]; then echo "$name ${!var}"; fi
  done
  ;;
*) echo "usage: $0 up|down|status|other-sqs" >&2; exit 2 ;;
esac
