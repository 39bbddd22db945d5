package queue

import (
	"context"
	"fmt"
	"maps"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// maxReasonLen bounds the reason attribute, so a long error text cannot push a message
// over the size limit.
const maxReasonLen = 1024

// DeadLetter sends body to the dead-letter queue dlqURL with its attributes and the reason
// as the attribute "junban-dlq-reason". The Consumer uses it for Poison messages (adding
// "junban-source-queue"); the order-worker uses it for events parked too long.
//
// Only after DeadLetter returned nil may the caller delete the original message: until
// then the original is the only copy (invariant "no lost event"). Attributes beyond SQS's
// limit of ten are dropped, the junban ones and "traceparent" last.
func DeadLetter(ctx context.Context, c *sqs.Client, dlqURL string, body []byte, reason string, attrs map[string]string) error {
	if dlqURL == "" {
		return fmt.Errorf("queue: dead-letter: no dead-letter queue URL")
	}
	if len(reason) > maxReasonLen {
		reason = reason[:maxReasonLen]
	}
	if reason == "" {
		reason = "unspecified"
	}
	all := make(map[string]string, len(attrs)+1)
	maps.Copy(all, attrs)
	all[AttrDLQReason] = reason
	all, _ = limitAttributes(all, AttrDLQReason, AttrSourceQueue, AttrTraceParent)
	_, err := c.SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl:          aws.String(dlqURL),
		MessageBody:       aws.String(string(body)),
		MessageAttributes: toSQSAttributes(all),
	})
	if err != nil {
		return fmt.Errorf("queue: dead-letter to %s: %w", queueName(dlqURL), err)
	}
	return nil
}
