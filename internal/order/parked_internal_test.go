package order

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/junban/junban/internal/domain"
	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/ledger"
	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/lockhandoff"
	"github.com/junban/junban/internal/queue"
	"github.com/junban/junban/internal/testenv"
)

type oneSKU stock.SKU

func (s oneSKU) LoadSKU(_ context.Context, sku string) (stock.SKU, error) {
	if sku != s.SKU {
		return stock.SKU{}, fmt.Errorf("sku=%s: %w", sku, stock.ErrUnknownSKU)
	}
	return stock.SKU(s), nil
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
	p, led, rc, prefix, _ := newParkedFixture(t)
	t0 := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	rc.Set(ctx, lockhandoff.Key(prefix, "O", "lock"), "tok", 0)
	seq := int64(0)
	handle := func(e event.Order, token string, at time.Time) error {
		seq++
		p.now = func() time.Time { return at }
		body, _ := json.Marshal(e)
		_, err := p.Step(ctx, lockhandoff.Turn{Entity: "O", Seq: seq, Token: token}, body)
		return err
	}
	order := func(id string, typ event.Type, data any) event.Order {
		e := event.Order{EventID: id, Type: typ, LCID: "O", OccurredAt: t0}
		if data != nil {
			e.Data, _ = json.Marshal(data)
		}
		return e
	}
	place := order("e-place", event.OrderPlaced, event.OrderData{Mode: stock.ModeShip, TargetDate: "2026-12-01", Lines: []event.Line{{LineID: "1", SKU: "P", Qty: 2}}})
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

// newParkedFixture is a processor with a ParkTimeout of an hour over a real ledger of one
// SKU, P (lot P1, 10 units), a real results queue and a real orders DLQ.
func newParkedFixture(t *testing.T) (*Processor, *ledger.Ledger, redis.UniversalClient, string, testenv.Queues) {
	t.Helper()
	rc, prefix := testenv.Redis(t)
	c := testenv.SQS(t)
	qs := testenv.NewQueues(t, c, 30)
	pub, err := queue.NewPublisher(queue.PublisherConfig{Client: c, QueueURL: qs.Results.URL})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pub.Stop(context.Background()) })
	led, err := ledger.New(ledger.Config{Redis: rc, Prefix: prefix, Loader: oneSKU{SKU: "P", Version: 1, Lots: []stock.Lot{{
		LotID: "P1", Kind: stock.KindOnHand, Good: true, BestBefore: "2027-01-01", RegSeq: 1,
		ValidFrom: "2026-01-01", ValidTo: "2027-12-31", Sellable: 10,
	}}}})
	if err != nil {
		t.Fatal(err)
	}
	dlq := func(ctx context.Context, body []byte, reason string, attrs map[string]string) error {
		return queue.DeadLetter(ctx, c, qs.Orders.DLQURL, body, reason, attrs, queue.Keys{})
	}
	p, err := New(Config{Redis: rc, Ledger: led, Publisher: pub, DeadLetter: dlq, Registerer: prometheus.NewRegistry(), Prefix: prefix, ParkTimeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return p, led, rc, prefix, qs
}

// A parked event that no longer decodes (parked before a rule of Decode tightened) is
// dead-lettered with its reason; the order's events go on.
//
// Broken variant tried: without deadLetterUndecodable, every event of the order failed
// on "parked event no longer decodes".
func TestUndecodableParkedEventIsDeadLettered(t *testing.T) {
	ctx := context.Background()
	p, _, rc, prefix, qs := newParkedFixture(t)
	tooLong := `{"event_id":"` + strings.Repeat("e", event.MaxIDLength+1) + `","type":"order.shipped","lcid":"O"}`
	st := domain.State{Seq: 1, Order: &event.OrderSnapshot{LCID: "O", Status: event.StatusPlaced},
		Parked: []domain.Parked{{Body: json.RawMessage(tooLong), Arrival: 1, ParkedAt: time.Now()}}}
	raw, _ := json.Marshal(st)
	rc.Set(ctx, StateKey(prefix, "O"), raw, 0)
	rc.Set(ctx, lockhandoff.Key(prefix, "O", "lock"), "tok", 0)
	pay, _ := json.Marshal(event.Order{EventID: "e-pay", Type: event.PaymentConfirmed, LCID: "O", OccurredAt: time.Now()})
	if _, err := p.Step(ctx, lockhandoff.Turn{Entity: "O", Seq: 2, Token: "tok"}, pay); err != nil {
		t.Fatal(err)
	}
	got, err := p.Load(ctx, "O")
	if err != nil {
		t.Fatal(err)
	}
	if !got.Order.Paid || len(got.Parked) != 0 {
		t.Errorf("paid %v with %d parked; want paid and the undecodable event gone", got.Order.Paid, len(got.Parked))
	}
	out, err := testenv.SQS(t).ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl: &qs.Orders.DLQURL, MessageAttributeNames: []string{"All"}, WaitTimeSeconds: 2,
	})
	if err != nil || len(out.Messages) != 1 {
		t.Fatalf("orders DLQ: %v %d messages, want the parked event", err, len(out.Messages))
	}
	if r := out.Messages[0].MessageAttributes[queue.AttrDLQReason]; r.StringValue == nil || *r.StringValue != domain.ReasonIDTooLong {
		t.Errorf("DLQ reason %v, want %s", r.StringValue, domain.ReasonIDTooLong)
	}
}
