package dlq

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/junban/junban/internal/platform/config"
	"github.com/junban/junban/internal/queue"
)

// Action is what Pick does with the messages it chooses.
type Action int

const (
	// Move sends a chosen message to the queue the DLQ serves, as Redrive does, then
	// deletes it.
	Move Action = iota
	// Delete deletes a chosen message for good.
	Delete
)

// PickOptions says which messages of a dead-letter queue Pick acts on.
type PickOptions struct {
	// DLQ is the dead-letter queue: JUNBAN_ORDERS_DLQ or JUNBAN_RESULTS_DLQ, as
	// RedriveOptions.DLQ names it.
	DLQ string
	// Match chooses the messages; nil chooses none.
	Match  func(Message) bool
	Action Action
}

// PickReport is what one Pick run did.
type PickReport struct {
	DLQ string `json:"dlq"`
	// Done counts the messages moved or deleted, Moved the moved ones by target queue.
	Done  int            `json:"done"`
	Moved map[string]int `json:"moved,omitempty"`
	// Looked is the number of messages read.
	Looked int `json:"looked"`
}

// ErrNoMatch: Pick read the queue and found no message that Match chose.
var ErrNoMatch = errors.New("no message of the dead-letter queue matched")

// Pick moves or deletes the messages of a dead-letter queue that o.Match chooses (one
// message by id, a reason's group) and leaves the others where they are, hidden while it
// reads and visible again when it ends. Like Redrive it reads at most twice the DLQ's
// depth at the start and stops at the first receive that brings nothing new, so
// messages that fail again and come back while it runs are not taken twice; a message is
// deleted from the DLQ only after its target accepted it. A moved message goes to the
// queue the DLQ serves, whatever its junban-source-queue says; a DLQ that is not one of
// junban's is ErrBadTarget before anything moves or is deleted.
func Pick(ctx context.Context, c *sqs.Client, cfg config.SQS, o PickOptions) (PickReport, error) {
	rep := PickReport{DLQ: o.DLQ, Moved: map[string]int{}}
	if o.Match == nil {
		return rep, ErrNoMatch
	}
	r, depth, err := openRoute(ctx, c, cfg, o.DLQ, "")
	if err != nil {
		return rep, fmt.Errorf("dlq: pick %s: %w", o.DLQ, err)
	}
	dlqURL := r.dlqURL
	limit := 2 * max(depth, 10)
	seen := map[string]bool{}
	var handBack []string
	defer func() { Release(ctx, c, dlqURL, handBack) }()
	for len(seen) < limit {
		ms, err := receive(ctx, c, dlqURL, 10, RedriveVisibility)
		if err != nil {
			return rep, fmt.Errorf("dlq: pick: done %d, then: %w", rep.Done, err)
		}
		fresh := false
		for _, m := range ms {
			id, handle := aws.ToString(m.MessageId), aws.ToString(m.ReceiptHandle)
			if seen[id] {
				continue
			}
			seen[id], fresh = true, true
			rep.Looked++
			if !o.Match(message(m)) {
				handBack = append(handBack, handle)
				continue
			}
			if o.Action == Move {
				if err := send(ctx, c, r.servedURL, m); err != nil {
					handBack = append(handBack, handle)
					return rep, fmt.Errorf("dlq: pick: done %d, then: %w", rep.Done, err)
				}
				rep.Moved[queueName(r.servedURL)]++
			}
			// Sent (or to be deleted): the delete must happen even if the caller gives up now.
			if _, err := c.DeleteMessage(context.WithoutCancel(ctx), &sqs.DeleteMessageInput{QueueUrl: aws.String(dlqURL), ReceiptHandle: m.ReceiptHandle}); err != nil {
				return rep, fmt.Errorf("dlq: pick: done %d (the last one may come again), then: %w", rep.Done, err)
			}
			rep.Done++
		}
		if !fresh {
			break
		}
	}
	if rep.Done == 0 {
		return rep, ErrNoMatch
	}
	return rep, nil
}

// message is m as List shows it.
func message(m types.Message) Message {
	msg := Message{ID: aws.ToString(m.MessageId), Body: aws.ToString(m.Body),
		SentAt:          msTime(m.Attributes[string(types.MessageSystemAttributeNameSentTimestamp)]),
		FirstReceivedAt: msTime(m.Attributes[string(types.MessageSystemAttributeNameApproximateFirstReceiveTimestamp)])}
	msg.Receives, _ = strconv.Atoi(m.Attributes[string(types.MessageSystemAttributeNameApproximateReceiveCount)])
	if a, ok := m.MessageAttributes[queue.AttrDLQReason]; ok {
		msg.Reason = aws.ToString(a.StringValue)
	}
	msg.Reason = cmp.Or(msg.Reason, RedrivePolicyReason)
	if a, ok := m.MessageAttributes[queue.AttrSourceQueue]; ok {
		msg.Source = aws.ToString(a.StringValue)
	}
	if a, ok := m.MessageAttributes[queue.AttrAttempts]; ok {
		msg.Attempts, _ = strconv.Atoi(aws.ToString(a.StringValue))
	}
	for name, t := range map[string]*time.Time{queue.AttrFirstFailure: &msg.FirstFailure, queue.AttrLastFailure: &msg.LastFailure} {
		if a, ok := m.MessageAttributes[name]; ok {
			*t, _ = time.Parse(time.RFC3339Nano, aws.ToString(a.StringValue))
		}
	}
	return msg
}
