package webhook

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
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
}

// Publish sends body to the queue.
func (p SQSPublisher) Publish(ctx context.Context, body []byte) error {
	_, err := p.Client.SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl:    aws.String(p.QueueURL),
		MessageBody: aws.String(string(body)),
	})
	if err != nil {
		return fmt.Errorf("webhook: send to %s: %w", p.QueueURL, err)
	}
	return nil
}
