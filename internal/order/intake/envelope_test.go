package intake_test

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/junban/junban/internal/domain"
	"github.com/junban/junban/internal/lockhandoff"
	"github.com/junban/junban/internal/order/intake"
	"github.com/junban/junban/internal/queue"
)

// recordingTurns is a Turns that keeps what the Worker submits.
type recordingTurns struct {
	submitted map[string][]string // by entity
	resumed   []string
}

func (r *recordingTurns) Submit(_ context.Context, entity string, envelope []byte) (lockhandoff.Outcome, error) {
	r.submitted[entity] = append(r.submitted[entity], string(envelope))
	return lockhandoff.OutcomeQueued, nil
}

func (r *recordingTurns) Resume(_ context.Context, entity string) error {
	r.resumed = append(r.resumed, entity)
	return nil
}

const wrappedPlaced = `{"event_id":"evt-7f3a","type":"order.placed","lcid":"ord-1001","occurred_at":"2026-12-01T09:30:00Z",` +
	`"data":{"mode":"ship","target_date":"2026-12-03","lines":[{"line_id":"1","sku":"SKU-0001","qty":2}]}}`

func snsNotification(message string) string {
	b, _ := json.Marshal(map[string]any{
		"Type": "Notification", "MessageId": "22b80b92-fdea-4c2c-8f9d-bdfb0c7bf324",
		"TopicArn": "arn:aws:sns:ap-northeast-1:123456789012:shop-orders", "Message": message,
		"Timestamp": "2026-12-01T09:30:00.123Z", "SignatureVersion": "1", "Signature": "EXAMPLE",
		"MessageAttributes": map[string]any{"traceparent": map[string]string{"Type": "String", "Value": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}},
	})
	return string(b)
}

func eventBridgeEvent(detailType, detail string) string {
	b, _ := json.Marshal(map[string]any{
		"version": "0", "id": "6a7e8feb-b491-4cf7-a9f1-bf3703467718", "detail-type": detailType, "source": "shop.checkout",
		"account": "123456789012", "time": "2026-12-01T09:30:00Z", "region": "ap-northeast-1", "resources": []string{},
		"detail": json.RawMessage(detail),
	})
	return string(b)
}

// The Worker submits the event inside an envelope to its turn, never the envelope: the
// turn, its parked events, the quarantine and the DLQ from the turn see a junban event.
// A refused message goes to the DLQ as it came, with the reason of the event inside when
// the envelope was sound; each message is counted by envelope, and a refusal logged with
// the envelope's ids.
func TestWorkerSubmitsTheEventInsideTheEnvelope(t *testing.T) {
	turns := &recordingTurns{submitted: map[string][]string{}}
	reg := prometheus.NewRegistry()
	metrics, err := intake.NewWorkerMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zapcore.InfoLevel)
	w := &intake.Worker{Turns: turns, Metrics: metrics, Log: zap.New(core)}
	handle := func(body string) queue.Outcome {
		return w.Handle(context.Background(), queue.Message{ID: "m-1", Body: []byte(body)})
	}

	for _, body := range []string{wrappedPlaced, snsNotification(wrappedPlaced), eventBridgeEvent("order.placed", wrappedPlaced)} {
		if out := handle(body); out.Verdict != queue.Done {
			t.Fatalf("%.60s...: %+v", body, out)
		}
	}
	if got := turns.submitted["ord-1001"]; len(got) != 3 || got[0] != wrappedPlaced || got[1] != wrappedPlaced || got[2] != wrappedPlaced {
		t.Fatalf("submitted %q, want the event alone three times", got)
	}
	if out := handle(snsNotification(`{"event_id":"drain_1","type":"junban.drain","lcid":"sku:SKU-0001"}`)); out.Verdict != queue.Done || len(turns.resumed) != 1 || turns.resumed[0] != "sku:SKU-0001" {
		t.Fatalf("a drain in a notification: %+v, resumed %v", out, turns.resumed)
	}

	badEvent := `{"event_id":"e1","type":"order.placed","lcid":"ord-1002","data":{"mode":"ship","target_date":"2026-12-03","lines":[{"line_id":"1","sku":"S","qty":0}]}}`
	_, decodeErr := domain.Decode([]byte(badEvent), 0)
	refused := []struct{ body, reason string }{
		{snsNotification(badEvent), decodeErr.Error()},
		{eventBridgeEvent("order.placed", badEvent), decodeErr.Error()},
		{snsNotification("order placed: ord-1002"), domain.ReasonMalformedJSON + ": SNS Message"},
		{eventBridgeEvent("Order Placed", wrappedPlaced), domain.ReasonDetailTypeMismatch},
		{`{"order":"ord-1002"}`, domain.ReasonUnknownEnvelope},
	}
	for _, c := range refused {
		if out := handle(c.body); out.Verdict != queue.Poison || !strings.HasPrefix(out.Reason, c.reason) {
			t.Errorf("%.60s...: %+v, want Poison with %s", c.body, out, c.reason)
		}
	}
	if _, ok := turns.submitted["ord-1002"]; ok {
		t.Fatal("a refused event reached its turn")
	}

	for kind, want := range map[string]float64{"raw": 1, "sns": 4, "eventbridge": 3, "unknown": 1} {
		if got := envelopesCounted(t, reg, kind); got != want {
			t.Errorf("junban_order_envelopes_total{envelope=%q} = %v, want %v", kind, got, want)
		}
	}
	lines := logs.FilterMessage("invalid order event").All()
	if len(lines) != len(refused) {
		t.Fatalf("%d invalid order event lines, want %d", len(lines), len(refused))
	}
	sns := lines[0].ContextMap()
	if sns["envelope"] != "sns" || sns["sns_message_id"] != "22b80b92-fdea-4c2c-8f9d-bdfb0c7bf324" || sns["topic_arn"] != "arn:aws:sns:ap-northeast-1:123456789012:shop-orders" {
		t.Errorf("the refused notification's line: %v", sns)
	}
	if eb := lines[1].ContextMap(); eb["envelope"] != "eventbridge" || eb["source"] != "shop.checkout" {
		t.Errorf("the refused EventBridge event's line: %v", eb)
	}
}

// envelopesCounted is junban_order_envelopes_total{envelope=kind} as reg gathers it.
func envelopesCounted(t *testing.T, reg *prometheus.Registry, kind string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "junban_order_envelopes_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "envelope" && l.GetValue() == kind {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no junban_order_envelopes_total{envelope=%q}", kind)
	return 0
}

// TestEnvelopeFieldsInALogLineAreBounded: a sender writes an envelope's ids, topic ARN,
// source and detail-type; a log line quotes each up to the longest value AWS sends, and
// a longer one is cut with its length, so a 240 KB TopicArn makes a short line that
// still says which field was cut. An envelope of AWS's own values is logged whole.
var cutMark = regexp.MustCompile(`^(arn:aws:sns:ap-northeast-1:123456789012:)?[ab]{20}.*\.\.\. \(cut from [0-9]+ bytes\)$`)

func TestEnvelopeFieldsInALogLineAreBounded(t *testing.T) {
	var buf strings.Builder
	enc := zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
	w := &intake.Worker{Turns: &recordingTurns{submitted: map[string][]string{}},
		Log: zap.New(zapcore.NewCore(enc, zapcore.AddSync(&buf), zapcore.DebugLevel))}
	huge, long := strings.Repeat("a", 240_000), strings.Repeat("b", 5_000)
	edit := func(body string, set map[string]any) string {
		var m map[string]any
		if err := json.Unmarshal([]byte(body), &m); err != nil {
			t.Fatal(err)
		}
		for k, v := range set {
			m[k] = v
		}
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	cases := []struct {
		name, body string
		cut        []string
	}{
		{"sns unwrapped", edit(snsNotification(wrappedPlaced), map[string]any{"TopicArn": "arn:aws:sns:ap-northeast-1:123456789012:" + huge, "MessageId": long}),
			[]string{"topic_arn", "sns_message_id"}},
		{"sns refused", edit(snsNotification(wrappedPlaced), map[string]any{"TopicArn": huge, "Type": "SubscriptionConfirmation"}), []string{"topic_arn"}},
		{"eventbridge unwrapped", edit(eventBridgeEvent("order.placed", wrappedPlaced), map[string]any{"source": huge, "id": long}),
			[]string{"source", "eventbridge_id"}},
		{"eventbridge refused", edit(eventBridgeEvent("order.placed", wrappedPlaced), map[string]any{"detail-type": huge}), []string{"detail_type"}},
		{"whole", snsNotification(wrappedPlaced), nil},
	}
	for _, c := range cases {
		buf.Reset()
		w.Handle(context.Background(), queue.Message{ID: "m-1", Body: []byte(c.body)})
		line := buf.String()
		if line == "" || len(line) > 2048 {
			t.Errorf("%s: a %d-byte log line, want one under 2 KB: %.300s", c.name, len(line), line)
			continue
		}
		var fields map[string]any
		if err := json.Unmarshal([]byte(line), &fields); err != nil {
			t.Fatalf("%s: %v: %s", c.name, err, line)
		}
		for _, k := range c.cut {
			if v, _ := fields[k].(string); !cutMark.MatchString(v) {
				t.Errorf("%s: %s = %.80q..., want it cut and saying so", c.name, k, v)
			}
		}
		if c.cut == nil && fields["topic_arn"] != "arn:aws:sns:ap-northeast-1:123456789012:shop-orders" {
			t.Errorf("%s: topic_arn %v, want it whole", c.name, fields["topic_arn"])
		}
	}
}
