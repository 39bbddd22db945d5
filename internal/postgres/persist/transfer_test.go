package persist_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/ledger"
	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/postgres/inventorydb"
	"github.com/junban/junban/internal/testenv"
)

// A transfer's results reach PostgreSQL through the same rows as any SKU's: the transit
// lots are upserted at the destination with their kind and buckets, the source lots lose
// the units, the moves to and from transit are stored, and the SKU loads back as Redis
// holds it after the request, the receipt and a cancel.
func TestTransferResultsArePersisted(t *testing.T) {
	ctx := context.Background()
	rc, prefix := testenv.Redis(t)
	led, err := ledger.New(ledger.Config{Redis: rc, Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	db := testenv.Postgres(t)
	seq := int64(0)
	step := func(typ event.Type, op stock.Op) stock.Result {
		t.Helper()
		res, err := led.Apply(ctx, op)
		if err != nil {
			t.Fatal(err)
		}
		seq++
		apply(t, db, []event.Result{skuResult("e"+res.OpID, typ, seq, res)})
		return res
	}
	type row struct {
		LotID, Kind, Location                                     string
		Sellable, Reserved, Allocated, Hidden, Shipped, Defective int64
	}
	rows := func() map[string]row {
		t.Helper()
		var rs []row
		if err := db.Raw(`SELECT lot_id, kind, location, sellable, reserved, allocated, hidden, shipped, defective
			FROM lots WHERE sku = 'TR' ORDER BY lot_id`).Scan(&rs).Error; err != nil {
			t.Fatal(err)
		}
		out := map[string]row{}
		for _, r := range rs {
			out[r.LotID] = r
		}
		return out
	}
	loads := func(when string) {
		t.Helper()
		got, err := inventorydb.PGLoader{DB: db}.LoadSKU(ctx, "TR")
		if err != nil {
			t.Fatal(err)
		}
		want, err := led.Snapshot(ctx, "TR")
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: PostgreSQL loads\n%+v\nRedis holds\n%+v", when, got, want)
		}
	}

	step(event.InventorySKURegistered, stock.RegisterSKURequest{OpID: "s", SKU: "TR"})
	step(event.InventoryLotRegistered, stock.RegisterLotRequest{OpID: "l1", SKU: "TR", Lot: stock.NewLot{LotID: "A", Kind: stock.KindOnHand, Good: true, BestBefore: "2027-01-01", Sellable: 4}})
	step(event.InventoryLotRegistered, stock.RegisterLotRequest{OpID: "l2", SKU: "TR", Lot: stock.NewLot{LotID: "B", Kind: stock.KindOnHand, Good: true, BestBefore: "2027-02-01", Sellable: 5}})
	step(event.InventoryTransferRequested, stock.TransferRequest{OpID: "t1", SKU: "TR", TransferID: "X", From: stock.DefaultLocation, To: "store-1", Qty: 6, ArrivesAt: "2026-12-05"})
	r := rows()
	if r["A"].Sellable != 0 || r["B"].Sellable != 3 || r["X~A"] != (row{"X~A", stock.KindPlanned, "store-1", 4, 0, 0, 0, 0, 0}) ||
		r["X~B"] != (row{"X~B", stock.KindPlanned, "store-1", 2, 0, 0, 0, 0, 0}) {
		t.Fatalf("lots after the request %+v", r)
	}
	var transit []struct {
		LotID, FromBucket, ToBucket string
		Qty                         int64
	}
	if err := db.Raw(`SELECT lot_id, from_bucket, to_bucket, qty FROM moves WHERE op_id = 't1' ORDER BY idx`).Scan(&transit).Error; err != nil {
		t.Fatal(err)
	}
	if len(transit) != 4 || transit[0].ToBucket != stock.Transit || transit[1].FromBucket != stock.Transit || transit[1].LotID != "X~A" {
		t.Fatalf("moves of the request %+v", transit)
	}
	loads("after the request")

	step(event.InventoryTransferReceived, stock.TransferReceiveRequest{OpID: "t2", SKU: "TR", TransferID: "X", Qty: 5})
	r = rows()
	if r["X~A"] != (row{"X~A", stock.KindOnHand, "store-1", 4, 0, 0, 0, 0, 0}) || r["X~B"] != (row{"X~B", stock.KindOnHand, "store-1", 1, 0, 0, 0, 0, 1}) {
		t.Fatalf("lots after the receipt %+v", r)
	}
	loads("after the receipt")

	step(event.InventoryTransferRequested, stock.TransferRequest{OpID: "t3", SKU: "TR", TransferID: "Y", From: "store-1", To: stock.DefaultLocation, Qty: 2, ArrivesAt: "2026-12-09"})
	step(event.InventoryTransferCancelled, stock.TransferCancelRequest{OpID: "t4", SKU: "TR", TransferID: "Y"})
	r = rows()
	if r["X~A"].Sellable != 4 || r["Y~X~A"] != (row{"Y~X~A", stock.KindPlanned, "default", 0, 0, 0, 0, 0, 0}) {
		t.Fatalf("lots after the cancel %+v", r)
	}
	loads("after the cancel")
}

// A transfer in transit survives a Redis data loss: its request's result is persisted
// (the transfers row), the SKU's Redis keys are lost, and the SKU loaded again from
// PostgreSQL has the transfer, so its receipt succeeds; the receipt's row replaces the
// request's, and the request's result delivered again leaves it received.
func TestTransferInTransitSurvivesRedisLoss(t *testing.T) {
	ctx := context.Background()
	rc, prefix := testenv.Redis(t)
	db := testenv.Postgres(t)
	led, err := ledger.New(ledger.Config{Redis: rc, Prefix: prefix, Loader: inventorydb.PGLoader{DB: db}})
	if err != nil {
		t.Fatal(err)
	}
	var results []event.Result
	step := func(typ event.Type, op stock.Op) (stock.Result, error) {
		res, err := led.Apply(ctx, op)
		if err == nil {
			results = append(results, skuResult("e"+res.OpID, typ, int64(len(results)+1), res))
			apply(t, db, results[len(results)-1:])
		}
		return res, err
	}
	for _, op := range []stock.Op{
		stock.RegisterSKURequest{OpID: "s", SKU: "TR"},
		stock.RegisterLotRequest{OpID: "l1", SKU: "TR", Lot: stock.NewLot{LotID: "A", Kind: stock.KindOnHand, Good: true, Sellable: 4}},
		stock.TransferRequest{OpID: "t1", SKU: "TR", TransferID: "X", From: stock.DefaultLocation, To: "store-1", Qty: 3, ArrivesAt: "2026-12-05"},
	} {
		if _, err := step(event.InventoryTransferRequested, op); err != nil {
			t.Fatal(err)
		}
	}
	type row struct {
		State, FromLocation, ToLocation, Lots string
		Version                               int64
	}
	stored := func() row {
		t.Helper()
		var rs []row
		if err := db.Raw(`SELECT state, from_location, to_location, lots::text AS lots, version FROM transfers WHERE sku = 'TR' AND transfer_id = 'X'`).Scan(&rs).Error; err != nil || len(rs) != 1 {
			t.Fatalf("transfer rows %+v %v", rs, err)
		}
		return rs[0]
	}
	if r := stored(); r != (row{stock.TransferInTransit, stock.DefaultLocation, "store-1", `[{"qty": 3, "source": "A", "transit": "X~A"}]`, 3}) {
		t.Fatalf("after the request %+v", r)
	}
	keys, err := rc.Keys(ctx, ledger.Key(prefix, "TR")+"*").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("keys %v %v", keys, err)
	}
	if err := rc.Del(ctx, keys...).Err(); err != nil {
		t.Fatal(err)
	}
	r, err := step(event.InventoryTransferReceived, stock.TransferReceiveRequest{OpID: "t2", SKU: "TR", TransferID: "X", Qty: 3})
	if err != nil || len(r.Moves) != 0 || r.Transfer == nil || r.Transfer.State != stock.TransferReceived {
		t.Fatalf("receipt after the loss %+v %v", r, err)
	}
	if r := stored(); r.State != stock.TransferReceived || r.Version != 4 {
		t.Fatalf("after the receipt %+v", r)
	}
	apply(t, db, []event.Result{func() event.Result { e := results[2]; e.EventID += "-again"; return e }()})
	if r := stored(); r.State != stock.TransferReceived {
		t.Fatalf("after the request's result again %+v", r)
	}
}
