package main

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/junban/junban/internal/queue"
	"github.com/junban/junban/internal/testenv"
)

func TestDLQListAndRedrive(t *testing.T) {
	c := testenv.SQS(t)
	q := testenv.NewQueues(t, c, 5)
	t.Setenv("AWS_ENDPOINT_URL_SQS", testenv.SQSConfig(t).Endpoint)
	t.Setenv("AWS_REGION", testenv.SQSConfig(t).Region)
	t.Setenv("JUNBAN_ORDERS_QUEUE", q.OrdersName)
	t.Setenv("JUNBAN_ORDERS_DLQ", q.OrdersDLQName)
	ctx := context.Background()
	for _, body := range []string{`{"a":1}`, `{"b":2}`, `{"c":3}`} {
		if err := queue.DeadLetter(ctx, c, q.Orders.DLQURL, []byte(body), "ERR_TEST", nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := runDLQList(ctx, []string{"-queue", q.OrdersDLQName}); err != nil {
		t.Fatal(err)
	}
	if err := runDLQRedrive(ctx, []string{"-queue", q.OrdersDLQName, "-max", "2"}); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for len(got) < 2 {
		out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(q.Orders.URL), MaxNumberOfMessages: 10, WaitTimeSeconds: 2, MessageAttributeNames: []string{"All"}})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Messages) == 0 {
			t.Fatalf("redrive moved %d of 2 messages to the orders queue", len(got))
		}
		for _, m := range out.Messages {
			if _, ok := m.MessageAttributes[queue.AttrDLQReason]; ok {
				t.Errorf("a redriven message still carries its DLQ reason")
			}
			got[aws.ToString(m.Body)] = true
		}
	}
	if len(got) != 2 {
		t.Fatalf("orders queue got %v, want 2 messages", got)
	}
}
