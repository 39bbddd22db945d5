package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/junban/junban/internal/domain"
	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/ledger"
	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/postgres/inventorydb"
	"github.com/junban/junban/internal/testenv"
	"github.com/junban/junban/internal/testenv/loadgen"
)

// sendRaw puts each body on the orders queue as it is.
func (f *fleet) sendRaw(bodies ...string) {
	f.t.Helper()
	for _, b := range bodies {
		if _, err := f.sqs.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(f.queues.Orders.URL), MessageBody: aws.String(b)}); err != nil {
			f.t.Fatal(err)
		}
	}
}

// deadLettered reads the orders DLQ until it held want messages (or wait passed) and
// returns each body's reason attribute, and how many copies of each body it found.
func (f *fleet) deadLettered(want int, wait time.Duration) (reasons map[string]string, copies map[string]int) {
	f.t.Helper()
	ctx := context.Background()
	reasons, copies = map[string]string{}, map[string]int{}
	for n, deadline := 0, time.Now().Add(wait); n < want && time.Now().Before(deadline); {
		out, err := f.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(f.queues.Orders.DLQURL), MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
			MessageAttributeNames: []string{"All"},
		})
		if err != nil {
			f.t.Fatal(err)
		}
		for _, m := range out.Messages {
			body := aws.ToString(m.Body)
			reasons[body] = aws.ToString(m.MessageAttributes["junban-dlq-reason"].StringValue)
			copies[body]++
			n++
			f.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(f.queues.Orders.DLQURL), ReceiptHandle: m.ReceiptHandle})
		}
	}
	return reasons, copies
}

func boundsInventory(skus ...string) loadgen.Workload {
	var w loadgen.Workload
	for _, s := range skus {
		w.Inventory = append(w.Inventory, stock.SKU{SKU: s, Lots: []stock.Lot{{
			LotID: "L1", Kind: stock.KindOnHand, Good: true, BestBefore: "2027-01-01", RegSeq: 1,
			ValidFrom: "2026-01-01", ValidTo: "2027-12-31", Sellable: 10_000}}})
	}
	return w
}

// The order: 2,500 lines on one SKU (121 KB, well inside SQS's limit), whose
// result (1.2 MB) could never be published, so its order waited behind it for ever. It
// goes to the DLQ with its own reason at decode, moves no stock, and the order's next
// events apply.
func TestTooManyLinesGoToTheDLQAndTheOrderGoesOn(t *testing.T) {
	f := newFleet(t)
	run := testenv.ID()
	sku, lcid := "TL-SKU-"+run, "TL-"+run
	f.seed(boundsInventory(sku))
	f.start(1)

	d := event.OrderData{Mode: stock.ModeShip, TargetDate: "2026-12-01"}
	for i := range 2500 {
		d.Lines = append(d.Lines, event.Line{LineID: fmt.Sprintf("line-%04d", i), SKU: sku, Qty: 1})
	}
	data, _ := json.Marshal(d)
	big, _ := json.Marshal(event.Order{EventID: "big-" + run, Type: event.OrderPlaced, LCID: lcid, OccurredAt: time.Now().UTC(), Data: data})
	if len(big) > domain.MaxEventBytes {
		t.Fatalf("the order is %d bytes: it would be refused for its size", len(big))
	}
	f.sendRaw(string(big))
	reasons, copies := f.deadLettered(1, time.Minute)
	if got := reasons[string(big)]; !strings.HasPrefix(got, domain.ReasonTooManyLines) {
		t.Fatalf("DLQ reason %q (copies %d), want %s", got, copies[string(big)], domain.ReasonTooManyLines)
	}

	// The same order's next events: a placement within the bound, then its payment.
	next := event.Order{EventID: "small-" + run, Type: event.OrderPlaced, LCID: lcid, OccurredAt: time.Now().UTC(),
		Data: json.RawMessage(`{"mode":"ship","target_date":"2026-12-01","lines":[{"line_id":"1","sku":"` + sku + `","qty":3},{"line_id":"2","sku":"` + sku + `","qty":4}]}`)}
	paid := event.Order{EventID: "paid-" + run, Type: event.PaymentConfirmed, LCID: lcid, OccurredAt: time.Now().UTC()}
	f.send([]event.Order{next, paid})
	f.collect(map[string]bool{next.EventID: true, paid.EventID: true}, time.Minute, nil)
	if r := f.results[next.EventID][0]; r.Outcome != event.Applied {
		t.Fatalf("the order's next placement: %s/%s", r.Outcome, r.Reason)
	}
	if r := f.results[paid.EventID][0]; r.Outcome != event.Applied || !r.Order.Paid {
		t.Fatalf("its payment: %s/%s paid=%v", r.Outcome, r.Reason, r.Order != nil && r.Order.Paid)
	}
	if _, ok := f.results["big-"+run]; ok {
		t.Fatal("the refused order has a result")
	}
	// Only the small placement holds stock: the refused one allocated nothing.
	led, err := ledger.New(ledger.Config{Redis: f.rc, Prefix: f.prefix, Loader: inventorydb.PGLoader{DB: f.db}})
	if err != nil {
		t.Fatal(err)
	}
	s, err := led.Snapshot(context.Background(), sku)
	if err != nil {
		t.Fatal(err)
	}
	if l := s.Lots[0]; l.Allocated != 7 || l.Reserved != 0 || l.Sellable != 10_000-7 {
		t.Fatalf("lot after the refused order and the small one: %+v, want 7 allocated", l)
	}
}

// Ids no event may carry (a brace breaks the hash tag of the keys an lcid or SKU names; a
// control character or NUL the ledger's text records): each goes to the DLQ with
// ERR_INVALID_ID once, at decode, never into a retry loop (a SKU with a brace on an
// inventory event used to reach lockhandoff.CheckEntity and be retried), and the worker
// goes on with the next message.
func TestBadIDsGoToTheDLQOnceAndTheWorkerGoesOn(t *testing.T) {
	f := newFleet(t)
	run := testenv.ID()
	sku := "BI-SKU-" + run
	f.seed(boundsInventory(sku))
	f.start(1)

	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	placed := func(eventID, lcid, lineID, lineSKU string) string {
		return `{"event_id":` + q(eventID) + `,"type":"order.placed","lcid":` + q(lcid) + `,"data":{"mode":"ship","target_date":"2026-12-01","lines":[{"line_id":` + q(lineID) + `,"sku":` + q(lineSKU) + `,"qty":1}]}}`
	}
	bad := map[string]string{
		"event_id with a brace":       `{"event_id":"e{1}-` + run + `","type":"payment.confirmed","lcid":"BI-1"}`,
		"lcid with NUL":               placed("e2-"+run, "BI\x00-"+run, "1", sku),
		"line_id with a control char": placed("e3-"+run, "BI-3-"+run, "1\x1b", sku),
		"line sku with a brace":       placed("e4-"+run, "BI-4-"+run, "1", "{"+sku+"}"),
		"received sku with a brace":   `{"event_id":"e5-` + run + `","type":"inventory.received","data":{"sku":"{` + sku + `}","lot_id":"L1","best_before":"2027-01-01"}}`,
		"adjusted sku with a brace":   `{"event_id":"e6-` + run + `","type":"inventory.adjusted","data":{"sku":"a}b","lot_id":"L1","delta":-1,"reason":"count"}}`,
		"adjusted lot_id with DEL":    `{"event_id":"e7-` + run + `","type":"inventory.adjusted","data":{"sku":` + q(sku) + `,"lot_id":"L\u007f1","delta":-1,"reason":"count"}}`,
		"received lot_id with a tab":  `{"event_id":"e8-` + run + `","type":"inventory.received","data":{"sku":` + q(sku) + `,"lot_id":"L\t1","best_before":"2027-01-01"}}`,
	}
	for _, body := range bad {
		f.sendRaw(body)
	}
	good := event.Order{EventID: "good-" + run, Type: event.OrderPlaced, LCID: "BI-OK-" + run, OccurredAt: time.Now().UTC(),
		Data: json.RawMessage(`{"mode":"ship","target_date":"2026-12-01","lines":[{"line_id":"1","sku":"` + sku + `","qty":2}]}`)}
	f.send([]event.Order{good})

	reasons, copies := f.deadLettered(len(bad), time.Minute)
	for name, body := range bad {
		if got := reasons[body]; !strings.HasPrefix(got, domain.ReasonInvalidID) {
			t.Errorf("%s: DLQ reason %q, want %s", name, got, domain.ReasonInvalidID)
		}
	}
	f.collect(map[string]bool{good.EventID: true}, time.Minute, nil)
	if r := f.results[good.EventID][0]; r.Outcome != event.Applied {
		t.Errorf("the valid event after them: %s/%s", r.Outcome, r.Reason)
	}
	// Handled once: no copy comes back from the orders queue (a retried message would be
	// received again after its backoff and, after maxReceiveCount, land here once more
	// without junban's reason).
	f.settle()
	more, extra := f.deadLettered(1, 3*time.Second)
	for body := range more {
		t.Errorf("a second copy in the DLQ (%d): %.80q", extra[body], body)
	}
	for body, n := range copies {
		if n > 1 {
			t.Errorf("%d copies in the DLQ: %.80q", n, body)
		}
	}
}

// The worker refuses to start when the largest result JUNBAN_MAX_LINES allows would not
// fit in the results queue's messages, and says which setting to change.
func TestWorkerRefusesALinesBoundWhoseResultCannotFit(t *testing.T) {
	f := newFleet(t)
	if _, err := f.sqs.SetQueueAttributes(context.Background(), &sqs.SetQueueAttributesInput{
		QueueUrl: aws.String(f.queues.Results.URL), Attributes: map[string]string{"MaximumMessageSize": "65536"},
	}); err != nil {
		t.Fatal(err)
	}
	fit := domain.MaxLinesFitting(65536)
	for _, c := range []struct {
		lines  int
		starts bool
	}{{fit + 1, false}, {fit, true}} {
		env := append(f.env, fmt.Sprintf("JUNBAN_MAX_LINES=%d", c.lines), "JUNBAN_LOG_LEVEL=info")
		p := testenv.Start(t, fmt.Sprintf("order-worker-%d-lines", c.lines), f.bin, env)
		started := func() bool { return strings.Contains(p.Output(), "order-worker started") }
		testenv.WaitFor(t, 30*time.Second, "the worker to start or exit", func() bool { return started() || p.Exited() })
		switch {
		case c.starts && !started():
			t.Errorf("%d lines (the most that fit) on a 64 KiB results queue: not started: %s", c.lines, p.Output())
		case !c.starts && (!p.Exited() || !strings.Contains(p.Output(), fmt.Sprintf("JUNBAN_MAX_LINES=%d", c.lines))):
			t.Errorf("%d lines on a 64 KiB results queue: exited %v, output %s", c.lines, p.Exited(), p.Output())
		}
		p.Kill()
	}
}
