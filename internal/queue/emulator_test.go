package queue_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/junban/junban/internal/testenv"
)

// TestEmulatorWithSDK is issue 2's acceptance test: the real aws-sdk-go-v2 client against
// the local emulator — batch send, long-poll receive, change visibility, batch delete, and
// a message that lands in the DLQ after maxReceiveCount (5) receives.
func TestEmulatorWithSDK(t *testing.T) {
	t.Parallel()
	c := testenv.SQS(t)
	q := testenv.NewQueues(t, c, 30).Orders
	ctx := context.Background()

	var bodies []string
	for i := range 10 {
		bodies = append(bodies, "m"+strconv.Itoa(i))
	}
	sendBodies(t, c, q.URL, bodies...) // one SendMessageBatch of 10

	got := receiveAll(t, c, q.URL, 10, 20*time.Second)
	if len(got) != 10 {
		t.Fatalf("long poll received %d of 10 messages", len(got))
	}
	for _, m := range got {
		if rc := m.Attributes["ApproximateReceiveCount"]; rc != "1" {
			t.Fatalf("first receive: ApproximateReceiveCount %q, want 1", rc)
		}
	}

	// Change visibility: one message back at once, the rest stay hidden (30 s).
	back := got[0]
	if _, err := c.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{
		QueueUrl: aws.String(q.URL), ReceiptHandle: back.ReceiptHandle, VisibilityTimeout: 0,
	}); err != nil {
		t.Fatal(err)
	}
	again := receiveAll(t, c, q.URL, 1, 10*time.Second)
	if len(again) != 1 || aws.ToString(again[0].MessageId) != aws.ToString(back.MessageId) {
		t.Fatalf("after visibility 0 got %d messages, want only %s", len(again), aws.ToString(back.MessageId))
	}
	// Real SQS says 2; the emulator also counts the ChangeMessageVisibility as a receive.
	if rc, _ := strconv.Atoi(again[0].Attributes["ApproximateReceiveCount"]); rc < 2 {
		t.Fatalf("second receive: ApproximateReceiveCount %d, want at least 2", rc)
	}
	got[0] = again[0] // its newest receipt handle

	// Batch delete.
	var entries []types.DeleteMessageBatchRequestEntry
	for i, m := range got {
		entries = append(entries, types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle})
	}
	del, err := c.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(q.URL), Entries: entries})
	if err != nil {
		t.Fatal(err)
	}
	if len(del.Successful) != 10 || len(del.Failed) != 0 {
		t.Fatalf("batch delete: %d ok, %d failed", len(del.Successful), len(del.Failed))
	}
	if n := queueDepth(t, c, q.URL); n != 0 {
		t.Fatalf("queue holds %d messages after the batch delete", n)
	}

	// Redrive: received 5 times (maxReceiveCount) and never deleted, it ends in the DLQ.
	// The visibility timeout (1 s) runs out each time, as with a consumer that crashed;
	// no ChangeMessageVisibility, which the emulator would count as a receive too.
	r := testenv.NewQueues(t, c, 1).Orders
	sendBodies(t, c, r.URL, "doomed")
	receives := 0
	var inDLQ []types.Message
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline) && len(inDLQ) == 0; {
		out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(r.URL), WaitTimeSeconds: 1})
		if err != nil {
			t.Fatal(err)
		}
		receives += len(out.Messages)
		if len(out.Messages) == 0 && receives >= 5 {
			inDLQ = receiveAll(t, c, r.DLQURL, 1, time.Second)
		}
	}
	if len(inDLQ) != 1 || aws.ToString(inDLQ[0].Body) != "doomed" {
		t.Fatalf("after %d receives the DLQ holds %d messages, want the doomed one", receives, len(inDLQ))
	}
	if receives != 5 {
		t.Fatalf("received %d times before the redrive, want maxReceiveCount 5", receives)
	}
	if n := queueDepth(t, c, r.URL); n != 0 {
		t.Fatalf("source queue still holds %d messages", n)
	}
}
