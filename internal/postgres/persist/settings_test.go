package persist_test

import (
	"context"
	"testing"

	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/postgres/persist"
	"github.com/junban/junban/internal/testenv"
	"github.com/junban/junban/internal/testenv/resultgen"
)

// A result's SKUs carry the version and the touched lots but not the SKU's settings:
// the order-worker builds them from ledger operation results, which do not return the
// safety stock. Applying one must leave the stored safety stock alone (it once wrote 0,
// which reconcile reported as drift after every chaos run).
func TestApplyKeepsSafetyStock(t *testing.T) {
	ctx := context.Background()
	cfg := resultgen.Config{Prefix: testenv.ID() + "-", SKUs: 3, LotsPerSKU: 2}
	db := seeded(t, cfg)
	cat := resultgen.Catalog(cfg)
	if _, err := persist.WriteSKUs(ctx, db, []stock.SKU{{SKU: cat[0].SKU, SafetyStock: 7, Version: 2, Lots: cat[0].Lots}}); err != nil {
		t.Fatal(err)
	}
	// As the order-worker sends it: a newer version, the touched lot, no settings.
	sku := stock.SKU{SKU: cat[0].SKU, Version: 3, Lots: cat[0].Lots[:1]}
	apply(t, db, []event.Result{{
		EventID: "evt-settings-1", Entity: "LC-settings", LCID: "LC-settings", Seq: 1,
		Type: event.OrderPlaced, Outcome: event.Applied, SKUs: []stock.SKU{sku},
		Order: &event.OrderSnapshot{LCID: "LC-settings", Status: event.StatusPlaced},
	}})
	var got struct {
		SafetyStock int64
		Version     int64
	}
	if err := db.Raw(`SELECT safety_stock, version FROM skus WHERE sku = ?`, sku.SKU).Scan(&got).Error; err != nil {
		t.Fatal(err)
	}
	if got.Version != 3 || got.SafetyStock != 7 {
		t.Fatalf("sku row after a result: version %d safety_stock %d, want version 3 safety_stock 7", got.Version, got.SafetyStock)
	}
}
