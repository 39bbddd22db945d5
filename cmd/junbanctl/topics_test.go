package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/junban/junban/internal/aws/topics"
	"github.com/junban/junban/internal/platform/cli"
	"github.com/junban/junban/internal/testenv"
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

// topics create, on the binary: run twice it prints the same ARN (CreateTopic finds the
// topic); --fifo makes NAME.fifo a FIFO topic; --json names it. topics subscribe --queue
// --create-queue then makes a consumer's queue, subscribes it with raw delivery (a second
// run finds it all in place), and a message published to the topic arrives in it as
// published; the orders queue is not subscribed.
func TestTopicsCreateAndSubscribeAnotherQueue(t *testing.T) {
	sn := testenv.SNS(t)
	sq := testenv.SQS(t)
	ctx := context.Background()
	q := testenv.NewQueues(t, sq, 30)
	bin := testenv.Binary(t, "junbanctl")
	env := append(testenv.Env(t), "JUNBAN_STACK_ENV=/nonexistent/stack.env", "AWS_ENDPOINT_URL_SNS="+testenv.SNSEndpoint(t),
		"JUNBAN_ORDERS_QUEUE="+q.OrdersName)
	run := func(args ...string) string {
		t.Helper()
		code, stdout, stderr := testenv.Exec(t, bin, env, args...)
		if code != 0 {
			t.Fatalf("junbanctl %q: exit %d\n%s%s", args, code, stdout, stderr)
		}
		return stdout
	}
	name := testenv.Name(t)
	t.Cleanup(func() {
		for _, n := range []string{name, name + ".fifo"} {
			arn := strings.TrimSpace(run("topics", "create", n))
			sn.DeleteTopic(ctx, &sns.DeleteTopicInput{TopicArn: aws.String(arn)})
		}
		if u, err := sq.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(name + "-shop")}); err == nil {
			sq.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: u.QueueUrl})
		}
	})

	arn := strings.TrimSpace(run("topics", "create", name))
	if !strings.HasPrefix(arn, "arn:aws:sns:") || !strings.HasSuffix(arn, ":"+name) {
		t.Fatalf("topics create printed %q, want the topic's ARN", arn)
	}
	if again := strings.TrimSpace(run("topics", "create", name)); again != arn {
		t.Fatalf("second topics create printed %q, want %q", again, arn)
	}
	var fifo topicReport
	testenv.DecodeJSON(t, "topics create --fifo --json", []byte(run("topics", "create", name, "--fifo", "--json")), &fifo)
	if !fifo.FIFO || fifo.Name != name+".fifo" || !strings.HasSuffix(fifo.ARN, ":"+name+".fifo") {
		t.Fatalf("topics create --fifo: %+v", fifo)
	}
	attrs, err := sn.GetTopicAttributes(ctx, &sns.GetTopicAttributesInput{TopicArn: aws.String(fifo.ARN)})
	if err != nil || attrs.Attributes["FifoTopic"] != "true" {
		t.Fatalf("FIFO topic's attributes %v, %v", attrs, err)
	}

	var s topics.Subscription
	for i := range 2 {
		testenv.DecodeJSON(t, "topics subscribe --queue --json",
			[]byte(run("topics", "subscribe", arn, "--queue", name+"-shop", "--create-queue", "--json")), &s)
		if s.Created != (i == 0) || s.PolicySet != (i == 0) || len(s.Updated) != 0 {
			t.Fatalf("run %d: %+v", i+1, s)
		}
	}
	sa, err := sn.GetSubscriptionAttributes(ctx, &sns.GetSubscriptionAttributesInput{SubscriptionArn: aws.String(s.ARN)})
	if err != nil || sa.Attributes["RawMessageDelivery"] != "true" || !strings.HasSuffix(s.QueueARN, ":"+name+"-shop") {
		t.Fatalf("subscription %+v: attributes %v, %v; want raw delivery to %s-shop", s, sa, err, name)
	}
	subs, err := sn.ListSubscriptionsByTopic(ctx, &sns.ListSubscriptionsByTopicInput{TopicArn: aws.String(arn)})
	if err != nil || len(subs.Subscriptions) != 1 {
		t.Fatalf("subscriptions of the topic: %+v, %v; want the shop's queue's alone", subs, err)
	}

	body := `{"id":"x","kind":"stock.out"}`
	if _, err := sn.Publish(ctx, &sns.PublishInput{TopicArn: aws.String(arn), Message: aws.String(body)}); err != nil {
		t.Fatal(err)
	}
	u, err := sq.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(name + "-shop")})
	if err != nil {
		t.Fatal(err)
	}
	var got string
	testenv.WaitFor(t, 10*time.Second, "the published message in the shop's queue", func() bool {
		out, err := sq.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: u.QueueUrl, WaitTimeSeconds: 1})
		if err == nil && len(out.Messages) > 0 {
			got = aws.ToString(out.Messages[0].Body)
		}
		return got != ""
	})
	if got != body {
		t.Fatalf("the shop's queue got %q, want %q as published", got, body)
	}
}

func TestTopicsCreateArgumentsAreChecked(t *testing.T) {
	for _, args := range [][]string{{}, {"a", "b"}, {"has space"}, {"dot.ted"}, {strings.Repeat("n", 252)}} {
		if err := ctl(context.Background(), nil, "topics create", args); !errors.Is(err, cli.ErrUsage) {
			t.Errorf("topics create %q: %v, want a usage error", args, err)
		}
	}
	if err := ctl(context.Background(), nil, "topics subscribe", []string{"arn:aws:sns:us-east-1:000000000000:t", "--create-queue"}); !errors.Is(err, cli.ErrUsage) {
		t.Errorf("topics subscribe --create-queue without --queue: %v, want a usage error", err)
	}
}
