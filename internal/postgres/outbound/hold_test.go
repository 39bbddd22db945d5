package outbound_test

import (
	"slices"
	"testing"
	"time"

	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/postgres/outbound"
	"github.com/junban/junban/internal/testenv"
)

// A reserve order's hold is told: on its first message, when an extension moves it, and
// when the expiry ends it with the status expired; every message passes the schema.
func TestOrderStatusChangedHold(t *testing.T) {
	db, w := testenv.Postgres(t), writer()
	hold := time.Date(2026, 12, 3, 9, 0, 0, 123456000, time.UTC)
	later := hold.Add(time.Hour)
	reserve := func(id string, seq int64, typ event.Type, status string, h *time.Time) event.Result {
		r := order(id, "LC-H", seq, typ, status, "", false)
		r.Order.Mode, r.Order.TargetDate, r.Order.HoldUntil = event.ModeReserve, "", h
		if status == event.StatusPlaced {
			r.Order.Allocation = "reserved"
			r.Order.Lines[0].Lots = []event.LotQty{{LotID: "L1", Qty: 2}}
		}
		return r
	}
	apply(t, db, w, reserve("h1", 1, event.OrderPlaced, event.StatusPlaced, &hold))
	apply(t, db, w, reserve("h2", 2, event.OrderReservationExtended, event.StatusPlaced, &later))
	apply(t, db, w, reserve(event.ExpiryEventID("LC-H", later), 3, event.OrderReservationExpired, event.StatusExpired, nil))

	ms := outbox(t, db, "LC-H")
	if len(ms) != 3 {
		t.Fatalf("%d messages, want 3", len(ms))
	}
	for i, want := range []struct {
		to      string
		hold    *time.Time
		changed []string
	}{
		{"placed", &hold, []string{"status", "allocation", "paid", "lines", "hold_until"}},
		{"placed", &later, []string{"hold_until"}},
		{"expired", nil, []string{"status", "allocation", "lines", "hold_until"}},
	} {
		d := data[outbound.OrderStatusData](t, ms[i])
		sameHold := (d.HoldUntil == nil) == (want.hold == nil) && (want.hold == nil || d.HoldUntil.Equal(*want.hold))
		if d.To != want.to || !sameHold || !slices.Equal(d.Changed, want.changed) {
			t.Errorf("message %d: to %s hold %v changed %q, want %+v", ms[i].Seq, d.To, d.HoldUntil, d.Changed, want)
		}
	}
}
