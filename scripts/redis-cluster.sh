#!/usr/bin/env bash
# A throwaway local Redis Cluster of 3 masters (no replicas), for tests and benchmarks.
#
#   scripts/redis-cluster.sh up [DIR]   start it; prints SEED=127.0.0.1:PORT and DIR=DIR
#   scripts/redis-cluster.sh down DIR   stop the servers that `up` started in DIR, by PID
#
# Persistence is off: the cluster holds test data only.
set -euo pipefail

log() { printf 'redis-cluster: %s\n' "$*" >&2; }

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

up() {
  local dir="${1:-$(mktemp -d -t junban-redis-cluster.XXXXXX)}"
  mkdir -p "$dir"
  local addrs=() port
  for i in 1 2 3; do
    port=$(free_port)
    mkdir -p "$dir/$port"
    redis-server --port "$port" --bind 127.0.0.1 --cluster-enabled yes \
      --cluster-config-file nodes.conf --cluster-node-timeout 5000 \
      --dir "$dir/$port" --daemonize yes --pidfile "$dir/$port/redis.pid" \
      --logfile "$dir/$port/redis.log" --save "" --appendonly no
    addrs+=("127.0.0.1:$port")
  done
  for a in "${addrs[@]}"; do
    for _ in $(seq 50); do
      redis-cli -h "${a%:*}" -p "${a#*:}" ping 2>/dev/null | grep -q PONG && break
      sleep 0.1
    done
  done
  redis-cli --cluster create "${addrs[@]}" --cluster-replicas 0 --cluster-yes >"$dir/create.log" 2>&1 || {
    log "cluster create failed, see $dir/create.log"; down "$dir"; exit 1
  }
  local seed="${addrs[0]}"
  for _ in $(seq 100); do
    redis-cli -h "${seed%:*}" -p "${seed#*:}" cluster info 2>/dev/null | grep -q 'cluster_state:ok' && break
    sleep 0.1
  done
  echo "SEED=$seed"
  echo "DIR=$dir"
}

down() {
  local dir="${1:?usage: redis-cluster.sh down DIR}"
  for pidfile in "$dir"/*/redis.pid; do
    [ -f "$pidfile" ] || continue
    local pid; pid=$(cat "$pidfile")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  done
  rm -rf "$dir"
}

case "${1:-}" in
  up) up "${2:-}" ;;
  down) down "${2:-}" ;;
  *) echo "usage: $0 up [DIR] | down DIR" >&2; exit 2 ;;
esac
