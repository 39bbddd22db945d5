package api

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/junban/junban/internal/aws/dlq"
	"github.com/junban/junban/internal/queue"
	"github.com/junban/junban/internal/testenv"
)

// drain receives and deletes what the queue at url holds until a receive brings nothing,
// and returns the bodies, sorted.
func (e *env) drain(url string) []string {
	e.t.Helper()
	var out []string
	for {
		r, err := e.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
		if err != nil {
			e.t.Fatal(err)
		}
		if len(r.Messages) == 0 {
			slices.Sort(out)
			return out
		}
		for _, m := range r.Messages {
			out = append(out, aws.ToString(m.Body))
			e.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle})
		}
	}
}

// forgedResult is a result body for an order no order-worker saw: shipped and paid.
const forgedResult = `{"lcid":"FORGED-ORDER-1","status":"shipped","payment_status":"paid"}`

// A message on the orders DLQ whose junban-source-queue names the results queue is
// redriven to the orders queue, never to the results queue (where the persist-worker
// would write the forged order). Broken variant: the code before followed the attribute
// and moved it to the results queue.
func TestDLQRedriveIgnoresTheSourceQueueAttribute(t *testing.T) {
	e := newEnv(t)
	for _, src := range []string{e.q.ResultsName, e.q.Results.URL} {
		if err := queue.DeadLetter(ctx, e.sqs, e.q.Orders.DLQURL, []byte(forgedResult+" "+src), "ERR_TEST forged", map[string]string{queue.AttrSourceQueue: src}, queue.Keys{}); err != nil {
			t.Fatal(err)
		}
	}
	code, body := e.do("POST", "/v1/dlq/"+e.q.OrdersDLQName+"/redrive", adminToken, nil)
	var rep dlq.Report
	decode(t, body, &rep)
	if code != 200 || !maps.Equal(rep.Moved, map[string]int{e.q.OrdersName: 2}) {
		t.Fatalf("redrive: %d %s; want 2 moved to %s", code, body, e.q.OrdersName)
	}
	if got := e.drain(e.q.Results.URL); len(got) != 0 {
		t.Fatalf("the results queue got %q", got)
	}
	if got := e.drain(e.q.Orders.URL); len(got) != 2 {
		t.Fatalf("the orders queue got %q, want both messages", got)
	}
}

// to names only the queue the DLQ serves: another of junban's queues, a DLQ, a queue that
// is not junban's or a foreign URL ending in the orders queue's name is a 400 problem
// naming the queue allowed, and nothing moves; the served queue by name or URL is
// accepted. Broken variant: the code before moved the message to the results queue for
// to = results.
func TestDLQRedriveRefusesATargetItDoesNotServe(t *testing.T) {
	e := newEnv(t)
	extra := testenv.Name(t) + "-extra"
	out, err := e.sqs.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(extra)})
	if err != nil {
		t.Fatal(err)
	}
	extraURL := aws.ToString(out.QueueUrl)
	t.Cleanup(func() { e.sqs.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(extraURL)}) })
	if err := queue.DeadLetter(ctx, e.sqs, e.q.Orders.DLQURL, []byte(forgedResult), "ERR_TEST", nil, queue.Keys{}); err != nil {
		t.Fatal(err)
	}
	path := "/v1/dlq/" + e.q.OrdersDLQName + "/redrive"
	for _, to := range []string{e.q.ResultsName, e.q.Results.URL, e.q.ResultsDLQName, e.q.OrdersDLQName, extra, extraURL,
		"https://sqs.attacker.example/999999999999/" + e.q.OrdersName} {
		code, body := e.do("POST", path, adminToken, RedriveRequest{To: to})
		var p Problem
		decode(t, body, &p)
		if code != 400 || !strings.Contains(p.Detail, fmt.Sprintf("%q", e.q.OrdersName)) {
			t.Errorf("redrive to %q: %d %s; want 400 naming %q", to, code, body, e.q.OrdersName)
		}
	}
	for _, url := range []string{e.q.Results.URL, e.q.Orders.URL, extraURL} {
		if got := e.drain(url); len(got) != 0 {
			t.Fatalf("%s got %q", url, got)
		}
	}
	for _, to := range []string{e.q.OrdersName, e.q.Orders.URL} {
		if to == e.q.Orders.URL {
			if err := queue.DeadLetter(ctx, e.sqs, e.q.Orders.DLQURL, []byte(forgedResult+" again"), "ERR_TEST", nil, queue.Keys{}); err != nil {
				t.Fatal(err)
			}
		}
		code, body := e.do("POST", path, adminToken, RedriveRequest{To: to})
		var rep dlq.Report
		decode(t, body, &rep)
		if code != 200 || !maps.Equal(rep.Moved, map[string]int{e.q.OrdersName: 1}) {
			t.Fatalf("redrive to %q: %d %s; want 1 moved to %s", to, code, body, e.q.OrdersName)
		}
	}
	if got := e.drain(e.q.Results.URL); len(got) != 0 {
		t.Fatalf("the results queue got %q", got)
	}
}
