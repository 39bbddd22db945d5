package queue_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/junban/junban/internal/platform/config"
	"github.com/junban/junban/internal/queue"
	"github.com/junban/junban/internal/testenv"
)

// TestCountRequests: a client built with CountRequests counts the requests of known calls
// against the real emulator, and the messages they carried: a receive of an empty queue is
// one request and no message, a SendMessageBatch of 7 is one request of 7 entries, the
// receives that take those 7 carry 7 messages, their DeleteMessageBatch 7 entries, and a
// call SQS refuses is one request labelled with SQS's error code. Seen failing with the
// middleware not added (NewClient without its APIOptions line): every count was 0.
func TestCountRequests(t *testing.T) {
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	c, err := queue.NewClient(ctx, testenv.SQSConfig(t), queue.CountRequests(reg))
	if err != nil {
		t.Fatal(err)
	}
	q := testenv.NewQueues(t, testenv.SQS(t), 30)
	name, url := q.OrdersName, q.Orders.URL
	counts := func() counted { return gatherCounts(t, reg) }

	if _, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10}); err != nil {
		t.Fatal(err)
	}
	got := counts()
	got.want(t, "requests", name, "ReceiveMessage", "", 1)
	got.want(t, "messages", name, "ReceiveMessage", "", 0)

	entries := make([]types.SendMessageBatchRequestEntry, 7)
	for i := range entries {
		entries[i] = types.SendMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(i)), MessageBody: aws.String(fmt.Sprint("m", i))}
	}
	if _, err := c.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(url), Entries: entries}); err != nil {
		t.Fatal(err)
	}
	got = counts()
	got.want(t, "requests", name, "SendMessageBatch", "", 1)
	got.want(t, "messages", name, "SendMessageBatch", "", 7)

	var received []types.Message
	receives := 1 // the empty one above
	for deadline := time.Now().Add(20 * time.Second); len(received) < 7 && time.Now().Before(deadline); {
		out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
		if err != nil {
			t.Fatal(err)
		}
		receives++
		received = append(received, out.Messages...)
	}
	if len(received) != 7 {
		t.Fatalf("received %d of the 7 messages", len(received))
	}
	del := make([]types.DeleteMessageBatchRequestEntry, len(received))
	for i, m := range received {
		del[i] = types.DeleteMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(i)), ReceiptHandle: m.ReceiptHandle}
	}
	if _, err := c.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(url), Entries: del}); err != nil {
		t.Fatal(err)
	}
	got = counts()
	got.want(t, "requests", name, "ReceiveMessage", "", receives)
	got.want(t, "messages", name, "ReceiveMessage", "", 7)
	got.want(t, "requests", name, "DeleteMessageBatch", "", 1)
	got.want(t, "messages", name, "DeleteMessageBatch", "", 7)

	// A call SQS refuses (not retried): one request, labelled with the error.
	missing := name + "-missing"
	if _, err := c.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(missing)}); err == nil {
		t.Fatalf("GetQueueUrl of %s succeeded", missing)
	}
	got = counts()
	if n := got.errors(missing, "GetQueueUrl"); n != 1 {
		t.Fatalf("GetQueueUrl of a missing queue: %d failed requests counted, want 1 (%v)", n, got)
	}
}

// TestCountRequestsCountsAttempts: a call the SDK retries counts each attempt: a receive
// from an endpoint that refuses connections is the SDK's 3 attempts, each labelled
// "transport". Seen failing with the request middleware in the Initialize step (before
// the retry loop) instead of Finalize: it counted 1.
func TestCountRequestsCountsAttempts(t *testing.T) {
	// Credentials of its own: without any, the SDK would stop at looking for them (in
	// EC2's metadata service) and send nothing to count.
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	reg := prometheus.NewRegistry()
	c, err := queue.NewClient(context.Background(), config.SQS{Region: "us-east-1", Endpoint: "http://127.0.0.1:1"}, queue.CountRequests(reg))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String("http://127.0.0.1:1/000000000000/gone")})
	if err == nil {
		t.Fatal("a receive from a closed port succeeded")
	}
	attempts := c.Options().RetryMaxAttempts
	if attempts == 0 {
		attempts = 3 // the SDK's standard retryer
	}
	gatherCounts(t, reg).want(t, "requests", "gone", "ReceiveMessage", "transport", attempts)
}

// TestCountRequestsTwice: two clients on one registry share its series.
func TestCountRequestsTwice(t *testing.T) {
	reg := prometheus.NewRegistry()
	for range 2 {
		if _, err := queue.NewClient(context.Background(), testenv.SQSConfig(t), queue.CountRequests(reg)); err != nil {
			t.Fatal(err)
		}
	}
}

// counted maps "kind queue action error" to a counter's value.
type counted map[string]float64

func (c counted) want(t *testing.T, kind, queueName, action, errLabel string, n int) {
	t.Helper()
	if got := c[kind+" "+queueName+" "+action+" "+errLabel]; got != float64(n) {
		t.Fatalf("%s{queue=%s,action=%s,error=%q} = %v, want %d (all: %v)", kind, queueName, action, errLabel, got, n, c)
	}
}

// errors sums the failed requests of one queue and action, whatever their error.
func (c counted) errors(queueName, action string) int {
	n := 0
	for k, v := range c {
		var kind, q, a, e string
		if _, err := fmt.Sscan(k, &kind, &q, &a, &e); err == nil && kind == "requests" && q == queueName && a == action && e != "" {
			n += int(v)
		}
	}
	return n
}

func gatherCounts(t *testing.T, reg *prometheus.Registry) counted {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := counted{}
	for _, mf := range mfs {
		kind := map[string]string{"junban_sqs_requests_total": "requests", "junban_sqs_messages_total": "messages"}[mf.GetName()]
		if kind == "" {
			continue
		}
		for _, m := range mf.GetMetric() {
			out[kind+" "+label(m, "queue")+" "+label(m, "action")+" "+label(m, "error")] += m.GetCounter().GetValue()
		}
	}
	return out
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
