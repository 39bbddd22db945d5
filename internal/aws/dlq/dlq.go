// Package dlq lists and redrives junban's dead-letter queues: what junbanctl's dlq
// commands and the API's /v1/dlq endpoints both call.
package dlq

import (
	"cmp"
	"context"
	"crypto/sha256"
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

var (
	// ErrRedriveIntoDLQ: the queue a DLQ serves is, as configured, the dead-letter queue
	// itself. Moving a message there re-sends it into the queue it is being taken from,
	// forever.
	ErrRedriveIntoDLQ = errors.New("redrive target is the dead-letter queue itself")
	// ErrBadTarget: the run has no usable target: the queue given is not one of junban's
	// dead-letter queues, a target asked for (RedriveOptions.To) is not the queue the DLQ
	// serves, or that queue is the DLQ itself. Nothing moved.
	ErrBadTarget = errors.New("no usable redrive target")
)

// RedriveVisibility is how long, in seconds, Redrive hides a message it received. A moved
// message is deleted well within it; a message it leaves in the DLQ (a repeat) stays
// hidden for the rest of the run, so that later receives bring the others, and is made
// visible again when the run ends (or when this passes, if the run dies). Five minutes
// cover a run of some ten thousand messages; a longer one can end early, saying so in
// its depths, and the next run goes on.
const RedriveVisibility = 300

// ListVisibility is how long, in seconds, List hides the messages it reads; it makes
// them visible again when it ends.
const ListVisibility = 30

// QueueState returns a queue's ARN and its depth: its visible, in-flight and delayed messages.
func QueueState(ctx context.Context, c *sqs.Client, url string) (string, int, error) {
	out, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(url),
		AttributeNames: []types.QueueAttributeName{
			types.QueueAttributeNameQueueArn,
			types.QueueAttributeNameApproximateNumberOfMessages,
			types.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
			types.QueueAttributeNameApproximateNumberOfMessagesDelayed,
		},
	})
	if err != nil {
		return "", 0, fmt.Errorf("attributes of %s: %w", url, err)
	}
	n := 0
	for _, a := range []types.QueueAttributeName{
		types.QueueAttributeNameApproximateNumberOfMessages,
		types.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
		types.QueueAttributeNameApproximateNumberOfMessagesDelayed,
	} {
		v, _ := strconv.Atoi(out.Attributes[string(a)])
		n += v
	}
	return out.Attributes[string(types.QueueAttributeNameQueueArn)], n, nil
}

// receive takes up to maxN (at most 10) messages, with their attributes, hidden for
// visibility seconds.
func receive(ctx context.Context, c *sqs.Client, url string, maxN, visibility int32) ([]types.Message, error) {
	out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl: aws.String(url), MaxNumberOfMessages: min(maxN, 10), WaitTimeSeconds: 1,
		VisibilityTimeout:     visibility,
		MessageAttributeNames: []string{"All"},
		AttributeNames:        []types.QueueAttributeName{types.QueueAttributeNameAll},
	})
	if err != nil {
		return nil, err
	}
	return out.Messages, nil
}

// Release makes received messages visible again, ignoring handles that no longer hold.
func Release(ctx context.Context, c *sqs.Client, url string, handles []string) {
	ctx = context.WithoutCancel(ctx)
	for _, h := range handles {
		_, _ = c.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{
			QueueUrl: aws.String(url), ReceiptHandle: aws.String(h), VisibilityTimeout: 0})
	}
}

// Message is one dead-lettered message as List sees it.
type Message struct {
	ID string `json:"message_id"`
	// Receives is SQS's ApproximateReceiveCount in the DLQ (List's own receive included).
	Receives int `json:"receives"`
	// Reason is the junban-dlq-reason attribute: the reason code and the last error;
	// "(redrive policy: maxReceiveCount)" for a message SQS moved after its receive limit.
	Reason string `json:"reason"`
	// Source is the junban-source-queue attribute: the queue it failed in, as whoever sent
	// it to the DLQ says ("" unknown). Shown for information; a redrive never follows it.
	Source string `json:"source_queue,omitempty"`
	// SentAt is when the message was sent to the DLQ by junban, which is when its last
	// failure was; for a message SQS moved by its redrive policy, when it was first sent.
	SentAt time.Time `json:"sent_at,omitzero"`
	// FirstReceivedAt is when it was first received from the DLQ (by List or anyone).
	FirstReceivedAt time.Time `json:"first_received_at,omitzero"`
	// Attempts, FirstFailure and LastFailure are set for an event the order-worker
	// quarantined: its failed runs, and when the first and the last were counted.
	Attempts     int       `json:"attempts,omitempty"`
	FirstFailure time.Time `json:"first_failure,omitzero"`
	LastFailure  time.Time `json:"last_failure,omitzero"`
	Body         string    `json:"body"`
}

// RedrivePolicyReason is a listed message's Reason when it carries none.
const RedrivePolicyReason = "(redrive policy: maxReceiveCount)"

func msTime(s string) time.Time {
	ms, err := strconv.ParseInt(s, 10, 64)
	if err != nil || ms <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

// List returns up to maxN messages of the dead-letter queue at url and leaves them
// where they are: they are hidden for ListVisibility seconds while it reads and made
// visible again when it ends. SQS gives no order, so this is a sample when the queue
// holds more; more is true when a receive still brought messages at the bound.
func List(ctx context.Context, c *sqs.Client, url string, maxN int) (msgs []Message, more bool, err error) {
	seen := map[string]bool{}
	var handles []string
	defer func() { Release(ctx, c, url, handles) }()
	for len(seen) < maxN {
		ms, err := receive(ctx, c, url, 10, ListVisibility)
		if err != nil {
			return msgs, false, err
		}
		fresh := 0
		for _, m := range ms {
			handles = append(handles, aws.ToString(m.ReceiptHandle))
			id := aws.ToString(m.MessageId)
			if seen[id] {
				continue
			}
			if len(seen) >= maxN {
				more = true
				continue
			}
			seen[id] = true
			fresh++
			msg := message(m)
			msgs = append(msgs, msg)
		}
		if fresh == 0 {
			break
		}
	}
	return msgs, more, nil
}

// Report is what one redrive run did.
type Report struct {
	// DLQ is the dead-letter queue as given.
	DLQ string `json:"dlq"`
	// Depth is the DLQ's depth at the start: visible, in flight and delayed messages.
	Depth int `json:"depth"`
	// Limit is the most the run moves: Depth, or the Max asked for when that is lower.
	Limit int `json:"limit"`
	// Moved counts the moved messages by the name of the queue they went to.
	Moved map[string]int `json:"moved"`
	// Repeats counts the messages left in the DLQ because their body was moved earlier in
	// the run: messages that failed again and came back, or duplicates.
	Repeats int `json:"repeats"`
	// Left is the DLQ's depth at the end, -1 if it could not be read.
	Left int `json:"left"`
}

// Total is the number of messages moved.
func (r Report) Total() int {
	n := 0
	for _, v := range r.Moved {
		n += v
	}
	return n
}

// RedriveOptions says what one redrive run moves.
type RedriveOptions struct {
	// DLQ is the dead-letter queue: JUNBAN_ORDERS_DLQ or JUNBAN_RESULTS_DLQ, by the name or
	// URL configured, its queue name or its URL; empty: JUNBAN_ORDERS_DLQ.
	DLQ string
	// To, when set, must name the queue the DLQ serves (as DLQ names the DLQ); anything
	// else is ErrBadTarget. It chooses nothing: the messages always go to that queue.
	To string
	// Max bounds the messages moved; 0: no bound beyond the DLQ's depth at the start.
	Max int
}

// Redrive moves messages from one of junban's dead-letter queues back to the queue it
// serves: JUNBAN_ORDERS_DLQ's to JUNBAN_ORDERS_QUEUE, JUNBAN_RESULTS_DLQ's to
// JUNBAN_RESULTS_QUEUE, whatever a message's junban-source-queue attribute says (it is
// dropped on the way). It deletes each from the DLQ only after the target accepted it.
// Before anything moves it refuses (ErrBadTarget) a DLQ that is not junban's, an o.To
// that is not the queue the DLQ serves, and a served queue that is the DLQ itself.
//
// One run cannot loop, even when the messages fail again at once and come back while it
// runs: it moves at most the DLQ's depth at its start (at least one receive's worth, as
// SQS's depth is approximate; o.Max lowers it), moves a body at most once (a message whose
// body it already moved is left in the DLQ, hidden while the run goes on and visible again
// when it ends), and ends at the first receive that brings no message it has not seen, or
// after reading twice the limit.
func Redrive(ctx context.Context, c *sqs.Client, cfg config.SQS, o RedriveOptions) (Report, error) {
	if o.Max < 0 {
		return Report{}, fmt.Errorf("%w: max %d is negative", ErrBadTarget, o.Max)
	}
	name := cmp.Or(o.DLQ, cfg.OrdersDLQ)
	r, depth, err := openRoute(ctx, c, cfg, name, o.To)
	if err != nil {
		return Report{}, fmt.Errorf("redrive %s: %w", name, err)
	}
	dlqURL, target := r.dlqURL, r.servedURL

	rep := Report{DLQ: name, Depth: depth, Limit: max(depth, 10), Moved: map[string]int{}, Left: -1}
	if o.Max > 0 {
		rep.Limit = min(o.Max, rep.Limit)
	}
	// Moved bodies, by hash: a message that comes back from its queue is recognised by
	// its body alone. Its attributes do not survive every way back (the order-worker
	// dead-letters a parked event without them), and its reason may differ the second time.
	movedBodies := map[[sha256.Size]byte]bool{}
	seen := map[string]bool{} // every message id received
	var handBack []string
	defer func() { Release(ctx, c, dlqURL, handBack) }()
	for rep.Total() < rep.Limit && len(seen) < 2*rep.Limit {
		ms, err := receive(ctx, c, dlqURL, int32(min(rep.Limit-rep.Total(), 10)), RedriveVisibility)
		if err != nil {
			return rep, fmt.Errorf("redrive: moved %d, then: %w", rep.Total(), err)
		}
		fresh := false
		for i, m := range ms {
			id, handle := aws.ToString(m.MessageId), aws.ToString(m.ReceiptHandle)
			if seen[id] {
				// The emulator may return one message twice in one answer.
				continue
			}
			seen[id], fresh = true, true
			sum := sha256.Sum256([]byte(aws.ToString(m.Body)))
			if movedBodies[sum] || rep.Total() >= rep.Limit {
				if movedBodies[sum] {
					rep.Repeats++
				}
				handBack = append(handBack, handle)
				continue
			}
			if err := send(ctx, c, target, m); err != nil {
				for _, rest := range ms[i:] {
					handBack = append(handBack, aws.ToString(rest.ReceiptHandle))
				}
				return rep, fmt.Errorf("redrive: moved %d, then: %w", rep.Total(), err)
			}
			movedBodies[sum] = true
			rep.Moved[queueName(target)]++
			// Sent: the delete must happen even if the run is interrupted now.
			if _, err := c.DeleteMessage(context.WithoutCancel(ctx), &sqs.DeleteMessageInput{QueueUrl: aws.String(dlqURL), ReceiptHandle: m.ReceiptHandle}); err != nil {
				for _, rest := range ms[i+1:] {
					handBack = append(handBack, aws.ToString(rest.ReceiptHandle))
				}
				return rep, fmt.Errorf("redrive: moved %d (the last one may come again), then: %w", rep.Total(), err)
			}
		}
		// A receive that brings nothing new ends the run. The messages left so far are
		// hidden until it ends, so each receive brings others while there are any.
		if !fresh {
			break
		}
	}
	Release(ctx, c, dlqURL, handBack)
	handBack = nil
	if _, n, err := QueueState(ctx, c, dlqURL); err == nil {
		rep.Left = n
	}
	return rep, nil
}

// send sends the dead-lettered message m to the queue at url with its attributes but
// the DLQ reason and the source queue, which describe its stay in the DLQ. On a FIFO
// queue it goes in the group it had in the DLQ (its original group: the consumer and
// SQS's redrive keep it), deduplicated by its DLQ message id: a send repeated because the
// delete from the DLQ failed is dropped, and the same event dead-lettered and redriven
// again is a new DLQ message.
func send(ctx context.Context, c *sqs.Client, url string, m types.Message) error {
	attrs := map[string]types.MessageAttributeValue{}
	for k, v := range m.MessageAttributes {
		if k != queue.AttrDLQReason && k != queue.AttrSourceQueue {
			attrs[k] = v
		}
	}
	keys := queue.Keys{Group: m.Attributes[string(types.MessageSystemAttributeNameMessageGroupId)], Dedup: aws.ToString(m.MessageId)}
	group, dedup, err := keys.For(url)
	if err != nil {
		return err
	}
	_, err = c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: m.Body, MessageAttributes: attrs,
		MessageGroupId: group, MessageDeduplicationId: dedup})
	return err
}
