package main

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/junban/junban/internal/platform/cli"
	"github.com/junban/junban/internal/queue"
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

// queues create --fifo makes FIFO queues of the configured names, .fifo added where a
// name lacks it, with the redrive policies, says which settings to change, and finds them
// all in place on a second run; a configured FIFO queue with a standard DLQ is refused
// without --fifo, before anything is created.
func TestQueuesCreateFIFO(t *testing.T) {
	c := testenv.SQS(t)
	ctx := context.Background()
	n := testenv.Name(t)
	names := []string{n + "-o.fifo", n + "-o-dlq.fifo", n + "-r.fifo", n + "-r-dlq.fifo"}
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
	t.Setenv("JUNBAN_ORDERS_QUEUE", n+"-o")
	t.Setenv("JUNBAN_ORDERS_DLQ", n+"-o-dlq")
	t.Setenv("JUNBAN_RESULTS_QUEUE", names[2])
	t.Setenv("JUNBAN_RESULTS_DLQ", n+"-r-dlq")
	var out strings.Builder
	if err := ctl(ctx, &out, "queues create", []string{"--fifo"}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"JUNBAN_ORDERS_QUEUE=" + names[0], "JUNBAN_ORDERS_DLQ=" + names[1], "JUNBAN_RESULTS_DLQ=" + names[3]} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("queues create --fifo printed\n%s\nwithout %s", out.String(), want)
		}
	}
	if strings.Contains(out.String(), "JUNBAN_RESULTS_QUEUE=") {
		t.Errorf("queues create --fifo printed\n%s\nnaming JUNBAN_RESULTS_QUEUE, whose name it kept", out.String())
	}
	var again queuesReport
	if err := decode(t, &again, "queues create", "--fifo"); err != nil {
		t.Fatal(err)
	}
	for _, q := range again.Queues {
		if q.State != "exists" {
			t.Errorf("second run: %s %s", q.Name, q.State)
		}
	}
	for i, name := range names {
		u, err := c.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(name)})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: u.QueueUrl, AttributeNames: []types.QueueAttributeName{"All"}})
		if err != nil {
			t.Fatal(err)
		}
		if out.Attributes["FifoQueue"] != "true" {
			t.Errorf("%s: FifoQueue %q", name, out.Attributes["FifoQueue"])
		}
		if rp := out.Attributes["RedrivePolicy"]; i%2 == 0 && !strings.Contains(rp, names[i+1]+`"`) {
			t.Errorf("%s: redrive policy %q, want one to %s", name, rp, names[i+1])
		}
	}

	// The orders pair is fine, the results pair is not: neither is created.
	t.Setenv("JUNBAN_ORDERS_QUEUE", n+"-fine")
	t.Setenv("JUNBAN_ORDERS_DLQ", n+"-fine-dlq")
	t.Setenv("JUNBAN_RESULTS_QUEUE", n+"-mixed.fifo")
	t.Setenv("JUNBAN_RESULTS_DLQ", n+"-mixed-dlq")
	if err := ctl(ctx, io.Discard, "queues create", nil); !errors.Is(err, queue.ErrMixedPair) {
		t.Fatalf("a FIFO queue with a standard DLQ: %v, want ErrMixedPair", err)
	}
	for _, name := range []string{n + "-fine", n + "-fine-dlq", n + "-mixed.fifo", n + "-mixed-dlq"} {
		if _, err := c.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(name)}); err == nil {
			t.Errorf("%s was created", name)
		}
	}
}
