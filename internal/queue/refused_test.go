package queue_test

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/junban/junban/internal/queue"
	"github.com/junban/junban/internal/testenv"
)

// A message SQS refuses as the sender's fault (U+FFFF, a character SQS cannot carry) fails
// alone in a PublishBatch, as an EntryError that names its index and SQS's code and says
// it is refused; the others are accepted. The publisher refuses it before sending, as SQS
// does: local-aws-sqs accepts it. Broken variants: the refusal reported as a plain error,
// without its code (no EntryError); without the publisher's own check, on local-aws-sqs,
// all ten were accepted.
func TestPublishBatchReportsARefusedMessageAlone(t *testing.T) {
	t.Parallel()
	testenv.EachQueueKind(t, func(t *testing.T, newQueues testenv.NewQueuesFunc) {
		t.Parallel()
		c := testenv.SQS(t)
		q := newQueues(t, c, 30).Orders
		pub, err := queue.NewPublisher(queue.PublisherConfig{Client: c, QueueURL: q.URL, Keys: groupKeys})
		if err != nil {
			t.Fatal(err)
		}
		defer pub.Stop(context.Background())
		var bodies [][]byte
		var want []string
		for i := range 10 {
			b := "A:" + strconv.Itoa(i)
			if i == 1 {
				b += "\uffff"
			} else {
				want = append(want, b)
			}
			bodies = append(bodies, []byte(b))
		}
		err = pub.PublishBatch(context.Background(), bodies)
		failed, ok := queue.EntryErrors(err)
		if !ok || len(failed) != 1 || failed[1] == nil {
			t.Fatalf("PublishBatch: %v, want message 1 failed and only it", err)
		}
		if e := failed[1]; !e.Refused || e.Code != "InvalidMessageContents" {
			t.Fatalf("message 1: refused %v, code %q; want refused, InvalidMessageContents", e.Refused, e.Code)
		}
		var got []string
		// Each message deleted once received: a FIFO group's next comes after that.
		for deadline := time.Now().Add(30 * time.Second); len(got) < len(want) && time.Now().Before(deadline); {
			out, err := c.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(q.URL), MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range out.Messages {
				got = append(got, aws.ToString(m.Body))
				if _, err := c.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: aws.String(q.URL), ReceiptHandle: m.ReceiptHandle}); err != nil {
					t.Fatal(err)
				}
			}
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("the queue got %v, want %v", got, want)
		}
	})
}
