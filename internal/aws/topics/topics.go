// Package topics feeds junban's orders queue from an SNS topic: it subscribes the queue to
// the topic (raw delivery or not, a filter policy on the event type or none), grants the
// topic the right to send to the queue in the queue's policy, and publishes junban events
// to a topic the way the subscription's filter expects them. Subscribe is idempotent, so
// `junbanctl topics subscribe` and `junbanlab loadgen --via-sns` can run it every time.
package topics

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	snstypes "github.com/aws/aws-sdk-go-v2/service/sns/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/junban/junban/internal/domain"
	"github.com/junban/junban/internal/queue"
)

// TypeAttribute is the message attribute a publisher sets to the junban event type: the
// filter policy Subscribe writes matches on it, so a message without it is dropped by a
// filtered subscription.
const TypeAttribute = "type"

// Config is where SNS is, read from the environment.
type Config struct {
	// Region is the AWS region.
	Region string `env:"AWS_REGION,required,notEmpty"`
	// Endpoint overrides the SNS endpoint (the local stack's emulator); empty for AWS.
	Endpoint string `env:"AWS_ENDPOINT_URL_SNS"`
}

// ErrNoSNS is returned by NewClient when no SNS endpoint is set but an SQS one is: the
// queues are on a local emulator and SNS requests would go to AWS.
var ErrNoSNS = errors.New("topics: AWS_ENDPOINT_URL_SNS is not set while AWS_ENDPOINT_URL_SQS is (a local SQS emulator without SNS?)")

// NewClient returns an SNS client for cfg. sqsEndpoint is the SQS endpoint in use: when it
// is set and cfg.Endpoint is not, NewClient refuses with ErrNoSNS rather than reach AWS.
func NewClient(ctx context.Context, cfg Config, sqsEndpoint string) (*sns.Client, error) {
	if cfg.Endpoint == "" && sqsEndpoint != "" {
		return nil, ErrNoSNS
	}
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx, awsconfig.WithRegion(cfg.Region))
	if err != nil {
		return nil, fmt.Errorf("topics: aws config: %w", err)
	}
	return sns.NewFromConfig(awsCfg, func(o *sns.Options) {
		// A publish whose answer is lost is retried: guarded, the answer is not lost to
		// the transport's handling of the request's body (queue.GuardBodies).
		o.HTTPClient = queue.GuardBodies(o.HTTPClient)
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
	}), nil
}

// Spec is a subscription of a queue to a topic.
type Spec struct {
	// TopicARN is the topic.
	TopicARN string
	// QueueURL is the queue that receives the topic's messages.
	QueueURL string
	// Raw turns RawMessageDelivery on: the queue gets the message alone, not the SNS
	// notification around it (the order-worker takes either).
	Raw bool
	// Types, when not empty, are the only event types delivered: a filter policy on the
	// message attribute TypeAttribute.
	Types []string
}

// Subscription is what Subscribe found and did.
type Subscription struct {
	// ARN of the subscription.
	ARN string `json:"subscription_arn"`
	// QueueARN is the subscribed queue's ARN.
	QueueARN string `json:"queue_arn"`
	// Created is true when the subscription was made now.
	Created bool `json:"created"`
	// Updated names the attributes of an existing subscription that were set now.
	Updated []string `json:"updated,omitempty"`
	// PolicySid is the queue policy statement that lets the topic send to the queue.
	PolicySid string `json:"policy_sid"`
	// PolicySet is true when that statement was added or changed now.
	PolicySet bool `json:"policy_set"`
}

// Subscribe subscribes the queue to the topic as spec says, and lets the topic send to
// the queue: a statement of the queue's policy (one per topic, Sid from the topic ARN)
// allowing sns.amazonaws.com to SendMessage with aws:SourceArn the topic; the policy's
// other statements are kept. It is idempotent: an existing subscription of the queue to
// the topic is found and its attributes set where they differ, and the statement is
// replaced, never added twice. The policy is set first, so that the first message
// published after the subscription is allowed in.
func Subscribe(ctx context.Context, sn *sns.Client, sq *sqs.Client, spec Spec) (Subscription, error) {
	var s Subscription
	want, err := spec.attributes()
	if err != nil {
		return s, err
	}
	qa, err := sq.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       aws.String(spec.QueueURL),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn, sqstypes.QueueAttributeNamePolicy},
	})
	if err != nil {
		return s, fmt.Errorf("topics: queue %s: %w", spec.QueueURL, err)
	}
	s.QueueARN = qa.Attributes[string(sqstypes.QueueAttributeNameQueueArn)]
	if s.QueueARN == "" {
		return s, fmt.Errorf("topics: queue %s: no QueueArn attribute", spec.QueueURL)
	}
	s.PolicySid = PolicySid(spec.TopicARN)
	policy, changed, err := MergePolicy(qa.Attributes[string(sqstypes.QueueAttributeNamePolicy)], s.QueueARN, spec.TopicARN)
	if err != nil {
		return s, fmt.Errorf("topics: queue %s: %w", spec.QueueURL, err)
	}
	if changed {
		if _, err := sq.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{
			QueueUrl:   aws.String(spec.QueueURL),
			Attributes: map[string]string{string(sqstypes.QueueAttributeNamePolicy): policy},
		}); err != nil {
			return s, fmt.Errorf("topics: queue %s: set policy: %w", spec.QueueURL, err)
		}
		s.PolicySet = true
	}

	s.ARN, err = find(ctx, sn, spec.TopicARN, s.QueueARN)
	if err != nil {
		return s, err
	}
	if s.ARN == "" {
		out, err := sn.Subscribe(ctx, &sns.SubscribeInput{
			TopicArn: aws.String(spec.TopicARN), Protocol: aws.String("sqs"), Endpoint: aws.String(s.QueueARN),
			Attributes: want, ReturnSubscriptionArn: true,
		})
		if err != nil {
			return s, fmt.Errorf("topics: subscribe %s to %s: %w", s.QueueARN, spec.TopicARN, err)
		}
		s.ARN, s.Created = aws.ToString(out.SubscriptionArn), true
		return s, nil
	}
	got, err := sn.GetSubscriptionAttributes(ctx, &sns.GetSubscriptionAttributesInput{SubscriptionArn: aws.String(s.ARN)})
	if err != nil {
		return s, fmt.Errorf("topics: subscription %s: %w", s.ARN, err)
	}
	// The scope after the policy: SNS takes a scope only beside a policy.
	for _, name := range []string{"RawMessageDelivery", "FilterPolicy", "FilterPolicyScope"} {
		if sameAttribute(name, got.Attributes[name], want[name]) {
			continue
		}
		// A filter is removed with an empty policy; the scope goes with it.
		if name == "FilterPolicyScope" && want[name] == "" {
			continue
		}
		v := want[name]
		if name == "FilterPolicy" && v == "" {
			v = "{}"
		}
		if _, err := sn.SetSubscriptionAttributes(ctx, &sns.SetSubscriptionAttributesInput{
			SubscriptionArn: aws.String(s.ARN), AttributeName: aws.String(name), AttributeValue: aws.String(v),
		}); err != nil {
			return s, fmt.Errorf("topics: subscription %s: set %s: %w", s.ARN, name, err)
		}
		s.Updated = append(s.Updated, name)
	}
	return s, nil
}

// attributes are the subscription attributes spec asks for.
func (spec Spec) attributes() (map[string]string, error) {
	if !strings.HasPrefix(spec.TopicARN, "arn:") || strings.Count(spec.TopicARN, ":") != 5 {
		return nil, fmt.Errorf("topics: %q is not a topic ARN", spec.TopicARN)
	}
	a := map[string]string{"RawMessageDelivery": strconv.FormatBool(spec.Raw)}
	if len(spec.Types) > 0 {
		p, err := FilterPolicy(spec.Types)
		if err != nil {
			return nil, err
		}
		a["FilterPolicy"], a["FilterPolicyScope"] = p, "MessageAttributes"
	}
	return a, nil
}

// FilterPolicy is the filter policy that delivers the event types given and no other: on
// the message attribute TypeAttribute.
func FilterPolicy(types []string) (string, error) {
	ts := slices.Clone(types)
	slices.Sort(ts)
	ts = slices.Compact(ts)
	if slices.Contains(ts, "") {
		return "", errors.New("topics: an empty event type in the filter")
	}
	b, err := json.Marshal(map[string][]string{TypeAttribute: ts})
	return string(b), err
}

// sameAttribute reports whether a subscription attribute as read equals the one wanted:
// policies compare as JSON, an absent filter as an empty one.
func sameAttribute(name, got, want string) bool {
	switch name {
	case "FilterPolicy":
		if got == "" || got == "{}" {
			return want == ""
		}
		if want == "" {
			return false
		}
		var g, w any
		return json.Unmarshal([]byte(got), &g) == nil && json.Unmarshal([]byte(want), &w) == nil && reflect.DeepEqual(g, w)
	case "FilterPolicyScope":
		return want == "" || got == want
	case "RawMessageDelivery":
		return strings.EqualFold(got, want) || got == "" && want == "false"
	}
	return got == want
}

// find returns the ARN of the SQS subscription of queueARN to topicARN, or "".
func find(ctx context.Context, sn *sns.Client, topicARN, queueARN string) (string, error) {
	p := sns.NewListSubscriptionsByTopicPaginator(sn, &sns.ListSubscriptionsByTopicInput{TopicArn: aws.String(topicARN)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return "", fmt.Errorf("topics: list subscriptions of %s: %w", topicARN, err)
		}
		for _, sub := range page.Subscriptions {
			if aws.ToString(sub.Protocol) == "sqs" && aws.ToString(sub.Endpoint) == queueARN {
				return aws.ToString(sub.SubscriptionArn), nil
			}
		}
	}
	return "", nil
}

// PolicySid is the Sid of the queue policy statement that lets topicARN send to the queue:
// one per topic, letters and digits only (as IAM wants), the same on every run.
func PolicySid(topicARN string) string {
	sum := sha256.Sum256([]byte(topicARN))
	return "JunbanFromSNS" + hex.EncodeToString(sum[:10])
}

// Statement is the queue policy statement that lets topicARN send to queueARN.
func Statement(queueARN, topicARN string) map[string]any {
	return map[string]any{
		"Sid":       PolicySid(topicARN),
		"Effect":    "Allow",
		"Principal": map[string]any{"Service": "sns.amazonaws.com"},
		"Action":    "sqs:SendMessage",
		"Resource":  queueARN,
		"Condition": map[string]any{"ArnEquals": map[string]any{"aws:SourceArn": topicARN}},
	}
}

// MergePolicy returns the queue policy current (JSON, "" for none) with the statement for
// topicARN in it, replacing a statement of the same Sid and keeping every other one, and
// whether that changed anything.
func MergePolicy(current, queueARN, topicARN string) (string, bool, error) {
	doc := map[string]any{}
	if strings.TrimSpace(current) != "" {
		if err := json.Unmarshal([]byte(current), &doc); err != nil {
			return "", false, fmt.Errorf("the queue's policy is not JSON: %w", err)
		}
	}
	var stmts []any
	switch st := doc["Statement"].(type) {
	case nil:
	case []any:
		stmts = st
	case map[string]any:
		stmts = []any{st}
	default:
		return "", false, errors.New("the queue's policy has a Statement that is neither an object nor a list")
	}
	// Round-trip ours through JSON so that it compares with what was read.
	var want map[string]any
	b, _ := json.Marshal(Statement(queueARN, topicARN))
	json.Unmarshal(b, &want) //nolint:errcheck // just marshalled
	sid, found, changed := want["Sid"], false, true
	for i, st := range stmts {
		if m, ok := st.(map[string]any); ok && m["Sid"] == sid {
			if found {
				stmts[i] = nil
				continue
			}
			found, changed = true, !reflect.DeepEqual(m, want)
			stmts[i] = want
		}
	}
	stmts = slices.DeleteFunc(stmts, func(st any) bool { return st == nil })
	if !found {
		stmts = append(stmts, want)
	}
	if !changed && len(stmts) == len(statements(doc)) {
		return current, false, nil
	}
	if doc["Version"] == nil {
		doc["Version"] = "2012-10-17"
	}
	doc["Statement"] = stmts
	out, err := json.Marshal(doc)
	return string(out), true, err
}

func statements(doc map[string]any) []any {
	switch st := doc["Statement"].(type) {
	case []any:
		return st
	case map[string]any:
		return []any{st}
	}
	return nil
}

// Publish publishes events (junban events as JSON, at most 10) to topicARN, each with its
// type in the message attribute TypeAttribute so that a filtered subscription sees it.
// A FIFO topic (".fifo") gets the ids junban's FIFO orders queue gets (domain.OrderKeys,
// sent as queue.FIFOID makes them): the event's entity (its turn: the order's lcid, or
// the SKU's for the warehouse's events) as its message group, and its identity,
// "{<entity>}<event_id>", as its deduplication id, so that two orders' events sharing an
// event id are both delivered; there every event must be one junban would apply.
func Publish(ctx context.Context, sn *sns.Client, topicARN string, events [][]byte) error {
	if len(events) == 0 {
		return nil
	}
	if len(events) > 10 {
		return fmt.Errorf("topics: publish %d events: at most 10 at a time", len(events))
	}
	fifo := strings.HasSuffix(topicARN, ".fifo")
	entries := make([]snstypes.PublishBatchRequestEntry, len(events))
	for i, body := range events {
		var head struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(body, &head); err != nil || head.Type == "" {
			return fmt.Errorf("topics: publish: event %d has no type (%v)", i, err)
		}
		entries[i] = snstypes.PublishBatchRequestEntry{
			Id: aws.String(strconv.Itoa(i)), Message: aws.String(string(body)),
			MessageAttributes: map[string]snstypes.MessageAttributeValue{
				TypeAttribute: {DataType: aws.String("String"), StringValue: aws.String(head.Type)},
			},
		}
		if fifo {
			group, dedup, err := domain.OrderKeys(body)
			if err != nil {
				return fmt.Errorf("topics: publish to FIFO topic %s: event %d: %w", topicARN, i, err)
			}
			entries[i].MessageGroupId = aws.String(queue.FIFOID(group))
			entries[i].MessageDeduplicationId = aws.String(queue.FIFOID(dedup))
		}
	}
	out, err := sn.PublishBatch(ctx, &sns.PublishBatchInput{TopicArn: aws.String(topicARN), PublishBatchRequestEntries: entries})
	if err != nil {
		return fmt.Errorf("topics: publish to %s: %w", topicARN, err)
	}
	if len(out.Failed) > 0 {
		f := out.Failed[0]
		return fmt.Errorf("topics: publish to %s: %d of %d failed, e.g. %s: %s", topicARN, len(out.Failed), len(events),
			aws.ToString(f.Code), aws.ToString(f.Message))
	}
	return nil
}

// Publisher publishes batches of junban events to one topic (Publish): the orders queue's
// publisher, through SNS.
type Publisher struct {
	// Client is the SNS client.
	Client *sns.Client
	// TopicARN is the topic.
	TopicARN string
}

// PublishBatch publishes bodies, ten at a time.
func (p Publisher) PublishBatch(ctx context.Context, bodies [][]byte) error {
	for i := 0; i < len(bodies); i += 10 {
		if err := Publish(ctx, p.Client, p.TopicARN, bodies[i:min(i+10, len(bodies))]); err != nil {
			return err
		}
	}
	return nil
}

// Ensure creates the standard topic named name where it is missing (CreateTopic is
// idempotent) and returns its ARN.
func Ensure(ctx context.Context, sn *sns.Client, name string) (string, error) {
	out, err := sn.CreateTopic(ctx, &sns.CreateTopicInput{Name: aws.String(name)})
	if err != nil {
		return "", fmt.Errorf("topics: create topic %s: %w", name, err)
	}
	return aws.ToString(out.TopicArn), nil
}
