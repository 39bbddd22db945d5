package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/junban/junban/internal/config"
	"github.com/junban/junban/internal/queue"
)

// dlqTarget resolves a dead-letter queue and the queue it drains into.
func dlqTarget(ctx context.Context, name, to string) (*sqs.Client, string, string, error) {
	cfg, err := config.Load[config.SQS]()
	if err != nil {
		return nil, "", "", err
	}
	c, err := queue.NewClient(ctx, cfg)
	if err != nil {
		return nil, "", "", err
	}
	if to == "" {
		switch name {
		case cfg.OrdersDLQ:
			to = cfg.OrdersQueue
		case cfg.ResultsDLQ:
			to = cfg.ResultsQueue
		default:
			to = strings.TrimSuffix(name, "-dlq")
		}
	}
	from, err := queue.ResolveURL(ctx, c, name)
	if err != nil {
		return nil, "", "", err
	}
	target, err := queue.ResolveURL(ctx, c, to)
	if err != nil {
		return nil, "", "", err
	}
	return c, from, target, nil
}

// sqsQueue returns a client and the URL of a queue given by name or URL.
func sqsQueue(ctx context.Context, name string) (*sqs.Client, string, error) {
	cfg, err := config.Load[config.SQS]()
	if err != nil {
		return nil, "", err
	}
	c, err := queue.NewClient(ctx, cfg)
	if err != nil {
		return nil, "", err
	}
	url, err := queue.ResolveURL(ctx, c, name)
	return c, url, err
}

// receiveDLQ takes up to 10 messages, with their attributes, hidden for visibility seconds.
func receiveDLQ(ctx context.Context, c *sqs.Client, url string, visibility int32) ([]types.Message, error) {
	out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl: aws.String(url), MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
		VisibilityTimeout:     visibility,
		MessageAttributeNames: []string{"All"},
		AttributeNames:        []types.QueueAttributeName{types.QueueAttributeNameAll},
	})
	if err != nil {
		return nil, err
	}
	return out.Messages, nil
}

// runDLQList prints the messages of a dead-letter queue with their reasons. It leaves
// them where they are (they are hidden for a few seconds while it reads).
func runDLQList(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("dlq list", flag.ContinueOnError)
	name := fs.String("queue", "orders-dlq", "dead-letter queue, name or URL")
	maxN := fs.Int("max", 100, "list at most this many messages")
	width := fs.Int("width", 120, "truncate bodies to this many characters (0: whole)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	c, url, err := sqsQueue(ctx, *name)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "MESSAGE ID\tRECEIVES\tREASON\tBODY")
	seen := map[string]bool{}
	var handles []string
	// Listing hides the messages while it reads; they are made visible again at the end.
	defer func() {
		for _, h := range handles {
			c.ChangeMessageVisibility(context.WithoutCancel(ctx), &sqs.ChangeMessageVisibilityInput{
				QueueUrl: aws.String(url), ReceiptHandle: aws.String(h), VisibilityTimeout: 0})
		}
	}()
	for len(seen) < *maxN {
		ms, err := receiveDLQ(ctx, c, url, 30)
		if err != nil {
			return err
		}
		fresh := 0
		for _, m := range ms {
			handles = append(handles, aws.ToString(m.ReceiptHandle))
			id := aws.ToString(m.MessageId)
			if seen[id] || len(seen) >= *maxN {
				continue
			}
			seen[id] = true
			fresh++
			body := aws.ToString(m.Body)
			if *width > 0 && len(body) > *width {
				body = body[:*width] + "..."
			}
			reason := ""
			if a, ok := m.MessageAttributes[queue.AttrDLQReason]; ok {
				reason = aws.ToString(a.StringValue)
			}
			if reason == "" {
				reason = "(redrive policy: maxReceiveCount)"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", id, m.Attributes["ApproximateReceiveCount"], reason, body)
		}
		if fresh == 0 {
			break
		}
	}
	tw.Flush()
	fmt.Printf("%d message(s) in %s\n", len(seen), *name)
	return nil
}

// runDLQRedrive moves messages from a dead-letter queue back to its source queue, each
// deleted from the DLQ only after the source queue accepted it.
func runDLQRedrive(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("dlq redrive", flag.ContinueOnError)
	name := fs.String("queue", "orders-dlq", "dead-letter queue, name or URL")
	to := fs.String("to", "", "queue to move the messages to (default: the DLQ's source queue)")
	maxN := fs.Int("max", 0, "move at most this many messages (0: all)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	c, from, target, err := dlqTarget(ctx, *name, *to)
	if err != nil {
		return err
	}
	moved := 0
	for *maxN == 0 || moved < *maxN {
		ms, err := receiveDLQ(ctx, c, from, 30)
		if err != nil {
			return err
		}
		if len(ms) == 0 {
			break
		}
		for _, m := range ms {
			if *maxN > 0 && moved >= *maxN {
				break
			}
			attrs := map[string]types.MessageAttributeValue{}
			for k, v := range m.MessageAttributes {
				if k != queue.AttrDLQReason && k != queue.AttrSourceQueue {
					attrs[k] = v
				}
			}
			if _, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(target), MessageBody: m.Body, MessageAttributes: attrs}); err != nil {
				return fmt.Errorf("redrive: moved %d, then: %w", moved, err)
			}
			if _, err := c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(from), ReceiptHandle: m.ReceiptHandle}); err != nil {
				return fmt.Errorf("redrive: moved %d (the last one may come again), then: %w", moved+1, err)
			}
			moved++
		}
	}
	fmt.Printf("redrive: moved %d message(s) from %s to %s\n", moved, *name, target)
	return nil
}
