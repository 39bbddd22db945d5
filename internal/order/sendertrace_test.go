package order_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/lockhandoff"
	"github.com/junban/junban/internal/platform/tracing"
	"github.com/junban/junban/internal/postgres/persist"
	"github.com/junban/junban/internal/queue"
	"github.com/junban/junban/internal/testenv"
)

// A sender's trace context: a sampled traceparent and a tracestate of 32 members of 511
// bytes each (16,383 bytes), which otel's ParseTraceState takes whole.
const sendersTrace = "5ca1ab1e5ca1ab1e5ca1ab1e5ca1ab1e"

var (
	sendersParent = "00-" + sendersTrace + "-5ca1ab1e5ca1ab1e-01"
	sendersState  = func() string {
		members := make([]string, 32)
		for i := range members {
			members[i] = fmt.Sprintf("k%02d%s=%s", i, strings.Repeat("k", 252), strings.Repeat("v", 255))
		}
		return strings.Join(members, ",")
	}()
)

// sendTraced puts e on the orders queue with the sender's trace context, as message
// attributes and as the event's own trace fields.
func (h *harness) sendTraced(e event.Order) {
	h.t.Helper()
	e.TraceParent, e.TraceState = sendersParent, sendersState
	body, err := json.Marshal(e)
	if err != nil {
		h.t.Fatal(err)
	}
	str := func(v string) types.MessageAttributeValue {
		return types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
	}
	if _, err := h.sqs.SendMessage(context.Background(), &sqs.SendMessageInput{
		QueueUrl: aws.String(h.queues.Orders.URL), MessageBody: aws.String(string(body)),
		MessageAttributes: map[string]types.MessageAttributeValue{
			tracing.AttrTraceParent: str(sendersParent), tracing.AttrTraceState: str(sendersState)},
	}); err != nil {
		h.t.Fatal(err)
	}
}

// resultMessages receives the results queue's messages, with their attributes, until one
// for each of ids arrived (or 30 s), and deletes them.
func (h *harness) resultMessages(ids ...string) map[string]queue.Message {
	h.t.Helper()
	got := map[string]queue.Message{}
	deadline := time.Now().Add(30 * time.Second)
	for len(got) < len(ids) && time.Now().Before(deadline) {
		out, err := h.sqs.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(h.queues.Results.URL), MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
			MessageAttributeNames: []string{"All"},
		})
		if err != nil {
			h.t.Fatal(err)
		}
		for _, m := range out.Messages {
			var r event.Result
			if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &r); err != nil {
				h.t.Fatalf("result is not JSON: %v", err)
			}
			attrs := map[string]string{}
			for k, v := range m.MessageAttributes {
				attrs[k] = aws.ToString(v.StringValue)
			}
			got[r.EventID] = queue.Message{ID: aws.ToString(m.MessageId), Body: []byte(aws.ToString(m.Body)), Attributes: attrs}
			h.sqs.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: aws.String(h.queues.Results.URL), ReceiptHandle: m.ReceiptHandle})
		}
	}
	for _, id := range ids {
		if _, ok := got[id]; !ok {
			h.t.Fatalf("no result for %s (got %d)", id, len(got))
		}
	}
	return got
}

// redisHolds is every value under the test's Redis prefix, one after another.
func (h *harness) redisHolds() string {
	h.t.Helper()
	ctx := context.Background()
	var all strings.Builder
	iter := h.rc.Scan(ctx, 0, h.prefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		k := iter.Val()
		typ, err := h.rc.Type(ctx, k).Result()
		if err != nil {
			h.t.Fatal(err)
		}
		var vals []string
		switch typ {
		case "none": // gone since the scan
		case "string":
			vals = []string{h.rc.Get(ctx, k).Val()}
		case "hash":
			for f, v := range h.rc.HGetAll(ctx, k).Val() {
				vals = append(vals, f, v)
			}
		case "list":
			vals = h.rc.LRange(ctx, k, 0, -1).Val()
		case "set":
			vals = h.rc.SMembers(ctx, k).Val()
		case "zset":
			vals = h.rc.ZRange(ctx, k, 0, -1).Val()
		case "stream":
			for _, m := range h.rc.XRange(ctx, k, "-", "+").Val() {
				for f, v := range m.Values {
					vals = append(vals, f, fmt.Sprint(v))
				}
			}
		default:
			h.t.Fatalf("key %s of type %s", k, typ)
		}
		all.WriteString(k + "\n" + strings.Join(vals, "\n") + "\n")
	}
	if err := iter.Err(); err != nil {
		h.t.Fatal(err)
	}
	return all.String()
}

// persisted applies results as the persist-worker does and returns inbox.trace_id of
// event id ("" for NULL).
func (h *harness) persisted(results map[string]queue.Message, id string) string {
	h.t.Helper()
	ph, err := persist.NewHandler(persist.HandlerConfig{DB: h.db, Registerer: prometheus.NewRegistry(), Logger: zap.NewNop()})
	if err != nil {
		h.t.Fatal(err)
	}
	msgs := make([]queue.Message, 0, len(results))
	for _, m := range results {
		msgs = append(msgs, m)
	}
	for i, o := range ph.HandleBatch(context.Background(), msgs) {
		if o.Verdict != queue.Done {
			h.t.Fatalf("persist %s: %+v", msgs[i].Body, o)
		}
	}
	var traceID *string
	if err := h.db.Raw(`SELECT trace_id FROM inbox WHERE event_id = ?`, id).Row().Scan(&traceID); err != nil {
		h.t.Fatal(err)
	}
	if traceID == nil {
		return ""
	}
	return *traceID
}

// TestSendersTraceContextIsIgnoredWhileTracingIsOff: with tracing off, a sender's
// traceparent and 16 KB tracestate (message attributes and the event's own fields) are
// neither stored in Redis nor put on the result's message, and the result names no
// trace, so inbox.trace_id stays empty.
func TestSendersTraceContextIsIgnoredWhileTracingIsOff(t *testing.T) {
	h := newHarness(t, []stock.SKU{{SKU: "TO", Lots: []stock.Lot{onHand("TO1", 1, 10, "2027-01-01")}}})
	h.consume(h.turns)
	e := placed("TO-1", stock.ModeShip, line("1", "TO", 2))
	h.sendTraced(e)
	msgs := h.resultMessages(e.EventID)
	m := msgs[e.EventID]
	if tp, ts := m.Attributes[tracing.AttrTraceParent], m.Attributes[tracing.AttrTraceState]; tp != "" || ts != "" {
		t.Errorf("the result's message carries the sender's trace context: traceparent %q, tracestate of %d bytes", tp, len(ts))
	}
	var r event.Result
	if err := json.Unmarshal(m.Body, &r); err != nil {
		t.Fatal(err)
	}
	if r.TraceID != "" {
		t.Errorf("result trace_id %q, want none while tracing is off", r.TraceID)
	}
	if held := h.redisHolds(); strings.Contains(held, sendersTrace) || strings.Contains(held, "k00kkk") {
		t.Errorf("Redis holds the sender's trace context")
	}
	if got := h.persisted(msgs, e.EventID); got != "" {
		t.Errorf("inbox.trace_id %q, want none: junban sampled no trace", got)
	}
}

// TestResultNamesOnlyASpanJunbanRecorded: a turn submitted in a context that carries a
// sampled remote trace, while the process does not trace, names no trace in its result:
// the trace id is only ever one of a span junban recorded.
func TestResultNamesOnlyASpanJunbanRecorded(t *testing.T) {
	h := newHarness(t, []stock.SKU{{SKU: "TN", Lots: []stock.Lot{onHand("TN1", 1, 10, "2027-01-01")}}})
	e := placed("TN-1", stock.ModeShip, line("1", "TN", 1))
	body, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	remote := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{7, 7}, SpanID: trace.SpanID{7}, TraceFlags: trace.FlagsSampled, Remote: true})
	if _, err := h.turns.Submit(trace.ContextWithRemoteSpanContext(context.Background(), remote), e.LCID, body); err != nil {
		t.Fatal(err)
	}
	msgs := h.resultMessages(e.EventID)
	var r event.Result
	if err := json.Unmarshal(msgs[e.EventID].Body, &r); err != nil {
		t.Fatal(err)
	}
	if r.TraceID != "" {
		t.Errorf("result trace_id %q, want none: no span of junban's recorded it", r.TraceID)
	}
	if got := h.persisted(msgs, e.EventID); got != "" {
		t.Errorf("inbox.trace_id %q, want none", got)
	}
}

// TestSendersTraceStateIsBoundedWhileTracing: with tracing on, a sender's sampled
// traceparent is continued (junban's spans record the trace, and its result and
// inbox.trace_id name it), but a tracestate over 512 bytes is dropped: the envelope
// stored in Redis and the result's message carry none of it.
func TestSendersTraceStateIsBoundedWhileTracing(t *testing.T) {
	_, shutdown := testenv.Tracing(t, "order-worker")
	h := newHarness(t, []stock.SKU{{SKU: "TB", Lots: []stock.Lot{onHand("TB1", 1, 10, "2027-01-01")}}})
	e := placed("TB-1", stock.ModeShip, line("1", "TB", 2))
	ctx := context.Background()
	lock := lockhandoff.Key(h.prefix, e.LCID, "lock")
	if err := h.rc.Set(ctx, lock, "another-replica", 0).Err(); err != nil {
		t.Fatal(err)
	}
	h.consume(h.turns)
	h.sendTraced(e)
	var held string
	testenv.WaitFor(t, 30*time.Second, "the event queued in Redis", func() bool {
		held = h.redisHolds()
		return strings.Contains(held, e.EventID)
	})
	if !strings.Contains(held, sendersTrace) {
		t.Errorf("the queued envelope carries no stamp of the sender's (continued) trace")
	}
	if strings.Contains(held, "k00kkk") {
		t.Errorf("Redis holds the sender's 16 KB tracestate")
	}
	if err := h.rc.Del(ctx, lock).Err(); err != nil {
		t.Fatal(err)
	}
	if err := h.turns.Resume(ctx, e.LCID); err != nil {
		t.Fatal(err)
	}
	msgs := h.resultMessages(e.EventID)
	if err := shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	m := msgs[e.EventID]
	if ts := m.Attributes[tracing.AttrTraceState]; len(ts) > tracing.MaxTraceStateBytes {
		t.Errorf("the result's message carries a tracestate of %d bytes", len(ts))
	}
	var r event.Result
	if err := json.Unmarshal(m.Body, &r); err != nil {
		t.Fatal(err)
	}
	if r.TraceID != sendersTrace {
		t.Errorf("result trace_id %q, want the continued trace %s", r.TraceID, sendersTrace)
	}
	if got := h.persisted(msgs, e.EventID); got != sendersTrace {
		t.Errorf("inbox.trace_id %q, want the sampled trace %s", got, sendersTrace)
	}
}
