package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/order"
	"github.com/junban/junban/internal/testenv"
	"github.com/junban/junban/internal/testenv/loadgen"
)

// The runbook's advice for ERR_RESULT_TOO_LARGE works as written: an order whose result
// (one line over 300 one-unit lots with 200-byte ids, about 300 KB) does not fit a results
// queue of 256 KiB is quarantined; once the queue's MaximumMessageSize is raised to 1 MiB
// and the worker restarted, `junbanctl dlq redrive` applies it and its result is
// published. Broken variant: the bound fixed at 248 KiB whatever the queue allows (the
// redriven event was quarantined again).
func TestResultTooLargeAppliesAfterTheQueueIsRaisedAndTheEventRedriven(t *testing.T) {
	f := newFleet(t)
	run := testenv.ID()
	sku, lcid := "RB-SKU-"+run, "RB-"+run
	const lots = 300
	setMax := func(size int) {
		t.Helper()
		if _, err := f.sqs.SetQueueAttributes(context.Background(), &sqs.SetQueueAttributesInput{
			QueueUrl: aws.String(f.queues.Results.URL), Attributes: map[string]string{"MaximumMessageSize": fmt.Sprint(size)},
		}); err != nil {
			t.Fatal(err)
		}
	}
	setMax(256 * 1024)
	var w loadgen.Workload
	s := stock.SKU{SKU: sku}
	for i := range lots {
		s.Lots = append(s.Lots, stock.Lot{LotID: fmt.Sprintf("%03d-%s", i, strings.Repeat("l", stock.MaxIDLen-4)), Kind: stock.KindOnHand,
			Good: true, BestBefore: "2027-01-01", RegSeq: int64(i + 1), ValidFrom: "2026-01-01", ValidTo: "2027-12-31", Sellable: 1})
	}
	w.Inventory = append(w.Inventory, s)
	f.seed(w)
	f.start(1)

	placed := event.Order{EventID: "big-" + run, Type: event.OrderPlaced, LCID: lcid, OccurredAt: time.Now().UTC(),
		Data: json.RawMessage(fmt.Sprintf(`{"mode":"ship","target_date":"2026-12-01","lines":[{"line_id":"1","sku":%q,"qty":%d}]}`, sku, lots))}
	f.send([]event.Order{placed})

	ctx := context.Background()
	var reason string
	for deadline := time.Now().Add(90 * time.Second); reason == "" && time.Now().Before(deadline); {
		out, err := f.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(f.queues.Orders.DLQURL),
			MaxNumberOfMessages: 1, WaitTimeSeconds: 1, MessageAttributeNames: []string{"All"}})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range out.Messages {
			reason = aws.ToString(m.MessageAttributes["junban-dlq-reason"].StringValue)
			// Visible again at once, for the redrive below.
			f.sqs.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(f.queues.Orders.DLQURL), ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 0})
		}
	}
	if !strings.HasPrefix(reason, order.ReasonResultTooLarge) {
		t.Fatalf("orders DLQ reason %q, want %s on a 256 KiB results queue", reason, order.ReasonResultTooLarge)
	}

	// The runbook: raise the results queue's MaximumMessageSize, restart the worker, redrive.
	setMax(1024 * 1024)
	for _, p := range f.procs {
		p.Kill()
	}
	f.start(1)
	cmd := exec.Command(testenv.Binary(t, "junbanctl"), "dlq", "redrive", "--queue", f.queues.OrdersDLQName)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "JUNBAN_STACK_ENV=/nonexistent/stack.env",
		"JUNBAN_ORDERS_QUEUE=" + f.queues.OrdersName, "JUNBAN_ORDERS_DLQ=" + f.queues.OrdersDLQName,
		"JUNBAN_RESULTS_QUEUE=" + f.queues.ResultsName, "JUNBAN_RESULTS_DLQ=" + f.queues.ResultsDLQName}, testenv.Env(t)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("dlq redrive: %v\n%s", err, out)
	}
	f.collect(map[string]bool{placed.EventID: true}, time.Minute, nil)
	r := f.results[placed.EventID][0]
	if r.Outcome != event.Applied || len(r.Moves) < lots {
		t.Fatalf("the redriven order: %s/%s with %d moves, want applied over %d lots", r.Outcome, r.Reason, len(r.Moves), lots)
	}
	body, _ := json.Marshal(r)
	if len(body) <= order.MaxResultBytesDefault {
		t.Fatalf("the result is %d bytes: within the old bound, it proves nothing", len(body))
	}
}
