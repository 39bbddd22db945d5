package topics_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/testenv"
	"github.com/junban/junban/internal/topics"
)

// Through a FIFO topic, each event travels in its order's message group, deduplicated by
// its event id: a second publication of the same event is dropped.
func TestPublishToAFIFOTopic(t *testing.T) {
	sn := testenv.SNS(t)
	sq := testenv.SQS(t)
	ctx := context.Background()
	name := testenv.Name(t)
	tp, err := sn.CreateTopic(ctx, &sns.CreateTopicInput{Name: aws.String(name + ".fifo"),
		Attributes: map[string]string{"FifoTopic": "true"}})
	if err != nil {
		t.Fatal(err)
	}
	topic := aws.ToString(tp.TopicArn)
	t.Cleanup(func() { sn.DeleteTopic(ctx, &sns.DeleteTopicInput{TopicArn: aws.String(topic)}) })
	q, err := sq.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name + ".fifo"),
		Attributes: map[string]string{"FifoQueue": "true"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sq.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: q.QueueUrl}) })
	if _, err := topics.Subscribe(ctx, sn, sq, topics.Spec{TopicARN: topic, QueueURL: aws.ToString(q.QueueUrl), Raw: true}); err != nil {
		t.Fatal(err)
	}
	var bodies [][]byte
	for _, lcid := range []string{"F-1", "F-2"} {
		b, _ := json.Marshal(event.Order{EventID: "paid-" + lcid, Type: event.PaymentConfirmed, LCID: lcid, OccurredAt: time.Now().UTC()})
		bodies = append(bodies, b)
	}
	for range 2 {
		if err := topics.Publish(ctx, sn, topic, bodies); err != nil {
			t.Fatal(err)
		}
	}
	groups := map[string]string{}
	for range 3 {
		out, err := sq.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, MaxNumberOfMessages: 10,
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameMessageGroupId}})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range out.Messages {
			var ev event.Order
			if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &ev); err != nil {
				t.Fatal(err)
			}
			if _, dup := groups[ev.EventID]; dup {
				t.Fatalf("%s delivered twice", ev.EventID)
			}
			groups[ev.EventID] = m.Attributes[string(sqstypes.MessageSystemAttributeNameMessageGroupId)]
			sq.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: q.QueueUrl, ReceiptHandle: m.ReceiptHandle})
		}
	}
	if len(groups) != 2 || groups["paid-F-1"] != "F-1" || groups["paid-F-2"] != "F-2" {
		t.Fatalf("message groups %v, want each event in its order's", groups)
	}
}
