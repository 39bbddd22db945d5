package persist_test

import (
	"context"
	"strconv"
	"sync"
	"testing"

	"github.com/junban/junban/internal/persist"
	"github.com/junban/junban/internal/persist/resultgen"
	"github.com/junban/junban/internal/queue"
	"github.com/junban/junban/internal/testenv"
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
