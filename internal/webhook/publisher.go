package webhook

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/junban/junban/internal/queue"
)

// Publisher sends an order event's body to the orders queue; nil means SQS accepted it.
// queue.Publisher may stand in for SQSPublisher once it is wired here.
type Publisher interface {
	Publish(ctx context.Context, body []byte) error
}

// SQSPublisher publishes with one SendMessage per event.
type SQSPublisher struct {
	Client   *sqs.Client
	QueueURL string
	// Keys gives an event's group and deduplication ids on a FIFO orders queue
	// (domain.OrderKeys); without it a FIFO queue's sends fail with queue.ErrNoGroupID
	// before they reach SQS.
	Keys queue.Keyer
}

// Publish sends body to the queue.
func (p SQSPublisher) Publish(ctx context.Context, body []byte) error {
	var k queue.Keys
	if queue.IsFIFO(p.QueueURL) && p.Keys != nil {
		var err error
		if k.Group, k.Dedup, err = p.Keys(body); err != nil {
			return fmt.Errorf("webhook: send to %s: %w: %w", p.QueueURL, queue.ErrNoGroupID, err)
		}
	}
	group, dedup, err := k.For(p.QueueURL)
	if err != nil {
		return fmt.Errorf("webhook: send to %s: %w", p.QueueURL, err)
	}
	_, err = p.Client.SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl:               aws.String(p.QueueURL),
		MessageBody:            aws.String(string(body)),
		MessageGroupId:         group,
		MessageDeduplicationId: dedup,
	})
	if err != nil {
		return fmt.Errorf("webhook: send to %s: %w", p.QueueURL, err)
	}
	return nil
}
