package order

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/junban/junban/internal/domain"
)

func decodeEvent(t testing.TB, body string) domain.Event {
	t.Helper()
	ev, err := domain.Decode([]byte(body), 0)
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

// TestStampDropsASendersTraceFields: while the process does not trace, an envelope goes
// to its turn as it came, but for trace fields a sender wrote: only the order-worker
// writes them, so a sender cannot choose the trace or the wait a turn records.
func TestStampDropsASendersTraceFields(t *testing.T) {
	plain := `{"event_id":"e1","type":"payment.confirmed","lcid":"O1","occurred_at":"2026-01-01T00:00:00Z"}`
	if got := Stamp(context.Background(), decodeEvent(t, plain), []byte(plain), domain.MaxEventBytes); string(got) != plain {
		t.Errorf("an unstamped envelope changed: %s", got)
	}
	forged := `{"event_id":"e1","type":"payment.confirmed","lcid":"O1","occurred_at":"2026-01-01T00:00:00Z",` +
		`"traceparent":"00-0102030405060708090a0b0c0d0e0f10-0102030405060708-01","tracestate":"a=b","queued_at":"2020-01-01T00:00:00Z"}`
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{9}, SpanID: trace.SpanID{9}, TraceFlags: trace.FlagsSampled})
	got := Stamp(trace.ContextWithSpanContext(context.Background(), sc), decodeEvent(t, forged), []byte(forged), domain.MaxEventBytes)
	ev := decodeEvent(t, string(got))
	if ev.TraceParent != "" || ev.TraceState != "" || ev.QueuedAt != nil {
		t.Errorf("a sender's trace fields reached the turn: %s", got)
	}
	if ev.EventID != "e1" || !ev.OccurredAt.Equal(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("the event changed: %s", got)
	}
}

// TestWaitStartIgnoresTheFuture: a stamp from a clock ahead of this one starts the wait now.
func TestWaitStartIgnoresTheFuture(t *testing.T) {
	now := time.Now()
	later, earlier := now.Add(time.Hour), now.Add(-time.Second)
	if got := waitStart(&later, now); !got.Equal(now) {
		t.Errorf("future stamp: %v", got)
	}
	if got := waitStart(&earlier, now); !got.Equal(earlier) {
		t.Errorf("past stamp: %v", got)
	}
	if got := waitStart(nil, now); !got.Equal(now) {
		t.Errorf("no stamp: %v", got)
	}
}

// FuzzQueuedContext: whatever trace fields an envelope holds, reading them back never
// panics, and what is not a valid trace context is none.
func FuzzQueuedContext(f *testing.F) {
	f.Add("00-0102030405060708090a0b0c0d0e0f10-0102030405060708-01", "a=b")
	f.Add("00-00000000000000000000000000000000-0000000000000000-01", "")
	f.Add("garbage", strings.Repeat("k=v,", 200))
	f.Fuzz(func(t *testing.T, tp, ts string) {
		body, err := json.Marshal(map[string]any{"event_id": "e", "type": "payment.confirmed", "lcid": "O",
			"occurred_at": "2026-01-01T00:00:00Z", "traceparent": tp, "tracestate": ts})
		if err != nil {
			return
		}
		ev, err := domain.Decode(body, 0)
		if err != nil {
			return
		}
		if sc, ok := queuedContext(ev.Order); ok != sc.IsValid() {
			t.Fatalf("ok %v for %+v", ok, sc)
		}
	})
}
