#!/usr/bin/env bash
# A throwaway local Redis Cluster, for tests, benchmarks and the failover scenario of
# `junbanlab chaos --redis-cluster`.
#
#   scripts/redis-cluster.sh up [--replicas N] [--aof POLICY] [--node-timeout MS] [DIR]
#       start 3 masters with N replicas each (default 0); prints SEED=127.0.0.1:PORT,
#       one NODE=127.0.0.1:PORT per node and DIR=DIR. Returns once every node says
#       cluster_state:ok and every replica's link to its master is up.
#   scripts/redis-cluster.sh kill DIR PORT    SIGKILL one node; returns once its port is closed
#   scripts/redis-cluster.sh start DIR PORT   start a node again (same config, data and node id)
#   scripts/redis-cluster.sh pause DIR PORT   SIGSTOP one node (a replica falls behind its master)
#   scripts/redis-cluster.sh resume DIR PORT  SIGCONT it
#   scripts/redis-cluster.sh stop DIR         stop the servers that `up` started in DIR, by PID
#   scripts/redis-cluster.sh down DIR         stop them and remove DIR
#
# Persistence is off unless --aof POLICY (appendonly yes, appendfsync POLICY: always,
# everysec or no). --node-timeout (default 5000) is cluster-node-timeout: how long a
# master may be unreachable before its replica is promoted. Each node's redis.conf is in
# DIR/PORT, so `start` brings a killed node back as it was: a master that lost its slots
# to a promoted replica rejoins as that replica's replica.
set -euo pipefail

log() { printf 'redis-cluster: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

# A free port P whose cluster bus port P+10000 is free too.
free_port() {
  python3 - <<'PY'
import random, socket
def free(p):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p)); return True
    except OSError:
        return False
    finally:
        s.close()
while True:
    p = random.randint(20000, 50000)
    if free(p) and free(p + 10000):
        print(p); break
PY
}

cli() { local port="$1"; shift; redis-cli -h 127.0.0.1 -p "$port" "$@"; }

# wait_for SECONDS CMD...: runs CMD every 0.1 s until it succeeds.
wait_for() {
  local n=$(( $1 * 10 )); shift
  for _ in $(seq "$n"); do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  return 1
}

pinged() { cli "$1" ping 2>/dev/null | grep -q PONG; }
port_closed() { ! cli "$1" ping >/dev/null 2>&1; }
cluster_ok() { cli "$1" cluster info 2>/dev/null | grep -q 'cluster_state:ok'; }

# replica_ready PORT: PORT is a master, or a replica whose link to its master is up and
# whose initial sync is over.
replica_ready() {
  local info; info=$(cli "$1" info replication 2>/dev/null) || return 1
  grep -q 'role:master' <<<"$info" && return 0
  grep -q 'master_link_status:up' <<<"$info" && grep -q 'master_sync_in_progress:0' <<<"$info"
}

start_node() {
  local dir="$1" port="$2"
  [ -f "$dir/$port/redis.conf" ] || die "no node $port in $dir"
  redis-server "$dir/$port/redis.conf"
  wait_for 10 pinged "$port" || die "node $port does not answer, see $dir/$port/redis.log"
}

up() {
  local replicas=0 aof="" timeout=5000 dir=""
  while [ $# -gt 0 ]; do
    case "$1" in
      --replicas) replicas="${2:?--replicas N}"; shift 2 ;;
      --aof) aof="${2:?--aof always|everysec|no}"; shift 2 ;;
      --node-timeout) timeout="${2:?--node-timeout MS}"; shift 2 ;;
      -*) die "unknown option $1" ;;
      *) dir="$1"; shift ;;
    esac
  done
  case "$replicas" in ''|*[!0-9]*) die "--replicas: $replicas is not a number" ;; esac
  case "$timeout" in ''|*[!0-9]*) die "--node-timeout: $timeout is not a number of milliseconds" ;; esac
  case "$aof" in ''|always|everysec|no) ;; *) die "--aof: $aof is not always, everysec or no" ;; esac
  dir="${dir:-$(mktemp -d -t junban-redis-cluster.XXXXXX)}"
  mkdir -p "$dir"
  local addrs=() ports=() port
  for _ in $(seq $(( 3 * (1 + replicas) ))); do
    port=$(free_port)
    while [[ " ${ports[*]} " == *" $port "* ]]; do port=$(free_port); done
    ports+=("$port")
    mkdir -p "$dir/$port"
    # cluster-replica-validity-factor 0: a replica may always be promoted, however long
    # its master was gone (the scenario kills masters; a replica that refuses would keep
    # the slots down).
    cat >"$dir/$port/redis.conf" <<EOF
port $port
bind 127.0.0.1
protected-mode no
cluster-enabled yes
cluster-config-file nodes.conf
cluster-node-timeout $timeout
cluster-replica-validity-factor 0
dir $dir/$port
daemonize yes
pidfile $dir/$port/redis.pid
logfile $dir/$port/redis.log
save ""
appendonly $([ -n "$aof" ] && echo yes || echo no)
appendfsync ${aof:-everysec}
EOF
    redis-server "$dir/$port/redis.conf"
    addrs+=("127.0.0.1:$port")
  done
  for p in "${ports[@]}"; do
    wait_for 10 pinged "$p" || { log "node $p does not answer, see $dir/$p/redis.log"; down "$dir"; exit 1; }
  done
  redis-cli --cluster create "${addrs[@]}" --cluster-replicas "$replicas" --cluster-yes >"$dir/create.log" 2>&1 || {
    log "cluster create failed, see $dir/create.log"; down "$dir"; exit 1
  }
  for p in "${ports[@]}"; do
    wait_for 30 cluster_ok "$p" || { log "node $p: cluster_state not ok"; down "$dir"; exit 1; }
    wait_for 30 replica_ready "$p" || { log "replica $p: not in sync with its master"; down "$dir"; exit 1; }
  done
  echo "SEED=${addrs[0]}"
  for a in "${addrs[@]}"; do echo "NODE=$a"; done
  echo "DIR=$dir"
}

# kill_node DIR PORT: SIGKILL, then the pid file goes, so that `down` never signals a
# process that took the pid over.
kill_node() {
  local dir="$1" port="$2" pidfile="$1/$2/redis.pid"
  [ -f "$pidfile" ] || die "node $port in $dir is not running (no pid file)"
  kill -9 "$(cat "$pidfile")" 2>/dev/null || true
  rm -f "$pidfile"
  wait_for 10 port_closed "$port" || die "node $port still answers after SIGKILL"
}

stop() {
  local dir="${1:?usage: redis-cluster.sh stop DIR}"
  for pidfile in "$dir"/*/redis.pid; do
    [ -f "$pidfile" ] || continue
    local pid; pid=$(cat "$pidfile")
    kill "$pid" 2>/dev/null || true
    kill -CONT "$pid" 2>/dev/null || true # a paused node acts on SIGTERM only once resumed
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    rm -f "$pidfile"
  done
}

signal_node() {
  local sig="$1" dir="$2" port="$3" pidfile="$2/$3/redis.pid"
  [ -f "$pidfile" ] || die "node $port in $dir is not running (no pid file)"
  kill "-$sig" "$(cat "$pidfile")"
}

down() {
  stop "${1:?usage: redis-cluster.sh down DIR}"
  rm -rf "$1"
}

case "${1:-}" in
  up) shift; up "$@" ;;
  kill) kill_node "${2:?usage: redis-cluster.sh kill DIR PORT}" "${3:?usage: redis-cluster.sh kill DIR PORT}" ;;
  start) start_node "${2:?usage: redis-cluster.sh start DIR PORT}" "${3:?usage: redis-cluster.sh start DIR PORT}" ;;
  pause) signal_node STOP "${2:?usage: redis-cluster.sh pause DIR PORT}" "${3:?usage: redis-cluster.sh pause DIR PORT}" ;;
  resume) signal_node CONT "${2:?usage: redis-cluster.sh resume DIR PORT}" "${3:?usage: redis-cluster.sh resume DIR PORT}" ;;
  stop) stop "${2:-}" ;;
  down) down "${2:-}" ;;
  *) echo "usage: $0 up [--replicas N] [--aof POLICY] [--node-timeout MS] [DIR] | kill DIR PORT | start DIR PORT | pause DIR PORT | resume DIR PORT | stop DIR | down DIR" >&2; exit 2 ;;
esac
