package e2e_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/junban/junban/internal/aws/topics"
	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/postgres/persist"
	"github.com/junban/junban/internal/testenv"
	"github.com/junban/junban/internal/testenv/loadgen"
)

// Orders published to real SNS topics reach PostgreSQL: the orders queue is subscribed
// (junbanctl topics subscribe's code) to one topic with raw delivery, to one without (the
// worker unwraps the notification) and to one whose filter policy takes order.placed
// only; what that filter drops (a payment) never arrives.
func TestOrdersThroughSNSTopics(t *testing.T) {
	sn := testenv.SNS(t)
	f := startFleet(t, testenv.NewQueues)
	ctx := context.Background()
	run := "T" + testenv.ID()
	sku := run + "-SKU"
	if err := loadgen.Import(ctx, f.db, []stock.SKU{{SKU: sku, Lots: []stock.Lot{{
		LotID: "L1", Kind: stock.KindOnHand, Good: true, BestBefore: "2027-01-01", RegSeq: 1,
		ValidFrom: "2026-01-01", ValidTo: "2027-12-31", Sellable: 1000}}}}); err != nil {
		t.Fatal(err)
	}

	raw, wrapped, filtered := testenv.Topic(t, sn), testenv.Topic(t, sn), testenv.Topic(t, sn)
	for _, spec := range []topics.Spec{
		{TopicARN: raw, Raw: true},
		{TopicARN: wrapped},
		{TopicARN: filtered, Types: []string{string(event.OrderPlaced)}},
	} {
		spec.QueueURL = f.queues.Orders.URL
		if _, err := topics.Subscribe(ctx, sn, f.sqs, spec); err != nil {
			t.Fatal(err)
		}
	}

	ev := func(id string, typ event.Type, lcid string, data string) []byte {
		e := event.Order{EventID: run + "-" + id, Type: typ, LCID: run + "-" + lcid, OccurredAt: time.Now().UTC()}
		if data != "" {
			e.Data = json.RawMessage(data)
		}
		b, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	lines := `{"mode":"ship","target_date":"2026-12-01","lines":[{"line_id":"1","sku":"` + sku + `","qty":2}]}`
	publish := func(topic string, events ...[]byte) {
		t.Helper()
		if err := topics.Publish(ctx, sn, topic, events); err != nil {
			t.Fatal(err)
		}
	}
	publish(raw, ev("placed-a", event.OrderPlaced, "A", lines), ev("paid-a", event.PaymentConfirmed, "A", ""))
	publish(wrapped, ev("placed-b", event.OrderPlaced, "B", lines), ev("paid-b", event.PaymentConfirmed, "B", ""))
	publish(filtered, ev("paid-c", event.PaymentConfirmed, "C", ""), ev("placed-c", event.OrderPlaced, "C", lines))

	want := []string{"placed-a", "paid-a", "placed-b", "paid-b", "placed-c"}
	for i := range want {
		want[i] = run + "-" + want[i]
	}
	var inbox []persist.InboxRow
	testenv.WaitFor(t, 2*time.Minute, "the events' results in PostgreSQL", func() bool {
		inbox = nil
		if err := f.db.Where("event_id LIKE ?", run+"-%").Find(&inbox).Error; err != nil {
			t.Fatal(err)
		}
		return len(inbox) >= len(want)
	})
	f.settle(t)
	if err := f.db.Where("event_id LIKE ?", run+"-%").Find(&inbox).Error; err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range inbox {
		got = append(got, r.EventID)
		if r.Outcome != event.Applied {
			t.Errorf("%s: %s/%s", r.EventID, r.Outcome, r.Reason)
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("results in PostgreSQL for %v, want %v (the filtered payment never)", got, want)
	}
	var orders []persist.OrderRow
	if err := f.db.Where("lcid LIKE ?", run+"-%").Order("lcid").Find(&orders).Error; err != nil {
		t.Fatal(err)
	}
	if len(orders) != 3 || !orders[0].Paid || !orders[1].Paid || orders[2].Paid {
		t.Fatalf("orders in PostgreSQL %+v: want A and B paid, C not (its payment was filtered out)", orders)
	}
}
