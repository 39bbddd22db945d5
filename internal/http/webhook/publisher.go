package webhook

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"go.opentelemetry.io/otel/trace"

	"github.com/junban/junban/internal/platform/tracing"
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

// Publish sends body to the queue in a send span whose context the message carries
// (traceparent and tracestate attributes), so that the order-worker's span continues the
// delivery's trace.
func (p SQSPublisher) Publish(ctx context.Context, body []byte) (err error) {
	ctx, span := tracing.StartSend(ctx, tracing.SQS, queue.NameOf(p.QueueURL), 1)
	defer func() { tracing.End(span, err) }()
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
	in := &sqs.SendMessageInput{
		QueueUrl:               aws.String(p.QueueURL),
		MessageBody:            aws.String(string(body)),
		MessageGroupId:         group,
		MessageDeduplicationId: dedup,
	}
	if trace.SpanContextFromContext(ctx).IsValid() {
		attrs := make(map[string]string, 2)
		tracing.Inject(ctx, attrs)
		in.MessageAttributes = make(map[string]types.MessageAttributeValue, len(attrs))
		for k, v := range attrs {
			in.MessageAttributes[k] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
		}
	}
	_, err = p.Client.SendMessage(ctx, in)
	if err != nil {
		return fmt.Errorf("webhook: send to %s: %w", p.QueueURL, err)
	}
	return nil
}
