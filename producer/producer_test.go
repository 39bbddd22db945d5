package producer_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/junban/junban/internal/aws/topics"
	"github.com/junban/junban/internal/domain"
	"github.com/junban/junban/internal/queue"
	"github.com/junban/junban/internal/testenv"
	"github.com/junban/junban/producer"
)

// everyKind is an event of each kind a sender sends, from the registry's example data.
func everyKind(t *testing.T, run string) []producer.Event {
	t.Helper()
	var out []producer.Event
	for _, k := range domain.Kinds() {
		if k.Origin != domain.FromSender {
			continue
		}
		lcid := ""
		if k.Entity == domain.OnOrder {
			lcid = "LC-" + run
		}
		var data any
		if k.Example != nil {
			data = k.Example
		}
		ev, err := producer.New(k.Type, run+"-"+string(k.Type), lcid, time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC), data)
		if err != nil {
			t.Fatalf("%s: %v", k.Type, err)
		}
		out = append(out, ev)
	}
	return out
}

// workerDecodes is what the order-worker does with a message of the orders queue before
// it submits the event to its turn (intake.Worker.Handle): it finds the event in its
// envelope and decodes it within its default limits; it returns the event.
func workerDecodes(t *testing.T, body string) domain.Event {
	t.Helper()
	inner, _, err := domain.Unwrap([]byte(body), domain.MaxEventBytes)
	if err != nil {
		t.Fatalf("the worker refuses the message: %v\n%s", err, body)
	}
	ev, err := domain.DecodeLimits(inner, domain.Limits{MaxBytes: domain.MaxEventBytes, MaxLines: domain.MaxLinesDefault})
	if err != nil {
		t.Fatalf("the worker refuses the event: %v\n%s", err, inner)
	}
	if ev.Kind().Origin != domain.FromSender {
		t.Fatalf("the worker refuses %s from the queue", ev.Type)
	}
	return ev
}

// receiveAll receives n messages from url, deleting each.
func receiveAll(t *testing.T, c *sqs.Client, url string, n int) []sqstypes.Message {
	t.Helper()
	ctx := context.Background()
	var got []sqstypes.Message
	deadline := time.Now().Add(60 * time.Second)
	for len(got) < n && time.Now().Before(deadline) {
		out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{
				sqstypes.MessageSystemAttributeNameMessageGroupId, sqstypes.MessageSystemAttributeNameMessageDeduplicationId}})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range out.Messages {
			got = append(got, m)
			if _, err := c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(got) != n {
		t.Fatalf("received %d messages of %d", len(got), n)
	}
	return got
}

// An event of every kind a sender sends, sent with SendSQS to a standard and to a FIFO
// orders queue, arrives as the order-worker decodes it, the same event; on the FIFO queue
// with the group and deduplication ids junban's own senders give it.
func TestSendSQSTheWorkerAccepts(t *testing.T) {
	c := testenv.SQS(t)
	testenv.EachQueueKind(t, func(t *testing.T, newQueues testenv.NewQueuesFunc) {
		q := newQueues(t, c, 30)
		evs := everyKind(t, testenv.Name(t))
		sent := map[string]producer.Event{}
		for _, ev := range evs {
			if _, err := producer.SendSQS(context.Background(), c, q.Orders.URL, ev); err != nil {
				t.Fatal(err)
			}
			sent[ev.EventID] = ev
		}
		for _, m := range receiveAll(t, c, q.Orders.URL, len(evs)) {
			got := workerDecodes(t, aws.ToString(m.Body))
			want, ok := sent[got.EventID]
			if !ok || got.Type != want.Type || got.LCID != want.LCID || got.ContractVersion() != producer.Version {
				t.Errorf("received %s %s %q, sent %+v", got.EventID, got.Type, got.LCID, want)
			}
			if queue.IsFIFO(q.Orders.URL) {
				g, d := m.Attributes[string(sqstypes.MessageSystemAttributeNameMessageGroupId)], m.Attributes[string(sqstypes.MessageSystemAttributeNameMessageDeduplicationId)]
				if g != queue.FIFOID(got.Entity()) || d != queue.FIFOID("{"+got.Entity()+"}"+got.EventID) {
					t.Errorf("%s: group %q, deduplication %q; its entity is %q", got.EventID, g, d, got.Entity())
				}
			}
			delete(sent, got.EventID)
		}
	})
}

// Events published with PublishSNS to a topic the orders queue subscribes (filtered on the
// type, without raw delivery) arrive in SNS notifications the order-worker unwraps and
// decodes.
func TestPublishSNSTheWorkerAccepts(t *testing.T) {
	c := testenv.SQS(t)
	sn := testenv.SNS(t)
	q := testenv.NewQueues(t, c, 30)
	topic := testenv.Topic(t, sn)
	ctx := context.Background()
	if _, err := topics.Subscribe(ctx, sn, c, topics.Spec{TopicARN: topic, QueueURL: q.Orders.URL,
		Types: []string{string(producer.OrderPlaced), string(producer.PaymentConfirmed)}}); err != nil {
		t.Fatal(err)
	}
	run := testenv.Name(t)
	var evs []producer.Event
	for _, ev := range everyKind(t, run) {
		if ev.Type == producer.OrderPlaced || ev.Type == producer.PaymentConfirmed || ev.Type == producer.OrderCancelled {
			evs = append(evs, ev)
		}
	}
	if err := producer.PublishSNS(ctx, sn, topic, evs...); err != nil {
		t.Fatal(err)
	}
	got := map[producer.Type]bool{}
	for _, m := range receiveAll(t, c, q.Orders.URL, 2) {
		if !strings.Contains(aws.ToString(m.Body), `"TopicArn"`) {
			t.Errorf("not an SNS notification: %s", aws.ToString(m.Body))
		}
		got[workerDecodes(t, aws.ToString(m.Body)).Type] = true
	}
	if !got[producer.OrderPlaced] || !got[producer.PaymentConfirmed] {
		t.Errorf("received %v", got)
	}
	// order.cancelled was filtered out by the subscription: nothing more arrives.
	out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(q.Orders.URL), WaitTimeSeconds: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Messages) > 0 {
		t.Errorf("the filter let through %s", aws.ToString(out.Messages[0].Body))
	}
}

// An EventBridge entry, delivered to the orders queue as EventBridge delivers it (the
// event in its detail, detail-type its type), is an event the worker decodes.
func TestForEventBridgeTheWorkerAccepts(t *testing.T) {
	for _, ev := range everyKind(t, "eb") {
		e, err := producer.ForEventBridge(ev, "shop.checkout")
		if err != nil {
			t.Fatal(err)
		}
		delivered, err := json.Marshal(map[string]any{"version": "0", "id": "6a7e8feb-b491-4cf7-a9f1-bf3703467718",
			"detail-type": e.DetailType, "source": e.Source, "account": "123456789012", "time": "2026-12-01T09:30:00Z",
			"region": "ap-northeast-1", "resources": []string{}, "detail": json.RawMessage(e.Detail)})
		if err != nil {
			t.Fatal(err)
		}
		if got := workerDecodes(t, string(delivered)); got.EventID != ev.EventID {
			t.Errorf("%s: decoded %s", ev.EventID, got.EventID)
		}
	}
	if _, err := producer.ForEventBridge(everyKind(t, "eb")[0], ""); err == nil {
		t.Error("an entry without a source: no error")
	}
}

// What the order-worker refuses, Check refuses before anything is sent, with the reason
// the worker would give: a bad event, more lines than the worker's default, junban's own
// kinds, an unknown version.
func TestCheckRefusesWhatTheWorkerRefuses(t *testing.T) {
	lines := make([]producer.Line, domain.MaxLinesDefault+1)
	for i := range lines {
		lines[i] = producer.Line{LineID: fmt.Sprint(i), SKU: "S", Qty: 1}
	}
	for name, c := range map[string]struct {
		body   string
		reason string
		own    bool
	}{
		"no lcid":           {`{"event_id":"e1","type":"payment.confirmed"}`, domain.ReasonMissingField, false},
		"unknown version":   {`{"event_id":"e1","type":"payment.confirmed","lcid":"L","version":"2"}`, domain.ReasonUnsupportedVersion, false},
		"too many lines":    {mustJSON(t, producer.Event{EventID: "e1", Type: producer.OrderPlaced, LCID: "L", Data: mustRaw(t, producer.OrderData{Mode: producer.ModeShip, TargetDate: "2026-12-03", Lines: lines})}), domain.ReasonTooManyLines, false},
		"junban's expiry":   {`{"event_id":"e1","type":"order.reservation_expired","lcid":"L","data":{"hold_until":"2026-12-01T00:00:00Z"}}`, "", true},
		"junban's drain":    {`{"event_id":"e1","type":"junban.drain","lcid":"L"}`, "", true},
		"brace in the lcid": {`{"event_id":"e1","type":"payment.confirmed","lcid":"{L}"}`, domain.ReasonInvalidID, false},
	} {
		err := producer.Check([]byte(c.body))
		if c.own {
			if !errors.Is(err, producer.ErrNotSendable) {
				t.Errorf("%s: %v, want ErrNotSendable", name, err)
			}
			continue
		}
		if got := producer.Reason(err); got != c.reason {
			t.Errorf("%s: reason %q (%v), want %q", name, got, err, c.reason)
		}
	}
	if _, err := producer.New(producer.PaymentConfirmed, "e1", "sku:TEA", time.Time{}, nil); producer.Reason(err) != domain.ReasonInvalidID {
		t.Errorf("an lcid in a SKU's namespace: %v", err)
	}
	if _, err := producer.New(producer.PaymentConfirmed, "e1", "L", time.Time{}, func() {}); err == nil {
		t.Error("data that does not encode: no error")
	}
}

func mustRaw(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustJSON(t *testing.T, v any) string { return string(mustRaw(t, v)) }
