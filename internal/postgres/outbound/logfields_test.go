package outbound

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zapcore"

	"github.com/junban/junban/internal/testenv"
)

// The relay's line about an entry SNS refused names the row (entity, message_id), the
// event that caused it (event_id) and the send's span (trace_id, span_id of the
// "send <topic>" span the receiver gets). (Fails with the line naming the entity and
// message id only.)
func TestRelayRefusedLineCarriesTheEventAndTheTrace(t *testing.T) {
	rcv, shutdown := testenv.Tracing(t, "persist-worker")

	db := testenv.Postgres(t)
	sn, topic, _ := newTopic(t, false)
	want := insertRows(t, db, testEntities("L", 1), 1, 1)
	flaky := &flakySNS{inner: sn, refuse: func(string) bool { return true }}
	log, logs := testenv.Logger(zapcore.InfoLevel)
	r, err := NewRelay(RelayConfig{DB: db, SNS: flaky, TopicARN: topic, Poll: 50 * time.Millisecond, Publishers: 1,
		RoundMax: 10, BackoffMax: time.Second, Registerer: prometheus.NewRegistry(), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	r.round(context.Background())
	if err := shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	lines := logs.FilterMessage("outbox message refused").All()
	if len(lines) != 1 {
		t.Fatalf("%d \"outbox message refused\" lines, want 1: %v", len(lines), logs.All())
	}
	f := lines[0].ContextMap()
	var m Message // the one row
	for _, w := range want {
		m = w
	}
	if f["entity"] != m.Entity || f["message_id"] != m.ID || f["event_id"] != m.CausedBy.EventID {
		t.Errorf("fields %v: want entity %s, message_id %s, event_id %s", f, m.Entity, m.ID, m.CausedBy.EventID)
	}
	found := false
	for _, s := range rcv.Spans() {
		found = found || strings.HasPrefix(s.Name, "send ") && s.TraceID == f["trace_id"] && s.SpanID == f["span_id"]
	}
	if !found {
		t.Errorf("fields %v: trace_id and span_id name no send span (spans %+v)", f, rcv.Spans())
	}
}
