package chaos_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/ledger"
	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/lockhandoff"
	"github.com/junban/junban/internal/testenv"
	"github.com/junban/junban/tools/chaos"
)

// needServers skips the test when PostgreSQL's initdb (or redis-server) is missing and
// cannot be installed; under CI (CI set) it fails instead, so that a machine without them
// cannot pass CI with the chaos test silently skipped.
func needServers(t *testing.T) {
	t.Helper()
	_, pgErr := chaos.FindInitdb()
	_, redisErr := exec.LookPath("redis-server")
	if pgErr == nil && redisErr == nil {
		return
	}
	if os.Geteuid() == 0 {
		if apt, err := exec.LookPath("apt-get"); err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			// A fresh machine has no package lists yet.
			out, err := exec.CommandContext(ctx, apt, "update", "-q").CombinedOutput()
			if err == nil {
				out, err = exec.CommandContext(ctx, apt, "install", "-y", "-q", "postgresql", "redis-server").CombinedOutput()
			}
			t.Logf("apt-get install postgresql redis-server: %v\n%s", err, out[max(0, len(out)-500):])
		}
	}
	skip := t.Skipf
	if os.Getenv("CI") != "" {
		skip = t.Fatalf
	}
	if _, err := chaos.FindInitdb(); err != nil {
		skip("chaos needs its own PostgreSQL: %v", err)
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		skip("chaos needs its own Redis: %v", err)
	}
}

// snsEndpoint is the stack's SNS beside its SQS ("" when there is none): the run's
// outbound topic goes there.
func snsEndpoint(t *testing.T) string {
	if testenv.HasSNS(t) {
		return testenv.SNSEndpoint(t)
	}
	return ""
}

type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// TestChaos is the CI version of `junbanlab chaos`: 1,500 events with 20% duplicates over
// 20 s while order-workers are SIGKILLed three times, the persist-worker once, Redis is
// SIGKILLed and restarted from its AOF and PostgreSQL is stopped for 5 s; with SNS, the
// subscriber of the run's outbound topic got every outbox row. Then it breaks
// the quiescent state on purpose, twice, to see the checks catch an event applied twice.
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos takes about a minute")
	}
	needServers(t)
	sqsCfg := testenv.SQSConfig(t)
	var childEnv []string
	for _, kv := range testenv.Env(t) {
		if strings.HasPrefix(kv, "AWS_ACCESS_KEY_ID=") || strings.HasPrefix(kv, "AWS_SECRET_ACCESS_KEY=") {
			childEnv = append(childEnv, kv)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	env, err := chaos.Start(ctx, chaos.Config{
		Events:         1500,
		SendDuration:   20 * time.Second,
		PGOutage:       5 * time.Second,
		QuiesceTimeout: 90 * time.Second,
		SQS:            sqsCfg,
		SNSEndpoint:    snsEndpoint(t),
		ChildEnv:       childEnv,
		Progress:       logWriter{t},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	if err := env.Drive(ctx); err != nil {
		t.Fatal(err)
	}
	rep, err := env.Check(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	rep.Print(&buf)
	t.Log("\n" + buf.String())
	if !rep.OK() {
		t.Fatalf("invariants broken: %s", strings.Join(rep.Problems(), "; "))
	}
	if o := rep.Outbound; testenv.HasSNS(t) && (o == nil || o.Rows == 0 || o.Distinct != o.Rows || o.Unpublished != 0) {
		t.Errorf("outbound: %+v, want every outbox row received", o)
	}
	if rep.Events < 1500 || rep.Kills != 4 || rep.RedisRestarts != 1 || rep.PGOutageS != 5 {
		t.Errorf("faults: events %d, kills %d, redis restarts %d, pg outage %.0fs; want >=1500, 4, 1, 5", rep.Events, rep.Kills, rep.RedisRestarts, rep.PGOutageS)
	}
	js, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	const head = `{"events":`
	if !bytes.HasPrefix(js, []byte(head)) || !bytes.Contains(js, []byte(`,"kills":4,"lost":0,"double_applied":0,"drift":0,"oversold":0,"conserved":true,`)) {
		t.Errorf("--json does not start with the contract's keys: %.200s", js)
	}

	// Broken variant 1: a zombie allocates again under a fresh op id (one unit of the
	// first SKU any order holds). The ledger moved stock that no order records.
	w := env.Workload()
	led, err := ledger.New(ledger.Config{Redis: env.Redis(), Prefix: chaos.KeyPrefix})
	if err != nil {
		t.Fatal(err)
	}
	target := ""
	for _, sku := range w.Inventory {
		s, err := led.Snapshot(ctx, sku.SKU)
		if err != nil {
			continue
		}
		for _, l := range s.Lots {
			if l.Sellable > 0 && l.Kind == stock.KindOnHand {
				target = sku.SKU
			}
		}
		if target != "" {
			break
		}
	}
	if target == "" {
		t.Fatal("no SKU with stock left to break")
	}
	z, err := led.Apply(ctx, stock.AllocateRequest{OpID: "zombie:1:alloc", SKU: target, Qty: 1, TargetDate: "2026-12-15", Mode: stock.ModeReserve})
	if err != nil {
		t.Fatal(err)
	}
	broken, err := env.Check(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if broken.HoldingMismatches == 0 || broken.DoubleApplied == 0 {
		t.Errorf("an allocation applied twice went unnoticed: %+v", broken.Details)
	}
	if _, err := led.Apply(ctx, stock.ReleaseRequest{OpID: "zombie:1:undo", SKU: target, From: stock.Reserved, Lots: []stock.LotQty{{LotID: z.Moves[0].LotID, Qty: 1}}}); err != nil {
		t.Fatal(err)
	}

	// Broken variant 2: an event's done marker is lost and the event is delivered again:
	// the order-worker processes it a second time, in a turn of its own.
	var again event.Order
	for _, e := range w.Events {
		if e.Type == event.PaymentConfirmed {
			again = e
			break
		}
	}
	if err := env.Redis().Del(ctx, lockhandoff.Key(chaos.KeyPrefix, again.LCID, "done:"+again.EventID)).Err(); err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(again)
	if err := env.Publish(ctx, [][]byte{body}); err != nil {
		t.Fatal(err)
	}
	if !env.Quiesce(ctx) {
		t.Fatal("no quiescence after the redelivery")
	}
	broken, err = env.Check(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if broken.SeqGaps != 1 || broken.DoubleApplied == 0 {
		t.Errorf("an event processed twice went unnoticed: seq gaps %d, details %+v", broken.SeqGaps, broken.Details)
	}
}
