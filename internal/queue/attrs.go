package queue

import (
	"sort"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/junban/junban/internal/platform/tracing"
)

// Message attributes junban sets itself.
const (
	// AttrTraceParent and AttrTraceState carry the W3C trace context of the send's span
	// (internal/platform/tracing); the consumer's span continues it.
	AttrTraceParent = tracing.AttrTraceParent
	AttrTraceState  = tracing.AttrTraceState
	// AttrDLQReason says why a message was dead-lettered.
	AttrDLQReason = "junban-dlq-reason"
	// AttrSourceQueue names the queue a dead-lettered message came from.
	AttrSourceQueue = "junban-source-queue"
	// AttrAttempts, AttrFirstFailure and AttrLastFailure are set on an event the
	// order-worker quarantined: its failed runs, and when the first and the last were
	// counted (RFC 3339).
	AttrAttempts     = "junban-attempts"
	AttrFirstFailure = "junban-first-failure"
	AttrLastFailure  = "junban-last-failure"
)

// MaxAttributes is SQS's limit of message attributes per message.
const MaxAttributes = 10

const stringType = "String"

func toSQSAttributes(attrs map[string]string) map[string]types.MessageAttributeValue {
	if len(attrs) == 0 {
		return nil
	}
	out := make(map[string]types.MessageAttributeValue, len(attrs))
	for k, v := range attrs {
		if v == "" {
			// SQS refuses empty attribute values; an empty value carries nothing anyway.
			continue
		}
		out[k] = types.MessageAttributeValue{DataType: aws.String(stringType), StringValue: aws.String(v)}
	}
	return out
}

// fromSQSAttributes keeps the String and Number attributes (as strings); binary ones are
// not part of junban's contract.
func fromSQSAttributes(attrs map[string]types.MessageAttributeValue) map[string]string {
	if len(attrs) == 0 {
		return nil
	}
	out := make(map[string]string, len(attrs))
	for k, v := range attrs {
		if v.StringValue != nil {
			out[k] = *v.StringValue
		}
	}
	return out
}

// messageSize is the size SQS counts against the maximum message size: the body plus
// every attribute's name, data type and value.
func messageSize(body []byte, attrs map[string]types.MessageAttributeValue) int {
	n := len(body)
	for k, v := range attrs {
		n += len(k) + len(aws.ToString(v.DataType)) + len(aws.ToString(v.StringValue)) + len(v.BinaryValue)
	}
	return n
}

// limitAttributes drops attributes beyond SQS's limit of ten, keeping the ones named in
// keep first and the rest in name order, so a message is never refused for them.
func limitAttributes(attrs map[string]string, keep ...string) (map[string]string, []string) {
	if len(attrs) <= MaxAttributes {
		return attrs, nil
	}
	out := make(map[string]string, MaxAttributes)
	for _, k := range keep {
		if v, ok := attrs[k]; ok && len(out) < MaxAttributes {
			out[k] = v
		}
	}
	names := make([]string, 0, len(attrs))
	for k := range attrs {
		names = append(names, k)
	}
	sort.Strings(names)
	var dropped []string
	for _, k := range names {
		if _, ok := out[k]; ok {
			continue
		}
		if len(out) < MaxAttributes {
			out[k] = attrs[k]
		} else {
			dropped = append(dropped, k)
		}
	}
	return out, dropped
}
