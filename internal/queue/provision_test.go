package queue_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/junban/junban/internal/queue"
	"github.com/junban/junban/internal/testenv"
)

func redriveOf(t *testing.T, c *sqs.Client, url string) string {
	t.Helper()
	out, err := c.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{
		QueueUrl:       aws.String(url),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameAll},
	})
	if err != nil {
		t.Fatal(err)
	}
	return out.Attributes["RedrivePolicy"]
}

func deleteQueues(t *testing.T, c *sqs.Client, names ...string) {
	t.Cleanup(func() {
		for _, n := range names {
			if u, err := c.GetQueueUrl(context.Background(), &sqs.GetQueueUrlInput{QueueName: aws.String(n)}); err == nil {
				c.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: u.QueueUrl})
			}
		}
	})
}

// A first run creates both queues with the redrive policy; a second one finds them and
// changes nothing; and a message received maxReceiveCount times lands in the DLQ, so the
// policy is the one SQS acts on.
func TestProvisionPairCreatesThenFindsTheQueues(t *testing.T) {
	t.Parallel()
	c, ops := countingClient(t)
	ctx := context.Background()
	name := testenv.Name(t)
	deleteQueues(t, c, name, name+"-dlq")
	spec := queue.PairSpec{Name: name, DLQName: name + "-dlq", MaxReceiveCount: 2, VisibilityTimeout: 1}
	first, err := queue.ProvisionPair(ctx, c, spec)
	if err != nil {
		t.Fatal(err)
	}
	if !first.Created || !first.DLQCreated || first.RedriveSet {
		t.Fatalf("first run: %+v, want both created", first)
	}
	if rp := redriveOf(t, c, first.URL); !strings.Contains(rp, name+"-dlq") {
		t.Fatalf("redrive policy %q does not name the DLQ", rp)
	}
	creates := ops.count("CreateQueue")
	again, err := queue.ProvisionPair(ctx, c, spec)
	if err != nil {
		t.Fatalf("second run: %v", err)
	}
	if again.Created || again.DLQCreated || again.RedriveSet || again.Pair != first.Pair {
		t.Fatalf("second run: %+v, want the same queues found as they are (first %+v)", again, first.Pair)
	}
	if n := ops.count("CreateQueue") - creates; n != 0 {
		t.Fatalf("second run called CreateQueue %d times", n)
	}

	// Received twice and never deleted (the visibility timeout, 1 s, runs out each
	// time), the message ends in the DLQ.
	sendBodies(t, c, first.URL, "doomed")
	receives := 0
	var inDLQ []types.Message
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline) && len(inDLQ) == 0; {
		out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(first.URL), WaitTimeSeconds: 1})
		if err != nil {
			t.Fatal(err)
		}
		receives += len(out.Messages)
		if len(out.Messages) == 0 && receives >= 2 {
			inDLQ = receiveAll(t, c, first.DLQURL, 1, time.Second)
		}
	}
	if len(inDLQ) != 1 || receives != 2 {
		t.Fatalf("after %d receives the DLQ holds %d messages, want the message after 2", receives, len(inDLQ))
	}
}

// A queue that exists without a redrive policy (made by hand, or by a tool that knows
// nothing of the DLQ) gets it; one whose policy differs is an error unless replacing is
// asked for.
func TestProvisionPairSetsAMissingRedrivePolicy(t *testing.T) {
	t.Parallel()
	c := testenv.SQS(t)
	ctx := context.Background()
	name := testenv.Name(t)
	other := name + "-other"
	deleteQueues(t, c, name, name+"-dlq", other)
	if _, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name)}); err != nil {
		t.Fatal(err)
	}
	p, err := queue.ProvisionPair(ctx, c, queue.PairSpec{Name: name, DLQName: name + "-dlq"})
	if err != nil {
		t.Fatal(err)
	}
	if p.Created || !p.DLQCreated || !p.RedriveSet {
		t.Fatalf("%+v: want the queue found, the DLQ created and the policy set", p)
	}
	if rp := redriveOf(t, c, p.URL); !strings.Contains(rp, name+"-dlq") {
		t.Fatalf("redrive policy %q after provisioning, want one to %s-dlq", rp, name)
	}

	// The same queue, now asked to redrive elsewhere.
	spec := queue.PairSpec{Name: name, DLQName: other}
	if _, err := queue.ProvisionPair(ctx, c, spec); !errors.Is(err, queue.ErrRedriveDiffers) {
		t.Fatalf("differing policy: %v, want ErrRedriveDiffers", err)
	}
	if rp := redriveOf(t, c, p.URL); !strings.Contains(rp, name+"-dlq\"") {
		t.Fatalf("the refused run changed the policy: %q", rp)
	}
	spec.ReplaceRedrive = true
	if p, err = queue.ProvisionPair(ctx, c, spec); err != nil || !p.RedriveSet {
		t.Fatalf("replace: %+v, %v", p, err)
	}
	if rp := redriveOf(t, c, p.URL); !strings.Contains(rp, other) {
		t.Fatalf("redrive policy %q after replacing, want one to %s", rp, other)
	}
}
