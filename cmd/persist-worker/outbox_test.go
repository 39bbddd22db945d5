package main

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/google/uuid"

	"github.com/junban/junban/internal/aws/topics"
	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/platform/config"
	"github.com/junban/junban/internal/postgres/outbound"
	"github.com/junban/junban/internal/testenv"
)

// A persist-worker with a topic relays the outbox; killed (SIGKILL) in the middle of a
// round (SNS has taken some of the round's messages, none is marked published) and
// started again, it publishes every row: the subscriber gets each at least once, the
// killed round's as copies. One round of 1000 rows through one publisher takes a hundred
// PublishBatch calls, so the kill lands inside it. (Fails with the rows marked published
// before they are published: the killed round's other rows are lost.)
func TestWorkerRelaysTheOutboxAcrossAKill(t *testing.T) {
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
	sn, sq := testenv.SNS(t), testenv.SQS(t)
	qs := testenv.NewQueues(t, sq, 10)
	topic := testenv.Topic(t, sn)
	q, err := sq.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(testenv.Name(t) + "-sub")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sq.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: q.QueueUrl}) })
	if _, err := topics.Subscribe(ctx, sn, sq, topics.Spec{TopicARN: topic, QueueURL: aws.ToString(q.QueueUrl), Raw: true}); err != nil {
		t.Fatal(err)
	}

	const entities, perEntity = 300, 10
	want := map[string]bool{}
	for s := int64(1); s <= perEntity; s++ {
		for e := range entities {
			lcid := fmt.Sprintf("KILL-%d", e)
			data, _ := json.Marshal(outbound.OrderRefusedData{Reason: "ERR_SHORTAGE"})
			m := outbound.Message{ID: uuid.NewString(), Kind: outbound.OrderRefused, Entity: lcid, LCID: lcid, Seq: s,
				OccurredAt: time.Now().UTC(), CausedBy: outbound.Cause{EventID: fmt.Sprintf("e-%d-%d", e, s), Type: event.OrderPlaced}, Data: data}
			b, _ := json.Marshal(m)
			if err := db.Exec(`INSERT INTO outbox (message_id, kind, entity, seq, body) VALUES (?, ?, ?, ?, ?)`,
				m.ID, string(m.Kind), m.Entity, m.Seq, string(b)).Error; err != nil {
				t.Fatal(err)
			}
			want[m.ID] = true
		}
	}
	published := func() int64 { return count(t, db.Where("published_at IS NOT NULL"), "outbox") }
	env := []string{"DATABASE_URL=" + dbURL, "AWS_ENDPOINT_URL_SNS=" + testenv.SNSEndpoint(t),
		"JUNBAN_RESULTS_QUEUE=" + qs.ResultsName, "JUNBAN_RESULTS_DLQ=" + qs.ResultsDLQName, "JUNBAN_SQS_WAIT_SECONDS=1",
		"JUNBAN_OUTBOX_TOPIC_ARN=" + topic, "JUNBAN_OUTBOX_ROUND_MAX=1000", "JUNBAN_OUTBOX_PUBLISHERS=1"}

	w := startWorker(t, env...)
	testenv.WaitFor(t, 60*time.Second, "SNS to take some messages", func() bool {
		a, err := sq.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: q.QueueUrl,
			AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages}})
		if err != nil {
			t.Fatal(err)
		}
		n, _ := strconv.Atoi(a.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessages)])
		return n >= 50
	})
	w.cmd.Process.Kill()
	<-w.exited
	if n := published(); n == int64(len(want)) {
		t.Fatal("every row was published before the kill")
	}
	startWorker(t, env...)
	testenv.WaitFor(t, 2*time.Minute, "every row to be published", func() bool { return published() == int64(len(want)) })

	// A short visibility, and quiet for longer than it: a receive whose answer the client
	// lost (a connection cut and retried) hides its messages only that long, and SQS's
	// redelivery of a message (same SQS message id) is not a relay's copy.
	got, seen := map[string]int{}, map[string]bool{}
	for quiet := 0; quiet < 5; {
		out, err := sq.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 1, VisibilityTimeout: 2})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Messages) == 0 {
			quiet++
			continue
		}
		quiet = 0
		for _, m := range out.Messages {
			if seen[aws.ToString(m.MessageId)] {
				continue
			}
			seen[aws.ToString(m.MessageId)] = true
			var msg outbound.Message
			if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &msg); err != nil {
				t.Fatal(err)
			}
			got[msg.ID]++
			sq.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: q.QueueUrl, ReceiptHandle: m.ReceiptHandle})
		}
	}
	missing := 0
	for id := range want {
		if got[id] == 0 {
			missing++
		}
	}
	if missing > 0 {
		t.Fatalf("%d of %d rows never arrived", missing, len(want))
	}
	copies := 0
	for _, c := range got {
		copies += c - 1
	}
	if copies == 0 {
		t.Fatal("no copy received: the kill did not land in a round")
	}
	t.Logf("%d rows, %d copies", len(want), copies)
}
