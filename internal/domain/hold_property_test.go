package domain_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/junban/junban/internal/domain"
	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/ledger/stock"
)

// Random histories of orders with holds, stepped against the ledger's model: placements
// with a hold_until, a hold_for or the TTL (or none), extensions, expiries of the order's
// current hold and of stale ones, payments (some after the expiry), allocations for
// shipment, changes of lines, cancellations and shipments, in any order. After every
// step: no unit is made or lost; every lot's reserved, allocated and shipped units are
// what the orders in those states hold (so an expired order holds nothing, and nothing
// is released twice); only a placed, reserved, unpaid order has a hold; an expiry applies
// only to the hold the order has, and moves nothing otherwise; an event that needs the
// reservation of an expired order is refused ERR_RESERVATION_EXPIRED.
func TestHoldHistoriesKeepTheStock(t *testing.T) {
	const (
		seeds  = 200
		orders = 4
		steps  = 40
		total  = 40
	)
	pol := domain.Policy{ReservationTTL: 90 * time.Minute}
	seen := map[string]int{}
	defer func() {
		// The histories reach what they are for.
		for _, want := range []string{
			"order.reservation_expired applied ", "order.reservation_expired rejected " + domain.ReasonHoldNotDue,
			"order.reservation_extended applied ", "order.reservation_extended rejected " + domain.ReasonInvalidHold,
			"order.reservation_extended rejected " + domain.ReasonReservationExpired,
			"payment.confirmed rejected " + domain.ReasonReservationExpired, "order.placed rejected " + domain.ReasonInvalidHold,
			"order.cancelled applied ", "order.shipped applied ",
		} {
			if seen[want] == 0 {
				t.Errorf("no %q in %d histories", want, seeds)
			}
		}
	}()
	for seed := range seeds {
		rng := rand.New(rand.NewPCG(uint64(seed), 7))
		ctx := context.Background()
		m := stock.NewModel(unknownSKUs{})
		if _, err := m.Put(stock.SKU{SKU: "A", Version: 1, Lots: []stock.Lot{onHand("A1", 1, "2027-01-01", buckets{total})}}); err != nil {
			t.Fatal(err)
		}
		states := map[string]domain.State{}
		arrival := map[string]int64{}
		stale := map[string][]time.Time{} // every hold each order has had
		for i := range steps {
			lcid := fmt.Sprintf("P%d", rng.IntN(orders))
			o := randomEvent(rng, lcid, states[lcid].Order, stale[lcid])
			o.EventID = fmt.Sprintf("s%d-e%d", seed, i)
			ev := decode(t, o, o.EventID)
			before := states[lcid]
			arrival[lcid]++
			next, results, err := domain.Step(ctx, m, pol, before, ev, arrival[lcid], now)
			if err != nil {
				t.Fatalf("seed %d step %d %s: %v", seed, i, o.Type, err)
			}
			states[lcid] = next
			if h := holdOf(next.Order); h != nil {
				stale[lcid] = append(stale[lcid], *h)
			}
			where := fmt.Sprintf("seed %d step %d: %s on %s (%s)", seed, i, o.Type, lcid, orderString(before.Order))
			checkHoldStep(t, where, before, ev, results, seen)
			checkStock(t, where, m, states, total)
		}
	}
}

func holdOf(o *event.OrderSnapshot) *time.Time {
	if o == nil {
		return nil
	}
	return o.HoldUntil
}

// randomEvent is an order's event of a random kind; an expiry names the order's hold
// (when it has one) or one it had.
func randomEvent(rng *rand.Rand, lcid string, cur *event.OrderSnapshot, had []time.Time) event.Order {
	hold := func() event.Hold {
		switch rng.IntN(4) {
		case 0:
			return holdFor(fmt.Sprintf("%dm", 1+rng.IntN(120)))
		case 1:
			return holdUntil(occurred.Add(time.Duration(1+rng.IntN(7200)) * time.Second))
		case 2:
			return event.Hold{} // the TTL
		}
		return holdFor("-1m") // refused
	}
	var o event.Order
	switch rng.IntN(9) {
	case 0, 1:
		mode := reserve
		if rng.IntN(4) == 0 {
			mode = ship
		}
		h := hold()
		if mode == ship && rng.IntN(2) == 0 {
			h = event.Hold{}
		}
		o = placeHeld(mode, h, line("1", "A", int64(1+rng.IntN(4))))
	case 2:
		o = extend(hold())
	case 3:
		until := occurred.Add(time.Hour)
		if h := holdOf(cur); h != nil && rng.IntN(4) > 0 {
			until = *h
		} else if len(had) > 0 {
			until = had[rng.IntN(len(had))]
		}
		o = expire(until)
	case 4:
		o = pay()
	case 5:
		o = allocate()
	case 6:
		o = change(line("1", "A", int64(1+rng.IntN(4))))
	case 7:
		o = cancel()
	default:
		o = shipIt()
	}
	o.LCID = lcid
	return o
}

// checkHoldStep checks the event's own result against the order it found.
func checkHoldStep(t *testing.T, where string, before domain.State, ev domain.Event, results []event.Result, seen map[string]int) {
	t.Helper()
	var r *event.Result
	for i := range results {
		if results[i].EventID == ev.EventID {
			r = &results[i]
		}
	}
	cur := before.Order
	switch d := ev.Payload().(type) {
	case *event.ReservationExpiredData:
		due := cur != nil && cur.HoldUntil != nil && cur.HoldUntil.Equal(d.HoldUntil)
		if r == nil || (due && r.Reason == domain.ReasonHoldNotDue) {
			t.Fatalf("%s: expiry of %v, the order's hold %v: %+v", where, d.HoldUntil, holdOf(cur), r)
		}
		if !due && (r.Reason != domain.ReasonHoldNotDue || len(r.Moves) != 0) {
			t.Fatalf("%s: a stale expiry %s %s with %d moves, want %s and none", where, r.Outcome, r.Reason, len(r.Moves), domain.ReasonHoldNotDue)
		}
		if r.Outcome == event.Applied && (r.Order.Status != event.StatusExpired || r.Order.HoldUntil != nil) {
			t.Fatalf("%s: an applied expiry left %s with hold %v", where, orderString(r.Order), r.Order.HoldUntil)
		}
	}
	if r != nil {
		seen[string(r.Type)+" "+r.Outcome+" "+r.Reason]++
	}
	if cur == nil || cur.Status != event.StatusExpired {
		return
	}
	switch ev.Type {
	case event.PaymentConfirmed, event.OrderAllocateForShipment, event.OrderLinesChanged, event.OrderReservationExtended, event.OrderShipped:
		if r == nil || r.Reason != domain.ReasonReservationExpired {
			t.Fatalf("%s: on an expired order %+v, want %s", where, r, domain.ReasonReservationExpired)
		}
	}
}

// checkStock checks the lot against the orders and the holds against the orders' states.
func checkStock(t *testing.T, where string, m *stock.Model, states map[string]domain.State, total int64) {
	t.Helper()
	s, err := m.Snapshot(context.Background(), "A")
	if err != nil {
		t.Fatal(err)
	}
	l := s.Lots[0]
	if sum := l.Sellable + l.Reserved + l.Allocated + l.Hidden + l.Shipped + l.Defective; sum != total {
		t.Fatalf("%s: %d units in the lot, want %d", where, sum, total)
	}
	var reserved, allocated, shipped int64
	for lcid, st := range states {
		o := st.Order
		if o == nil {
			continue
		}
		held := int64(0)
		for _, ln := range o.Lines {
			held += sumLots(ln.Lots)
		}
		switch {
		case o.Status == event.StatusPlaced && o.Allocation == "reserved":
			reserved += held
		case o.Status == event.StatusPlaced:
			allocated += held
		case o.Status == event.StatusShipped:
			shipped += held
		case held != 0:
			t.Fatalf("%s: %s is %s and holds %d units", where, lcid, o.Status, held)
		}
		if o.HoldUntil != nil && (o.Status != event.StatusPlaced || o.Allocation != "reserved" || o.Paid) {
			t.Fatalf("%s: %s is %s and has a hold", where, lcid, orderString(o))
		}
	}
	if l.Reserved != reserved || l.Allocated != allocated || l.Shipped != shipped {
		t.Fatalf("%s: lot reserved %d allocated %d shipped %d, the orders hold %d %d %d", where,
			l.Reserved, l.Allocated, l.Shipped, reserved, allocated, shipped)
	}
}

func sumLots(lots []stock.LotQty) int64 {
	var n int64
	for _, l := range lots {
		n += l.Qty
	}
	return n
}
