package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/platform/config"
	"github.com/junban/junban/internal/queue"
	"github.com/junban/junban/internal/testenv"
)

// placedResult is LC's order.placed result under the event id dup-1 (its line allocated
// one unit of sku under the op id the order-worker gives it), at seq.
func placedResult(lcid, sku string, seq int64) event.Result {
	return event.Result{
		EventID: "dup-1", Entity: lcid, LCID: lcid, Seq: seq, Type: event.OrderPlaced, Outcome: event.Applied,
		ProcessedAt: time.Now().UTC(), Order: &event.OrderSnapshot{LCID: lcid, Status: event.StatusPlaced},
		SKUs: []stock.SKU{{SKU: sku, Version: 2, Lots: []stock.Lot{{LotID: sku + "-L1", Kind: stock.KindOnHand, Good: true,
			ValidFrom: "2026-01-01", ValidTo: "2027-12-31", Sellable: 9, Allocated: 1}}}},
		Moves: []stock.Move{{OpID: "dup-1:1:alloc", SKU: sku, LotID: sku + "-L1", From: "sellable", To: "allocated", Qty: 1, Version: 2}},
	}
}

// Through SQS and the worker: two orders' results that share the event id dup-1 are both
// persisted (inbox rows, orders and moves); a redelivery is deleted as a duplicate; a
// result of LC-P1 under dup-1 with another seq goes to the results DLQ with a reason that
// names LC-P1 and dup-1, is logged at error and counted. Against the inbox keyed by
// event_id alone, LC-P2's result was deleted as a duplicate and the other one too, with
// no DLQ message and no log line.
func TestWorkerKeepsOrdersSharingAnEventID(t *testing.T) {
	ctx := context.Background()
	dbURL := testenv.PostgresURL(t)
	db, err := config.Postgres{URL: dbURL}.Open()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if s, err := db.DB(); err == nil {
			s.Close()
		}
	})
	c := testenv.SQS(t)
	qs := testenv.NewQueues(t, c, 10)
	w := startWorker(t, "DATABASE_URL="+dbURL,
		"JUNBAN_RESULTS_QUEUE="+qs.ResultsName, "JUNBAN_RESULTS_DLQ="+qs.ResultsDLQName,
		"JUNBAN_PERSIST_VISIBILITY=6s", "JUNBAN_SQS_WAIT_SECONDS=1")
	testenv.WaitFor(t, 30*time.Second, "the worker to be ready", func() bool { code, _ := w.get("/readyz"); return code == 200 })

	p1, p2 := placedResult("LC-P1", "P", 1), placedResult("LC-P2", "Q", 1)
	send(t, c, qs.Results.URL, []event.Result{p1, p2})
	testenv.WaitFor(t, 30*time.Second, "both orders' results in the inbox", func() bool { return count(t, db, "inbox") == 2 })
	// Sent after the first two were applied, so that the first copy is the one kept.
	send(t, c, qs.Results.URL, []event.Result{p2, placedResult("LC-P1", "P", 2)})

	var reason string
	testenv.WaitFor(t, 30*time.Second, "the other result of LC-P1 and dup-1 in the DLQ", func() bool {
		out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(qs.Results.DLQURL),
			MaxNumberOfMessages: 10, WaitTimeSeconds: 1, MessageAttributeNames: []string{"All"}})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range out.Messages {
			if a, ok := m.MessageAttributes[queue.AttrDLQReason]; ok {
				reason = aws.ToString(a.StringValue)
			}
			if !strings.Contains(aws.ToString(m.Body), `"seq":2`) {
				t.Errorf("DLQ holds %s, want only LC-P1's result at seq 2", aws.ToString(m.Body))
			}
		}
		return reason != ""
	})
	for _, want := range []string{"LC-P1", "dup-1", "seq 1, this one 2"} {
		if !strings.Contains(reason, want) {
			t.Errorf("DLQ reason %q does not name %q", reason, want)
		}
	}
	_, metrics := w.get("/metrics")
	testenv.WaitFor(t, 30*time.Second, "the redelivery counted as a duplicate", func() bool {
		_, metrics = w.get("/metrics")
		return strings.Contains(metrics, `junban_persist_results_total{status="duplicate"} 1`)
	})
	for _, want := range []string{`junban_persist_results_total{status="applied"} 2`, `junban_persist_results_total{status="conflict"} 1`,
		`junban_persist_identity_conflicts_total{table="inbox"} 1`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	var logged bool
	for _, l := range strings.Split(w.out.String(), "\n") {
		if strings.Contains(l, "ERROR") && strings.Contains(l, "dup-1") && strings.Contains(l, "LC-P1") {
			logged = true
		}
	}
	if !logged {
		t.Error("no error line names dup-1 and LC-P1")
	}
	var rows []string
	if err := db.Raw(`SELECT i.entity || ' ' || i.seq || ' ' || o.lcid || ' ' || m.sku FROM inbox i
		JOIN orders o ON o.lcid = i.entity JOIN moves m ON m.entity = i.entity AND m.event_id = i.event_id
		WHERE i.event_id = 'dup-1' ORDER BY i.entity`).Scan(&rows).Error; err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(rows, "; "), "LC-P1 1 LC-P1 P; LC-P2 1 LC-P2 Q"; got != want {
		t.Errorf("dup-1's inbox rows, orders and moves: %q, want %q", got, want)
	}
}
