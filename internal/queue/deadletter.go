package queue

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// maxReasonLen bounds the reason attribute, so a long error text cannot push a message
// over the size limit.
const maxReasonLen = 1024

// maxDeadLetterSize is what a dead-lettered message must fit in, body plus attributes:
// SQS's classic maximum, which junban's queues assume. A poison body close to it leaves
// less room than the reason and junban's attributes take.
const maxDeadLetterSize = MaxMessageSizeDefault

// minReasonLen is what DeadLetter keeps of a reason (its code and the start of the
// detail) before it drops other attributes to make room.
const minReasonLen = 64

// DeadLetter sends body to the dead-letter queue dlqURL with its attributes and the reason
// as the attribute "junban-dlq-reason". The Consumer uses it for Poison messages (adding
// "junban-source-queue"); the order-worker uses it for events parked too long.
//
// keys are the copy's ids when dlqURL is a FIFO queue (a FIFO queue's DLQ is FIFO too):
// the group of the original message (or its entity), and a deduplication id that names
// this dead-lettering, such as the original message's id: a second send of the same copy
// within five minutes is dropped, and a later dead-lettering of the same event must not
// be. Without a group id the send fails with ErrNoGroupID. A standard DLQ ignores keys.
//
// Only after DeadLetter returned nil may the caller delete the original message: until
// then the original is the only copy (invariant "no lost event"). Attributes beyond SQS's
// limit of ten are dropped, the junban ones and "traceparent" last. The reason is shortened
// so that the message fits in SQS's classic maximum size (fitReason): a poison message the
// DLQ refused would stay in its queue until SQS moved it there without a reason.
func DeadLetter(ctx context.Context, c *sqs.Client, dlqURL string, body []byte, reason string, attrs map[string]string, keys Keys) error {
	if dlqURL == "" {
		return fmt.Errorf("queue: dead-letter: no dead-letter queue URL")
	}
	group, dedup, err := keys.For(dlqURL)
	if err != nil {
		return fmt.Errorf("queue: dead-letter: %w", err)
	}
	// SQS refuses an attribute value that is not UTF-8.
	reason = truncateUTF8(strings.ToValidUTF8(reason, "\uFFFD"), maxReasonLen)
	if reason == "" {
		reason = "unspecified"
	}
	all := make(map[string]string, len(attrs)+1)
	maps.Copy(all, attrs)
	all[AttrDLQReason] = reason
	all, _ = limitAttributes(all, AttrDLQReason, AttrSourceQueue, AttrTraceParent)
	all = fitReason(body, all, maxDeadLetterSize)
	_, err = c.SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl:               aws.String(dlqURL),
		MessageBody:            aws.String(string(body)),
		MessageAttributes:      toSQSAttributes(all),
		MessageGroupId:         group,
		MessageDeduplicationId: dedup,
	})
	if err != nil {
		return fmt.Errorf("queue: dead-letter to %s: %w", queueName(dlqURL), err)
	}
	return nil
}

// fitReason makes body and attrs fit in limit bytes as SQS counts them (messageSize). It
// shortens the reason; when not even minReasonLen bytes of it fit, it first drops the
// other attributes, the caller's (in reverse name order) before "traceparent" and the
// source queue, until they do. A body over limit bytes came from a queue that
// allows more, so its DLQ must too: its attributes are left as they are.
func fitReason(body []byte, attrs map[string]string, limit int) map[string]string {
	if len(body) > limit {
		return attrs
	}
	reason := attrs[AttrDLQReason]
	rest := maps.Clone(attrs)
	delete(rest, AttrDLQReason)
	room := func() int {
		return limit - messageSize(body, toSQSAttributes(rest)) - len(AttrDLQReason) - len(stringType)
	}
	if room() >= len(reason) {
		return attrs
	}
	var drop []string
	for k := range rest {
		if k != AttrSourceQueue && k != AttrTraceParent {
			drop = append(drop, k)
		}
	}
	slices.Sort(drop)
	slices.Reverse(drop)
	drop = append(drop, AttrTraceParent, AttrSourceQueue)
	for _, k := range drop {
		if room() >= min(len(reason), minReasonLen) {
			break
		}
		delete(rest, k)
	}
	// With no room left at all the message goes without a reason rather than not at all.
	if r := truncateUTF8(reason, max(room(), 0)); r != "" {
		rest[AttrDLQReason] = r
	}
	return rest
}

// truncateUTF8 cuts s to at most n bytes without splitting a rune.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
