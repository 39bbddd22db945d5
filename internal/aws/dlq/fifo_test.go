package dlq

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/junban/junban/internal/queue"
	"github.com/junban/junban/internal/testenv"
)

// deadLetter is queue.DeadLetter with a group and a deduplication id of the message's own,
// as if each message were another entity's: on a FIFO DLQ no message waits for another.
func deadLetter(ctx context.Context, c *sqs.Client, url string, body []byte, reason string, attrs map[string]string) error {
	return queue.DeadLetter(ctx, c, url, body, reason, attrs, queue.Keys{Group: "g-" + testenv.ID(), Dedup: testenv.ID()})
}

// On FIFO queues a redrive sends each message in the group it had in the DLQ, in the
// group's order, with its DLQ message id as its deduplication id.
func TestRedriveKeepsTheGroupOnFIFO(t *testing.T) {
	c := testenv.SQS(t)
	q := testenv.NewFIFOQueues(t, c, 5)
	ctx := context.Background()
	sent := map[string][]string{"LC-1": {"first", "second", "third"}, "LC-2": {"other"}}
	for _, group := range slices.Sorted(maps.Keys(sent)) {
		for i, body := range sent[group] {
			keys := queue.Keys{Group: group, Dedup: fmt.Sprintf("%s-%d", group, i)}
			if err := queue.DeadLetter(ctx, c, q.Orders.DLQURL, []byte(body), "ERR_TEST", nil, keys); err != nil {
				t.Fatal(err)
			}
		}
	}
	// On a FIFO queue List sees the first message of each group (SQS, fauxqs): none of a
	// group is delivered while one of its messages is in flight, as List's are until it
	// ends. local-aws-sqs delivers them all.
	listed, _, err := List(ctx, c, q.Orders.DLQURL, 10)
	if err != nil {
		t.Fatal(err)
	}
	dlqIDs := map[string]string{}
	for _, m := range listed {
		dlqIDs[m.Body] = m.ID
	}
	if dlqIDs["first"] == "" || dlqIDs["other"] == "" {
		t.Fatalf("List on a FIFO DLQ gave %v, want at least the first message of each group", dlqIDs)
	}
	rep, err := Redrive(ctx, c, sqsConfig(q), RedriveOptions{DLQ: q.OrdersDLQName})
	if err != nil || rep.Moved[q.OrdersName] != 4 {
		t.Fatalf("redrive: moved %v, %v; want 4", rep.Moved, err)
	}
	got := map[string][]string{}
	dedups := map[string]bool{}
	for {
		out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(q.Orders.URL), MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
			AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameAll}})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Messages) == 0 {
			break
		}
		for _, m := range out.Messages {
			body := aws.ToString(m.Body)
			group := m.Attributes[string(types.MessageSystemAttributeNameMessageGroupId)]
			got[group] = append(got[group], body)
			dedup := m.Attributes[string(types.MessageSystemAttributeNameMessageDeduplicationId)]
			if id, ok := dlqIDs[body]; ok && dedup != id || dedup == "" || dedups[dedup] {
				t.Errorf("%s: deduplication id %q, want its DLQ message id (%q for the ones listed)", body, dedup, id)
			}
			dedups[dedup] = true
			if _, err := c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(q.Orders.URL), ReceiptHandle: m.ReceiptHandle}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if !maps.EqualFunc(got, sent, slices.Equal) {
		t.Fatalf("the orders queue got %v by group, want %v", got, sent)
	}
}
