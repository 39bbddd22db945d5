package persist_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/postgres/persist"
	"github.com/junban/junban/internal/queue"
	"github.com/junban/junban/internal/testenv"
	"github.com/junban/junban/internal/testenv/resultgen"
)

// Many receive loops share a few appliers: eight HandleBatch calls at once through a
// Handler with Appliers 2 all commit, and the rows equal an in-order application.
func TestHandlerAppliersShareConnections(t *testing.T) {
	cfg := resultgen.Config{Prefix: testenv.ID() + "-", SKUs: 10, Active: 8}
	rs := resultgen.New(cfg).Results(400)

	want := seeded(t, cfg)
	apply(t, want, rs)

	got := seeded(t, cfg)
	if _, err := persist.NewHandler(persist.HandlerConfig{DB: got, Appliers: -1}); err == nil {
		t.Error("NewHandler accepted negative Appliers")
	}
	h, err := persist.NewHandler(persist.HandlerConfig{DB: got, Appliers: 2})
	if err != nil {
		t.Fatal(err)
	}
	msgs := bodies(t, rs)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			// Worker w takes every eighth chunk of 10, so batches interleave.
			for lo := w * 10; lo < len(msgs); lo += 80 {
				var ms []queue.Message
				for i := lo; i < min(lo+10, len(msgs)); i++ {
					ms = append(ms, queue.Message{ID: strconv.Itoa(i), Body: []byte(msgs[i])})
				}
				for i, o := range h.HandleBatch(context.Background(), ms) {
					if o.Verdict != queue.Done {
						t.Errorf("message %s: %+v, want Done", ms[i].ID, o)
					}
				}
			}
		})
	}
	wg.Wait()
	diff(t, "rows after concurrent batches through 2 appliers", dump(t, want), dump(t, got))
}

// counter reads a counter of reg by name and labels (0 when it has no such series).
func counter(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if labels[lp.GetName()] != lp.GetValue() {
					continue metrics
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

// Through the handler: two orders sharing an event id are both Done and persisted; a
// redelivery is Done; a result that the inbox holds under its entity and event id with
// another body goes to the DLQ (Poison) with a reason that names both, is logged at error
// with event_id and entity and counted; a move recorded for another entity is logged at
// error and counted, its result Done. Against the old code the shared event id lost
// LC-P2 without a log line, and the other body was Done (deleted) without one.
func TestHandlerCollisionsAreLoud(t *testing.T) {
	db := testenv.Postgres(t)
	reg := prometheus.NewRegistry()
	core, logs := observer.New(zapcore.InfoLevel)
	h, err := persist.NewHandler(persist.HandlerConfig{DB: db, Registerer: reg, Logger: zap.New(core)})
	if err != nil {
		t.Fatal(err)
	}
	p1 := allocation("LC-P1", "dup-1", 1, "1", "P", "dup-1:1:alloc", 2, 1)
	p2 := allocation("LC-P2", "dup-1", 1, "1", "Q", "dup-1:1:alloc", 2, 1)
	other := allocation("LC-P1", "dup-1", 2, "1", "P", "dup-1~again:1:alloc", 3, 2)
	p3 := allocation("LC-P3", "dup-1", 1, "1", "P", "dup-1:1:alloc", 2, 1) // p1's operation answered again

	handle := func(rs ...event.Result) []queue.Outcome {
		var ms []queue.Message
		for i, b := range bodies(t, rs) {
			ms = append(ms, queue.Message{ID: strconv.Itoa(i), Body: []byte(b)})
		}
		return h.HandleBatch(context.Background(), ms)
	}
	for i, o := range handle(p1, p2) {
		if o.Verdict != queue.Done {
			t.Errorf("first batch, message %d: %+v, want Done", i, o)
		}
	}
	outs := handle(p1, other, p3)
	if outs[0].Verdict != queue.Done || outs[2].Verdict != queue.Done {
		t.Errorf("redelivery and LC-P3: %+v, %+v, want Done", outs[0], outs[2])
	}
	if o := outs[1]; o.Verdict != queue.Poison || !strings.Contains(o.Reason, "LC-P1") || !strings.Contains(o.Reason, "dup-1") {
		t.Errorf("other body: %+v, want Poison naming LC-P1 and dup-1", o)
	}

	inbox, orders, moves := identityRows(t, db)
	sameRows(t, "inbox", inbox, []string{"LC-P1 dup-1 1", "LC-P2 dup-1 1", "LC-P3 dup-1 1"})
	sameRows(t, "orders", orders, []string{"LC-P1 dup-1", "LC-P2 dup-1", "LC-P3 dup-1"})
	sameRows(t, "moves", moves, []string{"LC-P1 dup-1 P dup-1:1:alloc", "LC-P2 dup-1 Q dup-1:1:alloc"})

	loud := map[string]string{} // entity -> message of its error line
	for _, e := range logs.FilterLevelExact(zapcore.ErrorLevel).All() {
		f := e.ContextMap()
		if f["event_id"] != "dup-1" {
			t.Errorf("error line %q without event_id dup-1: %v", e.Message, f)
		}
		loud[f["entity"].(string)] = e.Message
	}
	if len(loud) != 2 || loud["LC-P1"] == "" || loud["LC-P3"] == "" {
		t.Errorf("error lines by entity %v, want one for LC-P1's other body and one for LC-P3's move", loud)
	}
	for _, c := range []struct {
		name, label, value string
		want               float64
	}{
		{"junban_persist_results_total", "status", "conflict", 1},
		{"junban_persist_results_total", "status", "applied", 3},
		{"junban_persist_results_total", "status", "duplicate", 1},
		{"junban_persist_identity_conflicts_total", "table", "inbox", 1},
		{"junban_persist_identity_conflicts_total", "table", "moves", 1},
		{"junban_persist_conflicts_skipped_total", "kind", "duplicate", 1},
	} {
		if got := counter(t, reg, c.name, map[string]string{c.label: c.value}); got != c.want {
			t.Errorf("%s{%s=%q} = %v, want %v", c.name, c.label, c.value, got, c.want)
		}
	}
}

// TestHandlerLogLinesCarryTheTrace: the handler's lines about a message or a result carry
// the trace of the result (its message's traceparent, the order-worker's send), so a
// search by trace id or event id finds them: a message that is not a result (message_id,
// trace_id, span_id) and a result whose event id PostgreSQL holds with another body
// (event_id, entity, message_id, trace_id, span_id).
func TestHandlerLogLinesCarryTheTrace(t *testing.T) {
	db := testenv.Postgres(t)
	core, logs := observer.New(zapcore.InfoLevel)
	h, err := persist.NewHandler(persist.HandlerConfig{DB: db, Registerer: prometheus.NewRegistry(), Logger: zap.New(core)})
	if err != nil {
		t.Fatal(err)
	}
	const traceID, spanID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	attrs := map[string]string{queue.AttrTraceParent: "00-" + traceID + "-" + spanID + "-01"}
	first := allocation("LC-T1", "tr-1", 1, "1", "P", "tr-1:1:alloc", 2, 1)
	other := allocation("LC-T1", "tr-1", 2, "1", "P", "tr-1~again:1:alloc", 3, 2)
	b := bodies(t, []event.Result{first, other})
	if o := h.HandleBatch(context.Background(), []queue.Message{{ID: "m1", Body: []byte(b[0])}}); o[0].Verdict != queue.Done {
		t.Fatalf("first result: %+v", o[0])
	}
	outs := h.HandleBatch(context.Background(), []queue.Message{
		{ID: "m2", Body: []byte(b[1]), Attributes: attrs},
		{ID: "m3", Body: []byte("not a result"), Attributes: attrs},
	})
	if outs[0].Verdict != queue.Poison || outs[1].Verdict != queue.Poison {
		t.Fatalf("outcomes %+v, want both Poison", outs)
	}
	want := map[string]map[string]any{
		"result conflicts with the persisted result of its entity and event id; dead-lettered": {
			"event_id": "tr-1", "entity": "LC-T1", "message_id": "m2", "trace_id": traceID, "span_id": spanID},
		"poison message": {"message_id": "m3", "trace_id": traceID, "span_id": spanID},
	}
	for msg, fields := range want {
		lines := logs.FilterMessage(msg).All()
		if len(lines) != 1 {
			t.Errorf("%d lines %q, want 1 (all: %v)", len(lines), msg, logs.All())
			continue
		}
		got := lines[0].ContextMap()
		for k, v := range fields {
			if got[k] != v {
				t.Errorf("line %q: %s = %v, want %v (fields %v)", msg, k, got[k], v, got)
			}
		}
	}
}
