package domain_test

import (
	"cmp"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/junban/junban/internal/domain"
	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/ledger/stock"
)

// buckets are a lot's quantities: sellable, reserved, allocated, hidden, shipped, defective.
type buckets [6]int64

func bucketsOf(l stock.Lot) buckets {
	return buckets{l.Sellable, l.Reserved, l.Allocated, l.Hidden, l.Shipped, l.Defective}
}

// lotState is what a lot is beside its buckets: "<kind> good=<bool> best_before=<date>".
func lotState(l stock.Lot) string {
	return fmt.Sprintf("%s good=%t best_before=%s", l.Kind, l.Good, l.BestBefore)
}

const (
	applied  = event.Applied
	rejected = event.Rejected
	// parked: the event yields no result and waits in State.Parked.
	parked = "parked"

	ship    = stock.ModeShip
	reserve = stock.ModeReserve

	// lcid is the one order of every case; a SKU's events run in the SKU's turn.
	lcid = "O1"
	// arrival is the stepped event's turn sequence (the events before it take 1, 2, ...).
	arrival = 100
)

var (
	occurred = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	now      = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
)

// stock is every case's warehouse. A keeps a safety stock of 2 and has two on-hand lots
// of 5, A2 first in FEFO order; B has one lot of 3; P has two planned lots, P2 (the newer,
// first in LIFO order) with 8 of its 10 units reserved by nobody the model knows; H has 3
// units held; Z's lot took the last registration number.
func stockSKUs() []stock.SKU {
	return []stock.SKU{
		{SKU: "A", SafetyStock: 2, Version: 1, Lots: []stock.Lot{
			onHand("A1", 1, "2027-03-01", buckets{5}), onHand("A2", 2, "2027-01-01", buckets{5})}},
		{SKU: "B", Version: 1, Lots: []stock.Lot{onHand("B1", 1, "2027-01-01", buckets{3})}},
		{SKU: "P", Version: 1, Lots: []stock.Lot{planned("P1", 1, buckets{10}), planned("P2", 2, buckets{2, 8})}},
		{SKU: "H", Version: 1, Lots: []stock.Lot{onHand("H1", 1, "2027-01-01", buckets{7, 0, 0, 3})}},
		{SKU: "Z", Version: 1, Lots: []stock.Lot{onHand("Z1", stock.MaxRegSeq, "2027-01-01", buckets{1})}},
		// Lots at three locations (testLocations): the store's expires first.
		{SKU: "L", Version: 1, Lots: []stock.Lot{onHand("L1", 1, "2027-03-01", buckets{4}),
			atLocation(onHand("L2", 2, "2027-01-01", buckets{3}), "west"), atLocation(onHand("L3", 3, "2026-12-20", buckets{5}), "store")}},
		// Two SKUs at three shipping locations (testLocations), for fewest_splits.
		{SKU: "S", Version: 1, Lots: []stock.Lot{onHand("S1", 1, "2027-03-01", buckets{3}),
			atLocation(onHand("S2", 2, "2027-01-01", buckets{2}), "west"), atLocation(onHand("S3", 3, "2027-02-01", buckets{4}), "south")}},
		{SKU: "T", Version: 1, Lots: []stock.Lot{onHand("T1", 1, "2027-03-01", buckets{1}),
			atLocation(onHand("T3", 3, "2027-02-01", buckets{2}), "south")}},
	}
}

func atLocation(l stock.Lot, location string) stock.Lot {
	l.Location = location
	return l
}

// testLocations are the shop's locations of SKU L's lots: the default warehouse (rank 2),
// a western one (rank 1) and a store that does not ship and offers pickup; and a southern
// warehouse (rank 3). A fresh read also finds "east", which the shop has just registered.
type testLocations struct{}

func (testLocations) Shop(_ context.Context, fresh bool) (stock.ShopLocations, error) {
	s := stock.ShopLocations{Registered: true, All: []stock.Location{
		{ID: stock.DefaultLocation, Kind: stock.LocationWarehouse, Rank: 2, Ships: true, Enabled: true},
		{ID: "west", Kind: stock.LocationWarehouse, Rank: 1, Ships: true, Enabled: true},
		{ID: "store", Kind: stock.LocationStore, Pickup: true, Enabled: true},
		{ID: "south", Kind: stock.LocationWarehouse, Rank: 3, Ships: true, Enabled: true},
	}}
	if fresh {
		s.All = append(s.All, stock.Location{ID: "east", Kind: stock.LocationWarehouse, Rank: 3, Ships: true, Enabled: true})
	}
	return s, nil
}

// pickupAtStore is an order collected at the store.
func pickupAtStore(d *event.OrderData) { d.PickupLocation = "store" }

// fewestSplits routes an order by fewest_splits, then rank.
func fewestSplits(d *event.OrderData) { d.Allocation = []string{"fewest_splits", "ranked"} }

// placeVia is an order.placed with routing fields.
func placeVia(route func(d *event.OrderData), lines ...event.Line) event.Order {
	return fromExample(event.OrderPlaced, func(d *event.OrderData) { d.Mode, d.Lines = ship, lines; route(d) })
}

func atLoc(lot string, qty int64, location string) stock.LotQty {
	return stock.LotQty{LotID: lot, Qty: qty, Location: location}
}

func onHand(id string, seq int64, bestBefore string, b buckets) stock.Lot {
	return withBuckets(stock.Lot{LotID: id, Kind: stock.KindOnHand, Good: true, BestBefore: bestBefore, RegSeq: seq,
		ValidFrom: "2026-01-01", ValidTo: "2027-12-31"}, b)
}

func planned(id string, seq int64, b buckets) stock.Lot {
	return withBuckets(stock.Lot{LotID: id, Kind: stock.KindPlanned, Good: true, RegSeq: seq, ArrivesAt: "2026-12-20",
		ValidFrom: "2026-01-01", ValidTo: "2027-12-31"}, b)
}

func withBuckets(l stock.Lot, b buckets) stock.Lot {
	l.Sellable, l.Reserved, l.Allocated, l.Hidden, l.Shipped, l.Defective = b[0], b[1], b[2], b[3], b[4], b[5]
	return l
}

// unknownSKUs is the catalog behind the model. Every case puts its SKUs into the model
// first, so any other SKU is refused as PostgreSQL refuses one it lacks (ERR_UNKNOWN_SKU),
// and a new SKU can be registered.
type unknownSKUs struct{}

func (unknownSKUs) LoadSKU(_ context.Context, sku string) (stock.SKU, error) {
	return stock.SKU{}, fmt.Errorf("sku=%s: %w", sku, stock.ErrUnknownSKU)
}

// The events of the cases start from each kind's example in the registry, so a field a
// kind gains later keeps a valid value here; ids are adapted. An event without an id is
// given one when the case runs.

func fromExample[D any](typ event.Type, adapt func(*D)) event.Order {
	k := domain.KindOf(typ)
	if k == nil || k.Example == nil {
		panic(fmt.Sprintf("no example of %s in the registry", typ))
	}
	var d D
	if err := json.Unmarshal(k.Example, &d); err != nil {
		panic(fmt.Sprintf("example of %s: %v", typ, err))
	}
	adapt(&d)
	raw, err := json.Marshal(d)
	if err != nil {
		panic(err)
	}
	o := event.Order{Type: typ, OccurredAt: occurred, Data: raw}
	if k.Entity == domain.OnOrder {
		o.LCID = lcid
	}
	return o
}

// bare is an order's event of a kind without data.
func bare(typ event.Type) event.Order {
	if k := domain.KindOf(typ); k == nil || k.Example != nil {
		panic(fmt.Sprintf("%s is no kind without data", typ))
	}
	return event.Order{Type: typ, LCID: lcid, OccurredAt: occurred}
}

func pay() event.Order      { return bare(event.PaymentConfirmed) }
func allocate() event.Order { return bare(event.OrderAllocateForShipment) }
func cancel() event.Order   { return bare(event.OrderCancelled) }
func shipIt() event.Order   { return bare(event.OrderShipped) }

func withID(id string, o event.Order) event.Order {
	o.EventID = id
	return o
}

func place(mode stock.Mode, lines ...event.Line) event.Order {
	return fromExample(event.OrderPlaced, func(d *event.OrderData) { d.Mode, d.Lines = mode, lines })
}

func change(lines ...event.Line) event.Order {
	return fromExample(event.OrderLinesChanged, func(d *event.OrderData) { d.Lines = lines })
}

func giveBack(defective bool, lines ...event.ReturnLine) event.Order {
	return fromExample(event.OrderReturned, func(d *event.ReturnedData) { d.Lines, d.Defective = lines, defective })
}

func receive(sku, lot string, qty int64) event.Order {
	return fromExample(event.InventoryReceived, func(d *event.InventoryReceivedData) { d.SKU, d.LotID, d.Qty = sku, lot, qty })
}

func adjust(sku, lot string, delta int64) event.Order {
	return fromExample(event.InventoryAdjusted, func(d *event.InventoryAdjustedData) { d.SKU, d.LotID, d.Delta = sku, lot, delta })
}

func registerSKU(sku string, safety int64) event.Order {
	return fromExample(event.InventorySKURegistered, func(d *event.SKURegisteredData) { d.SKU, d.SafetyStock = sku, safety })
}

func setSafety(sku string, safety int64) event.Order {
	return fromExample(event.InventorySafetyStockChanged, func(d *event.SafetyStockChangedData) { d.SKU, d.SafetyStock = sku, safety })
}

// setSafetyAt sets a location's own safety stock.
func setSafetyAt(sku, location string, safety int64) event.Order {
	return fromExample(event.InventorySafetyStockChanged, func(d *event.SafetyStockChangedData) {
		d.SKU, d.SafetyStock, d.Location = sku, safety, location
	})
}

// registerLot registers a lot of sellable units: planned as the example is, or on hand with
// a best-before.
func registerLot(sku, lot, kind string, sellable int64) event.Order {
	return fromExample(event.InventoryLotRegistered, func(d *event.LotRegisteredData) {
		d.SKU, d.LotID, d.Kind, d.Sellable = sku, lot, kind, sellable
		if kind == stock.KindOnHand {
			d.ArrivesAt, d.BestBefore = "", "2027-05-01"
		}
	})
}

// registerLotAt registers a planned lot of 48 units at location.
func registerLotAt(sku, lot, location string) event.Order {
	return fromExample(event.InventoryLotRegistered, func(d *event.LotRegisteredData) {
		d.SKU, d.LotID, d.Sellable, d.Location = sku, lot, 48, location
	})
}

func lotQty(typ event.Type, sku, lot string, qty int64) event.Order {
	return fromExample(typ, func(d *event.LotQtyData) { d.SKU, d.LotID, d.Qty = sku, lot, qty })
}

func recall(sku, lot string) event.Order {
	return fromExample(event.InventoryLotRecalled, func(d *event.LotRecalledData) { d.SKU, d.LotID = sku, lot })
}

func transfer(sku, from, to string, qty int64) event.Order {
	return fromExample(event.InventoryTransferRequested, func(d *event.TransferRequestedData) {
		d.SKU, d.FromLocation, d.ToLocation, d.Qty = sku, from, to, qty
	})
}

func transferIn(sku string, qty int64) event.Order {
	return fromExample(event.InventoryTransferReceived, func(d *event.TransferReceivedData) { d.SKU, d.Qty = sku, qty })
}

// transfersOf lists the transfers of a result's SKUs, "<sku>/<transfer id> <state>".
func transfersOf(r event.Result) []string {
	out := []string{}
	for _, s := range r.SKUs {
		for _, tr := range s.Transfers {
			out = append(out, s.SKU+"/"+tr.TransferID+" "+tr.State)
		}
	}
	return out
}

// transferNamed requests a transfer of qty units of sku from west to store under id.
func transferNamed(sku, id string, qty int64) event.Order {
	return fromExample(event.InventoryTransferRequested, func(d *event.TransferRequestedData) {
		d.SKU, d.TransferID, d.FromLocation, d.ToLocation, d.Qty = sku, id, "west", "store", qty
	})
}

// longTransfer is a transfer id whose transit lots' ids are too long to spell out:
// "~" and the SHA-1 of "<id>~<lot>" in hex.
var longTransfer = strings.Repeat("T", stock.MaxIDLen-1)

// longTransit is the transit lot longTransfer makes of lot, computed apart from the
// ledger's TransitLotID.
func longTransit(lot string) string {
	sum := sha1.Sum([]byte(longTransfer + "~" + lot)) //nolint:gosec // the ledger's name, not a secret
	return "~" + hex.EncodeToString(sum[:])
}

func transferOff(sku string) event.Order {
	return fromExample(event.InventoryTransferCancelled, func(d *event.TransferCancelledData) { d.SKU = sku })
}

func moveTo(lineID, location string) event.Order {
	return fromExample(event.OrderAllocationMoved, func(d *event.AllocationMovedData) { d.LineID, d.ToLocation = lineID, location })
}

func registerOnHandAt(sku, lot string, sellable int64, location string) event.Order {
	return fromExample(event.InventoryLotRegistered, func(d *event.LotRegisteredData) {
		d.SKU, d.LotID, d.Kind, d.Sellable, d.ArrivesAt, d.BestBefore, d.Location = sku, lot, stock.KindOnHand, sellable, "", "2027-05-01", location
	})
}

// disabledWest are testLocations with the western warehouse disabled.
type disabledWest struct{}

func (disabledWest) Shop(ctx context.Context, fresh bool) (stock.ShopLocations, error) {
	s, _ := testLocations{}.Shop(ctx, fresh)
	s.All[1].Enabled = false
	return s, nil
}

func line(id, sku string, qty int64) event.Line { return event.Line{LineID: id, SKU: sku, Qty: qty} }

func back(id string, qty int64) event.ReturnLine { return event.ReturnLine{LineID: id, Qty: qty} }

func snap(id, sku string, qty int64, lots ...stock.LotQty) event.SnapshotLine {
	return event.SnapshotLine{LineID: id, SKU: sku, Qty: qty, Lots: lots}
}

func at(lot string, qty int64) stock.LotQty { return stock.LotQty{LotID: lot, Qty: qty} }

// ops is an expect.moves: never nil, so ops() expects no moves at all.
func ops(suffixes ...string) []string { return append([]string{}, suffixes...) }

// interleave is another order's ledger operation that runs right after the step's
// operation named after (its op id past the event's prefix), as a worker holding that
// order's turn can run it.
type interleave struct {
	after string
	op    stock.Op
}

type transitionCase struct {
	name string
	// before are stepped first, each in its entity's turn (domain.Replay).
	before []event.Order
	// tamper runs on the ledger after before, under an op id of nobody's: the ledger then
	// disagrees with the order (as after a restore of Redis from PostgreSQL).
	tamper stock.Op
	// between runs during the step.
	between *interleave
	// pol is the policy of every step of the case (its reservation TTL).
	pol  domain.Policy
	ev   event.Order
	want expect
}

// expect is what a case's step must do.
type expect struct {
	outcome string
	reason  string
	// then are the results after the event's, of the parked events it let through, each
	// "<type> <outcome>[ <reason>]".
	then []string
	// order is the order of the event's entity after: "<status>/<allocation or ->/<paid or
	// unpaid>", "" for none.
	order string
	// hold is the order's hold_until after (RFC 3339, UTC), "" for none.
	hold string
	// lines, when set, are the order's lines after.
	lines []event.SnapshotLine
	// lots are the buckets after of the lots the event changes ("<sku>/<lot>"); every other
	// lot stays as it was, and after a rejection or a park every lot does.
	lots map[string]buckets
	// lotState is the lotState after of the lots whose state the event changes.
	lotState map[string]string
	// safety is the safety stock after of the SKUs the event sets or creates.
	safety map[string]int64
	// transfers, when set, are the transfers the event's result's SKUs carry, each
	// "<sku>/<transfer id> <state>" (what persistence writes of them).
	transfers []string
	// moves, when set, are the op ids of the event's result's moves, in order, past the
	// event's prefix ("{<lcid>}<event_id>" for an order's event, "<event_id>" for a SKU's).
	moves []string
	// detail, when set, is part of the event's result's detail (a rejection's).
	detail string
	// holders, when set, are the event's result's holders (a recall).
	holders []stock.Holder
}

func orderString(o *event.OrderSnapshot) string {
	if o == nil {
		return ""
	}
	paid := "unpaid"
	if o.Paid {
		paid = "paid"
	}
	return o.Status + "/" + cmp.Or(o.Allocation, "-") + "/" + paid
}

// transitionCases are the transitions and rejections of step.go and of the warehouse's
// kinds, from a starting situation each: the stock, the events before, a ledger tampered
// with.
func transitionCases() []transitionCase {
	shipped3 := []event.Order{place(ship, line("1", "A", 3)), pay(), shipIt()}
	twoLines := func(mode stock.Mode) event.Order { return place(mode, line("1", "A", 2), line("2", "B", 2)) }
	// Another op id takes line 2's units (B1, 2) out of the order's bucket.
	stealB := func(from string) stock.Op {
		return stock.ReleaseRequest{OpID: "other:steal", SKU: "B", From: from, Lots: []stock.LotQty{at("B1", 2)}}
	}
	return []transitionCase{
		// order.placed
		{name: "ship allocates the earliest best-before first", ev: place(ship, line("1", "A", 3)),
			want: expect{outcome: applied, order: "placed/allocated/unpaid", lines: []event.SnapshotLine{snap("1", "A", 3, at("A2", 3))},
				lots: map[string]buckets{"A/A2": {2, 0, 3}}, moves: ops(":1:alloc")}},
		{name: "ship takes the next lot when the first runs out", ev: place(ship, line("1", "A", 7)),
			want: expect{outcome: applied, order: "placed/allocated/unpaid", lines: []event.SnapshotLine{snap("1", "A", 7, at("A2", 5), at("A1", 2))},
				lots: map[string]buckets{"A/A2": {0, 0, 5}, "A/A1": {3, 0, 2}}}},
		{name: "reserve", ev: place(reserve, line("1", "A", 3)),
			want: expect{outcome: applied, order: "placed/reserved/unpaid", lines: []event.SnapshotLine{snap("1", "A", 3, at("A2", 3))},
				lots: map[string]buckets{"A/A2": {2, 3}}}},
		{name: "reserve does not keep the safety stock", ev: place(reserve, line("1", "A", 9)),
			want: expect{outcome: applied, order: "placed/reserved/unpaid", lots: map[string]buckets{"A/A2": {0, 5}, "A/A1": {1, 4}}}},
		{name: "planned lots, the newest first", ev: place(ship, line("1", "P", 3)),
			want: expect{outcome: applied, order: "placed/allocated/unpaid", lines: []event.SnapshotLine{snap("1", "P", 3, at("P2", 2), at("P1", 1))},
				lots: map[string]buckets{"P/P2": {0, 8, 2}, "P/P1": {9, 0, 1}}}},
		{name: "without a route and a default strategy: every lot alike, at any location", ev: place(ship, line("1", "L", 6)),
			want: expect{outcome: applied, order: "placed/allocated/unpaid", lines: []event.SnapshotLine{snap("1", "L", 6, atLoc("L3", 5, "store"), atLoc("L2", 1, "west"))},
				lots: map[string]buckets{"L/L3": {0, 0, 5}, "L/L2": {2, 0, 1}}}},
		{name: "the shop's default strategy: ranked, shipping locations only", pol: domain.Policy{Strategies: []stock.Strategy{stock.StrategyRanked}, Locations: testLocations{}},
			ev: place(ship, line("1", "L", 4)),
			want: expect{outcome: applied, order: "placed/allocated/unpaid", lines: []event.SnapshotLine{snap("1", "L", 4, atLoc("L2", 3, "west"), at("L1", 1))},
				lots: map[string]buckets{"L/L2": {0, 0, 3}, "L/L1": {3, 0, 1}}}},
		{name: "the western warehouse keeps 2 of its 3 units: the line takes 1 there", pol: domain.Policy{Strategies: []stock.Strategy{stock.StrategyRanked}, Locations: testLocations{}},
			before: []event.Order{setSafetyAt("L", "west", 2)}, ev: place(ship, line("1", "L", 4)),
			want: expect{outcome: applied, order: "placed/allocated/unpaid", lines: []event.SnapshotLine{snap("1", "L", 4, atLoc("L2", 1, "west"), at("L1", 3))},
				lots: map[string]buckets{"L/L2": {2, 0, 1}, "L/L1": {1, 0, 3}}}},
		{name: "ERR_SAFETY_STOCK: the units are there, the western warehouse keeps 2", pol: domain.Policy{Strategies: []stock.Strategy{stock.StrategyRanked}, Locations: testLocations{}},
			before: []event.Order{setSafetyAt("L", "west", 2)}, ev: place(ship, line("1", "L", 6)),
			want: expect{outcome: rejected, reason: "ERR_SAFETY_STOCK", order: "rejected/-/unpaid"}},
		{name: "the shop's default leaves out the store: ERR_SHORTAGE", pol: domain.Policy{Strategies: []stock.Strategy{stock.StrategyRanked}, Locations: testLocations{}},
			ev:   place(ship, line("1", "L", 8)),
			want: expect{outcome: rejected, reason: "ERR_SHORTAGE", order: "rejected/-/unpaid"}},
		{name: "registered locations route every order: ranked without defaults, shipping locations only", pol: domain.Policy{Locations: testLocations{}},
			ev: place(ship, line("1", "L", 4)),
			want: expect{outcome: applied, order: "placed/allocated/unpaid", lines: []event.SnapshotLine{snap("1", "L", 4, atLoc("L2", 3, "west"), at("L1", 1))},
				lots: map[string]buckets{"L/L2": {0, 0, 3}, "L/L1": {3, 0, 1}}}},
		{name: "registered locations route every order: the store's lots are no candidates, ERR_SHORTAGE", pol: domain.Policy{Locations: testLocations{}},
			ev:   place(ship, line("1", "L", 8)),
			want: expect{outcome: rejected, reason: "ERR_SHORTAGE", order: "rejected/-/unpaid"}},
		{name: "registered locations route a change of an order placed without a route", pol: domain.Policy{Locations: testLocations{}},
			before: []event.Order{place(ship, line("1", "L", 1))},
			ev:     change(line("1", "L", 4)),
			want: expect{outcome: applied, order: "placed/allocated/unpaid", lines: []event.SnapshotLine{snap("1", "L", 4, atLoc("L2", 3, "west"), at("L1", 1))},
				lots: map[string]buckets{"L/L2": {0, 0, 3}, "L/L1": {3, 0, 1}}}},
		{name: "ERR_UNKNOWN_LOCATION: a pickup at a location the shop lacks", pol: domain.Policy{Locations: testLocations{}},
			ev:   placeVia(func(d *event.OrderData) { d.PickupLocation = "north" }, line("1", "L", 2)),
			want: expect{outcome: rejected, reason: domain.ReasonUnknownLocation, order: "rejected/-/unpaid", moves: ops()}},
		{name: "a pickup at a location the shop has just registered", pol: domain.Policy{Locations: testLocations{}},
			ev:   placeVia(func(d *event.OrderData) { d.PickupLocation = "east" }, line("1", "L", 2)),
			want: expect{outcome: rejected, reason: "ERR_SHORTAGE", order: "rejected/-/unpaid", moves: ops()}},
		{name: "fewest_splits: the first location that covers the whole order", pol: domain.Policy{Locations: testLocations{}},
			ev: placeVia(fewestSplits, line("1", "S", 3), line("2", "T", 1)),
			want: expect{outcome: applied, order: "placed/allocated/unpaid", lines: []event.SnapshotLine{snap("1", "S", 3, at("S1", 3)), snap("2", "T", 1, at("T1", 1))},
				lots: map[string]buckets{"S/S1": {0, 0, 3}, "T/T1": {0, 0, 1}}, moves: ops(":1:alloc", ":2:alloc")}},
		{name: "fewest_splits: a whole cover of lower rank before a split at the first", pol: domain.Policy{Locations: testLocations{}},
			ev: placeVia(fewestSplits, line("1", "S", 4), line("2", "T", 2)),
			want: expect{outcome: applied, order: "placed/allocated/unpaid", lines: []event.SnapshotLine{snap("1", "S", 4, atLoc("S3", 4, "south")), snap("2", "T", 2, atLoc("T3", 2, "south"))},
				lots: map[string]buckets{"S/S3": {0, 0, 4}, "T/T3": {0, 0, 2}}}},
		{name: "fewest_splits: no location covers the order, two do", pol: domain.Policy{Locations: testLocations{}},
			ev: placeVia(fewestSplits, line("1", "S", 6), line("2", "T", 3)),
			want: expect{outcome: applied, order: "placed/allocated/unpaid",
				lines: []event.SnapshotLine{snap("1", "S", 6, atLoc("S3", 4, "south"), at("S1", 2)), snap("2", "T", 3, atLoc("T3", 2, "south"), at("T1", 1))},
				lots:  map[string]buckets{"S/S3": {0, 0, 4}, "S/S1": {1, 0, 2}, "T/T3": {0, 0, 2}, "T/T1": {0, 0, 1}}}},
		{name: "fewest_splits: a stale plan is made again for the lines from the refused one on", pol: domain.Policy{Locations: testLocations{}},
			ev:      placeVia(fewestSplits, line("1", "S", 3), line("2", "T", 1)),
			between: &interleave{after: ":1:alloc", op: stock.HoldRequest{OpID: "other:hold", SKU: "T", LotID: "T1", Qty: 1, Reason: "count"}},
			want: expect{outcome: applied, order: "placed/allocated/unpaid",
				lines: []event.SnapshotLine{snap("1", "S", 3, at("S1", 3)), snap("2", "T", 1, atLoc("T3", 1, "south"))},
				lots:  map[string]buckets{"S/S1": {0, 0, 3}, "T/T3": {1, 0, 1}, "T/T1": {0, 0, 0, 1}},
				moves: ops(":1:alloc", ":2:alloc~replan")}},
		{name: "fewest_splits: the replan covers the lines from the refused one on", pol: domain.Policy{Locations: testLocations{}},
			ev:      placeVia(fewestSplits, line("1", "S", 1), line("2", "T", 1), line("3", "S", 2)),
			between: &interleave{after: ":1:alloc", op: stock.HoldRequest{OpID: "other:hold", SKU: "T", LotID: "T1", Qty: 1, Reason: "count"}},
			want: expect{outcome: applied, order: "placed/allocated/unpaid",
				lines: []event.SnapshotLine{snap("1", "S", 1, at("S1", 1)), snap("2", "T", 1, atLoc("T3", 1, "south")), snap("3", "S", 2, atLoc("S3", 2, "south"))},
				lots:  map[string]buckets{"S/S1": {2, 0, 1}, "S/S3": {2, 0, 2}, "T/T3": {1, 0, 1}, "T/T1": {0, 0, 0, 1}},
				moves: ops(":1:alloc", ":2:alloc~replan", ":3:alloc~replan")}},
		{name: "fewest_splits: ERR_SHORTAGE when no locations cover the order", pol: domain.Policy{Locations: testLocations{}},
			ev:   placeVia(fewestSplits, line("1", "S", 2), line("2", "T", 4)),
			want: expect{outcome: rejected, reason: "ERR_SHORTAGE", order: "rejected/-/unpaid", moves: ops(":1:alloc", ":1:alloc-undo")}},
		{name: "a pickup at the store, which does not ship", pol: domain.Policy{Locations: testLocations{}},
			ev: placeVia(func(d *event.OrderData) { d.PickupLocation = "store" }, line("1", "L", 2)),
			want: expect{outcome: applied, order: "placed/allocated/unpaid", lines: []event.SnapshotLine{snap("1", "L", 2, atLoc("L3", 2, "store"))},
				lots: map[string]buckets{"L/L3": {3, 0, 2}}}},
		{name: "no_split: the first ranked location that covers the line", pol: domain.Policy{Locations: testLocations{}},
			ev: placeVia(func(d *event.OrderData) { d.Allocation, d.NoSplit = []string{"ranked"}, true }, line("1", "L", 4)),
			want: expect{outcome: applied, order: "placed/allocated/unpaid", lines: []event.SnapshotLine{snap("1", "L", 4, at("L1", 4))},
				lots: map[string]buckets{"L/L1": {0, 0, 4}}}},
		{name: "the order's strategies over the shop's: fefo_network", pol: domain.Policy{Strategies: []stock.Strategy{stock.StrategyRanked}, Locations: testLocations{}},
			ev: placeVia(func(d *event.OrderData) { d.Allocation = []string{"fefo_network"} }, line("1", "L", 4)),
			want: expect{outcome: applied, order: "placed/allocated/unpaid", lines: []event.SnapshotLine{snap("1", "L", 4, atLoc("L2", 3, "west"), at("L1", 1))},
				lots: map[string]buckets{"L/L2": {0, 0, 3}, "L/L1": {3, 0, 1}}}},
		{name: "a routed order keeps its route: a raised line takes only at its pickup location", pol: domain.Policy{Locations: testLocations{}},
			before: []event.Order{placeVia(func(d *event.OrderData) { d.PickupLocation = "west" }, line("1", "L", 2))},
			ev:     change(line("1", "L", 5)),
			want:   expect{outcome: rejected, reason: "ERR_SHORTAGE", order: "placed/allocated/unpaid", lines: []event.SnapshotLine{snap("1", "L", 2, atLoc("L2", 2, "west"))}}},
		{name: "a routed order's raised line within its pickup location", pol: domain.Policy{Locations: testLocations{}},
			before: []event.Order{placeVia(func(d *event.OrderData) { d.PickupLocation = "west" }, line("1", "L", 2))},
			ev:     change(line("1", "L", 3)),
			want: expect{outcome: applied, order: "placed/allocated/unpaid", lines: []event.SnapshotLine{snap("1", "L", 3, atLoc("L2", 3, "west"))},
				lots: map[string]buckets{"L/L2": {0, 0, 3}}}},
		{name: "a recalled lot is no candidate", before: []event.Order{recall("A", "A2")}, ev: place(ship, line("1", "A", 3)),
			want: expect{outcome: applied, order: "placed/allocated/unpaid", lines: []event.SnapshotLine{snap("1", "A", 3, at("A1", 3))},
				lots: map[string]buckets{"A/A1": {2, 0, 3}}}},
		{name: "a registered SKU's registered lot", before: []event.Order{registerSKU("N", 0), registerLot("N", "N1", stock.KindOnHand, 4)},
			ev:   place(ship, line("1", "N", 4)),
			want: expect{outcome: applied, order: "placed/allocated/unpaid", lots: map[string]buckets{"N/N1": {0, 0, 4}}}},
		{name: "a parked payment applies after", before: []event.Order{pay()}, ev: place(ship, line("1", "A", 3)),
			want: expect{outcome: applied, then: []string{"payment.confirmed applied"}, order: "placed/allocated/paid",
				lots: map[string]buckets{"A/A2": {2, 0, 3}}}},
		{name: "a parked shipment and payment apply after, in turn", before: []event.Order{shipIt(), pay()}, ev: place(ship, line("1", "A", 3)),
			want: expect{outcome: applied, then: []string{"payment.confirmed applied", "order.shipped applied"}, order: "shipped/allocated/paid",
				lots: map[string]buckets{"A/A2": {2, 0, 0, 0, 3}}}},
		{name: "ERR_ORDER_EXISTS", before: []event.Order{place(ship, line("1", "A", 3))}, ev: place(ship, line("1", "B", 1)),
			want: expect{outcome: rejected, reason: domain.ReasonOrderExists, order: "placed/allocated/unpaid", moves: ops()}},
		{name: "ERR_SHORTAGE", ev: place(reserve, line("1", "A", 11)),
			want: expect{outcome: rejected, reason: "ERR_SHORTAGE", order: "rejected/-/unpaid", lines: []event.SnapshotLine{snap("1", "A", 11)}, moves: ops()}},
		{name: "ERR_SHORTAGE: a parked payment is rejected after it", before: []event.Order{pay()}, ev: place(reserve, line("1", "A", 11)),
			want: expect{outcome: rejected, reason: "ERR_SHORTAGE", then: []string{"payment.confirmed rejected ERR_INVALID_TRANSITION"}, order: "rejected/-/unpaid"}},
		{name: "ERR_SAFETY_STOCK: the earlier line is undone", ev: place(ship, line("1", "B", 1), line("2", "A", 9)),
			want: expect{outcome: rejected, reason: "ERR_SAFETY_STOCK", order: "rejected/-/unpaid",
				lines: []event.SnapshotLine{snap("1", "B", 1), snap("2", "A", 9)}, moves: ops(":1:alloc", ":1:alloc-undo")}},
		{name: "ERR_SAFETY_STOCK after the safety stock rose", before: []event.Order{setSafety("A", 8)}, ev: place(ship, line("1", "A", 3)),
			want: expect{outcome: rejected, reason: "ERR_SAFETY_STOCK", order: "rejected/-/unpaid"}},
		{name: "ERR_UNKNOWN_SKU: the earlier line is undone", ev: place(ship, line("1", "A", 1), line("2", "NOPE", 1)),
			want: expect{outcome: rejected, reason: "ERR_UNKNOWN_SKU", order: "rejected/-/unpaid", moves: ops(":1:alloc", ":1:alloc-undo")}},

		// payment.confirmed
		{name: "before placement parks", ev: pay(), want: expect{outcome: parked}},
		{name: "a redelivery of a parked payment is a no-op", before: []event.Order{withID("pay-1", pay())}, ev: withID("pay-1", pay()),
			want: expect{outcome: parked}},
		{name: "pays a placed order", before: []event.Order{place(ship, line("1", "A", 3))}, ev: pay(),
			want: expect{outcome: applied, order: "placed/allocated/paid", moves: ops()}},
		{name: "a repeat pays again", before: []event.Order{place(ship, line("1", "A", 3)), pay()}, ev: pay(),
			want: expect{outcome: applied, order: "placed/allocated/paid", moves: ops()}},
		{name: "a parked shipment follows", before: []event.Order{place(ship, line("1", "A", 3)), shipIt()}, ev: pay(),
			want: expect{outcome: applied, then: []string{"order.shipped applied"}, order: "shipped/allocated/paid",
				lots: map[string]buckets{"A/A2": {2, 0, 0, 0, 3}}}},
		{name: "rejected order: ERR_INVALID_TRANSITION", before: []event.Order{place(reserve, line("1", "A", 11))}, ev: pay(),
			want: expect{outcome: rejected, reason: domain.ReasonInvalidTransition, order: "rejected/-/unpaid"}},
		{name: "cancelled order: ERR_INVALID_TRANSITION", before: []event.Order{place(ship, line("1", "A", 3)), cancel()}, ev: pay(),
			want: expect{outcome: rejected, reason: domain.ReasonInvalidTransition, order: "cancelled/allocated/unpaid"}},
		{name: "shipped order: ERR_INVALID_TRANSITION", before: shipped3, ev: pay(),
			want: expect{outcome: rejected, reason: domain.ReasonInvalidTransition, order: "shipped/allocated/paid"}},

		// order.allocate_for_shipment
		{name: "reserved becomes allocated", before: []event.Order{place(reserve, line("1", "A", 3))}, ev: allocate(),
			want: expect{outcome: applied, order: "placed/allocated/unpaid", lines: []event.SnapshotLine{snap("1", "A", 3, at("A2", 3))},
				lots: map[string]buckets{"A/A2": {2, 0, 3}}, moves: ops(":1:confirm")}},
		{name: "reserved becomes allocated without the safety check", before: []event.Order{place(reserve, line("1", "A", 9))}, ev: allocate(),
			want: expect{outcome: applied, order: "placed/allocated/unpaid", lots: map[string]buckets{"A/A2": {0, 0, 5}, "A/A1": {1, 0, 4}}}},
		{name: "an order placed to ship: a no-op", before: []event.Order{place(ship, line("1", "A", 3))}, ev: allocate(),
			want: expect{outcome: applied, order: "placed/allocated/unpaid", moves: ops()}},
		{name: "a repeat: a no-op", before: []event.Order{place(reserve, line("1", "A", 3)), allocate()}, ev: allocate(),
			want: expect{outcome: applied, order: "placed/allocated/unpaid", moves: ops()}},
		{name: "a parked shipment follows", before: []event.Order{place(reserve, line("1", "A", 3)), pay(), shipIt()}, ev: allocate(),
			want: expect{outcome: applied, then: []string{"order.shipped applied"}, order: "shipped/allocated/paid",
				lots: map[string]buckets{"A/A2": {2, 0, 0, 0, 3}}}},
		{name: "before placement parks", ev: allocate(), want: expect{outcome: parked}},
		{name: "cancelled order: ERR_INVALID_TRANSITION", before: []event.Order{place(reserve, line("1", "A", 3)), cancel()}, ev: allocate(),
			want: expect{outcome: rejected, reason: domain.ReasonInvalidTransition, order: "cancelled/reserved/unpaid"}},
		{name: "ERR_INSUFFICIENT: line 1 is moved back", before: []event.Order{twoLines(reserve)}, tamper: stealB(stock.Reserved), ev: allocate(),
			want: expect{outcome: rejected, reason: "ERR_INSUFFICIENT", order: "placed/reserved/unpaid", moves: ops(":1:confirm", ":1:confirm-undo")}},

		// order.lines_changed
		{name: "raise", before: []event.Order{place(ship, line("1", "A", 2))}, ev: change(line("1", "A", 4)),
			want: expect{outcome: applied, order: "placed/allocated/unpaid", lines: []event.SnapshotLine{snap("1", "A", 4, at("A2", 4))},
				lots: map[string]buckets{"A/A2": {1, 0, 4}}, moves: ops(":A:change")}},
		{name: "raise a reserved order: reserved", before: []event.Order{place(reserve, line("1", "A", 2))}, ev: change(line("1", "A", 4)),
			want: expect{outcome: applied, order: "placed/reserved/unpaid", lots: map[string]buckets{"A/A2": {1, 4}}}},
		{name: "lower", before: []event.Order{place(ship, line("1", "A", 3))}, ev: change(line("1", "A", 1)),
			want: expect{outcome: applied, order: "placed/allocated/unpaid", lines: []event.SnapshotLine{snap("1", "A", 1, at("A2", 1))},
				lots: map[string]buckets{"A/A2": {4, 0, 1}}, moves: ops(":A:change")}},
		{name: "remove", before: []event.Order{place(ship, line("1", "A", 2), line("2", "B", 1))}, ev: change(line("1", "A", 2)),
			want: expect{outcome: applied, order: "placed/allocated/unpaid", lines: []event.SnapshotLine{snap("1", "A", 2, at("A2", 2))},
				lots: map[string]buckets{"B/B1": {3}}, moves: ops(":B:change")}},
		{name: "add", before: []event.Order{place(ship, line("1", "A", 2))}, ev: change(line("1", "A", 2), line("2", "B", 1)),
			want: expect{outcome: applied, order: "placed/allocated/unpaid",
				lines: []event.SnapshotLine{snap("1", "A", 2, at("A2", 2)), snap("2", "B", 1, at("B1", 1))},
				lots:  map[string]buckets{"B/B1": {2, 0, 1}}, moves: ops(":B:change")}},
		{name: "a line moves to another SKU: the growing SKU first", before: []event.Order{place(ship, line("1", "A", 2))}, ev: change(line("1", "B", 2)),
			want: expect{outcome: applied, order: "placed/allocated/unpaid", lines: []event.SnapshotLine{snap("1", "B", 2, at("B1", 2))},
				lots: map[string]buckets{"A/A2": {5}, "B/B1": {1, 0, 2}}, moves: ops(":B:change", ":A:change")}},
		{name: "a unit one line gives back serves another", before: []event.Order{place(ship, line("1", "B", 2), line("2", "B", 1))},
			ev: change(line("1", "B", 1), line("2", "B", 2)),
			want: expect{outcome: applied, order: "placed/allocated/unpaid",
				lines: []event.SnapshotLine{snap("1", "B", 1, at("B1", 1)), snap("2", "B", 2, at("B1", 2))}, moves: ops(":B:change")}},
		{name: "before placement parks", ev: change(line("1", "A", 1)), want: expect{outcome: parked}},
		{name: "ERR_SHORTAGE: a refused raise leaves all as it was", before: []event.Order{place(ship, line("1", "A", 2), line("2", "B", 1))},
			ev: change(line("1", "A", 4), line("2", "B", 5)),
			want: expect{outcome: rejected, reason: "ERR_SHORTAGE", order: "placed/allocated/unpaid",
				lines: []event.SnapshotLine{snap("1", "A", 2, at("A2", 2)), snap("2", "B", 1, at("B1", 1))},
				moves: ops(":A:change", ":A:change-undo")}},
		{name: "ERR_SAFETY_STOCK", before: []event.Order{place(ship, line("1", "A", 2))}, ev: change(line("1", "A", 9)),
			want: expect{outcome: rejected, reason: "ERR_SAFETY_STOCK", order: "placed/allocated/unpaid", moves: ops()}},
		{name: "ERR_INSUFFICIENT: the lowered line's units are gone", before: []event.Order{place(ship, line("1", "A", 3))},
			tamper: stock.ReleaseRequest{OpID: "other:steal", SKU: "A", From: stock.Allocated, Lots: []stock.LotQty{at("A2", 3)}},
			ev:     change(line("1", "A", 1)),
			want:   expect{outcome: rejected, reason: "ERR_INSUFFICIENT", order: "placed/allocated/unpaid", moves: ops()}},
		{name: "cancelled order: ERR_INVALID_TRANSITION", before: []event.Order{place(ship, line("1", "A", 2)), cancel()}, ev: change(line("1", "A", 1)),
			want: expect{outcome: rejected, reason: domain.ReasonInvalidTransition, order: "cancelled/allocated/unpaid"}},

		// order.allocation_moved
		{name: "a line's units at the store move to the western warehouse", pol: domain.Policy{Locations: testLocations{}},
			before: []event.Order{placeVia(pickupAtStore, line("1", "L", 3))}, ev: moveTo("1", "west"),
			want: expect{outcome: applied, order: "placed/allocated/unpaid", lines: []event.SnapshotLine{snap("1", "L", 3, atLoc("L2", 3, "west"))},
				lots: map[string]buckets{"L/L3": {5}, "L/L2": {0, 0, 3}}, moves: ops(":1:move~west")}},
		{name: "reserved units stay reserved at the destination", pol: domain.Policy{Locations: testLocations{}},
			before: []event.Order{place(reserve, line("1", "L", 4))}, ev: moveTo("1", stock.DefaultLocation),
			want: expect{outcome: applied, order: "placed/reserved/unpaid", lines: []event.SnapshotLine{snap("1", "L", 4, at("L1", 4))},
				lots: map[string]buckets{"L/L2": {3}, "L/L1": {0, 4}}, moves: ops(":1:move~default")}},
		{name: "to a store that does not ship: the line's units come from the store's lots, FEFO", pol: domain.Policy{Locations: testLocations{}},
			before: []event.Order{place(ship, line("1", "L", 6)), registerOnHandAt("L", "L4", 4, "store")}, ev: moveTo("1", "store"),
			want: expect{outcome: applied, order: "placed/allocated/unpaid", lines: []event.SnapshotLine{snap("1", "L", 6, atLoc("L3", 5, "store"), atLoc("L4", 1, "store"))},
				lots: map[string]buckets{"L/L2": {3}, "L/L1": {4}, "L/L3": {0, 0, 5}, "L/L4": {3, 0, 1}}}},
		{name: "the destination cannot cover the line: ERR_SHORTAGE naming it, nothing moves", pol: domain.Policy{Locations: testLocations{}},
			before: []event.Order{place(ship, line("1", "L", 5))}, ev: moveTo("1", stock.DefaultLocation),
			want: expect{outcome: rejected, reason: "ERR_SHORTAGE", detail: "requested=3 available=2 location=default", order: "placed/allocated/unpaid",
				lines: []event.SnapshotLine{snap("1", "L", 5, atLoc("L2", 3, "west"), at("L1", 2))}}},
		{name: "a line already at the destination only: ERR_ALREADY_AT_LOCATION", pol: domain.Policy{Locations: testLocations{}},
			before: []event.Order{place(ship, line("1", "L", 3))}, ev: moveTo("1", "west"),
			want: expect{outcome: rejected, reason: domain.ReasonAlreadyAtLocation, order: "placed/allocated/unpaid"}},
		{name: "a location the shop lacks: ERR_LOCATION_UNAVAILABLE", pol: domain.Policy{Locations: testLocations{}},
			before: []event.Order{place(ship, line("1", "L", 3))}, ev: moveTo("1", "north"),
			want: expect{outcome: rejected, reason: domain.ReasonLocationUnavailable, order: "placed/allocated/unpaid"}},
		{name: "a disabled location: ERR_LOCATION_UNAVAILABLE", pol: domain.Policy{Locations: disabledWest{}},
			before: []event.Order{place(ship, line("1", "L", 3))}, ev: moveTo("1", "west"),
			want: expect{outcome: rejected, reason: domain.ReasonLocationUnavailable, order: "placed/allocated/unpaid"}},
		{name: "an unknown line: ERR_UNKNOWN_LINE", pol: domain.Policy{Locations: testLocations{}},
			before: []event.Order{place(ship, line("1", "L", 3))}, ev: moveTo("2", "west"),
			want: expect{outcome: rejected, reason: domain.ReasonUnknownLine, order: "placed/allocated/unpaid"}},
		{name: "a shipped order: ERR_INVALID_TRANSITION", before: shipped3, ev: moveTo("1", "west"),
			want: expect{outcome: rejected, reason: domain.ReasonInvalidTransition, order: "shipped/allocated/paid"}},
		{name: "a cancelled order: ERR_INVALID_TRANSITION", before: []event.Order{place(ship, line("1", "L", 3)), cancel()}, ev: moveTo("1", "west"),
			want: expect{outcome: rejected, reason: domain.ReasonInvalidTransition, order: "cancelled/allocated/unpaid"}},
		{name: "before placement parks", ev: moveTo("1", "west"), want: expect{outcome: parked}},

		// order.cancelled
		{name: "releases what an allocated order holds", before: []event.Order{place(ship, line("1", "A", 3))}, ev: cancel(),
			want: expect{outcome: applied, order: "cancelled/allocated/unpaid", lines: []event.SnapshotLine{snap("1", "A", 3)},
				lots: map[string]buckets{"A/A2": {5}}, moves: ops(":1:cancel")}},
		{name: "releases what a reserved order holds", before: []event.Order{place(reserve, line("1", "A", 3), line("2", "B", 1))}, ev: cancel(),
			want: expect{outcome: applied, order: "cancelled/reserved/unpaid",
				lots: map[string]buckets{"A/A2": {5}, "B/B1": {3}}, moves: ops(":1:cancel", ":2:cancel")}},
		{name: "a repeat: a no-op", before: []event.Order{place(ship, line("1", "A", 3)), cancel()}, ev: cancel(),
			want: expect{outcome: applied, order: "cancelled/allocated/unpaid", moves: ops()}},
		{name: "before placement parks", ev: cancel(), want: expect{outcome: parked}},
		{name: "shipped order: ERR_INVALID_TRANSITION", before: shipped3, ev: cancel(),
			want: expect{outcome: rejected, reason: domain.ReasonInvalidTransition, order: "shipped/allocated/paid"}},
		{name: "rejected order: ERR_INVALID_TRANSITION", before: []event.Order{place(reserve, line("1", "A", 11))}, ev: cancel(),
			want: expect{outcome: rejected, reason: domain.ReasonInvalidTransition, order: "rejected/-/unpaid"}},
		{name: "ERR_INSUFFICIENT: line 1 is reserved again", before: []event.Order{twoLines(reserve)}, tamper: stealB(stock.Reserved), ev: cancel(),
			want: expect{outcome: rejected, reason: "ERR_INSUFFICIENT", order: "placed/reserved/unpaid", moves: ops(":1:cancel", ":1:cancel-undo")}},
		{name: "ERR_UNDO_REFUSED: another order took line 1's units before the undo", before: []event.Order{twoLines(reserve)},
			tamper: stealB(stock.Reserved),
			between: &interleave{after: ":1:cancel", op: stock.AllocateRequest{OpID: "other:alloc", SKU: "A", Qty: 10,
				TargetDate: "2026-12-03", Mode: reserve, Holder: "O2"}},
			ev: cancel(),
			want: expect{outcome: rejected, reason: domain.ReasonUndoRefused, order: "placed/reserved/unpaid",
				lots: map[string]buckets{"A/A1": {0, 5}, "A/A2": {0, 5}}, moves: ops(":1:cancel")}},

		// order.shipped
		{name: "ships a paid, allocated order", before: []event.Order{place(ship, line("1", "A", 3)), pay()}, ev: shipIt(),
			want: expect{outcome: applied, order: "shipped/allocated/paid", lines: []event.SnapshotLine{snap("1", "A", 3, at("A2", 3))},
				lots: map[string]buckets{"A/A2": {2, 0, 0, 0, 3}}, moves: ops(":1:ship")}},
		{name: "a parked return follows", before: []event.Order{place(ship, line("1", "A", 3)), pay(), giveBack(false, back("1", 1))}, ev: shipIt(),
			want: expect{outcome: applied, then: []string{"order.returned applied"}, order: "shipped/allocated/paid",
				lots: map[string]buckets{"A/A2": {3, 0, 0, 0, 2}}}},
		{name: "unpaid: parks", before: []event.Order{place(ship, line("1", "A", 3))}, ev: shipIt(),
			want: expect{outcome: parked, order: "placed/allocated/unpaid"}},
		{name: "reserved, not allocated: parks", before: []event.Order{place(reserve, line("1", "A", 3)), pay()}, ev: shipIt(),
			want: expect{outcome: parked, order: "placed/reserved/paid"}},
		{name: "before placement parks", ev: shipIt(), want: expect{outcome: parked}},
		{name: "a repeat: a no-op", before: shipped3, ev: shipIt(),
			want: expect{outcome: applied, order: "shipped/allocated/paid", moves: ops()}},
		{name: "cancelled order: ERR_INVALID_TRANSITION", before: []event.Order{place(ship, line("1", "A", 3)), pay(), cancel()}, ev: shipIt(),
			want: expect{outcome: rejected, reason: domain.ReasonInvalidTransition, order: "cancelled/allocated/paid"}},
		{name: "ERR_INSUFFICIENT: line 1 is moved back", before: []event.Order{twoLines(ship), pay()}, tamper: stealB(stock.Allocated), ev: shipIt(),
			want: expect{outcome: rejected, reason: "ERR_INSUFFICIENT", order: "placed/allocated/paid", moves: ops(":1:ship", ":1:ship-undo")}},

		// order.returned
		{name: "back to sale", before: shipped3, ev: giveBack(false, back("1", 1)),
			want: expect{outcome: applied, order: "shipped/allocated/paid",
				lines: []event.SnapshotLine{{LineID: "1", SKU: "A", Qty: 3, Lots: []stock.LotQty{at("A2", 3)}, Returned: []stock.LotQty{at("A2", 1)}}},
				lots:  map[string]buckets{"A/A2": {3, 0, 0, 0, 2}}, moves: ops(":1:return")}},
		{name: "defective", before: shipped3, ev: giveBack(true, back("1", 1)),
			want: expect{outcome: applied, order: "shipped/allocated/paid", lots: map[string]buckets{"A/A2": {2, 0, 0, 0, 2, 1}}}},
		{name: "the last allocated lot first", before: []event.Order{place(ship, line("1", "A", 7)), pay(), shipIt()}, ev: giveBack(false, back("1", 3)),
			want: expect{outcome: applied, order: "shipped/allocated/paid",
				lines: []event.SnapshotLine{{LineID: "1", SKU: "A", Qty: 7, Lots: []stock.LotQty{at("A2", 5), at("A1", 2)},
					Returned: []stock.LotQty{at("A1", 2), at("A2", 1)}}},
				lots: map[string]buckets{"A/A1": {5}, "A/A2": {1, 0, 0, 0, 4}}}},
		{name: "before shipment parks", before: []event.Order{place(ship, line("1", "A", 3))}, ev: giveBack(false, back("1", 1)),
			want: expect{outcome: parked, order: "placed/allocated/unpaid"}},
		{name: "before placement parks", ev: giveBack(false, back("1", 1)), want: expect{outcome: parked}},
		{name: "ERR_UNKNOWN_LINE", before: shipped3, ev: giveBack(false, back("9", 1)),
			want: expect{outcome: rejected, reason: domain.ReasonUnknownLine, order: "shipped/allocated/paid", moves: ops()}},
		{name: "ERR_RETURN_EXCEEDS_SHIPPED", before: shipped3, ev: giveBack(false, back("1", 4)),
			want: expect{outcome: rejected, reason: domain.ReasonReturnExceedsShipped, order: "shipped/allocated/paid", moves: ops()}},
		{name: "ERR_RETURN_EXCEEDS_SHIPPED after an earlier return", before: append(slices.Clone(shipped3), giveBack(false, back("1", 2))),
			ev: giveBack(false, back("1", 2)),
			want: expect{outcome: rejected, reason: domain.ReasonReturnExceedsShipped, order: "shipped/allocated/paid",
				lines: []event.SnapshotLine{{LineID: "1", SKU: "A", Qty: 3, Lots: []stock.LotQty{at("A2", 3)}, Returned: []stock.LotQty{at("A2", 2)}}}}},
		{name: "cancelled order: ERR_INVALID_TRANSITION", before: []event.Order{place(ship, line("1", "A", 3)), cancel()}, ev: giveBack(false, back("1", 1)),
			want: expect{outcome: rejected, reason: domain.ReasonInvalidTransition, order: "cancelled/allocated/unpaid"}},
		{name: "ERR_INSUFFICIENT: the shipped units are gone", before: shipped3,
			tamper: stock.ReturnRequest{OpID: "other:return", SKU: "A", Lots: []stock.LotQty{at("A2", 3)}},
			ev:     giveBack(false, back("1", 1)),
			want:   expect{outcome: rejected, reason: "ERR_INSUFFICIENT", order: "shipped/allocated/paid", moves: ops()}},

		// inventory.received
		{name: "a planned lot goes on hand as planned", ev: receive("P", "P1", 0),
			want: expect{outcome: applied, lots: map[string]buckets{"P/P1": {10}},
				lotState: map[string]string{"P/P1": "onhand good=true best_before=2027-06-30"}, moves: ops()}},
		{name: "counted more: the difference comes in", ev: receive("P", "P1", 12),
			want: expect{outcome: applied, lots: map[string]buckets{"P/P1": {12}},
				lotState: map[string]string{"P/P1": "onhand good=true best_before=2027-06-30"}, moves: ops(":P1:receive")}},
		{name: "counted fewer: the difference goes out", ev: receive("P", "P1", 8),
			want: expect{outcome: applied, lots: map[string]buckets{"P/P1": {8}},
				lotState: map[string]string{"P/P1": "onhand good=true best_before=2027-06-30"}}},
		{name: "ERR_LOT_STATE: an on-hand lot", ev: receive("A", "A1", 0), want: expect{outcome: rejected, reason: "ERR_LOT_STATE"}},
		{name: "ERR_UNKNOWN_LOT", ev: receive("P", "P9", 0), want: expect{outcome: rejected, reason: "ERR_UNKNOWN_LOT"}},
		{name: "ERR_INSUFFICIENT: fewer counted than are reserved", ev: receive("P", "P2", 5),
			want: expect{outcome: rejected, reason: "ERR_INSUFFICIENT"}},

		// inventory.adjusted
		{name: "up", ev: adjust("A", "A1", 3), want: expect{outcome: applied, lots: map[string]buckets{"A/A1": {8}}, moves: ops(":A1:adjust")}},
		{name: "down", ev: adjust("A", "A1", -2), want: expect{outcome: applied, lots: map[string]buckets{"A/A1": {3}}}},
		{name: "ERR_INSUFFICIENT", ev: adjust("A", "A1", -6), want: expect{outcome: rejected, reason: "ERR_INSUFFICIENT"}},
		{name: "ERR_UNKNOWN_LOT", ev: adjust("A", "A9", 1), want: expect{outcome: rejected, reason: "ERR_UNKNOWN_LOT"}},
		{name: "ERR_UNKNOWN_SKU", ev: adjust("NOPE", "N1", 1), want: expect{outcome: rejected, reason: "ERR_UNKNOWN_SKU"}},

		// inventory.sku_registered
		{name: "a new SKU", ev: registerSKU("N", 5), want: expect{outcome: applied, safety: map[string]int64{"N": 5}, moves: ops()}},
		{name: "ERR_SKU_EXISTS", ev: registerSKU("A", 5), want: expect{outcome: rejected, reason: "ERR_SKU_EXISTS"}},

		// inventory.safety_stock_changed
		{name: "set", ev: setSafety("A", 8), want: expect{outcome: applied, safety: map[string]int64{"A": 8}, moves: ops()}},
		{name: "ERR_UNKNOWN_SKU", ev: setSafety("NOPE", 8), want: expect{outcome: rejected, reason: "ERR_UNKNOWN_SKU"}},
		{name: "at a location: the network-wide one stays", pol: domain.Policy{Locations: testLocations{}}, ev: setSafetyAt("L", "west", 2),
			want: expect{outcome: applied, moves: ops()}},
		{name: "ERR_UNKNOWN_LOCATION: at a location the shop lacks", pol: domain.Policy{Locations: testLocations{}}, ev: setSafetyAt("L", "north", 2),
			want: expect{outcome: rejected, reason: domain.ReasonUnknownLocation, moves: ops()}},

		// inventory.lot_registered
		{name: "a planned lot", ev: registerLot("A", "A3", stock.KindPlanned, 48),
			want: expect{outcome: applied, lots: map[string]buckets{"A/A3": {48}},
				lotState: map[string]string{"A/A3": "planned good=true best_before="}, moves: ops(":A3:register")}},
		{name: "an on-hand lot", ev: registerLot("A", "A3", stock.KindOnHand, 6),
			want: expect{outcome: applied, lots: map[string]buckets{"A/A3": {6}},
				lotState: map[string]string{"A/A3": "onhand good=true best_before=2027-05-01"}}},
		{name: "ERR_LOT_EXISTS", ev: registerLot("A", "A1", stock.KindPlanned, 48), want: expect{outcome: rejected, reason: "ERR_LOT_EXISTS"}},
		{name: "a lot at one of the shop's locations", pol: domain.Policy{Locations: testLocations{}}, ev: registerLotAt("A", "A3", "west"),
			want: expect{outcome: applied, lots: map[string]buckets{"A/A3": {48}}}},
		{name: "a lot at a location the shop has just registered", pol: domain.Policy{Locations: testLocations{}}, ev: registerLotAt("A", "A3", "east"),
			want: expect{outcome: applied, lots: map[string]buckets{"A/A3": {48}}}},
		{name: "ERR_UNKNOWN_LOCATION: a lot at a location the shop lacks", pol: domain.Policy{Locations: testLocations{}}, ev: registerLotAt("A", "A3", "north"),
			want: expect{outcome: rejected, reason: domain.ReasonUnknownLocation, moves: ops()}},
		{name: "ERR_UNKNOWN_LOCATION: a lot at a location in a shop without registered locations", ev: registerLotAt("A", "A3", "west"),
			want: expect{outcome: rejected, reason: domain.ReasonUnknownLocation, moves: ops()}},
		{name: "a lot at the default location in a shop without registered locations", ev: registerLotAt("A", "A3", "default"),
			want: expect{outcome: applied, lots: map[string]buckets{"A/A3": {48}}}},
		{name: "ERR_LOT_STATE: no registration number left", ev: registerLot("Z", "Z2", stock.KindPlanned, 1),
			want: expect{outcome: rejected, reason: "ERR_LOT_STATE"}},
		{name: "ERR_UNKNOWN_SKU", ev: registerLot("NOPE", "N1", stock.KindPlanned, 1), want: expect{outcome: rejected, reason: "ERR_UNKNOWN_SKU"}},

		// inventory.held, inventory.released_hold, inventory.damaged
		{name: "sellable to hidden", ev: lotQty(event.InventoryHeld, "A", "A1", 2),
			want: expect{outcome: applied, lots: map[string]buckets{"A/A1": {3, 0, 0, 2}}, moves: ops(":A1:hold")}},
		{name: "ERR_INSUFFICIENT", ev: lotQty(event.InventoryHeld, "A", "A1", 6), want: expect{outcome: rejected, reason: "ERR_INSUFFICIENT"}},
		{name: "ERR_UNKNOWN_LOT", ev: lotQty(event.InventoryHeld, "A", "A9", 1), want: expect{outcome: rejected, reason: "ERR_UNKNOWN_LOT"}},
		{name: "ERR_UNKNOWN_LOCATION: a hold names a location the shop lacks", pol: domain.Policy{Locations: testLocations{}},
			ev:   fromExample(event.InventoryHeld, func(d *event.LotQtyData) { d.SKU, d.LotID, d.Qty, d.Location = "L", "L2", 1, "north" }),
			want: expect{outcome: rejected, reason: domain.ReasonUnknownLocation}},
		{name: "a hold names the lot's location", pol: domain.Policy{Locations: testLocations{}},
			ev:   fromExample(event.InventoryHeld, func(d *event.LotQtyData) { d.SKU, d.LotID, d.Qty, d.Location = "L", "L2", 1, "west" }),
			want: expect{outcome: applied, lots: map[string]buckets{"L/L2": {2, 0, 0, 1}}}},
		{name: "hidden to sellable", ev: lotQty(event.InventoryReleasedHold, "H", "H1", 2),
			want: expect{outcome: applied, lots: map[string]buckets{"H/H1": {9, 0, 0, 1}}, moves: ops(":H1:release_hold")}},
		{name: "ERR_INSUFFICIENT", ev: lotQty(event.InventoryReleasedHold, "H", "H1", 4), want: expect{outcome: rejected, reason: "ERR_INSUFFICIENT"}},
		{name: "sellable to defective", ev: lotQty(event.InventoryDamaged, "A", "A1", 1),
			want: expect{outcome: applied, lots: map[string]buckets{"A/A1": {4, 0, 0, 0, 0, 1}}, moves: ops(":A1:damage")}},
		{name: "ERR_INSUFFICIENT", ev: lotQty(event.InventoryDamaged, "A", "A1", 6), want: expect{outcome: rejected, reason: "ERR_INSUFFICIENT"}},

		// inventory.lot_recalled
		{name: "sellable to defective; the order holding it is listed", before: []event.Order{place(ship, line("1", "A", 3))}, ev: recall("A", "A2"),
			want: expect{outcome: applied, lots: map[string]buckets{"A/A2": {0, 0, 3, 0, 0, 2}},
				lotState: map[string]string{"A/A2": "onhand good=false best_before=2027-01-01"},
				holders:  []stock.Holder{{LCID: lcid, LotID: "A2", Qty: 3}}, moves: ops(":A2:recall")}},
		{name: "held units too", ev: recall("H", "H1"),
			want: expect{outcome: applied, lots: map[string]buckets{"H/H1": {0, 0, 0, 0, 0, 10}},
				lotState: map[string]string{"H/H1": "onhand good=false best_before=2027-01-01"}}},
		{name: "ERR_UNKNOWN_LOT", ev: recall("A", "A9"), want: expect{outcome: rejected, reason: "ERR_UNKNOWN_LOT"}},

		// inventory.transfer_requested, _received, _cancelled (the example's transfer TR-1)
		{pol: domain.Policy{Locations: testLocations{}}, name: "units leave the source's lots into a transit lot at the destination", ev: transfer("L", "west", "store", 2),
			want: expect{outcome: applied, lots: map[string]buckets{"L/L2": {1}, "L/TR-1~L2": {2}},
				lotState: map[string]string{"L/TR-1~L2": "planned good=true best_before=2027-01-01"}, moves: ops(":TR-1:transfer"),
				transfers: []string{"L/TR-1 in_transit"}}},
		{pol: domain.Policy{Locations: testLocations{}}, name: "ERR_SHORTAGE", ev: transfer("L", stock.DefaultLocation, "west", 5), want: expect{outcome: rejected, reason: "ERR_SHORTAGE"}},
		{pol: domain.Policy{Locations: testLocations{}}, name: "the transit lot is on hand, the shortfall defective", before: []event.Order{transfer("L", "west", "store", 3)}, ev: transferIn("L", 2),
			want: expect{outcome: applied, lots: map[string]buckets{"L/L2": {0}, "L/TR-1~L2": {2, 0, 0, 0, 0, 1}},
				lotState: map[string]string{"L/TR-1~L2": "onhand good=true best_before=2027-01-01"}, moves: ops(":TR-1:transfer_receive"),
				transfers: []string{"L/TR-1 received"}}},
		{pol: domain.Policy{Locations: testLocations{}}, name: "ERR_UNKNOWN_TRANSFER", ev: transferIn("L", 2), want: expect{outcome: rejected, reason: "ERR_UNKNOWN_TRANSFER"}},
		{pol: domain.Policy{Locations: testLocations{}}, name: "the units go back", before: []event.Order{transfer("L", "west", "store", 3)}, ev: transferOff("L"),
			want: expect{outcome: applied, lots: map[string]buckets{"L/L2": {3}, "L/TR-1~L2": {0}}, moves: ops(":TR-1:transfer_cancel"),
				transfers: []string{"L/TR-1 cancelled"}}},
		{pol: domain.Policy{Locations: testLocations{}}, name: "ERR_TRANSFER_STATE", before: []event.Order{transfer("L", "west", "store", 3), transferIn("L", 3)}, ev: transferOff("L"),
			want: expect{outcome: rejected, reason: "ERR_TRANSFER_STATE", transfers: []string{}}},
		{name: "ERR_UNKNOWN_LOCATION: a transfer to a location the shop lacks", pol: domain.Policy{Locations: testLocations{}},
			ev: transfer("L", "west", "north", 2), want: expect{outcome: rejected, reason: domain.ReasonUnknownLocation}},

		// An event names a transit lot by its transfer and its source lot (transfer_id).
		{name: "a count adjusts a received transit lot", pol: domain.Policy{Locations: testLocations{}},
			before: []event.Order{transfer("L", "west", "store", 3), transferIn("L", 3)},
			ev: fromExample(event.InventoryAdjusted, func(d *event.InventoryAdjustedData) {
				d.SKU, d.TransferID, d.LotID, d.Delta = "L", "TR-1", "L2", -1
			}),
			want: expect{outcome: applied, lots: map[string]buckets{"L/L2": {0}, "L/TR-1~L2": {2}}, moves: ops(":TR-1~L2:adjust"), transfers: []string{}}},
		{name: "a hold of a transit lot in transit", pol: domain.Policy{Locations: testLocations{}},
			before: []event.Order{transfer("L", "west", "store", 3)},
			ev: fromExample(event.InventoryHeld, func(d *event.LotQtyData) {
				d.SKU, d.TransferID, d.LotID, d.Qty, d.Location = "L", "TR-1", "L2", 2, "store"
			}),
			want: expect{outcome: applied, lots: map[string]buckets{"L/L2": {0}, "L/TR-1~L2": {1, 0, 0, 2}}, moves: ops(":TR-1~L2:hold")}},
		{name: "a damage of a received transit lot whose id is a digest", pol: domain.Policy{Locations: testLocations{}},
			before: []event.Order{transferNamed("L", longTransfer, 3), fromExample(event.InventoryTransferReceived, func(d *event.TransferReceivedData) {
				d.SKU, d.TransferID, d.Qty = "L", longTransfer, 3
			})},
			ev: fromExample(event.InventoryDamaged, func(d *event.LotQtyData) {
				d.SKU, d.TransferID, d.LotID, d.Qty = "L", longTransfer, "L2", 1
			}),
			want: expect{outcome: applied, lots: map[string]buckets{"L/L2": {0}, "L/" + longTransit("L2"): {2, 0, 0, 0, 0, 1}}}},
		{name: "a recall of a received transit lot", pol: domain.Policy{Locations: testLocations{}},
			before: []event.Order{transfer("L", "west", "store", 3), transferIn("L", 3)},
			ev:     fromExample(event.InventoryLotRecalled, func(d *event.LotRecalledData) { d.SKU, d.TransferID, d.LotID = "L", "TR-1", "L2" }),
			want: expect{outcome: applied, lots: map[string]buckets{"L/L2": {0}, "L/TR-1~L2": {0, 0, 0, 0, 0, 3}},
				lotState: map[string]string{"L/TR-1~L2": "onhand good=false best_before=2027-01-01"}}},
		{name: "ERR_UNKNOWN_LOT: a transit lot of a transfer the SKU lacks", pol: domain.Policy{Locations: testLocations{}},
			ev:   fromExample(event.InventoryHeld, func(d *event.LotQtyData) { d.SKU, d.TransferID, d.LotID, d.Qty = "L", "TR-9", "L2", 1 }),
			want: expect{outcome: rejected, reason: "ERR_UNKNOWN_LOT"}},
	}
}

// Every transition and rejection of the state machine, stepped against the ledger's
// plain-Go model: each case seeds the same stock, steps the events before, and then the
// event, and checks its outcome and reason, the order after, the parked events, and the
// buckets of every lot (those it names changed so, all others as they were). Every case
// then steps the event again from the same state, as after a commit that failed: the
// op ids make the ledger replay, so the results, the state and the ledger are the same.
// Last, every kind the registry declares but junban.drain has a case in which it applies
// and one in which it is rejected: a kind registered later fails here until it has both.
func TestEveryTransitionAgainstTheModel(t *testing.T) {
	cases := append(transitionCases(), holdCases()...)
	for _, c := range cases {
		t.Run(string(c.ev.Type)+": "+c.name, func(t *testing.T) {
			t.Parallel()
			runTransition(t, c)
		})
	}

	t.Run("junban.drain has no step", func(t *testing.T) {
		ev := decode(t, event.Order{Type: event.Drain, LCID: lcid, OccurredAt: occurred}, "drain")
		if _, rs, err := domain.Step(context.Background(), stock.NewModel(nil), domain.Policy{}, domain.State{}, ev, 1, now); err == nil || rs != nil {
			t.Errorf("step of a drain: %v results, error %v; want an error", rs, err)
		}
	})

	applies, refuses := map[event.Type]bool{}, map[event.Type]bool{}
	for _, c := range cases {
		switch c.want.outcome {
		case applied:
			applies[c.ev.Type] = true
		case rejected:
			refuses[c.ev.Type] = true
		}
	}
	// Every kind can be rejected today (an order's kinds on an order in the wrong status,
	// a SKU's on an unknown SKU or lot).
	for _, k := range domain.Kinds() {
		if k.Origin == domain.Nudge {
			continue
		}
		if !applies[k.Type] {
			t.Errorf("%s: no case in which it applies", k.Type)
		}
		if !refuses[k.Type] {
			t.Errorf("%s: no case in which it is rejected", k.Type)
		}
	}
}

func runTransition(t *testing.T, c transitionCase) {
	ctx := context.Background()
	m := stock.NewModel(unknownSKUs{})
	for _, s := range stockSKUs() {
		if _, err := m.Put(s); err != nil {
			t.Fatal(err)
		}
	}
	var pre []domain.Event
	for i, o := range c.before {
		pre = append(pre, decode(t, o, fmt.Sprintf("pre-%d", i)))
	}
	states, _, err := domain.Replay(ctx, m, c.pol, pre, now)
	if err != nil {
		t.Fatalf("the events before: %v", err)
	}
	if c.tamper != nil {
		if _, err := m.Apply(ctx, c.tamper); err != nil {
			t.Fatalf("tamper: %v", err)
		}
	}
	ev := decode(t, c.ev, "ev")
	st := states[ev.Entity()]
	w := c.want
	skus := skusOf(w)
	was := snapshot(t, m, skus)

	var l domain.Ledger = m
	var other *interleaving
	if c.between != nil {
		other = &interleaving{Model: m, t: t, after: opPrefix(ev) + c.between.after, op: c.between.op}
		l = other
	}
	next, results, err := domain.Step(ctx, l, c.pol, st, ev, arrival, now)
	if err != nil {
		t.Fatalf("step: %v", err)
	}
	if other != nil && !other.done {
		t.Errorf("the step ran no operation %s for the other order's to follow", other.after)
	}
	after := snapshot(t, m, skus)

	checkOutcome(t, w, ev, st, next, results)
	if got := orderString(next.Order); got != w.order {
		t.Errorf("order after: %q, want %q", got, w.order)
	}
	if got := holdString(next.Order); got != w.hold {
		t.Errorf("hold after: %q, want %q", got, w.hold)
	}
	if w.lines != nil && (next.Order == nil || !reflect.DeepEqual(next.Order.Lines, w.lines)) {
		t.Errorf("lines after: %s, want %s", jsonOf(next.Order), jsonOf(w.lines))
	}
	checkLedger(t, w, was, after)
	if len(results) > 0 {
		r := results[0]
		if w.moves != nil {
			if got := opsOf(t, r, opPrefix(ev)); !slices.Equal(got, w.moves) {
				t.Errorf("moves by %v, want %v", got, w.moves)
			}
		}
		if w.detail != "" && !strings.Contains(r.Detail, w.detail) {
			t.Errorf("detail %q, want it to hold %q", r.Detail, w.detail)
		}
		if w.holders != nil && (!reflect.DeepEqual(r.Holders, w.holders) || r.HolderCount != len(w.holders)) {
			t.Errorf("holders %+v (%d), want %+v", r.Holders, r.HolderCount, w.holders)
		}
		if got := transfersOf(r); w.transfers != nil && !slices.Equal(got, w.transfers) {
			t.Errorf("transfers %q, want %q", got, w.transfers)
		}
	}

	// A re-run of the step from the same state, as after a commit that failed.
	again, againResults, err := domain.Step(ctx, m, c.pol, st, ev, arrival, now)
	if err != nil {
		t.Fatalf("re-run: %v", err)
	}
	if !reflect.DeepEqual(againResults, results) {
		t.Errorf("re-run results:\n%s\nwant\n%s", jsonOf(againResults), jsonOf(results))
	}
	if !reflect.DeepEqual(again, next) {
		t.Errorf("re-run state:\n%s\nwant\n%s", jsonOf(again), jsonOf(next))
	}
	if got := snapshot(t, m, skus); !reflect.DeepEqual(got, after) {
		t.Errorf("the re-run changed the ledger:\n%s\nwant\n%s", jsonOf(got), jsonOf(after))
	}
}

// checkOutcome checks the event's result (none when parked), the results of the parked
// events it let through, and what is parked after.
func checkOutcome(t *testing.T, w expect, ev domain.Event, st, next domain.State, results []event.Result) {
	t.Helper()
	wasParked := parkedCount(st, ev.EventID) > 0
	if w.outcome == parked {
		if len(results) != 0 {
			t.Fatalf("%d results (first %s %s), want none: parked", len(results), results[0].Outcome, results[0].Reason)
		}
		if n := parkedCount(next, ev.EventID); n != 1 {
			t.Errorf("parked %d times, want once", n)
		}
		if wasParked && !reflect.DeepEqual(next, st) {
			t.Errorf("a redelivery of a parked event changed the state:\n%s\nwant\n%s", jsonOf(next), jsonOf(st))
		}
		if !wasParked && len(next.Parked) != len(st.Parked)+1 {
			t.Errorf("%d parked after, want %d", len(next.Parked), len(st.Parked)+1)
		}
		if !reflect.DeepEqual(next.Order, st.Order) {
			t.Errorf("a parked event changed the order: %s, want %s", jsonOf(next.Order), jsonOf(st.Order))
		}
		return
	}
	if len(results) == 0 {
		t.Fatalf("no result (parked), want %s %s", w.outcome, w.reason)
	}
	r := results[0]
	if r.EventID != ev.EventID || r.Outcome != w.outcome || r.Reason != w.reason {
		t.Errorf("result of %s: %s %s (%s), want %s %s", r.EventID, r.Outcome, r.Reason, r.Detail, w.outcome, w.reason)
	}
	var then []string
	for _, r := range results[1:] {
		then = append(then, strings.TrimSpace(fmt.Sprintf("%s %s %s", r.Type, r.Outcome, r.Reason)))
	}
	if !slices.Equal(then, w.then) {
		t.Errorf("then %q, want %q", then, w.then)
	}
	if parkedCount(next, ev.EventID) != 0 || len(next.Parked) != len(st.Parked)-len(w.then) {
		t.Errorf("%d parked after (the event %d times), want %d", len(next.Parked), parkedCount(next, ev.EventID), len(st.Parked)-len(w.then))
	}
	if last := results[len(results)-1]; !reflect.DeepEqual(last.Order, next.Order) {
		t.Errorf("the last result's order %s, the state's %s", jsonOf(last.Order), jsonOf(next.Order))
	}
	if w.outcome == rejected && st.Order != nil && !reflect.DeepEqual(next.Order, st.Order) {
		t.Errorf("a rejected event changed the order: %s, want %s", jsonOf(next.Order), jsonOf(st.Order))
	}
}

// checkLedger checks every lot and SKU after against before: what the case names is as
// named, the rest as it was; after a rejection (but a refused undo, which leaves what it
// could not move back) or a park, everything is as it was.
func checkLedger(t *testing.T, w expect, was, after map[string]stock.SKU) {
	t.Helper()
	still := w.outcome == parked || (w.outcome == rejected && w.reason != domain.ReasonUndoRefused)
	wasLots, afterLots := lotsByKey(was), lotsByKey(after)
	for key, l := range afterLots {
		b4, existed := wasLots[key]
		want, named := w.lots[key]
		switch {
		case still && existed && bucketsOf(l) != bucketsOf(b4):
			t.Errorf("%s: %v, want as before: %v", key, bucketsOf(l), bucketsOf(b4))
		case named && bucketsOf(l) != want:
			t.Errorf("%s: %v, want %v", key, bucketsOf(l), want)
		case !named && !existed:
			t.Errorf("%s appeared: %v", key, bucketsOf(l))
		case !named && bucketsOf(l) != bucketsOf(b4):
			t.Errorf("%s: %v, want as before: %v", key, bucketsOf(l), bucketsOf(b4))
		}
		if s, ok := w.lotState[key]; ok {
			if lotState(l) != s {
				t.Errorf("%s: %q, want %q", key, lotState(l), s)
			}
		} else if existed && lotState(l) != lotState(b4) {
			t.Errorf("%s: %q, want as before: %q", key, lotState(l), lotState(b4))
		}
	}
	for key := range w.lots {
		if _, ok := afterLots[key]; !ok {
			t.Errorf("no lot %s after", key)
		}
	}
	for key := range wasLots {
		if _, ok := afterLots[key]; !ok {
			t.Errorf("lot %s is gone", key)
		}
	}
	for sku, s := range after {
		b4, existed := was[sku]
		if want, ok := w.safety[sku]; ok {
			if s.SafetyStock != want {
				t.Errorf("%s: safety stock %d, want %d", sku, s.SafetyStock, want)
			}
		} else if !existed {
			t.Errorf("SKU %s appeared", sku)
		} else if s.SafetyStock != b4.SafetyStock {
			t.Errorf("%s: safety stock %d, want as before: %d", sku, s.SafetyStock, b4.SafetyStock)
		}
	}
	for sku := range w.safety {
		if _, ok := after[sku]; !ok {
			t.Errorf("no SKU %s after", sku)
		}
	}
}

// interleaving is the model with another order's operation right after the step's
// operation with op id after (once).
type interleaving struct {
	*stock.Model
	t     *testing.T
	after string
	op    stock.Op
	done  bool
}

func (l *interleaving) Apply(ctx context.Context, op stock.Op) (stock.Result, error) {
	r, err := l.Model.Apply(ctx, op)
	if err == nil && r.OpID == l.after && !l.done {
		l.done = true
		if _, err := l.Model.Apply(ctx, l.op); err != nil {
			l.t.Errorf("the other order's operation: %v", err)
		}
	}
	return r, err
}

func decode(t *testing.T, o event.Order, id string) domain.Event {
	t.Helper()
	if o.EventID == "" {
		o.EventID = id
	}
	body, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := domain.Decode(body, 0)
	if err != nil {
		t.Fatalf("%s does not decode: %v", body, err)
	}
	return ev
}

// opPrefix is what the op ids of ev's ledger operations begin with.
func opPrefix(ev domain.Event) string {
	if _, inventory := ev.InventorySKU(); inventory {
		return ev.EventID
	}
	return "{" + ev.LCID + "}" + ev.EventID
}

// opsOf returns the op ids of r's moves, each once, in order, past prefix.
func opsOf(t *testing.T, r event.Result, prefix string) []string {
	t.Helper()
	var out []string
	for _, m := range r.Moves {
		op, ok := strings.CutPrefix(m.OpID, prefix)
		if !ok {
			t.Errorf("move of %s: not an operation of the event (%s)", m.OpID, prefix)
		}
		if !slices.Contains(out, op) {
			out = append(out, op)
		}
	}
	return out
}

func parkedCount(st domain.State, id string) int {
	n := 0
	for _, p := range st.Parked {
		if p.EventID() == id {
			n++
		}
	}
	return n
}

// skusOf are the SKUs a case looks at: the stock's and those its expectation names.
func skusOf(w expect) []string {
	var out []string
	for _, s := range stockSKUs() {
		out = append(out, s.SKU)
	}
	for key := range w.lots {
		sku, _, _ := strings.Cut(key, "/")
		out = append(out, sku)
	}
	for sku := range w.safety {
		out = append(out, sku)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// snapshot reads the SKUs the model has of skus (a SKU it lacks is left out).
func snapshot(t *testing.T, m *stock.Model, skus []string) map[string]stock.SKU {
	t.Helper()
	out := map[string]stock.SKU{}
	for _, sku := range skus {
		s, err := m.Snapshot(context.Background(), sku)
		if err != nil {
			continue // not registered (yet)
		}
		out[sku] = s
	}
	return out
}

func lotsByKey(skus map[string]stock.SKU) map[string]stock.Lot {
	out := map[string]stock.Lot{}
	for _, s := range skus {
		for _, l := range s.Lots {
			out[s.SKU+"/"+l.LotID] = l
		}
	}
	return out
}

func jsonOf(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
