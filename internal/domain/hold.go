package domain

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/ledger/stock"
)

// Policy is what the order-worker's configuration tells the steps. Replay takes the one
// the run it reproduces had.
type Policy struct {
	// ReservationTTL is the hold of a reserve-mode order.placed that names none, from the
	// event's occurred_at (JUNBAN_RESERVATION_TTL; 0: such an order holds until it is
	// cancelled, paid or allocated for shipment).
	ReservationTTL time.Duration
	// Strategies are the shop's default allocation strategies, for an order.placed that
	// names none (JUNBAN_ALLOCATION_STRATEGIES; none: ranked, once the shop has registered
	// locations). An order.placed without routing fields in a shop without registered
	// locations and without defaults allocates from every lot alike, as before locations.
	Strategies []stock.Strategy
	// Locations gives the shop's locations (the order-worker's cache of the Redis hash,
	// ledger.LocationCache); nil: the default location alone, none registered.
	Locations LocationSource
}

// LocationSource gives the shop's locations; fresh reads them anew, whatever a cache's
// age (a step does before it refuses a location it does not know).
type LocationSource interface {
	Shop(ctx context.Context, fresh bool) (stock.ShopLocations, error)
}

// normalizeHold makes a hold's instant UTC and microsecond precise, as the snapshot, the
// due index and PostgreSQL keep it.
func normalizeHold(t *time.Time) {
	if t != nil {
		*t = t.UTC().Truncate(time.Microsecond)
	}
}

// holdSet tells whether a hold names an end.
func holdSet(h event.Hold) bool { return h.HoldUntil != nil || h.HoldFor != "" }

// resolveHold is the instant h names for an event that occurred at from, or the refusal
// that makes it an ERR_INVALID_HOLD: both fields, neither, a hold_for that is not a
// positive duration (or has no occurred_at to count from), an instant not after from.
func resolveHold(h event.Hold, from time.Time) (time.Time, string) {
	var until time.Time
	switch {
	case h.HoldUntil != nil && h.HoldFor != "":
		return time.Time{}, "hold_until and hold_for are both set"
	case h.HoldUntil != nil:
		until = *h.HoldUntil
	case h.HoldFor != "":
		d, err := time.ParseDuration(h.HoldFor)
		if err != nil || d <= 0 {
			return time.Time{}, fmt.Sprintf("hold_for %.40q is not a positive duration", h.HoldFor)
		}
		if from.IsZero() {
			return time.Time{}, "hold_for needs the event's occurred_at"
		}
		until = from.Add(d)
	default:
		return time.Time{}, "neither hold_until nor hold_for is set"
	}
	until = until.UTC().Truncate(time.Microsecond)
	if !from.IsZero() && !until.After(from) {
		return time.Time{}, fmt.Sprintf("hold_until %s is not after occurred_at %s", until.Format(time.RFC3339Nano), from.UTC().Format(time.RFC3339Nano))
	}
	return until, ""
}

// placedHold is the hold an order.placed gives its order (nil: none), or the refusal of
// an invalid one: a hold on a ship-mode order, or one resolveHold refuses. A reserve-mode
// order that names none holds for the policy's TTL from occurred_at (from now when the
// event has no occurred_at).
func (t *txn) placedHold(d *event.OrderData) (*time.Time, string) {
	if holdSet(d.Hold) {
		if d.Mode != stock.ModeReserve {
			return nil, "a hold on a " + string(d.Mode) + "-mode order"
		}
		until, refusal := resolveHold(d.Hold, t.ev.OccurredAt)
		if refusal != "" {
			return nil, refusal
		}
		return &until, ""
	}
	if d.Mode != stock.ModeReserve || t.pol.ReservationTTL <= 0 {
		return nil, ""
	}
	from := t.ev.OccurredAt
	if from.IsZero() {
		from = t.now
	}
	until := from.Add(t.pol.ReservationTTL).UTC().Truncate(time.Microsecond)
	return &until, ""
}

// invalidHold rejects the event with ERR_INVALID_HOLD and says why in its detail.
func (t *txn) invalidHold(refusal string) (transition, error) {
	t.refusals = append(t.refusals, refusal)
	return rejected(ReasonInvalidHold)
}

// needsReservation refuses an event that needs the reservation of an order that expired
// (a payment, an allocation for shipment, a change of lines, an extension, a shipment).
func needsReservation(cur *event.OrderSnapshot) (string, bool) {
	if cur != nil && cur.Status == event.StatusExpired {
		return ReasonReservationExpired, true
	}
	return "", false
}

// extended moves a placed reserve-mode order's hold. An order that holds no end (paid,
// allocated for shipment, placed without one) or is not placed refuses it with
// ERR_INVALID_HOLD, an expired one with ERR_RESERVATION_EXPIRED; one before its order
// waits for it.
func (t *txn) extended(cur *event.OrderSnapshot, d *event.ReservationExtendedData) (transition, error) {
	if cur == nil {
		return transition{park: true}, nil
	}
	if reason, ok := needsReservation(cur); ok {
		return rejected(reason)
	}
	if cur.Status != event.StatusPlaced || cur.Allocation != "reserved" || cur.HoldUntil == nil {
		return t.invalidHold(fmt.Sprintf("the order is %s/%s and holds no expiring reservation", cur.Status, cur.Allocation))
	}
	until, refusal := resolveHold(d.Hold, t.ev.OccurredAt)
	if refusal != "" {
		return t.invalidHold(refusal)
	}
	o := clone(cur)
	o.HoldUntil = &until
	return transition{next: o}, nil
}

// expired ends a reservation whose hold passed: it releases the reserved units as a
// cancellation does and the order becomes expired. It expires exactly the hold it names:
// an order whose hold has moved since it was found due (extended, ended by a payment or an
// allocation for shipment, cancelled) refuses it with ERR_HOLD_NOT_DUE and keeps its
// reservation. The step does not compare the hold with its own clock: the scanner that
// found it due did, and a replica whose clock lags must not refuse it for good (its event
// id is the hold's, so it runs once).
func (t *txn) expired(cur *event.OrderSnapshot, d *event.ReservationExpiredData) (transition, error) {
	if cur == nil || cur.HoldUntil == nil || !cur.HoldUntil.Equal(d.HoldUntil) {
		has := "none"
		if cur != nil && cur.HoldUntil != nil {
			has = cur.HoldUntil.Format(time.RFC3339Nano)
		}
		t.refusals = append(t.refusals, fmt.Sprintf("the order's hold is %s, not %s", has, d.HoldUntil.Format(time.RFC3339Nano)))
		return rejected(ReasonHoldNotDue)
	}
	for _, ln := range cur.Lines {
		if len(ln.Lots) == 0 {
			continue
		}
		lots := slices.Clone(ln.Lots)
		slices.Reverse(lots)
		if reason, err := t.keep(t.l.Apply(t.ctx, stock.ReleaseRequest{OpID: t.opID(ln.LineID, "expire"), SKU: ln.SKU, From: stock.Reserved, Lots: lots, Holder: t.holder()})); err != nil || reason != "" {
			return transition{reason: reason}, err
		}
	}
	o := clone(cur)
	o.Status = event.StatusExpired
	o.HoldUntil = nil
	for i := range o.Lines {
		o.Lines[i].Lots = nil
	}
	return transition{next: o}, nil
}

// checkHold normalizes the instant a hold names; the rest is the step's (ERR_INVALID_HOLD
// needs the order and the event's occurred_at).
func checkHold(h *event.Hold) error {
	normalizeHold(h.HoldUntil)
	return nil
}

// checkExpired checks an order.reservation_expired's data: the hold it expires.
func checkExpired(d *event.ReservationExpiredData, _ Limits) error {
	if d.HoldUntil.IsZero() {
		return invalid(ReasonMissingField, "data.hold_until is required")
	}
	normalizeHold(&d.HoldUntil)
	return nil
}
