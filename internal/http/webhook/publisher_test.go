package webhook_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/junban/junban/internal/domain"
	"github.com/junban/junban/internal/http/webhook"
	"github.com/junban/junban/internal/queue"
	"github.com/junban/junban/internal/testenv"
)

// On a FIFO orders queue the gateway's event goes in its order's group, deduplicated by
// its identity: a second publish of it within five minutes is accepted and dropped.
// Without Keys the send is refused before it reaches SQS.
func TestSQSPublisherOnAFIFOQueue(t *testing.T) {
	t.Parallel()
	c := testenv.SQS(t)
	q := testenv.NewFIFOQueues(t, c, 30).Orders
	ctx := context.Background()
	body := []byte(`{"event_id":"evt_pay_1","type":"payment.confirmed","lcid":"LC-FIFO-1","occurred_at":"2026-12-01T10:00:00Z"}`)
	pub := webhook.SQSPublisher{Client: c, QueueURL: q.URL, Keys: domain.OrderKeys}
	for range 2 {
		if err := pub.Publish(ctx, body); err != nil {
			t.Fatal(err)
		}
	}
	if err := (webhook.SQSPublisher{Client: c, QueueURL: q.URL}).Publish(ctx, body); !errors.Is(err, queue.ErrNoGroupID) {
		t.Fatalf("without Keys: %v, want ErrNoGroupID", err)
	}
	var got []types.Message
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(q.URL), MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
			AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameAll}})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Messages) == 0 && len(got) > 0 {
			break
		}
		for _, m := range out.Messages {
			got = append(got, m)
			c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(q.URL), ReceiptHandle: m.ReceiptHandle})
		}
	}
	if len(got) != 1 {
		t.Fatalf("the queue got %d messages, want the event once", len(got))
	}
	a := got[0].Attributes
	if g, d := a[string(types.MessageSystemAttributeNameMessageGroupId)], a[string(types.MessageSystemAttributeNameMessageDeduplicationId)]; g != "LC-FIFO-1" || d != "{LC-FIFO-1}evt_pay_1" {
		t.Fatalf("group %q, deduplication id %q", g, d)
	}
}
