// Package outboundcheck checks what a consumer of junban's outbound topic received
// against the outbox it was published from: Drain empties a queue subscribed to the topic,
// validating every body against its kind's JSON Schema, and Check compares what it got
// with the outbox table: a committed row never received (Missing), a message received
// that no committed row holds (Unknown), an entity whose seqs received are not 1..max
// (Gaps), a body that breaks the contract (Invalid), and the copies (Duplicates: at
// least once allows them). The lab's demo, chaos and e2e runs end with it.
package outboundcheck

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/junban/junban/internal/postgres/outbound"
)

// Defaults of DrainOptions.
const (
	// QuietDefault is how long the queue must give nothing for Drain to end.
	QuietDefault = 3 * time.Second
	// WaitSecondsDefault is the long poll of each receive.
	WaitSecondsDefault = 1
	// VisibilityDefault is the visibility timeout of each receive: short, so that messages
	// a receive took but never answered with (an emulator keeps the messages of a long poll
	// whose caller went away: a retried request, a cancelled one) come back before the
	// queue counts as quiet.
	VisibilityDefault = 2 * time.Second
)

// DrainOptions say when Drain ends.
type DrainOptions struct {
	// Quiet is how long the queue must give nothing (after Settled said true) for Drain to
	// end; 0: QuietDefault.
	Quiet time.Duration
	// WaitSeconds is each receive's long poll, 0..20 seconds; 0: WaitSecondsDefault.
	WaitSeconds int32
	// Visibility is each receive's visibility timeout, in whole seconds; 0:
	// VisibilityDefault. Drain is quiet no sooner than twice this.
	Visibility time.Duration
	// Settled, when set, tells whether nothing more is on its way (e.g. the load is over
	// and the relay has published every outbox row, Published): Drain does not end before
	// it said true once. An error ends Drain with it.
	Settled func(ctx context.Context) (bool, error)
}

// Message is one message received from the subscriber queue (a copy is one more).
type Message struct {
	// Body is the outbound message: the queue message's body, or the Message of the SNS
	// notification around it when the subscription is not raw.
	Body []byte `json:"-"`
	// ID, Kind, Entity and Seq are the body's (zero when it has none).
	ID     string        `json:"id"`
	Kind   outbound.Kind `json:"kind"`
	Entity string        `json:"entity"`
	Seq    int64         `json:"seq"`
	// Invalid says how the body breaks its kind's JSON Schema (outbound.Validate); "" when
	// it validates.
	Invalid string `json:"invalid,omitempty"`
}

// Drain receives and deletes every message of the queue at queueURL until it is quiet
// (o.Quiet without a message, once o.Settled said true), and returns them in the order
// received, each validated. It returns what it received with ctx's error when ctx ends
// first.
func Drain(ctx context.Context, sq *sqs.Client, queueURL string, o DrainOptions) ([]Message, error) {
	if o.Quiet <= 0 {
		o.Quiet = QuietDefault
	}
	if o.WaitSeconds <= 0 {
		o.WaitSeconds = WaitSecondsDefault
	}
	if o.Visibility < time.Second {
		o.Visibility = VisibilityDefault
	}
	o.Quiet = max(o.Quiet, 2*o.Visibility)
	var got []Message
	// SQS gives a message again when its delete came too late: one copy, SQS's, not the
	// relay's, and not counted.
	seen := map[string]bool{}
	settled := o.Settled == nil
	var quietSince time.Time
	for {
		if err := ctx.Err(); err != nil {
			return got, fmt.Errorf("outboundcheck: drain %s: %w", queueURL, err)
		}
		if !settled {
			ok, err := o.Settled(ctx)
			if err != nil {
				return got, fmt.Errorf("outboundcheck: drain %s: %w", queueURL, err)
			}
			settled, quietSince = ok, time.Time{}
		}
		out, err := sq.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(queueURL), MaxNumberOfMessages: 10, WaitTimeSeconds: o.WaitSeconds,
			VisibilityTimeout: int32(o.Visibility / time.Second),
		})
		if err != nil {
			if ctx.Err() != nil {
				continue
			}
			return got, fmt.Errorf("outboundcheck: receive from %s: %w", queueURL, err)
		}
		if len(out.Messages) == 0 {
			if quietSince.IsZero() {
				quietSince = time.Now()
			} else if settled && time.Since(quietSince) >= o.Quiet {
				return got, nil
			}
			continue
		}
		quietSince = time.Time{}
		entries := make([]sqstypes.DeleteMessageBatchRequestEntry, len(out.Messages))
		for i, m := range out.Messages {
			if id := aws.ToString(m.MessageId); !seen[id] {
				seen[id] = true
				got = append(got, Parse([]byte(aws.ToString(m.Body))))
			}
			entries[i] = sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(i)), ReceiptHandle: m.ReceiptHandle}
		}
		del, err := sq.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(queueURL), Entries: entries})
		if err == nil && len(del.Failed) > 0 {
			err = errors.New(aws.ToString(del.Failed[0].Message))
		}
		if err != nil && ctx.Err() == nil {
			return got, fmt.Errorf("outboundcheck: delete from %s: %w", queueURL, err)
		}
	}
}

// Parse reads a message as the subscriber queue holds it: the outbound message itself
// (raw delivery) or an SNS notification around it, validated against its kind's schema.
func Parse(body []byte) Message {
	body = unwrapSNS(body)
	m := Message{Body: body}
	if err := outbound.Validate(body); err != nil {
		m.Invalid = err.Error()
	}
	var head struct {
		ID     string        `json:"id"`
		Kind   outbound.Kind `json:"kind"`
		Entity string        `json:"entity"`
		Seq    int64         `json:"seq"`
	}
	if err := json.Unmarshal(body, &head); err == nil {
		m.ID, m.Kind, m.Entity, m.Seq = head.ID, head.Kind, head.Entity, head.Seq
	}
	return m
}

// unwrapSNS returns the Message of an SNS notification (an object with "Type"
// "Notification" and a "TopicArn", matched by their exact names), else body.
func unwrapSNS(body []byte) []byte {
	var top map[string]json.RawMessage
	if json.Unmarshal(body, &top) != nil || top["TopicArn"] == nil || string(top["Type"]) != `"Notification"` {
		return body
	}
	var msg string
	if json.Unmarshal(top["Message"], &msg) != nil {
		return body
	}
	return []byte(msg)
}
