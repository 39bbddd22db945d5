package order_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/lockhandoff"
	"github.com/junban/junban/internal/order"
	"github.com/junban/junban/internal/testenv"
)

// An order's step writes through pipelines: its take with the backlog index entry, its
// commit (with a WAIT when replicas are required), and the handoff that carries its
// results list trim (the ack of the published result). Each case cuts one of them after its
// first command, once the server ran it; go-redis sends the pipeline again. The
// placement's stock moves once, its result is published once, the results list ends empty, the
// turn ends with nothing in wait or proc, and the order's next event (a cancellation)
// applies once.
//
// Broken variant tried: commit.lua without its done check (the commit case): the
// placement's result was published twice.
func TestCutPipelinesOfAStepApplyOnce(t *testing.T) {
	t.Parallel()
	isEval := func(args []string) bool {
		return len(args) > 1 && (args[0] == "evalsha" || args[0] == "EVALSHA")
	}
	for _, c := range []struct {
		name  string
		match func(prefix, lcid string) func(args []string) bool
	}{
		{"take", func(prefix, lcid string) func([]string) bool {
			pushed := lockhandoff.Key(prefix, lcid, "pushed:")
			return func(args []string) bool {
				return isEval(args) && slices.ContainsFunc(args, func(a string) bool { return len(a) > len(pushed) && a[:len(pushed)] == pushed })
			}
		}},
		{"commit", func(string, string) func([]string) bool { return testenv.ScriptCall(order.CommitHash) }},
		{"handoff with the outbox trim", func(prefix, lcid string) func([]string) bool {
			outbox := lockhandoff.Key(prefix, lcid, "outbox")
			return func(args []string) bool {
				return isEval(args) && args[1] != order.CommitHash && args[1] != order.AckHash && slices.Contains(args, outbox)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cut := testenv.StartPipelineCutter(t, testenv.RedisAddr(t), 1, func([]string) bool { return false })
			h := newHarnessWith(t, []stock.SKU{{SKU: "A", Lots: []stock.Lot{onHand("A1", 1, 10, "2027-01-01")}}},
				harnessOptions{redis: testenv.RedisVia(t, cut.Addr())})
			// A first order loads the scripts: a cut of an EVALSHA answered NOSCRIPT would
			// cut a script that never ran.
			h.submit(placed("CUT-0", stock.ModeReserve, line("1", "A", 1)))
			h.submit(ev("CUT-0", event.OrderCancelled, nil))
			const lcid = "CUT-1"
			cut.Arm(1, c.match(h.prefix, lcid))
			p := placed(lcid, stock.ModeReserve, line("1", "A", 2))
			h.submit(p)
			if cut.Cuts() != 1 {
				t.Fatalf("the proxy cut %d pipelines, want 1", cut.Cuts())
			}
			ctx := context.Background()
			testenv.WaitFor(t, 30*time.Second, "the turn to end", func() bool {
				n, _ := h.rc.Exists(ctx, lockhandoff.Key(h.prefix, lcid, "lock"), lockhandoff.Key(h.prefix, lcid, "proc")).Result()
				return n == 0
			})
			cancel := ev(lcid, event.OrderCancelled, nil)
			h.submit(cancel)
			h.collect(4)
			h.pub.mu.Lock()
			sent := map[string]int{p.EventID: h.pub.sent[p.EventID], cancel.EventID: h.pub.sent[cancel.EventID]}
			h.pub.mu.Unlock()
			for id, n := range sent {
				if n != 1 {
					t.Errorf("result of %s published %d times, want 1", id, n)
				}
			}
			if r := h.result(p.EventID); r.Outcome != event.Applied || len(r.Moves) != 1 {
				t.Errorf("placement: %s %s with %d moves, want applied with 1", r.Outcome, r.Reason, len(r.Moves))
			}
			snap, err := h.led.Snapshot(ctx, "A")
			if err != nil {
				t.Fatal(err)
			}
			if b := totals(snap); b.reserved != 0 || snap.Version != 4 {
				t.Errorf("after two placements and their cancels: %d reserved at version %d, want 0 at 4", b.reserved, snap.Version)
			}
			testenv.WaitFor(t, 30*time.Second, "the outbox, wait and proc to empty", func() bool {
				n, _ := h.rc.Exists(ctx, lockhandoff.Key(h.prefix, lcid, "outbox"), lockhandoff.Key(h.prefix, lcid, "wait"), lockhandoff.Key(h.prefix, lcid, "proc")).Result()
				return n == 0
			})
		})
	}
}
