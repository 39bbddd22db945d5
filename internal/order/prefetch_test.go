package order_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/ledger"
)

// commandCounter counts the commands of one name a client sends, alone or in pipelines.
type commandCounter struct {
	name string
	n    atomic.Int64
}

func (c *commandCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *commandCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == c.name {
			c.n.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (c *commandCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			if cmd.Name() == c.name {
				c.n.Add(1)
			}
		}
		return next(ctx, cmds)
	}
}

// A step's done marker and state come with the script that gave its event the turn
// (Processor.Prefetch): the steps of a turn send no read of their own before their work,
// and a duplicate still finds its done marker there, so it has no second effect.
//
// Broken variant tried: the harness's turns without Prefetch: 3 MGETs, one per step.
func TestStepsReadTheirTurnWithTheTurnsScript(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []ledger.SKU{{SKU: "P", Lots: []ledger.Lot{onHand("P1", 1, 100, "2027-01-01")}}})
	mgets := &commandCounter{name: "mget"}
	h.rc.AddHook(mgets)
	e := placed("PF-1", ledger.ModeShip, line("1", "P", 3))
	pay := ev("PF-1", event.PaymentConfirmed, nil)
	h.submit(e)
	h.submit(pay)
	h.submit(e) // a duplicate
	h.settle("PF-1")
	if n := mgets.n.Load(); n != 0 {
		t.Errorf("the steps sent %d MGETs, want 0: their turn's scripts read the done markers and the state", n)
	}
	if n := h.pub.count(e.EventID); n != 1 {
		t.Errorf("placement's result published %d times, want 1", n)
	}
	if n := h.pub.count(pay.EventID); n != 1 {
		t.Errorf("payment's result published %d times, want 1", n)
	}
	s, err := h.led.Snapshot(context.Background(), "P")
	if err != nil {
		t.Fatal(err)
	}
	if got := totals(s); got != (bucketTotals{sellable: 97, allocated: 3}) {
		t.Errorf("P after a placement, its payment and a duplicate: %+v", got)
	}
}
