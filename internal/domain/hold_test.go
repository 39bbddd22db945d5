package domain_test

import (
	"time"

	"github.com/junban/junban/internal/domain"
	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/ledger/stock"
)

// The holds of the cases: occurred is every event's occurred_at.
var (
	in2h    = occurred.Add(2 * time.Hour)
	in3h    = occurred.Add(3 * time.Hour)
	in2hStr = in2h.Format(time.RFC3339Nano)
	in3hStr = in3h.Format(time.RFC3339Nano)
)

func holdUntil(t time.Time) event.Hold { return event.Hold{HoldUntil: &t} }

func holdFor(d string) event.Hold { return event.Hold{HoldFor: d} }

// placeHeld is an order.placed with a hold.
func placeHeld(mode stock.Mode, h event.Hold, lines ...event.Line) event.Order {
	return fromExample(event.OrderPlaced, func(d *event.OrderData) { d.Mode, d.Lines, d.Hold = mode, lines, h })
}

func extend(h event.Hold) event.Order {
	return fromExample(event.OrderReservationExtended, func(d *event.ReservationExtendedData) { d.Hold = h })
}

func expire(until time.Time) event.Order {
	return fromExample(event.OrderReservationExpired, func(d *event.ReservationExpiredData) { d.HoldUntil = until })
}

func holdString(o *event.OrderSnapshot) string {
	if o == nil || o.HoldUntil == nil {
		return ""
	}
	return o.HoldUntil.UTC().Format(time.RFC3339Nano)
}

// holdCases are the transitions of expiring reservations: a hold given, defaulted,
// refused, moved and ended; the expiry and what it refuses after.
func holdCases() []transitionCase {
	held := func() event.Order { return placeHeld(reserve, holdUntil(in2h), line("1", "A", 3)) }
	expiredBefore := []event.Order{held(), expire(in2h)}
	ttl := domain.Policy{ReservationTTL: 30 * time.Minute}
	invalid := func(name string, ev event.Order) transitionCase {
		return transitionCase{name: "ERR_INVALID_HOLD: " + name, ev: ev,
			want: expect{outcome: rejected, reason: domain.ReasonInvalidHold, order: "rejected/-/unpaid", moves: ops()}}
	}
	onHeld := func(name string, ev event.Order, reason string) transitionCase {
		return transitionCase{name: name, before: []event.Order{held()}, ev: ev,
			want: expect{outcome: rejected, reason: reason, order: "placed/reserved/unpaid", hold: in2hStr, moves: ops()}}
	}
	afterExpiry := func(ev event.Order, reason string) transitionCase {
		return transitionCase{name: "after the expiry: " + reason, before: expiredBefore, ev: ev,
			want: expect{outcome: rejected, reason: reason, order: "expired/reserved/unpaid", moves: ops()}}
	}
	return []transitionCase{
		// order.placed
		{name: "reserve with hold_until", ev: held(),
			want: expect{outcome: applied, order: "placed/reserved/unpaid", hold: in2hStr, lots: map[string]buckets{"A/A2": {2, 3}}, moves: ops(":1:alloc")}},
		{name: "reserve with hold_for, from occurred_at", ev: placeHeld(reserve, holdFor("90m"), line("1", "A", 3)),
			want: expect{outcome: applied, order: "placed/reserved/unpaid", hold: "2026-11-30T10:30:00Z", lots: map[string]buckets{"A/A2": {2, 3}}}},
		{name: "hold_until truncated to microseconds", ev: placeHeld(reserve, holdUntil(in2h.Add(1234567)), line("1", "A", 3)),
			want: expect{outcome: applied, order: "placed/reserved/unpaid", hold: "2026-11-30T11:00:00.001234Z", lots: map[string]buckets{"A/A2": {2, 3}}}},
		{name: "reserve without a hold takes the TTL", pol: ttl, ev: place(reserve, line("1", "A", 3)),
			want: expect{outcome: applied, order: "placed/reserved/unpaid", hold: "2026-11-30T09:30:00Z", lots: map[string]buckets{"A/A2": {2, 3}}}},
		{name: "reserve without a hold nor a TTL holds for ever", ev: place(reserve, line("1", "A", 3)),
			want: expect{outcome: applied, order: "placed/reserved/unpaid", lots: map[string]buckets{"A/A2": {2, 3}}}},
		{name: "ship never takes the TTL", pol: ttl, ev: place(ship, line("1", "A", 3)),
			want: expect{outcome: applied, order: "placed/allocated/unpaid", lots: map[string]buckets{"A/A2": {2, 0, 3}}}},
		{name: "a shortage has no hold", pol: ttl, ev: place(reserve, line("1", "A", 11)),
			want: expect{outcome: rejected, reason: "ERR_SHORTAGE", order: "rejected/-/unpaid"}},
		invalid("on a ship-mode order", placeHeld(ship, holdFor("1h"), line("1", "A", 3))),
		invalid("both fields", placeHeld(reserve, event.Hold{HoldUntil: &in2h, HoldFor: "1h"}, line("1", "A", 3))),
		invalid("hold_for zero", placeHeld(reserve, holdFor("0s"), line("1", "A", 3))),
		invalid("hold_for negative", placeHeld(reserve, holdFor("-5m"), line("1", "A", 3))),
		invalid("hold_for not a duration", placeHeld(reserve, holdFor("3 days"), line("1", "A", 3))),
		invalid("hold_until at occurred_at", placeHeld(reserve, holdUntil(occurred), line("1", "A", 3))),

		// order.lines_changed
		{name: "keeps the hold", before: []event.Order{held()}, ev: change(line("1", "A", 4)),
			want: expect{outcome: applied, order: "placed/reserved/unpaid", hold: in2hStr, lots: map[string]buckets{"A/A2": {1, 4}}}},
		onHeld("ERR_INVALID_HOLD: it takes no hold", fromExample(event.OrderLinesChanged, func(d *event.OrderData) {
			d.Lines, d.Hold = []event.Line{line("1", "A", 1)}, holdFor("1h")
		}), domain.ReasonInvalidHold),
		afterExpiry(change(line("1", "A", 1)), domain.ReasonReservationExpired),

		// payment.confirmed
		{name: "ends the hold", before: []event.Order{held()}, ev: pay(),
			want: expect{outcome: applied, order: "placed/reserved/paid", moves: ops()}},
		afterExpiry(pay(), domain.ReasonReservationExpired),

		// order.allocate_for_shipment
		{name: "ends the hold", before: []event.Order{held()}, ev: allocate(),
			want: expect{outcome: applied, order: "placed/allocated/unpaid", lots: map[string]buckets{"A/A2": {2, 0, 3}}, moves: ops(":1:confirm")}},
		afterExpiry(allocate(), domain.ReasonReservationExpired),

		// order.cancelled
		{name: "ends the hold", before: []event.Order{held()}, ev: cancel(),
			want: expect{outcome: applied, order: "cancelled/reserved/unpaid", lots: map[string]buckets{"A/A2": {5}}, moves: ops(":1:cancel")}},
		{name: "after the expiry: a no-op", before: expiredBefore, ev: cancel(),
			want: expect{outcome: applied, order: "expired/reserved/unpaid", moves: ops()}},

		// order.shipped
		afterExpiry(shipIt(), domain.ReasonReservationExpired),

		// order.returned
		afterExpiry(giveBack(false, back("1", 1)), domain.ReasonInvalidTransition),

		// order.reservation_extended
		{name: "moves hold_until", before: []event.Order{held()}, ev: extend(holdUntil(in3h)),
			want: expect{outcome: applied, order: "placed/reserved/unpaid", hold: in3hStr, moves: ops()}},
		{name: "hold_for counts from its own occurred_at", before: []event.Order{held()}, ev: extend(holdFor("1h")),
			want: expect{outcome: applied, order: "placed/reserved/unpaid", hold: "2026-11-30T10:00:00Z", moves: ops()}},
		{name: "a TTL's hold moves too", pol: ttl, before: []event.Order{place(reserve, line("1", "A", 3))}, ev: extend(holdUntil(in3h)),
			want: expect{outcome: applied, order: "placed/reserved/unpaid", hold: in3hStr}},
		{name: "before placement parks", ev: extend(holdUntil(in3h)), want: expect{outcome: parked}},
		{name: "a parked extension applies after placement", before: []event.Order{extend(holdUntil(in3h))}, ev: held(),
			want: expect{outcome: applied, then: []string{"order.reservation_extended applied"}, order: "placed/reserved/unpaid", hold: in3hStr,
				lots: map[string]buckets{"A/A2": {2, 3}}}},
		{name: "ERR_INVALID_HOLD: a paid order holds no end", before: []event.Order{held(), pay()}, ev: extend(holdUntil(in3h)),
			want: expect{outcome: rejected, reason: domain.ReasonInvalidHold, order: "placed/reserved/paid"}},
		{name: "ERR_INVALID_HOLD: a ship-mode order", before: []event.Order{place(ship, line("1", "A", 3))}, ev: extend(holdUntil(in3h)),
			want: expect{outcome: rejected, reason: domain.ReasonInvalidHold, order: "placed/allocated/unpaid"}},
		{name: "ERR_INVALID_HOLD: a reserve order without a hold", before: []event.Order{place(reserve, line("1", "A", 3))}, ev: extend(holdUntil(in3h)),
			want: expect{outcome: rejected, reason: domain.ReasonInvalidHold, order: "placed/reserved/unpaid"}},
		{name: "ERR_INVALID_HOLD: a cancelled order", before: []event.Order{held(), cancel()}, ev: extend(holdUntil(in3h)),
			want: expect{outcome: rejected, reason: domain.ReasonInvalidHold, order: "cancelled/reserved/unpaid"}},
		onHeld("ERR_INVALID_HOLD: neither field", extend(event.Hold{}), domain.ReasonInvalidHold),
		onHeld("ERR_INVALID_HOLD: both fields", extend(event.Hold{HoldUntil: &in3h, HoldFor: "1h"}), domain.ReasonInvalidHold),
		onHeld("ERR_INVALID_HOLD: not after occurred_at", extend(holdUntil(occurred.Add(-time.Minute))), domain.ReasonInvalidHold),
		afterExpiry(extend(holdUntil(in3h)), domain.ReasonReservationExpired),

		// order.reservation_expired
		{name: "releases the reserved units", before: []event.Order{placeHeld(reserve, holdUntil(in2h), line("1", "A", 3), line("2", "B", 1))}, ev: expire(in2h),
			want: expect{outcome: applied, order: "expired/reserved/unpaid", lines: []event.SnapshotLine{snap("1", "A", 3), snap("2", "B", 1)},
				lots: map[string]buckets{"A/A2": {5}, "B/B1": {3}}, moves: ops(":1:expire", ":2:expire")}},
		{name: "a TTL's hold", pol: ttl, before: []event.Order{place(reserve, line("1", "A", 3))}, ev: expire(occurred.Add(30 * time.Minute)),
			want: expect{outcome: applied, order: "expired/reserved/unpaid", lots: map[string]buckets{"A/A2": {5}}}},
		{name: "a parked shipment is refused after it", before: []event.Order{held(), shipIt()}, ev: expire(in2h),
			want: expect{outcome: applied, then: []string{"order.shipped rejected " + domain.ReasonReservationExpired}, order: "expired/reserved/unpaid",
				lots: map[string]buckets{"A/A2": {5}}}},
		{name: "ERR_HOLD_NOT_DUE: extended since", before: []event.Order{held(), extend(holdUntil(in3h))}, ev: expire(in2h),
			want: expect{outcome: rejected, reason: domain.ReasonHoldNotDue, order: "placed/reserved/unpaid", hold: in3hStr, moves: ops()}},
		{name: "ERR_HOLD_NOT_DUE: paid since", before: []event.Order{held(), pay()}, ev: expire(in2h),
			want: expect{outcome: rejected, reason: domain.ReasonHoldNotDue, order: "placed/reserved/paid", moves: ops()}},
		{name: "ERR_HOLD_NOT_DUE: allocated for shipment since", before: []event.Order{held(), allocate()}, ev: expire(in2h),
			want: expect{outcome: rejected, reason: domain.ReasonHoldNotDue, order: "placed/allocated/unpaid", moves: ops()}},
		{name: "ERR_HOLD_NOT_DUE: cancelled since", before: []event.Order{held(), cancel()}, ev: expire(in2h),
			want: expect{outcome: rejected, reason: domain.ReasonHoldNotDue, order: "cancelled/reserved/unpaid", moves: ops()}},
		{name: "ERR_HOLD_NOT_DUE: expired already", before: expiredBefore, ev: expire(in2h),
			want: expect{outcome: rejected, reason: domain.ReasonHoldNotDue, order: "expired/reserved/unpaid", moves: ops()}},
		{name: "ERR_HOLD_NOT_DUE: no order", ev: expire(in2h),
			want: expect{outcome: rejected, reason: domain.ReasonHoldNotDue, moves: ops()}},
		{name: "ERR_INSUFFICIENT: line 1 is reserved again",
			before: []event.Order{placeHeld(reserve, holdUntil(in2h), line("1", "A", 2), line("2", "B", 2))},
			tamper: stock.ReleaseRequest{OpID: "other:steal", SKU: "B", From: stock.Reserved, Lots: []stock.LotQty{at("B1", 2)}}, ev: expire(in2h),
			want: expect{outcome: rejected, reason: "ERR_INSUFFICIENT", order: "placed/reserved/unpaid", hold: in2hStr, moves: ops(":1:expire", ":1:expire-undo")}},
	}
}
