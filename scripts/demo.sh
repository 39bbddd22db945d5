#!/usr/bin/env bash
# junban's main job, end to end: the stack, migrations, two order-workers, a
# persist-worker and the webhook gateway, a minute of realistic load, reconcile, a summary;
# with SNS in the stack (fauxqs), the outbound events a shop's queue got from junban's topic.
# Run it with `make demo` (which builds the binaries and starts the stack first).
# junban-api serves the operator console during the load; afterwards the fleet keeps
# running until Enter or Ctrl-C, so the console can be looked around in. DEMO_KEEP=0
# stops at once (for scripts), and so does a stdin that is not a terminal (CI, pipes).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
bin="$root/bin"
logs="$root/.junban/demo"
mkdir -p "$logs"

scripts/stack.sh up >/dev/null
# KEY=VALUE lines, read rather than sourced: a DATABASE_URL's parameters hold '&'.
while IFS='=' read -r k v; do
  case "$k" in '' | \#*) continue ;; esac
  [ -n "${!k:-}" ] || export "$k=$v"
done <"$root/.junban/stack.env"

# Demo settings, overridable from the environment.
ORDERS=${DEMO_ORDERS:-3000}
API_PORT=${DEMO_API_PORT:-8090}
if [ -z "${DEMO_KEEP:-}" ]; then
  if [ -t 0 ]; then DEMO_KEEP=1; else DEMO_KEEP=0; fi
fi
RATE=${DEMO_RATE:-250}
# The warehouse feed's share of the events (junbanlab loadgen -warehouse; 0: none).
WAREHOUSE=${DEMO_WAREHOUSE:-0.04}
# Abandoned checkouts: the share of the reserve orders placed with a short hold and never
# paid nor cancelled, which junban expires (junbanlab loadgen -abandoned, -hold-for); 0: none.
ABANDONED=${DEMO_ABANDONED:-0.1}
HOLD_FOR=${DEMO_HOLD_FOR:-5s}
# The share of the events published through an SNS topic the orders queue is subscribed
# to (junbanlab loadgen -via-sns), when the stack has SNS (fauxqs); 0: none.
if [ -n "${AWS_ENDPOINT_URL_SNS:-}" ]; then VIA_SNS=${DEMO_VIA_SNS:-0.2}; else VIA_SNS=0; fi
# Outbound events (docs/outbound.md): the persist-worker's relay publishes them to this
# topic, and the shop's queue subscribed to it gets them, when the stack has SNS.
OUTBOUND_TOPIC=${DEMO_OUTBOUND_TOPIC:-junban-outbound}
OUTBOUND_QUEUE=${DEMO_OUTBOUND_QUEUE:-shop-outbound}
export JUNBAN_LOG_LEVEL=${JUNBAN_LOG_LEVEL:-warn}
# A local-only signing secret for the demo's payment provider (Standard Webhooks).
export JUNBAN_WEBHOOK_PROVIDERS=${JUNBAN_WEBHOOK_PROVIDERS:-demo:standard:whsec_ZGVtby1zZWNyZXQtZm9yLWxvY2FsLW9ubHk=}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

pids=()
stop_all() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
}
trap stop_all EXIT

start() { # start NAME BINARY PORT [READY_PORT] (the health port; /readyz on READY_PORT if given)
  JUNBAN_HTTP_ADDR="127.0.0.1:$3" "$bin/$2" >"$logs/$1.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 100); do
    if curl -fsS -m 1 "http://127.0.0.1:${4:-$3}/readyz" >/dev/null 2>&1; then return 0; fi
    if ! kill -0 "${pids[-1]}" 2>/dev/null; then
      echo "demo: $1 exited; its log:" >&2; cat "$logs/$1.log" >&2; exit 1
    fi
    sleep 0.2
  done
  echo "demo: $1 not ready after 20 s; its log:" >&2; cat "$logs/$1.log" >&2; exit 1
}

echo "== junban demo =="
"$bin/junbanctl" migrate
# The shop's three locations: two warehouses on either coast that ship online orders, and
# a store that only hands orders over (pickup). Lots are spread over them; an order ships
# from the warehouse closest to its ship_to (then by rank), or is collected at the store.
"$bin/junbanctl" locations set wh-east --kind warehouse --rank 1 --lat 40.71 --lon -74.01 >/dev/null
"$bin/junbanctl" locations set wh-west --kind warehouse --rank 2 --lat 34.05 --lon -118.24 >/dev/null
"$bin/junbanctl" locations set store-sf --kind store --rank 3 --ships=false --pickup --lat 37.77 --lon -122.42 >/dev/null
export JUNBAN_ALLOCATION_STRATEGIES=${JUNBAN_ALLOCATION_STRATEGIES:-closest,ranked}
echo "locations:"
"$bin/junbanctl" locations list | sed 's/^/  /'
gw_port=$(free_port)
ow1_port=$(free_port)
start order-worker-1 order-worker "$ow1_port"
ow2_port=$(free_port)
start order-worker-2 order-worker "$ow2_port"
outbound_arn=
if [ -n "${AWS_ENDPOINT_URL_SNS:-}" ]; then
  outbound_arn=$("$bin/junbanctl" topics create "$OUTBOUND_TOPIC")
  "$bin/junbanctl" topics subscribe "$outbound_arn" --queue "$OUTBOUND_QUEUE" --create-queue >/dev/null
  # The check holds this run's rows to account: the database keeps earlier runs'.
  outbound_since=$(date -u +%Y-%m-%dT%H:%M:%S.%6NZ)
  JUNBAN_OUTBOX_TOPIC_ARN=$outbound_arn start persist-worker persist-worker "$(free_port)"
else
  start persist-worker persist-worker "$(free_port)"
fi
# The gateway's public port serves the webhooks only; its probes are on the admin port.
gw_admin_port=$(free_port)
JUNBAN_WEBHOOK_ADMIN_ADDR="127.0.0.1:$gw_admin_port" start webhook-gateway webhook-gateway "$gw_port" "$gw_admin_port"
if ! python3 -c 'import socket,sys; s=socket.socket(); s.bind(("127.0.0.1",int(sys.argv[1])))' "$API_PORT" 2>/dev/null; then
  API_PORT=$(free_port)
fi
# Loopback and no token: the API and its console are open to this machine only.
JUNBAN_API_ADDR="127.0.0.1:$API_PORT" start junban-api junban-api "$(free_port)"
echo "started 2 order-workers, a persist-worker, the webhook gateway and junban-api (logs in .junban/demo/)"
if [ -n "$outbound_arn" ]; then
  echo "outbound events: the persist-worker publishes to $outbound_arn, queue $OUTBOUND_QUEUE subscribed (raw)"
else
  echo "outbound events: off (the stack has no SNS: local-aws-sqs serves none)"
fi
echo
echo "console: http://127.0.0.1:$API_PORT/   (the API under /v1, see docs/api.md and docs/console.md)"

echo
sns_note=
[ "$VIA_SNS" = 0 ] || sns_note=", a share ($VIA_SNS) through an SNS topic"
echo "== load: $ORDERS orders, ~$RATE events/s, 20% duplicate deliveries, payments partly by webhook, the warehouse's feed beside$sns_note =="
# A shop, not a shortage: 40 SKUs whose popularity falls off gently (-skew 0.6), stocked
# for the run's demand, so that most orders succeed and the hottest one or two SKUs
# sell out towards the end.
RUN=${DEMO_RUN:-demo$(date +%s)}
"$bin/junbanlab" loadgen -run "$RUN" -orders "$ORDERS" -rate "$RATE" -skus 40 -lots 4 -stock 180 -safety-stock 10 -skew 0.6 \
  -locations wh-east,wh-west,store-sf -pickup "${DEMO_PICKUP:-0.15}" \
  -warehouse "$WAREHOUSE" -duplicates 0.2 -out-of-order 0.2 -shuffle 0.1 -via-sns "$VIA_SNS" \
  -abandoned "$ABANDONED" -hold-for "$HOLD_FOR" -extend 0.3 \
  -gateway "http://127.0.0.1:$gw_port" -provider demo -webhook-share 0.3 \
  -worker-metrics "127.0.0.1:$ow1_port,127.0.0.1:$ow2_port" | tee "$logs/summary.txt"

echo
echo "== the hottest SKU, per location: lots, buckets and what an order could get =="
# (on the workload's target date, loadgen's default)
"$bin/junbanctl" stock --date 2026-12-15 "$RUN-SKU-000"

echo
echo "== reconcile: Redis (source of truth) against PostgreSQL =="
"$bin/junbanctl" reconcile

echo
if [ -n "$outbound_arn" ]; then
  echo "== outbound: what the shop's queue $OUTBOUND_QUEUE got from $OUTBOUND_TOPIC, against the outbox =="
  "$bin/junbanlab" outbound check --queue "$OUTBOUND_QUEUE" --since "$outbound_since" | tee "$logs/outbound.txt"
else
  echo "== outbound: off (the stack has no SNS) =="
fi

cat <<'EOF'

What the numbers show:
  - most orders shipped; oversold SKUs 0 and a few ERR_SHORTAGE / ERR_SAFETY_STOCK
    rejections: the hottest SKUs sold out and junban refused the orders it could not
    cover, atomically, across two workers (ERR_INVALID_TRANSITION: the later events of
    those refused orders, and events that arrived after their order was finished);
  - warehouse events, per type: lots registered and received, holds and their
    releases, damage, recalls, safety stock changes, new SKUs and returns ran in their
    SKU's (or order's) turn beside the orders; the few refused are what a shop sees too
    (a release after a recall took the held units, a return of a refused shipment);
  - per location: the lots at each of the three locations, what came in there (imports,
    receipts and transfers in, less transfers out), what its orders hold and took
    (shipped), and the units transfers took out and brought in (the warehouse's feed
    sends a unit between locations now and then, half of them called back); oversold
    locations 0: no location gave more than it had. The store ships nothing but its
    pickups: a shipped order took only the warehouses' stock, the closest first;
  - lots not conserved 0: every bucket of every lot is its import plus the moves in
    PostgreSQL, stock coming in or going out only through the warehouse's moves;
  - duplicate deliveries sent, found done by the order-workers, and applied + rejected =
    distinct events: no duplicate (SQS or webhook) had a second effect;
  - orders placed/shipped/cancelled with payments arriving before placements: each order's
    events were applied in turn, early ones parked until their precondition held;
  - abandoned reservations, expired: reserve orders never paid nor cancelled whose hold
    passed; junban expired each in its turn and released its units (orders expired), a
    few after an order.reservation_extended moved their hold;
  - send -> commit, applied in turn: junban's own latency through both queues, the two
    workers and PostgreSQL; parked on purpose: the events sent before their precondition
    (a payment before its placement), which wait for the workload's next send;
  - reconcile: PostgreSQL matches Redis;
  - outbound (with SNS): per kind, the order and stock events the shop's queue got, each
    body valid against its kind's schema, none missing, none unknown, every order's and
    SKU's seqs 1..N without a gap; duplicates are copies the relay published again (at
    least once), which a consumer drops by the message's id.
EOF

if [ "$DEMO_KEEP" != 0 ]; then
  echo
  echo "The fleet keeps running: console at http://127.0.0.1:$API_PORT/ . Press Enter or Ctrl-C to stop it."
  read -r _ || true
fi
