package queue

import (
	"context"
	"strings"
	"time"
)

// Message is one received SQS message.
type Message struct {
	ID            string
	ReceiptHandle string
	Body          []byte
	// ReceiveCount is SQS's ApproximateReceiveCount (1 on the first delivery).
	ReceiveCount int
	// Attributes are the message's string attributes.
	Attributes map[string]string
	// GroupID is the message's MessageGroupId on a FIFO queue ("" on a standard queue).
	GroupID string
	// AWSTraceHeader is the message's X-Ray trace header system attribute, "" when absent:
	// the trace context of a message without a traceparent attribute.
	AWSTraceHeader string
}

// Verdict says what the consumer does with a handled message.
type Verdict int

const (
	// Done: the message's custody moved on; delete it.
	Done Verdict = iota
	// Retry: make it visible again after a backoff (with jitter) and let SQS redeliver it.
	Retry
	// Poison: it can never be handled; send it to the DLQ with the reason, then delete it.
	Poison
)

// Outcome is a handler's answer for one message.
type Outcome struct {
	Verdict Verdict
	// Reason says why, for Retry and Poison (logged; a Poison's reason travels to the DLQ
	// as the message attribute "junban-dlq-reason").
	Reason string
	// After overrides the backoff of a Retry when positive.
	After time.Duration
}

// Handler handles one message.
type Handler func(ctx context.Context, m Message) Outcome

// BatchHandler handles the messages of one or more receives together and returns one
// outcome per message, in the same order.
type BatchHandler func(ctx context.Context, ms []Message) []Outcome

// NameOf is the queue's name in its URL (the path's last segment), as spans and logs name
// a queue.
func NameOf(queueURL string) string {
	if i := strings.LastIndexByte(queueURL, '/'); i >= 0 {
		return queueURL[i+1:]
	}
	return queueURL
}
