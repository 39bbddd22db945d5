package queue

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// Defaults of PairSpec: the values the stack, LocalStack's init script and a new AWS
// account get.
const (
	// MaxReceiveCountDefault is how many receives SQS allows a message before it moves
	// the message to the DLQ itself.
	MaxReceiveCountDefault = 5
	// VisibilityTimeoutDefault (seconds) of a work queue: the order-worker's heartbeats
	// extend it while a handler runs, so it only bounds how soon a crashed worker's
	// messages come back.
	VisibilityTimeoutDefault = 60
	// DLQRetentionDefault (seconds) of a dead-letter queue: SQS's most, 14 days, so an
	// operator has time to look before a message is gone.
	DLQRetentionDefault = 1209600
)

// ErrRedriveDiffers: a queue that exists has a redrive policy other than the one asked
// for. ProvisionPair leaves it as it is unless told to replace it.
var ErrRedriveDiffers = errors.New("queue: the existing queue's redrive policy differs")

// ErrMixedPair: of a work queue and its dead-letter queue one is a FIFO queue and the
// other is not. SQS allows a FIFO queue only a FIFO DLQ, and a standard queue only a
// standard one.
var ErrMixedPair = errors.New("queue: a FIFO queue and a standard queue cannot be a queue and its DLQ")

// PairSpec is a work queue and its dead-letter queue as ProvisionPair creates them.
type PairSpec struct {
	// Name of the work queue; a name that ends in ".fifo" makes a FIFO queue.
	Name string
	// DLQName is the name of its dead-letter queue, ending in ".fifo" when Name does.
	DLQName string
	// MaxReceiveCount of the redrive policy; 0: MaxReceiveCountDefault.
	MaxReceiveCount int
	// VisibilityTimeout (seconds) of a work queue that is created; 0: VisibilityTimeoutDefault.
	VisibilityTimeout int
	// DLQRetention (seconds) of a dead-letter queue that is created; 0: DLQRetentionDefault.
	DLQRetention int
	// ReplaceRedrive sets the redrive policy of an existing work queue whose policy
	// differs; without it that is ErrRedriveDiffers.
	ReplaceRedrive bool
}

// Provisioned says what ProvisionPair found and did.
type Provisioned struct {
	Pair
	// DLQCreated and Created: the queue did not exist and was created.
	DLQCreated, Created bool
	// RedriveSet: the work queue existed and its redrive policy was set (it had none, or
	// ReplaceRedrive and it differed).
	RedriveSet bool
}

// ProvisionPair creates what is missing of a work queue and its DLQ, with the redrive
// policy from the queue to the DLQ, and leaves what exists alone. It is idempotent: a
// second run finds both queues and the policy and changes nothing. Attributes of
// existing queues other than the redrive policy are never changed (CreateQueue would
// refuse an existing queue whose attributes differ, so it is only called for a
// missing one).
//
// A name that ends in ".fifo" is a FIFO queue (created with FifoQueue, deduplicating by
// the ids senders give, not by content); a work queue and its DLQ must be of one kind
// (ErrMixedPair).
func ProvisionPair(ctx context.Context, c *sqs.Client, spec PairSpec) (Provisioned, error) {
	if spec.Name == "" || spec.DLQName == "" || spec.Name == spec.DLQName {
		return Provisioned{}, fmt.Errorf("queue: provision: need two different names, got %q and %q", spec.Name, spec.DLQName)
	}
	if err := CheckPair(spec.Name, spec.DLQName); err != nil {
		return Provisioned{}, err
	}
	maxReceive := cmp.Or(spec.MaxReceiveCount, MaxReceiveCountDefault)
	if maxReceive < 1 || maxReceive > 1000 {
		return Provisioned{}, fmt.Errorf("queue: provision %s: maxReceiveCount %d, want 1..1000", spec.Name, maxReceive)
	}
	var p Provisioned
	var err error
	if p.DLQURL, p.DLQCreated, err = ensureQueue(ctx, c, spec.DLQName, withKind(spec.DLQName, map[string]string{
		"MessageRetentionPeriod": strconv.Itoa(cmp.Or(spec.DLQRetention, DLQRetentionDefault)),
	})); err != nil {
		return p, err
	}
	attrs, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       aws.String(p.DLQURL),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn},
	})
	if err != nil {
		return p, fmt.Errorf("queue: arn of %s: %w", spec.DLQName, err)
	}
	dlqARN := attrs.Attributes[string(types.QueueAttributeNameQueueArn)]
	if dlqARN == "" {
		return p, fmt.Errorf("queue: %s has no QueueArn", spec.DLQName)
	}
	redrive := fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":"%d"}`, dlqARN, maxReceive)
	if p.URL, p.Created, err = ensureQueue(ctx, c, spec.Name, withKind(spec.Name, map[string]string{
		"VisibilityTimeout": strconv.Itoa(cmp.Or(spec.VisibilityTimeout, VisibilityTimeoutDefault)),
		"RedrivePolicy":     redrive,
	})); err != nil || p.Created {
		return p, err
	}
	attrs, err = c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       aws.String(p.URL),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameRedrivePolicy},
	})
	if err != nil {
		return p, fmt.Errorf("queue: redrive policy of %s: %w", spec.Name, err)
	}
	have := attrs.Attributes[string(types.QueueAttributeNameRedrivePolicy)]
	if have != "" {
		target, n, err := parseRedrive(have)
		if err == nil && target == dlqARN && n == maxReceive {
			return p, nil
		}
		if !spec.ReplaceRedrive {
			return p, fmt.Errorf("%w: %s has %s, want %s", ErrRedriveDiffers, spec.Name, have, redrive)
		}
	}
	if _, err := c.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{
		QueueUrl:   aws.String(p.URL),
		Attributes: map[string]string{string(types.QueueAttributeNameRedrivePolicy): redrive},
	}); err != nil {
		return p, fmt.Errorf("queue: set the redrive policy of %s: %w", spec.Name, err)
	}
	p.RedriveSet = true
	return p, nil
}

// CheckPair returns ErrMixedPair unless the queue and the DLQ named (by name or URL) are
// both FIFO queues or both standard ones.
func CheckPair(queue, dlq string) error {
	if IsFIFO(queue) != IsFIFO(dlq) {
		return fmt.Errorf("%w: %s and its DLQ %s (a FIFO queue's name, and only its, ends in %q)", ErrMixedPair, queueName(queue), queueName(dlq), FIFOSuffix)
	}
	return nil
}

// withKind adds to the attributes of a queue to create what makes it a FIFO queue when its
// name says it is one: SQS creates a FIFO queue only when asked with FifoQueue.
func withKind(name string, attrs map[string]string) map[string]string {
	if IsFIFO(name) {
		attrs[string(types.QueueAttributeNameFifoQueue)] = "true"
	}
	return attrs
}

// ensureQueue returns the URL of the queue called name, creating it with attrs when it
// does not exist.
func ensureQueue(ctx context.Context, c *sqs.Client, name string, attrs map[string]string) (url string, created bool, err error) {
	got, err := c.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(name)})
	if err == nil {
		return aws.ToString(got.QueueUrl), false, nil
	}
	var gone *types.QueueDoesNotExist
	if !errors.As(err, &gone) {
		return "", false, fmt.Errorf("queue: look up %s: %w", name, err)
	}
	out, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
	if err != nil {
		return "", false, fmt.Errorf("queue: create %s: %w", name, err)
	}
	return aws.ToString(out.QueueUrl), true, nil
}

// parseRedrive reads a RedrivePolicy attribute; SQS writes maxReceiveCount as a number,
// some emulators as a string.
func parseRedrive(s string) (target string, maxReceive int, err error) {
	var p struct {
		Target string          `json:"deadLetterTargetArn"`
		Max    json.RawMessage `json:"maxReceiveCount"`
	}
	if err := json.Unmarshal([]byte(s), &p); err != nil {
		return "", 0, err
	}
	var n int
	if err := json.Unmarshal(p.Max, &n); err != nil {
		var str string
		if err := json.Unmarshal(p.Max, &str); err != nil {
			return "", 0, err
		}
		if n, err = strconv.Atoi(str); err != nil {
			return "", 0, err
		}
	}
	return p.Target, n, nil
}
