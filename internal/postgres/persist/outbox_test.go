package persist_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/postgres/outbound"
	"github.com/junban/junban/internal/postgres/persist"
	"github.com/junban/junban/internal/queue"
	"github.com/junban/junban/internal/testenv"
)

// A handler with an outbound writer writes a batch's outbound events with it, counts
// them, and calls OutboxWritten after each batch that wrote some; a redelivered batch
// writes none and calls nothing. Without a writer, nothing goes to the outbox.
func TestHandlerWritesTheOutbox(t *testing.T) {
	db := testenv.Postgres(t)
	reg := prometheus.NewRegistry()
	wakes := 0
	h, err := persist.NewHandler(persist.HandlerConfig{DB: db, Registerer: reg,
		Outbound:      &outbound.Writer{LowStockThreshold: outbound.LowStockThresholdDefault},
		OutboxWritten: func() { wakes++ }})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	placed := func(lcid string) event.Result {
		return event.Result{EventID: "e-" + lcid, Entity: lcid, LCID: lcid, Seq: 1, Type: event.OrderPlaced, Outcome: event.Applied,
			Order: &event.OrderSnapshot{LCID: lcid, Status: event.StatusPlaced, Lines: []event.SnapshotLine{}}, ProcessedAt: now}
	}
	handle := func(h *persist.Handler, rs ...event.Result) {
		t.Helper()
		var ms []queue.Message
		for i, b := range bodies(t, rs) {
			ms = append(ms, queue.Message{ID: strconv.Itoa(i), Body: []byte(b)})
		}
		for i, o := range h.HandleBatch(context.Background(), ms) {
			if o.Verdict != queue.Done {
				t.Fatalf("message %d: %+v", i, o)
			}
		}
	}
	handle(h, placed("LC-1"), placed("LC-2"))
	handle(h, placed("LC-1"), placed("LC-2"))
	if wakes != 1 {
		t.Errorf("OutboxWritten called %d times, want 1", wakes)
	}
	if got := counter(t, reg, "junban_persist_outbox_rows_total", nil); got != 2 {
		t.Errorf("junban_persist_outbox_rows_total = %v, want 2", got)
	}

	plain, err := persist.NewHandler(persist.HandlerConfig{DB: db})
	if err != nil {
		t.Fatal(err)
	}
	handle(plain, placed("LC-3"))
	var rows int64
	if err := db.Raw(`SELECT count(*) FROM outbox`).Row().Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 2 {
		t.Errorf("outbox holds %d rows, want 2 (none for LC-3)", rows)
	}
}
