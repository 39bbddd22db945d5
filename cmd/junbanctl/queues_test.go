package main

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/junban/junban/internal/cli"
	"github.com/junban/junban/internal/testenv"
)

// queues create makes the four queues named by the settings (a URL's last part is the
// name), with the redrive policies; a second run finds them all in place.
func TestQueuesCreateMakesTheConfiguredQueues(t *testing.T) {
	c := testenv.SQS(t)
	ctx := context.Background()
	n := testenv.Name(t)
	names := []string{n + "-o", n + "-o-dlq", n + "-r", n + "-r-dlq"}
	t.Cleanup(func() {
		for _, name := range names {
			if u, err := c.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(name)}); err == nil {
				c.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: u.QueueUrl})
			}
		}
	})
	t.Setenv("JUNBAN_STACK_ENV", "/nonexistent/stack.env")
	t.Setenv("AWS_ENDPOINT_URL_SQS", testenv.SQSConfig(t).Endpoint)
	t.Setenv("AWS_REGION", testenv.SQSConfig(t).Region)
	t.Setenv("JUNBAN_ORDERS_QUEUE", names[0])
	t.Setenv("JUNBAN_ORDERS_DLQ", "http://127.0.0.1:1/000000000000/"+names[1])
	t.Setenv("JUNBAN_RESULTS_QUEUE", names[2])
	t.Setenv("JUNBAN_RESULTS_DLQ", names[3])
	for run := range 2 {
		if err := ctl(ctx, nil, "queues create", []string{"-max-receive-count", "3"}); err != nil {
			t.Fatalf("run %d: %v", run+1, err)
		}
	}
	for i, name := range names {
		u, err := c.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(name)})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if i%2 == 1 {
			continue
		}
		out, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: u.QueueUrl, AttributeNames: []types.QueueAttributeName{"All"}})
		if err != nil {
			t.Fatal(err)
		}
		rp := out.Attributes["RedrivePolicy"]
		if !strings.Contains(rp, names[i+1]+`"`) || !strings.Contains(rp, "3") {
			t.Fatalf("%s: redrive policy %q, want one to %s after 3 receives", name, rp, names[i+1])
		}
	}
}

func TestQueuesCreateFlagsAreChecked(t *testing.T) {
	for _, args := range [][]string{
		{"-max-receive-count", "0"}, {"-max-receive-count", "1001"}, {"-visibility", "0"},
		{"-visibility", "43201"}, {"-dlq-retention", "59"}, {"-dlq-retention", "1209601"},
		{"orders"}, {"-nope"},
	} {
		if err := ctl(context.Background(), nil, "queues create", args); !errors.Is(err, cli.ErrUsage) {
			t.Errorf("queues create %q: %v, want a usage error", args, err)
		}
	}
	if _, err := queueName("http://127.0.0.1:1/000000000000/"); err == nil {
		t.Error("a queue URL without a name was taken")
	}
}
