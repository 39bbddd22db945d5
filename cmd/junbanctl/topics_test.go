package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/junban/junban/internal/cli"
	"github.com/junban/junban/internal/testenv"
	"github.com/junban/junban/internal/topics"
)

// topics subscribe, run three times (raw; then a filter without raw; then the same again),
// leaves one subscription with the last run's attributes and one policy statement for the
// topic beside the queue's statement that was there before.
func TestTopicsSubscribeIsIdempotent(t *testing.T) {
	sn := testenv.SNS(t)
	sq := testenv.SQS(t)
	ctx := context.Background()
	q := testenv.NewQueues(t, sq, 30)
	q.Setenv(t)
	testenv.SetSNSenv(t)
	topic := testenv.Topic(t, sn)

	other := `{"Version":"2012-10-17","Statement":[{"Sid":"KeepMe","Effect":"Allow","Principal":{"AWS":"arn:aws:iam::123456789012:root"},"Action":"sqs:SendMessage","Resource":"*"}]}`
	if _, err := sq.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: aws.String(q.Orders.URL),
		Attributes: map[string]string{"Policy": other}}); err != nil {
		t.Fatal(err)
	}

	run := func(args ...string) topics.Subscription {
		t.Helper()
		var out bytes.Buffer
		if err := ctl(ctx, &out, "topics subscribe", append([]string{topic, "--json"}, args...)); err != nil {
			t.Fatalf("topics subscribe %q: %v", args, err)
		}
		var s topics.Subscription
		if err := json.Unmarshal(out.Bytes(), &s); err != nil {
			t.Fatalf("%v: %s", err, out.String())
		}
		return s
	}
	first := run("--raw")
	if !first.Created || !first.PolicySet {
		t.Fatalf("first run: %+v, want the subscription created and the policy set", first)
	}
	second := run("--filter", "payment.confirmed,order.placed")
	if second.Created || second.ARN != first.ARN || len(second.Updated) == 0 || second.PolicySet {
		t.Fatalf("second run: %+v, want %s updated, the policy in place", second, first.ARN)
	}
	third := run("--filter", "order.placed,payment.confirmed")
	if third.Created || third.ARN != first.ARN || len(third.Updated) != 0 || third.PolicySet {
		t.Fatalf("third run: %+v, want nothing done", third)
	}

	subs, err := sn.ListSubscriptionsByTopic(ctx, &sns.ListSubscriptionsByTopicInput{TopicArn: aws.String(topic)})
	if err != nil {
		t.Fatal(err)
	}
	if len(subs.Subscriptions) != 1 || aws.ToString(subs.Subscriptions[0].Endpoint) != first.QueueARN {
		t.Fatalf("subscriptions %+v, want one, of %s", subs.Subscriptions, first.QueueARN)
	}
	attrs, err := sn.GetSubscriptionAttributes(ctx, &sns.GetSubscriptionAttributesInput{SubscriptionArn: aws.String(first.ARN)})
	if err != nil {
		t.Fatal(err)
	}
	if a := attrs.Attributes; a["RawMessageDelivery"] != "false" || a["FilterPolicyScope"] != "MessageAttributes" ||
		a["FilterPolicy"] != `{"type":["order.placed","payment.confirmed"]}` {
		t.Fatalf("subscription attributes %v", a)
	}

	qa, err := sq.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(q.Orders.URL), AttributeNames: []sqstypes.QueueAttributeName{"Policy"}})
	if err != nil {
		t.Fatal(err)
	}
	var policy struct {
		Statement []map[string]any
	}
	if err := json.Unmarshal([]byte(qa.Attributes["Policy"]), &policy); err != nil {
		t.Fatal(err)
	}
	sids := map[string]int{}
	for _, st := range policy.Statement {
		sids[st["Sid"].(string)]++
	}
	if len(policy.Statement) != 2 || sids["KeepMe"] != 1 || sids[topics.PolicySid(topic)] != 1 {
		t.Fatalf("queue policy %s, want KeepMe and %s once each", qa.Attributes["Policy"], topics.PolicySid(topic))
	}
	for _, st := range policy.Statement {
		if st["Sid"] != topics.PolicySid(topic) {
			continue
		}
		b, _ := json.Marshal(st)
		want, _ := json.Marshal(topics.Statement(first.QueueARN, topic))
		if string(b) != string(want) {
			t.Fatalf("statement %s, want %s", b, want)
		}
	}
}

func TestTopicsSubscribeArgumentsAreChecked(t *testing.T) {
	for _, args := range [][]string{
		{}, {"not-an-arn"}, {"arn:aws:sns:us-east-1:000000000000:t", "--filter", "order.teleported"},
		{"arn:aws:sns:us-east-1:000000000000:t", "extra"},
	} {
		if err := ctl(context.Background(), nil, "topics subscribe", args); !errors.Is(err, cli.ErrUsage) {
			t.Errorf("topics subscribe %q: %v, want a usage error", args, err)
		}
	}
}
