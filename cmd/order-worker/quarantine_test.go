package main_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/ledger"
	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/order"
	"github.com/junban/junban/internal/postgres/persist"
	"github.com/junban/junban/internal/testenv"
)

// An order whose second SKU's key in Redis is not a ledger hash (bad stock data: the
// ledger's script fails with WRONGTYPE, not a rejection) fails on every run. The worker quarantines it after
// JUNBAN_MAX_ATTEMPTS runs: the first line's allocation is undone, the event is in
// orders-dlq with ERR_MAX_ATTEMPTS and the load error, and a payment for another order
// goes through meanwhile. Once the row is fixed, `junbanctl dlq redrive` brings the event
// back and it applies once; Redis and PostgreSQL then agree.
func TestStuckOrderIsQuarantinedAndRedrivenOnce(t *testing.T) {
	f := newFleet(t)
	f.env = append(f.env, "JUNBAN_MAX_ATTEMPTS=3", "JUNBAN_QUARANTINE_MIN_AGE=0")
	for _, stmt := range []string{
		`INSERT INTO skus (sku, safety_stock, version) VALUES ('QA', 0, 1), ('QB', 0, 1)`,
		`INSERT INTO lots (sku, lot_id, kind, good, best_before, reg_seq, valid_from, valid_to, sellable, version)
		 VALUES ('QA', 'QA1', 'onhand', true, '2027-01-01', 1, '2026-01-01', '2027-12-31', 10, 1),
		        ('QB', 'QB1', 'onhand', true, '2027-01-01', 1, '2026-01-01', '2027-12-31', 10, 1)`,
	} {
		if err := f.db.Exec(stmt).Error; err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	if err := f.rc.RPush(ctx, ledger.Key(f.prefix, "QB"), "not a ledger").Err(); err != nil {
		t.Fatal(err)
	}
	f.start(1)
	stuck := event.Order{EventID: "q-place", Type: event.OrderPlaced, LCID: "Q-STUCK", OccurredAt: time.Now(),
		Data: json.RawMessage(`{"mode":"ship","target_date":"2026-12-01","lines":[{"line_id":"1","sku":"QA","qty":4},{"line_id":"2","sku":"QB","qty":1}]}`)}
	other := event.Order{EventID: "q-other", Type: event.OrderPlaced, LCID: "Q-OTHER", OccurredAt: time.Now(),
		Data: json.RawMessage(`{"mode":"ship","target_date":"2026-12-01","lines":[{"line_id":"1","sku":"QA","qty":1}]}`)}
	f.send([]event.Order{stuck, other})

	var reason string
	deadline := time.Now().Add(90 * time.Second)
	for reason == "" && time.Now().Before(deadline) {
		out, err := f.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(f.queues.Orders.DLQURL), MaxNumberOfMessages: 1, WaitTimeSeconds: 1,
			MessageAttributeNames: []string{"All"}, VisibilityTimeout: 0,
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range out.Messages {
			reason = aws.ToString(m.MessageAttributes["junban-dlq-reason"].StringValue)
			// Visible again at once, for the redrive below.
			f.sqs.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(f.queues.Orders.DLQURL), ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 0})
		}
	}
	if !strings.HasPrefix(reason, order.ReasonMaxAttempts+": 3 failed runs") || !strings.Contains(reason, "WRONGTYPE") {
		t.Fatalf("dlq reason %q", reason)
	}
	f.collect(map[string]bool{"q-other": true, "q-place~q1": true}, time.Minute, nil)
	if r := f.results["q-place~q1"][0]; r.Reason != order.ReasonQuarantined {
		t.Fatalf("quarantine result %+v", r)
	}
	led, err := ledger.New(ledger.Config{Redis: f.rc, Prefix: f.prefix})
	if err != nil {
		t.Fatal(err)
	}
	qa := func() stock.Lot {
		s, err := led.Snapshot(ctx, "QA")
		if err != nil {
			t.Fatal(err)
		}
		return s.Lots[0]
	}
	if l := qa(); l.Allocated != 1 || l.Sellable != 9 {
		t.Fatalf("QA after the quarantine: %+v (only the other order's unit stays allocated)", l)
	}

	if err := f.rc.Del(ctx, ledger.Key(f.prefix, "QB")).Err(); err != nil { // the fix: QB loads from PostgreSQL
		t.Fatal(err)
	}
	cmd := exec.Command(testenv.Binary(t, "junbanctl"), "dlq", "redrive", "--queue", f.queues.OrdersDLQName)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "JUNBAN_STACK_ENV=/nonexistent/stack.env",
		"JUNBAN_ORDERS_QUEUE=" + f.queues.OrdersName, "JUNBAN_ORDERS_DLQ=" + f.queues.OrdersDLQName,
		"JUNBAN_RESULTS_QUEUE=" + f.queues.ResultsName, "JUNBAN_RESULTS_DLQ=" + f.queues.ResultsDLQName}, testenv.Env(t)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("dlq redrive: %v\n%s", err, out)
	}
	f.collect(map[string]bool{"q-place": true}, time.Minute, nil)
	if r := f.results["q-place"][0]; r.Outcome != event.Applied {
		t.Fatalf("redriven placement: %+v", r)
	}
	if l := qa(); l.Allocated != 5 || l.Sellable != 5 {
		t.Fatalf("QA after the redrive: %+v (allocated once)", l)
	}
	var all []event.Result
	for _, rs := range f.results {
		all = append(all, rs...)
	}
	if _, err := persist.Apply(ctx, f.db, all); err != nil {
		t.Fatal(err)
	}
	rep, err := persist.Reconcile(ctx, persist.ReconcileConfig{DB: f.db, SKUs: led, Orders: order.NewStore(f.rc, f.prefix)})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Drifts) != 0 {
		t.Fatalf("drift: %v", rep.Drifts)
	}
}
