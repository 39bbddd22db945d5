package dlq

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/junban/junban/internal/platform/config"
	"github.com/junban/junban/internal/queue"
	"github.com/junban/junban/internal/testenv"
)

// bodies receives what the queue at url holds (deleting it) until a receive brings none.
func bodies(t *testing.T, c *sqs.Client, url string) []string {
	t.Helper()
	var out []string
	for {
		r, err := c.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Messages) == 0 {
			break
		}
		for _, m := range r.Messages {
			out = append(out, aws.ToString(m.Body))
			c.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle})
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Pick moves the one message chosen by id to its source queue, deletes a reason's group,
// and leaves every other message in the DLQ, visible again; a choice that matches
// nothing is ErrNoMatch and changes nothing.
func TestPickMovesOrDeletesOnlyTheChosen(t *testing.T) {
	testenv.EachQueueKind(t, func(t *testing.T, newQueues testenv.NewQueuesFunc) {
		c := testenv.SQS(t)
		q := newQueues(t, c, 5)
		ctx := context.Background()
		cfg := config.SQS{OrdersQueue: q.OrdersName, OrdersDLQ: q.OrdersDLQName}
		for i := range 6 {
			reason := "ERR_A one"
			if i >= 3 {
				reason = "ERR_B two"
			}
			if err := deadLetter(ctx, c, q.Orders.DLQURL, []byte(fmt.Sprint("m", i)), reason, map[string]string{queue.AttrSourceQueue: q.OrdersName}); err != nil {
				t.Fatal(err)
			}
		}
		all, _, err := List(ctx, c, q.Orders.DLQURL, 10)
		if err != nil || len(all) != 6 {
			t.Fatalf("list: %d %v", len(all), err)
		}
		var id string
		for _, m := range all {
			if m.Body == "m1" {
				id = m.ID
			}
		}
		rep, err := Pick(ctx, c, cfg, PickOptions{DLQ: q.OrdersDLQName, Action: Move, Match: func(m Message) bool { return m.ID == id }})
		if err != nil || rep.Done != 1 || rep.Moved[q.OrdersName] != 1 {
			t.Fatalf("pick one: %+v %v", rep, err)
		}
		if got := bodies(t, c, q.Orders.URL); !slices.Equal(got, []string{"m1"}) {
			t.Fatalf("the orders queue got %v, want [m1]", got)
		}
		rep, err = Pick(ctx, c, cfg, PickOptions{DLQ: q.OrdersDLQName, Action: Delete, Match: func(m Message) bool { return m.Reason == "ERR_B two" }})
		if err != nil || rep.Done != 3 || len(rep.Moved) != 0 {
			t.Fatalf("delete group: %+v %v", rep, err)
		}
		if _, err := Pick(ctx, c, cfg, PickOptions{DLQ: q.OrdersDLQName, Action: Delete, Match: func(m Message) bool { return m.Body == "nope" }}); !errors.Is(err, ErrNoMatch) {
			t.Fatalf("no match: %v", err)
		}
		// The others are visible at once (released, not left to their visibility timeout).
		left, _, err := List(ctx, c, q.Orders.DLQURL, 10)
		var got []string
		for _, m := range left {
			got = append(got, m.Body)
		}
		slices.Sort(got)
		if err != nil || !slices.Equal(got, []string{"m0", "m2"}) {
			t.Fatalf("left in the DLQ: %v %v", got, err)
		}
		if got := bodies(t, c, q.Orders.URL); len(got) != 0 {
			t.Fatalf("a delete sent %v to the orders queue", got)
		}
	})
}
