package queue_test

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/junban/junban/internal/queue"
	"github.com/junban/junban/internal/testenv"
)

// A poison message near the size limit still reaches the DLQ with its reason: the reason
// is shortened (at a rune boundary) so that body and attributes fit.
func TestDeadLetterFitsTheReasonNearTheSizeLimit(t *testing.T) {
	t.Parallel()
	c := testenv.SQS(t)
	ctx := context.Background()
	// A queue created today allows 1 MiB; junban's queues assume SQS's classic 256 KiB.
	dlq, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{
		QueueName:  aws.String(testenv.Name(t) + "-dlq"),
		Attributes: map[string]string{"MaximumMessageSize": strconv.Itoa(queue.MaxMessageSizeDefault)},
	})
	if err != nil {
		t.Fatal(err)
	}
	dlqURL := aws.ToString(dlq.QueueUrl)
	// "é" is two bytes: an odd cut would split it.
	reason := "ERR_MALFORMED_JSON: x" + strings.Repeat("é", 2000)
	source := map[string]string{queue.AttrSourceQueue: "orders", "origin": "test"}
	type dlqCase struct {
		body  []byte
		attrs map[string]string
		// kept are the attributes that must arrive.
		kept []string
	}
	cases := map[string]dlqCase{
		"room for the whole reason": {
			body:  []byte("small"),
			attrs: source,
			kept:  []string{queue.AttrSourceQueue, "origin"},
		},
		"room for a short reason": {
			body:  bytes.Repeat([]byte("a"), queue.MaxMessageSizeDefault-300),
			attrs: source,
			kept:  []string{queue.AttrSourceQueue, "origin"},
		},
		"no room but for the reason": {
			body:  bytes.Repeat([]byte("b"), queue.MaxMessageSizeDefault-60),
			attrs: source,
		},
	}
	for name, tc := range cases {
		if err := queue.DeadLetter(ctx, c, dlqURL, tc.body, reason, tc.attrs, queue.Keys{}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	dead := receiveAll(t, c, dlqURL, len(cases), 10*time.Second)
	if len(dead) != len(cases) {
		t.Fatalf("DLQ holds %d messages, want %d", len(dead), len(cases))
	}
	for _, m := range dead {
		body := aws.ToString(m.Body)
		var tc dlqCase
		for _, c := range cases {
			if string(c.body) == body {
				tc = c
			}
		}
		if tc.body == nil {
			t.Fatalf("a DLQ message of %d bytes matches no body sent", len(body))
		}
		got := aws.ToString(m.MessageAttributes[queue.AttrDLQReason].StringValue)
		if got == "" || !strings.HasPrefix(reason, got) || !utf8.ValidString(got) {
			t.Errorf("body of %d bytes: reason %q is not a valid prefix of the one given", len(body), got)
		}
		if !strings.HasPrefix(got, "ERR_MALFORMED_JSON") {
			t.Errorf("body of %d bytes: reason %q lost its code", len(body), got)
		}
		for _, k := range tc.kept {
			if aws.ToString(m.MessageAttributes[k].StringValue) != tc.attrs[k] {
				t.Errorf("body of %d bytes: attribute %s lost", len(body), k)
			}
		}
		size := len(body)
		for k, v := range m.MessageAttributes {
			size += len(k) + len(aws.ToString(v.DataType)) + len(aws.ToString(v.StringValue))
		}
		if size > queue.MaxMessageSizeDefault {
			t.Errorf("body of %d bytes: message is %d bytes, over %d", len(body), size, queue.MaxMessageSizeDefault)
		}
	}
}
