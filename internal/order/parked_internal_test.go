package order

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/ledger"
	"github.com/junban/junban/internal/lockhandoff"
	"github.com/junban/junban/internal/queue"
	"github.com/junban/junban/internal/testenv"
)

type oneSKU ledger.SKU

func (s oneSKU) LoadSKU(_ context.Context, sku string) (ledger.SKU, error) {
	if sku != s.SKU {
		return ledger.SKU{}, fmt.Errorf("sku=%s: %w", sku, ledger.ErrUnknownSKU)
	}
	return ledger.SKU(s), nil
}

// A parked event that a step applied is not expired when that step is re-run after its
// deadline: the first run shipped the stock (its commit was then refused), so the re-run
// must apply the shipment again, or the order stays unshipped while the ledger shipped.
//
// Broken variant tried: expiring parked events before the step (the code before): the
// re-run dead-lettered the shipment and committed "paid, not shipped" over a ledger
// that had shipped.
func TestParkedEventAppliedOnceIsNotExpiredOnTheReRun(t *testing.T) {
	ctx := context.Background()
	rc, prefix := testenv.Redis(t)
	c := testenv.SQS(t)
	qs := testenv.NewQueues(t, c, 30)
	pub, err := queue.NewPublisher(c, queue.PublisherConfig{QueueURL: qs.Results.URL})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pub.Close() })
	led := ledger.New(rc, prefix, oneSKU{SKU: "P", Version: 1, Lots: []ledger.Lot{{
		LotID: "P1", Kind: ledger.KindOnHand, Good: true, BestBefore: "2027-01-01", RegSeq: 1,
		ValidFrom: "2026-01-01", ValidTo: "2027-12-31", Sellable: 10,
	}}}, ledger.Config{})
	dlq := func(ctx context.Context, body []byte, reason string) error {
		return queue.DeadLetter(ctx, c, qs.Orders.DLQURL, body, reason, nil)
	}
	p, err := NewProcessor(rc, led, pub, dlq, Config{Prefix: prefix, ParkTimeout: time.Hour}, nil, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	rc.Set(ctx, lockhandoff.Key(prefix, "O", "lock"), "tok", 0)
	seq := int64(0)
	handle := func(e event.Order, token string, at time.Time) error {
		seq++
		p.now = func() time.Time { return at }
		body, _ := json.Marshal(e)
		return p.Handle(ctx, lockhandoff.Turn{Entity: "O", Seq: seq, Token: token}, body)
	}
	order := func(id string, typ event.Type, data any) event.Order {
		e := event.Order{EventID: id, Type: typ, LCID: "O", OccurredAt: t0}
		if data != nil {
			e.Data, _ = json.Marshal(data)
		}
		return e
	}
	place := order("e-place", event.OrderPlaced, event.OrderData{Mode: ledger.ModeShip, TargetDate: "2026-12-01", Lines: []event.Line{{LineID: "1", SKU: "P", Qty: 2}}})
	if err := handle(place, "tok", t0); err != nil {
		t.Fatal(err)
	}
	if err := handle(order("e-ship", event.OrderShipped, nil), "tok", t0); err != nil { // parked: unpaid
		t.Fatal(err)
	}
	pay := order("e-pay", event.PaymentConfirmed, nil)
	// Just before the deadline: the payment applies and the parked shipment with it, but
	// the commit is refused (the turn was lost).
	if err := handle(pay, "stale", t0.Add(time.Hour-time.Second)); !errors.Is(err, ErrFenced) {
		t.Fatalf("commit with a stale token: %v, want ErrFenced", err)
	}
	// The re-run, just after the deadline.
	if err := handle(pay, "tok", t0.Add(time.Hour+time.Second)); err != nil {
		t.Fatal(err)
	}
	st, err := p.Load(ctx, "O")
	if err != nil {
		t.Fatal(err)
	}
	snap, err := led.Snapshot(ctx, "P")
	if err != nil {
		t.Fatal(err)
	}
	if shipped := snap.Lots[0].Shipped; st.Order.Status != event.StatusShipped || shipped != 2 {
		t.Errorf("order %s with %d parked, ledger shipped %d; want shipped and 2", st.Order.Status, len(st.Parked), shipped)
	}
}
