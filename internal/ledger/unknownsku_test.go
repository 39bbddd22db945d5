package ledger

import (
	"errors"
	"testing"

	"github.com/junban/junban/internal/ledger/stock"
)

// An operation on a SKU that neither Redis nor the Loader knows is refused, and the refusal
// is remembered under its op id like the script's own: a replay answers it even once the
// SKU is registered (a step's re-run must meet what its first run met), at another fence
// it is ERR_OP_FENCED, and a new op id runs anew. RegisterSKU itself, which asks the
// Loader the same way, remembers nothing of it.
//
// Seen failing without the record (rememberUnknownSKU): the replay after the
// registration allocated the unit.
func TestUnknownSKUIsRememberedUnderTheOpID(t *testing.T) {
	t.Parallel()
	for name, inv := range impls(t) {
		t.Run(name, func(t *testing.T) {
			alloc := stock.AllocateRequest{OpID: "o1", SKU: "NEW", Qty: 1, TargetDate: "2026-12-01", Mode: stock.ModeShip, Holder: "LC-1"}
			if _, err := inv.Apply(ctx, stock.Fenced{Op: alloc, Fence: "0"}); !errors.Is(err, stock.ErrUnknownSKU) {
				t.Fatalf("allocation on an unknown SKU: %v, want %v", err, stock.ErrUnknownSKU)
			}
			if _, err := inv.Apply(ctx, stock.RegisterSKURequest{OpID: "reg", SKU: "NEW"}); err != nil {
				t.Fatalf("register the SKU: %v", err)
			}
			if _, err := inv.Apply(ctx, stock.RegisterLotRequest{OpID: "reglot", SKU: "NEW", Lot: stock.NewLot{
				LotID: "N1", Kind: stock.KindOnHand, Good: true, BestBefore: "2027-01-01", Sellable: 3}}); err != nil {
				t.Fatalf("register a lot: %v", err)
			}
			r, err := inv.Apply(ctx, stock.Fenced{Op: alloc, Fence: "0"})
			if !errors.Is(err, stock.ErrUnknownSKU) || len(r.Moves) != 0 {
				t.Errorf("replay after the registration: %v, %d moves; want %v and none", err, len(r.Moves), stock.ErrUnknownSKU)
			}
			if _, err := inv.Apply(ctx, stock.Fenced{Op: alloc, Fence: "1"}); !errors.Is(err, stock.ErrOpFenced) {
				t.Errorf("replay at another fence: %v, want %v", err, stock.ErrOpFenced)
			}
			again := alloc
			again.OpID = "o2"
			if r, err := inv.Apply(ctx, stock.Fenced{Op: again, Fence: "0"}); err != nil || len(r.Moves) != 1 {
				t.Errorf("a new op id on the registered SKU: %v, %d moves; want one", err, len(r.Moves))
			}
			s, err := inv.Snapshot(ctx, "NEW")
			if err != nil {
				t.Fatal(err)
			}
			if got := s.Lots[0]; got.Sellable != 2 || got.Allocated != 1 {
				t.Errorf("N1: %d sellable, %d allocated; want 2 and 1", got.Sellable, got.Allocated)
			}
		})
	}
}
