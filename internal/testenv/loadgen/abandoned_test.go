package loadgen

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/testenv"
)

// bodies is a Publisher that keeps what it is sent.
type bodies struct {
	mu  sync.Mutex
	evs []event.Order
}

func (b *bodies) PublishBatch(_ context.Context, bs [][]byte) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, raw := range bs {
		var ev event.Order
		if err := json.Unmarshal(raw, &ev); err != nil {
			return err
		}
		b.evs = append(b.evs, ev)
	}
	return nil
}

// Run sends an abandoned order's placement and extension with the occurred_at of their
// first sending, so that their holds run on the wall clock, and a copy with its
// original's; every other event keeps the workload's. No fleet runs: the results are
// missing, which the summary says.
func TestRunStampsAbandonedHoldsAtSend(t *testing.T) {
	db := testenv.Postgres(t)
	spec := DefaultSpec(testenv.ID())
	spec.Orders, spec.WarehouseShare, spec.DuplicateShare = 60, 0, 0.5
	spec.AbandonedShare, spec.HoldFor, spec.ExtendShare = 0.5, 5*time.Second, 0.5
	pub := &bodies{}
	before := time.Now().Add(-time.Second)
	s, err := Run(context.Background(), db, pub, RunConfig{Spec: spec, Wait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	w := Generate(spec)
	if s.Abandoned != len(w.Abandoned) || s.Abandoned == 0 {
		t.Fatalf("summary: %d abandoned, the workload %d", s.Abandoned, len(w.Abandoned))
	}
	generated := map[string]time.Time{}
	for _, ev := range w.Events {
		generated[ev.EventID] = ev.OccurredAt
	}
	first := map[string]time.Time{}
	stamped := 0
	for _, ev := range pub.evs {
		if !w.AtSend[ev.EventID] {
			if !ev.OccurredAt.Equal(generated[ev.EventID]) {
				t.Fatalf("%s (%s) occurs at %s, not at the workload's %s", ev.EventID, ev.Type, ev.OccurredAt, generated[ev.EventID])
			}
			continue
		}
		if ev.OccurredAt.Before(before) || ev.OccurredAt.After(after) {
			t.Fatalf("%s occurs at %s, not when it was sent", ev.EventID, ev.OccurredAt)
		}
		if f, ok := first[ev.EventID]; ok && !f.Equal(ev.OccurredAt) {
			t.Fatalf("a copy of %s occurs at %s, its original at %s", ev.EventID, ev.OccurredAt, f)
		}
		first[ev.EventID] = ev.OccurredAt
		stamped++
	}
	if stamped <= len(first) {
		t.Errorf("%d stamped sends of %d events: no copy of an abandoned order's event was sent", stamped, len(first))
	}
}
