package persist_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/postgres/persist"
	"github.com/junban/junban/internal/queue"
	"github.com/junban/junban/internal/testenv"
	"github.com/junban/junban/internal/testenv/resultgen"
)

func sendBodies(t *testing.T, c *sqs.Client, url string, bodies []string) {
	t.Helper()
	for lo := 0; lo < len(bodies); lo += 10 {
		var entries []types.SendMessageBatchRequestEntry
		for i := lo; i < min(lo+10, len(bodies)); i++ {
			entries = append(entries, types.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(bodies[i])})
		}
		out, err := c.SendMessageBatch(context.Background(), &sqs.SendMessageBatchInput{QueueUrl: aws.String(url), Entries: entries})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Failed) > 0 {
			t.Fatalf("send: %s", aws.ToString(out.Failed[0].Message))
		}
	}
}

func bodies(t *testing.T, rs []event.Result) []string {
	t.Helper()
	out := make([]string, len(rs))
	for i, r := range rs {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = string(b)
	}
	return out
}

// A poison result (and a message that is no result at all) goes to the DLQ with its
// reason; the other results of its batch commit and their messages are deleted.
func TestConsumerPoisonToDLQ(t *testing.T) {
	cfg := resultgen.Config{Seed: 21, SKUs: 4, Active: 4}
	db := seeded(t, cfg)
	c := testenv.SQS(t)
	qs := testenv.NewQueues(t, c, 10)

	good := resultgen.New(cfg).Results(18)
	poison := good[4]
	poison.EventID = "evt-poison"
	poison.Moves = []stock.Move{{OpID: "op-poison", SKU: "S", LotID: "L", From: "sellable", To: "allocated", Qty: -1}}
	msgs := bodies(t, append(append([]event.Result(nil), good...), poison))
	msgs = append(msgs, `{"event_id": 12`)
	sendBodies(t, c, qs.Results.URL, msgs)

	h, err := persist.NewHandler(persist.HandlerConfig{DB: db})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var batches [][]queue.Outcome
	var handled int
	done := make(chan struct{})
	consumer, err := queue.NewBatchConsumer(queue.ConsumerConfig{
		Client:   c,
		QueueURL: qs.Results.URL, DLQURL: qs.Results.DLQURL, WaitTimeSeconds: 1,
		BatchMax: 50, BatchWindow: time.Second, ShutdownBudget: 5 * time.Second,
		BatchHandler: func(ctx context.Context, ms []queue.Message) []queue.Outcome {
			outs := h.HandleBatch(ctx, ms)
			mu.Lock()
			defer mu.Unlock()
			batches = append(batches, outs)
			if handled += len(ms); handled >= len(msgs) {
				select {
				case <-done:
				default:
					close(done)
				}
			}
			return outs
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- consumer.Run(ctx) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("the consumer did not handle every message")
	}
	cancel()
	if err := <-ran; err != nil {
		t.Fatal(err)
	}

	// Every poison shared its batch with good results, which were Done.
	for _, outs := range batches {
		var poisons, dones int
		for _, o := range outs {
			switch o.Verdict {
			case queue.Poison:
				poisons++
			case queue.Done:
				dones++
			}
		}
		if poisons > 0 && poisons+dones != len(outs) {
			t.Errorf("a batch with %d poison message(s) did not commit the rest: %+v", poisons, outs)
		}
	}
	var inbox int64
	db.Table("inbox").Count(&inbox)
	if inbox != int64(len(good)) {
		t.Errorf("inbox holds %d results, want %d", inbox, len(good))
	}

	dead := map[string]string{}
	deadline := time.Now().Add(20 * time.Second)
	for len(dead) < 2 && time.Now().Before(deadline) {
		out, err := c.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(qs.Results.DLQURL), MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
			MessageAttributeNames: []string{"All"},
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range out.Messages {
			dead[aws.ToString(m.Body)] = aws.ToString(m.MessageAttributes[queue.AttrDLQReason].StringValue)
		}
	}
	if len(dead) != 2 {
		t.Fatalf("DLQ holds %d messages, want 2: %v", len(dead), dead)
	}
	for body, reason := range dead {
		switch {
		case strings.Contains(body, "evt-poison"):
			if !strings.Contains(reason, "evt-poison") || !strings.Contains(reason, "moves") {
				t.Errorf("poison result's reason %q names neither the event nor the table", reason)
			}
		case strings.Contains(reason, "not a result"):
		default:
			t.Errorf("unexpected DLQ message %q (reason %q)", body, reason)
		}
	}
	attrs, err := c.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{
		QueueUrl:       aws.String(qs.Results.URL),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages, types.QueueAttributeNameApproximateNumberOfMessagesNotVisible},
	})
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range attrs.Attributes {
		if v != "0" {
			t.Errorf("results queue %s = %s, want 0 (every message deleted)", k, v)
		}
	}
}
