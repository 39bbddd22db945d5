package domain

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/ledger/stock"
)

// FuzzOpIDs checks the op ids of any order's event that decodes: the ledger accepts each
// (the new one, the legacy one and their undos), the new one names the order (or is a
// hash), differs from its legacy one, and differs from another order's for the same
// event, line and step.
func FuzzOpIDs(f *testing.F) {
	f.Add("LC-P1", "LC-P2", "dup-1", "1", 0)
	f.Add("LC-1", "LC-1/x", "e", "1", 0)
	f.Add("a/b", "a", "c", "b/c", 1)
	f.Add("注文-1", "注文-2", "evt", "行", 2)
	f.Add(strings.Repeat("l", event.MaxIDLength), strings.Repeat("m", event.MaxIDLength), strings.Repeat("e", event.MaxIDLength), strings.Repeat("1", event.MaxIDLength), 9)
	f.Add("LC", "LC2", strings.Repeat("e", stock.MaxIDLen-len(":1:alloc")), "1", 0)
	f.Fuzz(func(t *testing.T, lcid, other, eventID, lineID string, gen int) {
		for _, id := range []string{eventID, lineID} {
			if id == "" || len(id) > event.MaxIDLength || event.CheckID(id) != nil {
				return
			}
		}
		if lcid == "" || other == "" || event.CheckLCID(lcid) != nil || event.CheckLCID(other) != nil || gen < 0 {
			return
		}
		tx := func(lcid string) *txn {
			return &txn{ev: Event{Order: event.Order{EventID: eventID, LCID: lcid, Type: event.OrderPlaced}}, gen: gen}
		}
		a := tx(lcid)
		id, legacy := a.opID(lineID, "alloc"), a.legacyOpID(lineID, "alloc")
		m := stock.NewModel(nil) // no SKU: a valid request fails with ErrNotLoaded
		for _, op := range [][2]string{{id, legacy}, {undoOpID(id), undoOpID(legacy)}} {
			_, err := m.Apply(context.Background(), stock.AllocateRequest{OpID: op[0], LegacyOpID: op[1], SKU: "S", Qty: 1, TargetDate: "2026-12-01", Mode: stock.ModeShip})
			if !errors.Is(err, stock.ErrNotLoaded) {
				t.Fatalf("op ids %q / %q: %v, want accepted (ErrNotLoaded)", op[0], op[1], err)
			}
		}
		if !strings.HasPrefix(id, "{"+lcid+"}") && !strings.HasPrefix(id, "h:") {
			t.Errorf("op id %q names neither the order %q nor is a hash", id, lcid)
		}
		if id == legacy || strings.HasPrefix(legacy, "{") {
			t.Errorf("op id %q and legacy op id %q", id, legacy)
		}
		if lcid != other && tx(other).opID(lineID, "alloc") == id {
			t.Errorf("orders %q and %q share the op id %q", lcid, other, id)
		}
	})
}
