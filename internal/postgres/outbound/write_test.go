package outbound_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/ledger"
	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/postgres/inventorydb"
	"github.com/junban/junban/internal/postgres/outbound"
	"github.com/junban/junban/internal/postgres/persist"
	"github.com/junban/junban/internal/testenv"
)

// today is the writers' clock in these tests: as_of is its date.
var today = time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)

func writer() *outbound.Writer {
	return &outbound.Writer{LowStockThreshold: 10, Now: func() time.Time { return today }}
}

var processed atomic.Int64

func at() time.Time { return today.Add(time.Duration(processed.Add(1)) * time.Millisecond) }

// order is an applied result of an order event with the order's snapshot.
func order(id, lcid string, seq int64, typ event.Type, status, alloc string, paid bool, lots ...event.LotQty) event.Result {
	return event.Result{EventID: id, Entity: lcid, LCID: lcid, Seq: seq, Type: typ, Outcome: event.Applied,
		Order: &event.OrderSnapshot{LCID: lcid, Status: status, Allocation: alloc, Paid: paid, Mode: event.ModeShip,
			TargetDate: "2026-12-03", Lines: []event.SnapshotLine{{LineID: "1", SKU: "TEA", Qty: 2, Lots: lots}}},
		ProcessedAt: at()}
}

// stock is an applied warehouse result listing sku with one on-hand lot of sellable units.
func stockResult(id, sku string, version, safety, sellable int64) event.Result {
	return event.Result{EventID: id, Entity: event.SKUEntityPrefix + sku, Seq: version, Type: event.InventorySafetyStockChanged,
		Outcome: event.Applied, SKUs: []event.SKU{{SKU: sku, SafetyStock: safety, Version: version, Lots: []event.Lot{
			{LotID: "L1", Kind: stock.KindOnHand, Good: true, RegSeq: 1, ValidFrom: "2026-01-01", ValidTo: "2027-12-31", Sellable: sellable, Reserved: 1},
			// Not valid today: counted in sellable, not in available_to_ship.
			{LotID: "L2", Kind: stock.KindPlanned, Good: true, RegSeq: 2, ValidFrom: "2027-01-01", ValidTo: "2027-12-31", Sellable: 100},
			// Not good: counted nowhere.
			{LotID: "L3", Kind: stock.KindOnHand, Good: false, RegSeq: 3, ValidFrom: "2026-01-01", ValidTo: "2027-12-31", Sellable: 7},
		}}},
		ProcessedAt: at()}
}

func apply(t *testing.T, db *gorm.DB, w *outbound.Writer, rs ...event.Result) persist.Report {
	t.Helper()
	rep, err := persist.Apply(context.Background(), db, rs, persist.WithOutbound(w))
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// outbox reads every message of entity (every message when ""), in seq order, and checks
// each against its kind's schema and its row.
func outbox(t *testing.T, db *gorm.DB, entity string) []outbound.Message {
	t.Helper()
	var rows []struct {
		MessageID, Kind, Entity string
		Seq                     int64
		Body                    string
	}
	q := db.Raw(`SELECT message_id::text, kind, entity, seq, body::text FROM outbox ORDER BY entity, seq`)
	if entity != "" {
		q = db.Raw(`SELECT message_id::text, kind, entity, seq, body::text FROM outbox WHERE entity = ? ORDER BY seq`, entity)
	}
	if err := q.Scan(&rows).Error; err != nil {
		t.Fatal(err)
	}
	out := make([]outbound.Message, 0, len(rows))
	for _, r := range rows {
		if err := outbound.Validate([]byte(r.Body)); err != nil {
			t.Errorf("%s seq %d: %v\n%s", r.Entity, r.Seq, err, r.Body)
		}
		var m outbound.Message
		if err := json.Unmarshal([]byte(r.Body), &m); err != nil {
			t.Fatal(err)
		}
		if m.ID != r.MessageID || string(m.Kind) != r.Kind || m.Entity != r.Entity || m.Seq != r.Seq {
			t.Errorf("row %s %s %s %d holds another message: %s", r.MessageID, r.Kind, r.Entity, r.Seq, r.Body)
		}
		out = append(out, m)
	}
	return out
}

func data[T any](t *testing.T, m outbound.Message) T {
	t.Helper()
	var d T
	if err := json.Unmarshal(m.Data, &d); err != nil {
		t.Fatal(err)
	}
	return d
}

func kinds(ms []outbound.Message) string {
	var b []string
	for _, m := range ms {
		b = append(b, fmt.Sprintf("%d:%s", m.Seq, m.Kind))
	}
	return strings.Join(b, " ")
}

func TestOrderStatusChanged(t *testing.T) {
	db, w := testenv.Postgres(t), writer()
	placed := order("e1", "LC-1", 1, event.OrderPlaced, event.StatusPlaced, "", false)
	if rep := apply(t, db, w, placed); rep.Outbound != 1 {
		t.Fatalf("first batch wrote %d rows, want 1", rep.Outbound)
	}
	ms := outbox(t, db, "LC-1")
	if got := kinds(ms); got != "1:order.status_changed" {
		t.Fatalf("messages %s", got)
	}
	d := data[outbound.OrderStatusData](t, ms[0])
	if d.From != nil || d.To != "placed" || !slices.Equal(d.Changed, []string{"status", "allocation", "paid", "lines"}) {
		t.Errorf("first message: %+v", d)
	}
	if ms[0].LCID != "LC-1" || ms[0].CausedBy != (outbound.Cause{EventID: "e1", Type: event.OrderPlaced}) ||
		!ms[0].OccurredAt.Equal(placed.ProcessedAt) {
		t.Errorf("first message: %+v", ms[0])
	}

	// Payment only.
	apply(t, db, w, order("e2", "LC-1", 2, event.PaymentConfirmed, event.StatusPlaced, "", true))
	// Allocation and lines, then the same result again (nothing), then an older result
	// (the order row keeps the newer: nothing changed).
	apply(t, db, w, order("e3", "LC-1", 3, event.OrderAllocateForShipment, event.StatusPlaced, "allocated", true, event.LotQty{LotID: "L1", Qty: 2}))
	if rep := apply(t, db, w, order("e3", "LC-1", 3, event.OrderAllocateForShipment, event.StatusPlaced, "allocated", true, event.LotQty{LotID: "L1", Qty: 2})); rep.Outbound != 0 {
		t.Errorf("a duplicate wrote %d rows", rep.Outbound)
	}
	if rep := apply(t, db, w, order("e1b", "LC-1", 1, event.OrderPlaced, event.StatusCancelled, "", false)); rep.Outbound != 0 {
		t.Errorf("an older result wrote %d rows", rep.Outbound)
	}
	// A status change.
	apply(t, db, w, order("e4", "LC-1", 4, event.OrderShipped, event.StatusShipped, "allocated", true, event.LotQty{LotID: "L1", Qty: 2}))

	ms = outbox(t, db, "LC-1")
	if got := kinds(ms); got != "1:order.status_changed 2:order.status_changed 3:order.status_changed 4:order.status_changed" {
		t.Fatalf("messages %s", got)
	}
	for i, want := range []struct {
		from, to string
		changed  []string
		cause    string
	}{
		{"placed", "placed", []string{"paid"}, "e2"},
		{"placed", "placed", []string{"allocation", "lines"}, "e3"},
		{"placed", "shipped", []string{"status"}, "e4"},
	} {
		m := ms[i+1]
		d := data[outbound.OrderStatusData](t, m)
		if d.From == nil || *d.From != want.from || d.To != want.to || !slices.Equal(d.Changed, want.changed) || m.CausedBy.EventID != want.cause {
			t.Errorf("message %d: %+v caused by %+v, want %+v", m.Seq, d, m.CausedBy, want)
		}
	}
}

// order.status_changed groups the lots its lines hold by their location: what each
// location must ship.
func TestOrderStatusChangedByLocation(t *testing.T) {
	db, w := testenv.Postgres(t), writer()
	r := order("e1", "LC-1", 1, event.OrderPlaced, event.StatusPlaced, "allocated", true)
	r.Order.Lines = []event.SnapshotLine{
		{LineID: "1", SKU: "TEA", Qty: 5, Lots: []event.LotQty{{LotID: "T1", Qty: 2, Location: "wh-2"}, {LotID: "T2", Qty: 1},
			{LotID: "T3", Qty: 2, Location: "wh-2"}}},
		{LineID: "2", SKU: "CUP", Qty: 1, Lots: []event.LotQty{{LotID: "C1", Qty: 1, Location: "store-1"}}},
		{LineID: "3", SKU: "POT", Qty: 1},
	}
	apply(t, db, w, r)
	ms := outbox(t, db, "LC-1")
	if len(ms) != 1 {
		t.Fatalf("messages %s", kinds(ms))
	}
	got := data[outbound.OrderStatusData](t, ms[0]).Locations
	want := []outbound.OrderLocation{
		{Location: "default", Lines: []outbound.OrderLocationLine{{LineID: "1", SKU: "TEA", Lots: []event.LotQty{{LotID: "T2", Qty: 1}}}}},
		{Location: "store-1", Lines: []outbound.OrderLocationLine{{LineID: "2", SKU: "CUP", Lots: []event.LotQty{{LotID: "C1", Qty: 1}}}}},
		{Location: "wh-2", Lines: []outbound.OrderLocationLine{{LineID: "1", SKU: "TEA", Lots: []event.LotQty{{LotID: "T1", Qty: 2}, {LotID: "T3", Qty: 2}}}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("locations %+v\nwant %+v", got, want)
	}
	// An order no line of which holds a lot has none.
	apply(t, db, w, order("e2", "LC-2", 1, event.OrderPlaced, event.StatusPlaced, "", false))
	if d := data[outbound.OrderStatusData](t, outbox(t, db, "LC-2")[0]); d.Locations != nil {
		t.Errorf("an order without lots: locations %+v", d.Locations)
	}
}

func TestOrderRefused(t *testing.T) {
	db, w := testenv.Postgres(t), writer()
	refused := func(id, lcid string, seq int64, order *event.OrderSnapshot) event.Result {
		return event.Result{EventID: id, Entity: lcid, LCID: lcid, Seq: seq, Type: event.OrderPlaced, Outcome: event.Rejected,
			Reason: "ERR_SHORTAGE", Detail: "TEA: short by 2", Order: order, ProcessedAt: at()}
	}
	// Without an order row: junban holds no order.
	apply(t, db, w, refused("r1", "LC-NONE", 1, nil))
	ms := outbox(t, db, "LC-NONE")
	if got := kinds(ms); got != "1:order.refused" {
		t.Fatalf("messages %s", got)
	}
	if d := data[outbound.OrderRefusedData](t, ms[0]); d != (outbound.OrderRefusedData{Reason: "ERR_SHORTAGE", Detail: "TEA: short by 2"}) {
		t.Errorf("refusal without order: %+v", d)
	}

	// With an order row: placed, then a refused change of its lines in the same batch.
	apply(t, db, w, order("p1", "LC-2", 1, event.OrderPlaced, event.StatusPlaced, "", false),
		refused("r2", "LC-2", 2, nil))
	ms = outbox(t, db, "LC-2")
	if got := kinds(ms); got != "1:order.status_changed 2:order.refused" {
		t.Fatalf("messages %s", got)
	}
	if d := data[outbound.OrderRefusedData](t, ms[1]); d.Status != "placed" || ms[1].CausedBy.EventID != "r2" {
		t.Errorf("refusal of a placed order: %+v %+v", d, ms[1].CausedBy)
	}

	// A refusal of a warehouse event tells nothing.
	if rep := apply(t, db, w, event.Result{EventID: "r3", Entity: "sku:TEA", Seq: 1, Type: event.InventoryHeld,
		Outcome: event.Rejected, Reason: "ERR_SHORTAGE", ProcessedAt: at()}); rep.Outbound != 0 {
		t.Errorf("a refused warehouse event wrote %d rows", rep.Outbound)
	}
}

func TestStockLevels(t *testing.T) {
	db, w := testenv.Postgres(t), writer()
	steps := []struct {
		sellable, safety int64
		want             string
		level, previous  string
	}{
		{50, 0, "1:stock.changed", "ok", ""},
		{50, 0, "", "", ""}, // a new version, the same figures
		{12, 3, "2:stock.changed 3:stock.low", "low", "ok"},
		{3, 3, "4:stock.changed 5:stock.out", "out", "low"},
		{8, 3, "6:stock.changed 7:stock.back", "low", "out"},
		{40, 3, "8:stock.changed 9:stock.back", "ok", "low"},
		{2, 0, "10:stock.changed 11:stock.low", "low", "ok"},
	}
	seen := 0
	for i, s := range steps {
		apply(t, db, w, stockResult(fmt.Sprintf("s%d", i), "TEA", int64(i+1), s.safety, s.sellable))
		ms := outbox(t, db, "sku:TEA")
		if got := kinds(ms[seen:]); got != s.want {
			t.Fatalf("step %d (sellable %d, safety %d): messages %q, want %q", i, s.sellable, s.safety, got, s.want)
		}
		if s.want == "" {
			continue
		}
		seen = len(ms)
		d := data[outbound.StockData](t, ms[len(ms)-1-btoi(s.previous != "")])
		want := outbound.StockData{Version: int64(i + 1), SafetyStock: s.safety, Sellable: s.sellable + 100, Reserved: 1,
			AvailableToShip: max(0, s.sellable-s.safety), AsOf: "2026-12-02", Level: outbound.Level(max(0, s.sellable-s.safety), 10), Threshold: 10}
		if !reflect.DeepEqual(d, want) {
			t.Errorf("step %d: stock.changed %+v, want %+v", i, d, want)
		}
		if s.previous != "" {
			l := data[outbound.StockLevelData](t, ms[len(ms)-1])
			if l.Level != s.level || l.Previous != s.previous || l.AvailableToShip != want.AvailableToShip {
				t.Errorf("step %d: level message %+v", i, l)
			}
		}
	}
}

// locatedResult is an applied warehouse result listing sku with one on-hand lot per
// location, of sellable[location] units.
func locatedResult(id, sku string, version int64, sellable map[string]int64) event.Result {
	r := event.Result{EventID: id, Entity: event.SKUEntityPrefix + sku, Seq: version, Type: event.InventoryAdjusted,
		Outcome: event.Applied, ProcessedAt: at()}
	s := event.SKU{SKU: sku, Version: version}
	for i, loc := range slices.Sorted(maps.Keys(sellable)) {
		l := event.Lot{LotID: "L-" + loc, Kind: stock.KindOnHand, Good: true, RegSeq: int64(i + 1), ValidFrom: "2026-01-01",
			ValidTo: "2027-12-31", Sellable: sellable[loc], Location: loc}
		if loc == event.DefaultLocation {
			l.Location = ""
		}
		s.Lots = append(s.Lots, l)
	}
	r.SKUs = []event.SKU{s}
	return r
}

// The network's figures count only the lots at enabled locations that ship; each
// location's stock has its own level messages. A store that does not ship running out
// sends its stock.location_out and no stock.out; the network is out when the last
// location that ships empties.
func TestStockPerLocation(t *testing.T) {
	db := testenv.Postgres(t)
	w := &outbound.Writer{LowStockThreshold: 2, Now: func() time.Time { return today }}
	if err := db.Exec(`INSERT INTO locations (location, kind, ships, enabled) VALUES
		('store-1', 'store', false, true), ('wh-2', 'warehouse', true, true), ('wh-3', 'warehouse', true, false)`).Error; err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name     string
		sellable map[string]int64
		want     string
		// network is the network's sellable after the step.
		network int64
		// locations are the locations of the step's stock.location_* messages, in order.
		locations []string
	}{
		{"every location stocked", map[string]int64{"default": 5, "wh-2": 5, "store-1": 5, "wh-3": 7}, "1:stock.changed", 10, nil},
		{"the store that does not ship empties", map[string]int64{"default": 5, "wh-2": 5, "store-1": 0, "wh-3": 7},
			"2:stock.changed 3:stock.location_out", 10, []string{"store-1"}},
		{"the default location empties", map[string]int64{"default": 0, "wh-2": 5, "store-1": 0, "wh-3": 7},
			"4:stock.changed 5:stock.location_out", 5, []string{"default"}},
		{"the last location that ships empties", map[string]int64{"default": 0, "wh-2": 0, "store-1": 0, "wh-3": 7},
			"6:stock.changed 7:stock.out 8:stock.location_out", 0, []string{"wh-2"}},
		{"the store is restocked", map[string]int64{"default": 0, "wh-2": 0, "store-1": 9, "wh-3": 7},
			"9:stock.changed 10:stock.location_back", 0, []string{"store-1"}},
	}
	seen := 0
	for i, s := range steps {
		apply(t, db, w, locatedResult(fmt.Sprintf("p%d", i), "TEA", int64(i+1), s.sellable))
		ms := outbox(t, db, "sku:TEA")
		if got := kinds(ms[seen:]); got != s.want {
			t.Fatalf("%s: messages %q, want %q", s.name, got, s.want)
		}
		step := ms[seen:]
		seen = len(ms)
		d := data[outbound.StockData](t, step[0])
		if d.Sellable != s.network || d.AvailableToShip != s.network || step[0].Location != "" {
			t.Errorf("%s: stock.changed tells the network %d sellable, %d available (location %q), want %d",
				s.name, d.Sellable, d.AvailableToShip, step[0].Location, s.network)
		}
		var got []outbound.LocationStock
		for _, loc := range []string{"default", "store-1", "wh-2", "wh-3"} {
			n := s.sellable[loc]
			got = append(got, outbound.LocationStock{Location: loc, Network: loc == "default" || loc == "wh-2",
				Sellable: n, AvailableToShip: n, Level: outbound.Level(n, 2)})
		}
		if !reflect.DeepEqual(d.Locations, got) {
			t.Errorf("%s: locations %+v, want %+v", s.name, d.Locations, got)
		}
		var locs []string
		for _, m := range step[1:] {
			if strings.HasPrefix(string(m.Kind), "stock.location_") {
				locs = append(locs, m.Location)
			} else if m.Location != "" {
				t.Errorf("%s: %s names location %q", s.name, m.Kind, m.Location)
			}
		}
		if !slices.Equal(locs, s.locations) {
			t.Errorf("%s: stock.location_* of %q, want %q", s.name, locs, s.locations)
		}
	}
}

// The stock levels gauge counts the SKUs low or out as last told, for the network and per
// described location, every location the shop has not described under one label.
func TestReadStockLevels(t *testing.T) {
	db := testenv.Postgres(t)
	w := &outbound.Writer{LowStockThreshold: 2, Now: func() time.Time { return today }}
	if err := db.Exec(`INSERT INTO locations (location, ships) VALUES ('wh-2', true)`).Error; err != nil {
		t.Fatal(err)
	}
	apply(t, db, w,
		locatedResult("a", "A", 1, map[string]int64{"default": 0, "wh-2": 1}),
		locatedResult("b", "B", 1, map[string]int64{"default": 0, "wh-2": 0, "nowhere-1": 5, "nowhere-2": 0}),
		locatedResult("c", "C", 1, map[string]int64{"default": 9}))
	got, err := outbound.ReadStockLevels(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(got, func(a, b outbound.StockLevel) int { return strings.Compare(a.Location+a.Level, b.Location+b.Level) })
	want := []outbound.StockLevel{
		{Location: "default", Level: "out", SKUs: 2},
		{Location: "wh-2", Level: "low", SKUs: 1},
		{Location: "wh-2", Level: "out", SKUs: 1},
		{Location: outbound.NetworkLabel, Level: "low", SKUs: 1},
		{Location: outbound.NetworkLabel, Level: "out", SKUs: 1},
		{Location: outbound.OtherLocationLabel, Level: "out", SKUs: 1},
	}
	if !slices.Equal(got, want) {
		t.Errorf("levels %+v\nwant %+v", got, want)
	}
}

// A shop whose every lot is at the default location, which ships, gets the messages it
// got before locations: no locations array, no per-location message.
func TestStockAtTheDefaultLocationAlone(t *testing.T) {
	db, w := testenv.Postgres(t), writer()
	apply(t, db, w, locatedResult("d1", "TEA", 1, map[string]int64{"default": 5}))
	apply(t, db, w, locatedResult("d2", "TEA", 2, map[string]int64{"default": 0}))
	ms := outbox(t, db, "sku:TEA")
	if got := kinds(ms); got != "1:stock.changed 2:stock.low 3:stock.changed 4:stock.out" {
		t.Fatalf("messages %q", got)
	}
	if d := data[outbound.StockData](t, ms[0]); d.Locations != nil || d.Sellable != 5 {
		t.Errorf("stock.changed %+v", d)
	}
	// A default location the shop set not to ship counts toward nothing.
	if err := db.Exec(`UPDATE locations SET ships = false WHERE location = 'default'`).Error; err != nil {
		t.Fatal(err)
	}
	apply(t, db, w, locatedResult("d3", "TEA", 3, map[string]int64{"default": 30}))
	ms = outbox(t, db, "sku:TEA")
	if got := kinds(ms[4:]); got != "5:stock.changed" {
		t.Fatalf("after the default location stops shipping: %q", got)
	}
	d := data[outbound.StockData](t, ms[4])
	want := []outbound.LocationStock{{Location: "default", Sellable: 30, AvailableToShip: 30, Level: outbound.LevelOK}}
	if d.Sellable != 0 || d.AvailableToShip != 0 || !reflect.DeepEqual(d.Locations, want) {
		t.Errorf("after the default location stops shipping: %+v", d)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestStockThresholdPerSKU(t *testing.T) {
	db, w := testenv.Postgres(t), writer()
	apply(t, db, w, stockResult("a1", "A", 1, 0, 50), stockResult("b1", "B", 1, 0, 50))
	if err := db.Exec(`UPDATE skus SET low_stock_threshold = 60 WHERE sku = 'B'`).Error; err != nil {
		t.Fatal(err)
	}
	// The threshold takes effect at the SKU's next move.
	apply(t, db, w, stockResult("a2", "A", 2, 0, 49), stockResult("b2", "B", 2, 0, 49))
	if got := kinds(outbox(t, db, "sku:A")); got != "1:stock.changed 2:stock.changed" {
		t.Errorf("A (default threshold 10): %s", got)
	}
	ms := outbox(t, db, "sku:B")
	if got := kinds(ms); got != "1:stock.changed 2:stock.changed 3:stock.low" {
		t.Fatalf("B (threshold 60): %s", got)
	}
	if d := data[outbound.StockLevelData](t, ms[2]); d.Threshold != 60 || d.AvailableToShip != 49 {
		t.Errorf("B: %+v", d)
	}
}

// A batch whose transaction rolls back leaves no outbox row, and numbers nothing.
func TestWriteRollsBackWithItsBatch(t *testing.T) {
	db, w := testenv.Postgres(t), writer()
	injected := errors.New("injected after Write")
	err := db.Transaction(func(tx *gorm.DB) error {
		n, err := w.Write(tx, []event.Result{{EventID: "r1", Entity: "LC-1", LCID: "LC-1", Seq: 1, Type: event.OrderPlaced,
			Outcome: event.Rejected, Reason: "ERR_SHORTAGE", ProcessedAt: at()}})
		if err != nil || n != 1 {
			t.Fatalf("Write: %d, %v", n, err)
		}
		return injected
	})
	if !errors.Is(err, injected) {
		t.Fatal(err)
	}
	var rows, seqs int64
	if err := db.Raw(`SELECT (SELECT count(*) FROM outbox), (SELECT coalesce(sum(seq), 0) FROM outbox_entities)`).Row().Scan(&rows, &seqs); err != nil {
		t.Fatal(err)
	}
	if rows != 0 || seqs != 0 {
		t.Errorf("after the rollback: %d outbox rows, seqs summing to %d", rows, seqs)
	}
}

// A poison result sends the batch down the savepoint path: the first attempt's messages
// roll back with it, and each kept result's are written once.
func TestPoisonBatchWritesTheKeptResultsOnce(t *testing.T) {
	db, w := testenv.Postgres(t), writer()
	poison := event.Result{EventID: "bad", Entity: "LC-X", LCID: "LC-X", Seq: 1, Type: event.OrderPlaced,
		Outcome: event.Applied, Order: &event.OrderSnapshot{LCID: "LC-X", Status: "lost"}, ProcessedAt: at()}
	rep := apply(t, db, w, order("a", "LC-A", 1, event.OrderPlaced, event.StatusPlaced, "", false), poison,
		stockResult("s", "TEA", 1, 0, 5), order("b", "LC-B", 1, event.OrderPlaced, event.StatusPlaced, "", false))
	if !rep.Isolated || rep.Count(persist.Poison) != 1 || rep.Outbound != 4 {
		t.Fatalf("isolated %v, poison %d, outbound %d", rep.Isolated, rep.Count(persist.Poison), rep.Outbound)
	}
	want := "1:order.status_changed 1:order.status_changed 1:stock.changed 2:stock.low"
	if got := kinds(outbox(t, db, "")); got != want {
		t.Errorf("outbox: %s, want %s", got, want)
	}
}

// Batches of the same entities, applied at once from several goroutines, number each
// entity's messages 1..N with no gap and tell each change against the one before.
func TestConcurrentBatchesNumberWithoutGaps(t *testing.T) {
	db, w := testenv.Postgres(t), writer()
	const workers, batches = 8, 50
	lcids, skus := []string{"LC-1", "LC-2", "LC-3"}, []string{"A", "B"}
	var seq atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for g := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rnd := rand.New(rand.NewPCG(uint64(g), 1))
			for b := range batches {
				var rs []event.Result
				for _, lcid := range lcids {
					if rnd.IntN(2) == 0 {
						continue
					}
					id := fmt.Sprintf("g%d-b%d-%s", g, b, lcid)
					if rnd.IntN(4) == 0 {
						rs = append(rs, event.Result{EventID: id, Entity: lcid, LCID: lcid, Seq: seq.Add(1), Type: event.OrderLinesChanged,
							Outcome: event.Rejected, Reason: "ERR_SHORTAGE", ProcessedAt: at()})
						continue
					}
					status := []string{event.StatusPlaced, event.StatusCancelled}[rnd.IntN(2)]
					rs = append(rs, order(id, lcid, seq.Add(1), event.OrderLinesChanged, status, "", rnd.IntN(2) == 0))
				}
				for _, sku := range skus {
					if rnd.IntN(2) == 0 {
						rs = append(rs, stockResult(fmt.Sprintf("g%d-b%d-%s", g, b, sku), sku, seq.Add(1), 0, int64(rnd.IntN(3)*8)))
					}
				}
				rep, err := persist.Apply(context.Background(), db, rs, persist.WithOutbound(w))
				if err == nil && rep.Count(persist.Applied) != len(rs) {
					err = fmt.Errorf("batch g%d-b%d: %d of %d applied: %+v", g, b, rep.Count(persist.Applied), len(rs), rep.Results)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	ms := outbox(t, db, "")
	byEntity := map[string][]outbound.Message{}
	for _, m := range ms {
		byEntity[m.Entity] = append(byEntity[m.Entity], m)
	}
	for entity, ms := range byEntity {
		var last *string
		var lastLevel = outbound.LevelOK
		for i, m := range ms {
			if m.Seq != int64(i+1) {
				t.Fatalf("%s: message %d has seq %d: %s", entity, i+1, m.Seq, kinds(ms))
			}
			switch m.Kind {
			case outbound.OrderStatusChanged:
				d := data[outbound.OrderStatusData](t, m)
				if (last == nil) != (d.From == nil) || last != nil && *last != *d.From || len(d.Changed) == 0 {
					t.Errorf("%s seq %d: from %v after %v, changed %v", entity, m.Seq, d.From, last, d.Changed)
				}
				last = &d.To
			case outbound.StockLow, outbound.StockOut, outbound.StockBack:
				d := data[outbound.StockLevelData](t, m)
				if d.Previous != lastLevel || d.Previous == d.Level {
					t.Errorf("%s seq %d: %s from %s after %s", entity, m.Seq, m.Kind, d.Previous, lastLevel)
				}
				lastLevel = d.Level
			}
		}
		var seq int64
		if err := db.Raw(`SELECT seq FROM outbox_entities WHERE entity = ?`, entity).Row().Scan(&seq); err != nil || seq != int64(len(ms)) {
			t.Errorf("%s: outbox_entities.seq %d (%v), %d messages", entity, seq, err, len(ms))
		}
	}
	// The last status told is the order's.
	for _, lcid := range lcids {
		var status string
		if err := db.Raw(`SELECT status FROM orders WHERE lcid = ?`, lcid).Row().Scan(&status); err != nil {
			t.Fatal(err)
		}
		var last string
		for _, m := range byEntity[lcid] {
			if m.Kind == outbound.OrderStatusChanged {
				last = data[outbound.OrderStatusData](t, m).To
			}
		}
		if last != status {
			t.Errorf("%s: last status told %q, the order's %q", lcid, last, status)
		}
	}
	if len(ms) < workers*batches/2 {
		t.Errorf("only %d messages", len(ms))
	}
}

// available_to_ship is what the ledger's availability answers for an order to ship on
// as_of, over the same lots (loaded into Redis from PostgreSQL).
func TestAvailableToShipAgreesWithTheLedger(t *testing.T) {
	db, w := testenv.Postgres(t), writer()
	rc, prefix := testenv.Redis(t)
	led, err := ledger.New(ledger.Config{Redis: rc, Prefix: prefix, Loader: inventorydb.PGLoader{DB: db}})
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range []struct {
		sku              string
		safety, sellable int64
	}{{"AV-1", 0, 30}, {"AV-2", 4, 30}, {"AV-3", 40, 30}, {"AV-4", 0, 0}} {
		apply(t, db, w, stockResult(fmt.Sprintf("av%d", i), c.sku, 1, c.safety, c.sellable))
		ms := outbox(t, db, event.SKUEntityPrefix+c.sku)
		if len(ms) == 0 || ms[0].Kind != outbound.StockChanged {
			t.Fatalf("%s: messages %s", c.sku, kinds(ms))
		}
		d := data[outbound.StockData](t, ms[0])
		a, err := led.Availability(context.Background(), ledger.AvailabilityRequest{SKU: c.sku, TargetDate: d.AsOf, Mode: stock.ModeShip})
		if err != nil {
			t.Fatal(err)
		}
		if d.AvailableToShip != a.Available || d.SafetyStock != a.SafetyStock {
			t.Errorf("%s: available_to_ship %d (safety stock %d), the ledger's %d (%d): %+v", c.sku,
				d.AvailableToShip, d.SafetyStock, a.Available, a.SafetyStock, a.Candidates)
		}
	}
}

func TestLevel(t *testing.T) {
	for _, c := range []struct {
		available, threshold int64
		want                 string
	}{{0, 10, "out"}, {0, 0, "out"}, {1, 10, "low"}, {10, 10, "low"}, {11, 10, "ok"}, {1, 0, "ok"}} {
		if got := outbound.Level(c.available, c.threshold); got != c.want {
			t.Errorf("Level(%d, %d) = %s, want %s", c.available, c.threshold, got, c.want)
		}
	}
}

// A location's own safety stock keeps its units out of the location's available-to-ship
// and of the network's, as the ledger's availability counts them.
func TestAvailableToShipUnderLocationSafetyStock(t *testing.T) {
	db := testenv.Postgres(t)
	w := &outbound.Writer{LowStockThreshold: 2, Now: func() time.Time { return today }}
	if err := db.Exec(`INSERT INTO locations (location, kind, ships, enabled) VALUES ('wh-2', 'warehouse', true, true)`).Error; err != nil {
		t.Fatal(err)
	}
	if err := db.Exec(`INSERT INTO skus (sku, safety_stock, version) VALUES ('TEA', 1, 0)`).Error; err != nil {
		t.Fatal(err)
	}
	if err := db.Exec(`INSERT INTO sku_location_safety (sku, location, safety_stock, version) VALUES ('TEA', 'wh-2', 4, 0)`).Error; err != nil {
		t.Fatal(err)
	}
	apply(t, db, w, locatedResult("p", "TEA", 1, map[string]int64{"default": 5, "wh-2": 5}))
	ms := outbox(t, db, "sku:TEA")
	if len(ms) == 0 || ms[0].Kind != outbound.StockChanged {
		t.Fatalf("messages %s", kinds(ms))
	}
	d := data[outbound.StockData](t, ms[0])
	want := []outbound.LocationStock{
		{Location: "default", Network: true, Sellable: 5, AvailableToShip: 4, Level: outbound.Level(4, 2)},
		{Location: "wh-2", Network: true, Sellable: 5, AvailableToShip: 1, Level: outbound.Level(1, 2)},
	}
	if d.AvailableToShip != 6 || !reflect.DeepEqual(d.Locations, want) {
		t.Fatalf("available_to_ship %d, locations %+v; want 6, %+v", d.AvailableToShip, d.Locations, want)
	}
}

// The waiting lines' demand (backorders) is held back from available_to_ship, the
// network's and each location's, as the ledger's availability holds its queue back.
func TestAvailableToShipHoldsTheWaitingDemandBack(t *testing.T) {
	db, w := testenv.Postgres(t), writer()
	rc, prefix := testenv.Redis(t)
	led, err := ledger.New(ledger.Config{Redis: rc, Prefix: prefix, Loader: inventorydb.PGLoader{DB: db}})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Exec(`INSERT INTO backorders (sku, holder, line, want, mode, target_date, class, seq, queued_at, version)
		VALUES ('AW-1', 'LC-1', '1', 7, 'ship', '2026-12-01', 0, 1, 0, 1), ('AW-1', 'LC-2', '1', 0, 'ship', '2026-12-01', 0, 2, 0, 1)`).Error; err != nil {
		t.Fatal(err)
	}
	apply(t, db, w, stockResult("aw", "AW-1", 2, 4, 30))
	ms := outbox(t, db, event.SKUEntityPrefix+"AW-1")
	if len(ms) == 0 || ms[0].Kind != outbound.StockChanged {
		t.Fatalf("messages %s", kinds(ms))
	}
	d := data[outbound.StockData](t, ms[0])
	a, err := led.Availability(context.Background(), ledger.AvailabilityRequest{SKU: "AW-1", TargetDate: d.AsOf, Mode: stock.ModeShip})
	if err != nil {
		t.Fatal(err)
	}
	if d.Waiting != 7 || d.AvailableToShip != 30-4-7 || d.AvailableToShip != a.Available || a.Waiting != d.Waiting {
		t.Errorf("available_to_ship %d, waiting %d; the ledger's %d, waiting %d; want 19 and 7", d.AvailableToShip, d.Waiting, a.Available, a.Waiting)
	}
}
