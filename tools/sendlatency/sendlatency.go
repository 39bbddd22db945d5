// Package sendlatency measures the send -> commit latency of a workload: a Recorder
// notes when each order event was first sent, and Split reads when PostgreSQL committed
// it, keeping apart the events parked on purpose (sent before their precondition), whose
// wait is the workload's, not junban's.
package sendlatency

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"gorm.io/gorm"

	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/testenv/loadgen"
)

// Recorder passes order events on to the orders queue (or the gateway) and notes when
// each event was first sent, in sending order: the start of its send -> commit latency,
// and the stream ParkedOnPurpose replays.
type Recorder struct {
	pub   loadgen.Publisher
	mu    sync.Mutex
	first map[string]time.Time
	order []event.Order
}

// NewRecorder sends through pub.
func NewRecorder(pub loadgen.Publisher) *Recorder {
	return &Recorder{pub: pub, first: map[string]time.Time{}}
}

func (r *Recorder) note(ev event.Order, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.first[ev.EventID]; ok {
		return // a duplicate delivery: its latency is the original's
	}
	r.first[ev.EventID] = at
	r.order = append(r.order, ev)
}

// PublishBatch notes the bodies' events, then sends them.
func (r *Recorder) PublishBatch(ctx context.Context, bodies [][]byte) error {
	now := time.Now()
	for _, b := range bodies {
		var ev event.Order
		if err := json.Unmarshal(b, &ev); err == nil {
			r.note(ev, now)
		}
	}
	return r.pub.PublishBatch(ctx, bodies)
}

// Webhook notes each event sent through the gateway, then sends it.
func (r *Recorder) Webhook(next loadgen.Webhook) loadgen.Webhook {
	return func(ctx context.Context, pid string, ev event.Order) (int, error) {
		r.note(ev, time.Now())
		return next(ctx, pid, ev)
	}
}

// ParkedOnPurpose replays the events in the order they were sent, as one order's turn
// sees them, and returns those whose precondition did not hold when they arrived: a
// payment, line change, allocation or cancellation before the placement, a shipment
// before the payment or (reserve mode) the allocation. The order-worker parks them until
// the precondition holds, so their send -> commit time is the workload's gap between
// the two sends, not junban's latency.
func ParkedOnPurpose(sent []event.Order) map[string]bool {
	type orderState struct {
		placed, paid, allocated, finished bool
		waiting                           []event.Order
	}
	orders := map[string]*orderState{}
	parked := map[string]bool{}
	// applies answers whether ev applies now, and applies it.
	applies := func(st *orderState, ev event.Order) bool {
		if st.finished {
			return true // rejected at once: not parked
		}
		switch ev.Type {
		case event.OrderPlaced:
			if !st.placed {
				var d event.OrderData
				_ = json.Unmarshal(ev.Data, &d) // a placement without data counts as allocated
				st.placed, st.allocated = true, d.Mode != stock.ModeReserve
			}
		case event.PaymentConfirmed, event.OrderLinesChanged, event.OrderAllocateForShipment, event.OrderCancelled:
			if !st.placed {
				return false
			}
			st.paid = st.paid || ev.Type == event.PaymentConfirmed
			st.allocated = st.allocated || ev.Type == event.OrderAllocateForShipment
			st.finished = ev.Type == event.OrderCancelled
		case event.OrderShipped:
			if !st.placed || !st.paid || !st.allocated {
				return false
			}
			st.finished = true
		}
		return true
	}
	for _, ev := range sent {
		st := orders[ev.LCID]
		if st == nil {
			st = &orderState{}
			orders[ev.LCID] = st
		}
		if !applies(st, ev) {
			parked[ev.EventID] = true
			st.waiting = append(st.waiting, ev)
			continue
		}
		// Every applied event may be the precondition a parked one waited for.
		for progress := true; progress; {
			progress = false
			for i := 0; i < len(st.waiting); i++ {
				if applies(st, st.waiting[i]) {
					st.waiting = slices.Delete(st.waiting, i, i+1)
					progress = true
					break
				}
			}
		}
	}
	return parked
}

// Stats are send -> commit percentiles of a set of events.
type Stats struct {
	Events int     `json:"events"`
	P50MS  float64 `json:"p50_ms"`
	P95MS  float64 `json:"p95_ms"`
	P99MS  float64 `json:"p99_ms"`
	MaxMS  float64 `json:"max_ms"`
}

// StatsOf are the percentiles of lat (sorted in place).
func StatsOf(lat []time.Duration) Stats {
	slices.Sort(lat)
	pct := func(p float64) float64 {
		if len(lat) == 0 {
			return 0
		}
		return float64(lat[int(float64(len(lat)-1)*p)].Microseconds()) / 1000
	}
	return Stats{Events: len(lat), P50MS: pct(0.50), P95MS: pct(0.95), P99MS: pct(0.99), MaxMS: pct(1)}
}

func (l Stats) String() string {
	return fmt.Sprintf("%.0f / %.0f / %.0f ms (max %.0f, %d events)", l.P50MS, l.P95MS, l.P99MS, l.MaxMS, l.Events)
}

// Split reads the commit time of every event r sent from the inbox and returns
// the send -> commit latencies of the events that applied in turn and, apart, of those
// parked on purpose; missing counts events without an inbox row.
func Split(ctx context.Context, db *gorm.DB, r *Recorder) (inTurn, parked Stats, missing int, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ids := make([]string, 0, len(r.order))
	for _, ev := range r.order {
		ids = append(ids, ev.EventID)
	}
	committed := make(map[string]time.Time, len(ids))
	// In chunks: PostgreSQL takes at most 65535 parameters in one statement.
	for i := 0; i < len(ids); i += 10000 {
		var rows []struct {
			EventID     string
			CommittedAt time.Time
		}
		if err := db.WithContext(ctx).Raw(`SELECT event_id, committed_at FROM inbox WHERE event_id IN ?`, ids[i:min(i+10000, len(ids))]).Scan(&rows).Error; err != nil {
			return inTurn, parked, 0, fmt.Errorf("latency: inbox: %w", err)
		}
		for _, row := range rows {
			committed[row.EventID] = row.CommittedAt
		}
	}
	onPurpose := ParkedOnPurpose(r.order)
	var a, b []time.Duration
	for _, id := range ids {
		at, ok := committed[id]
		if !ok {
			missing++
			continue
		}
		if onPurpose[id] {
			b = append(b, at.Sub(r.first[id]))
		} else {
			a = append(a, at.Sub(r.first[id]))
		}
	}
	return StatsOf(a), StatsOf(b), missing, nil
}
