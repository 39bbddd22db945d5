package sendlatency

import (
	"encoding/json"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/ledger/stock"
)

func ev(id string, t event.Type, lcid string) event.Order {
	return event.Order{EventID: id, Type: t, LCID: lcid}
}

func placed(id, lcid string, mode stock.Mode) event.Order {
	e := ev(id, event.OrderPlaced, lcid)
	e.Data, _ = json.Marshal(event.OrderData{Mode: mode})
	return e
}

// The events the order-worker parks are those sent before their precondition: anything
// before the placement, a shipment before the payment or, in reserve mode, before the
// allocation. Events after a parked one that applies later are in turn again, and an
// event for a finished order is rejected at once, not parked.
func TestParkedOnPurposeFollowsTheOrderPreconditions(t *testing.T) {
	sent := []event.Order{
		// A: in order.
		placed("a1", "A", stock.ModeShip), ev("a2", event.PaymentConfirmed, "A"), ev("a3", event.OrderShipped, "A"),
		// B: paid and shipped before it was placed.
		ev("b1", event.PaymentConfirmed, "B"), ev("b2", event.OrderShipped, "B"), placed("b3", "B", stock.ModeShip),
		// C: reserve mode, shipped before its allocation; the allocation releases it.
		placed("c1", "C", stock.ModeReserve), ev("c2", event.PaymentConfirmed, "C"), ev("c3", event.OrderShipped, "C"),
		ev("c4", event.OrderAllocateForShipment, "C"),
		// D: shipped before the payment, then a line change before the payment too (not parked).
		placed("d1", "D", stock.ModeShip), ev("d2", event.OrderShipped, "D"), ev("d3", event.OrderLinesChanged, "D"),
		ev("d4", event.PaymentConfirmed, "D"),
		// E: cancelled, then a payment that is rejected, not parked.
		placed("e1", "E", stock.ModeShip), ev("e2", event.OrderCancelled, "E"), ev("e3", event.PaymentConfirmed, "E"),
		// F: everything before the placement, the placement last.
		ev("f1", event.OrderLinesChanged, "F"), ev("f2", event.OrderAllocateForShipment, "F"), ev("f3", event.OrderCancelled, "F"),
		placed("f4", "F", stock.ModeReserve),
	}
	got := slices.Sorted(maps.Keys(ParkedOnPurpose(sent)))
	want := []string{"b1", "b2", "c3", "d2", "f1", "f2", "f3"}
	if !slices.Equal(got, want) {
		t.Fatalf("parked on purpose %v, want %v", got, want)
	}
}

func TestLatencyStatsPercentiles(t *testing.T) {
	var lat []time.Duration
	for i := 100; i >= 1; i-- {
		lat = append(lat, time.Duration(i)*time.Millisecond)
	}
	s := StatsOf(lat)
	if s.Events != 100 || s.P50MS != 50 || s.P95MS != 95 || s.P99MS != 99 || s.MaxMS != 100 {
		t.Fatalf("stats of 1..100 ms: %+v", s)
	}
	if z := StatsOf(nil); z.Events != 0 || z.P99MS != 0 {
		t.Fatalf("stats of nothing: %+v", z)
	}
}
