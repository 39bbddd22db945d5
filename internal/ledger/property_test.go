package ledger

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/testenv"
)

var (
	flagSeqs = flag.Int("ledger.seqs", 2000, "random operation sequences in TestScriptMatchesModel")
	flagOps  = flag.Int("ledger.ops", 25, "operations per random sequence")
)

// genStep is one generated operation: exactly one request field is set.
type genStep struct {
	name     string
	sku      string
	alloc    *stock.AllocateRequest
	release  *stock.ReleaseRequest
	lots     *stock.LotsRequest
	receive  *stock.ReceiveRequest
	hold     *stock.HoldRequest
	recall   *stock.RecallRequest
	ret      *stock.ReturnRequest
	undo     *stock.UndoRequest
	change   *stock.ChangeRequest
	moveTo   *stock.MoveAllocationRequest
	regSKU   *stock.RegisterSKURequest
	regLot   *stock.RegisterLotRequest
	ss       *stock.SafetyStockRequest
	adjust   *stock.AdjustRequest
	transfer *stock.TransferRequest
	treceive *stock.TransferReceiveRequest
	tcancel  *stock.TransferCancelRequest
	backord  *stock.BackorderRequest
	dequeue  *stock.DequeueRequest
	fill     *stock.FillRequest
	snapshot bool
}

func (s genStep) String() string {
	for _, v := range []any{s.alloc, s.release, s.lots, s.receive, s.hold, s.recall, s.ret, s.undo, s.change, s.moveTo, s.regSKU, s.regLot, s.ss, s.adjust, s.transfer, s.treceive, s.tcancel, s.backord, s.dequeue, s.fill} {
		if !reflect.ValueOf(v).IsNil() {
			return fmt.Sprintf("%s %+v", s.name, reflect.ValueOf(v).Elem().Interface())
		}
	}
	return s.name + " " + s.sku
}

var genDates = []string{"2026-11-30", "2026-12-01", "2026-12-05", "2026-12-10", "2026-12-11"}

// genSequence draws SKUs and a sequence of operations on them from rng: several SKUs,
// lots of both kinds with tied best-befores, defective lots, validity periods around
// the target dates, replays of earlier op ids, unknown lots and SKUs, invalid requests.
func mapHas(m map[string]int, k string) bool {
	_, ok := m[k]
	return ok
}

// genRoute draws a route over the generator's locations (the default, wh-2, store-1)
// with random settings, strategies, ship_to, a pinned location and no_split; sometimes an
// invalid one.
func genRoute(rng *rand.Rand) *stock.Route {
	r := &stock.Route{NoSplit: rng.IntN(3) == 0}
	for _, id := range []string{stock.DefaultLocation, "wh-2", "store-1"} {
		if rng.IntN(8) == 0 {
			continue // unknown to the shop: not eligible
		}
		l := stock.Location{ID: id, Kind: stock.LocationWarehouse, Rank: rng.IntN(3), Ships: rng.IntN(4) != 0, Enabled: rng.IntN(6) != 0}
		if rng.IntN(3) != 0 {
			lat, lon := float64(rng.IntN(180)-90), float64(rng.IntN(360)-180)
			l.Lat, l.Lon = &lat, &lon
		}
		r.Locations = append(r.Locations, l)
	}
	all := []stock.Strategy{stock.StrategyRanked, stock.StrategyClosest, stock.StrategyFEFONetwork, stock.StrategyPinned, stock.StrategyFewestSplits}
	rng.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	r.Strategies = all[:rng.IntN(len(all)+1)]
	if slices.Contains(r.Strategies, stock.StrategyClosest) || rng.IntN(4) == 0 {
		r.ShipTo = &stock.Coordinates{Lat: float64(rng.IntN(180) - 90), Lon: float64(rng.IntN(360) - 180)}
	}
	if slices.Contains(r.Strategies, stock.StrategyPinned) || rng.IntN(6) == 0 {
		r.Pinned = []string{stock.DefaultLocation, "wh-2", "store-1"}[rng.IntN(3)]
	}
	if slices.Contains(r.Strategies, stock.StrategyFewestSplits) || rng.IntN(30) == 0 {
		// A plan (invalid without fewest_splits), sometimes naming a location the shop lacks.
		for _, id := range []string{stock.DefaultLocation, "wh-2", "store-1", "gone"} {
			if rng.IntN(2) == 0 {
				r.Plan = append(r.Plan, id)
			}
		}
		rng.Shuffle(len(r.Plan), func(i, j int) { r.Plan[i], r.Plan[j] = r.Plan[j], r.Plan[i] })
	}
	if rng.IntN(30) == 0 {
		r.ShipTo = nil // invalid with closest
		r.Strategies = append(r.Strategies, stock.StrategyClosest)
	}
	return r
}

// location is the location a lot operation names ("" for none, and for every other
// operation): every lot it moves must be stored there.
func (s genStep) location() string {
	switch {
	case s.receive != nil:
		return s.receive.Location
	case s.hold != nil:
		return s.hold.Location
	case s.recall != nil:
		return s.recall.Location
	case s.adjust != nil:
		return s.adjust.Location
	}
	return ""
}

// pick2 draws one of xs.
func pick2(rng *rand.Rand, xs ...int) int { return xs[rng.IntN(len(xs))] }

func genSequence(rng *rand.Rand, nOps int) ([]stock.SKU, []genStep) {
	pick := func(xs ...string) string { return xs[rng.IntN(len(xs))] }
	var skus []stock.SKU
	for i := range 1 + rng.IntN(3) {
		s := stock.SKU{SKU: fmt.Sprintf("S%d", i), SafetyStock: int64(rng.IntN(4)) * int64(rng.IntN(3)), Version: int64(rng.IntN(3)), Lots: []stock.Lot{}}
		nLots := rng.IntN(7)
		if rng.IntN(16) == 0 {
			// Enough lots for several index chunks, and a safety stock that makes ship
			// allocations read across them.
			nLots = 20 + rng.IntN(80)
			s.SafetyStock = int64(rng.IntN(150))
		}
		if rng.IntN(3) == 0 {
			// Locations' own safety stocks, which cap what a ship allocation takes there.
			s.LocationSafety = map[string]int64{}
			for _, l := range []string{stock.DefaultLocation, "wh-2", "store-1"} {
				if rng.IntN(2) == 0 {
					s.LocationSafety[l] = 1 + int64(rng.IntN(6))
				}
			}
			if len(s.LocationSafety) == 0 {
				s.LocationSafety = nil
			}
		}
		regs := rng.Perm(200)
		for j := range nLots {
			l := stock.Lot{
				LotID: fmt.Sprintf("L%d", j), Kind: pick(stock.KindOnHand, stock.KindOnHand, stock.KindPlanned),
				Good: rng.IntN(8) != 0, BestBefore: pick("", "2027-01-01", "2027-01-01", "2027-02-01", "2026-12-15"),
				RegSeq:    int64(regs[j]),
				ArrivesAt: pick("", "2026-12-03"),
				ValidFrom: pick(stock.MinDate, stock.MinDate, "2026-12-01", "2026-12-05"),
				ValidTo:   pick(stock.MaxDate, stock.MaxDate, "2026-12-05", "2026-12-10"),
				Sellable:  int64(rng.IntN(10)), Reserved: int64(rng.IntN(4)), Allocated: int64(rng.IntN(4)),
				Hidden: int64(rng.IntN(3)), Shipped: int64(rng.IntN(3)),
			}
			if rng.IntN(20) == 0 {
				l.RegSeq = stock.MaxRegSeq - int64(j)
			}
			l.Location = pick("", "", "wh-2", "store-1")
			if l.ValidFrom > l.ValidTo {
				l.ValidFrom, l.ValidTo = l.ValidTo, l.ValidFrom
			}
			s.Lots = append(s.Lots, l)
		}
		skus = append(skus, s)
	}
	// Lots registered by the sequence, per SKU, so later steps name them too; S9 is in
	// no loader, S8 only after the sequence registers it.
	added := map[string][]stock.Lot{}
	skuOf := func() (string, []stock.Lot) {
		switch rng.IntN(30) {
		case 0:
			return "S9", nil // not in the loader
		case 1, 2:
			return "S8", added["S8"]
		}
		s := skus[rng.IntN(len(skus))]
		return s.SKU, append(slices.Clone(s.Lots), added[s.SKU]...)
	}
	lotOf := func(lots []stock.Lot) string {
		if len(lots) == 0 || rng.IntN(25) == 0 {
			return "LX"
		}
		return lots[rng.IntN(len(lots))].LotID
	}
	holderOf := func() string { return pick("", "o1", "o2", "o3") }
	// locOf is the location a lot operation names: mostly none, the lots' locations, the
	// default's id, sometimes an invalid one.
	locOf := func() string {
		if rng.IntN(60) == 0 {
			return "wh 2" // invalid
		}
		return pick("", "", "", stock.DefaultLocation, "wh-2", "store-1")
	}
	qty := func() int64 {
		if rng.IntN(60) == 0 {
			return int64(rng.IntN(2)) - 1 // 0 or -1: invalid
		}
		if rng.IntN(12) == 0 {
			return 1 + int64(rng.IntN(200))
		}
		return 1 + int64(rng.IntN(6))
	}
	lotQtys := func(lots []stock.Lot) []stock.LotQty {
		out := []stock.LotQty{}
		for range 1 + rng.IntN(3) {
			out = append(out, stock.LotQty{LotID: lotOf(lots), Qty: qty()})
		}
		return out
	}
	// heldIn draws 1-2 quantities that lots hold in bucket at the start (Sellable, Reserved,
	// Allocated), so that a change's releases and undos often apply; lotQtys when none does.
	heldIn := func(lots []stock.Lot, bucket string) []stock.LotQty {
		var have []stock.Lot
		for _, l := range lots {
			if *stock.BucketOf(&l, bucket) > 0 {
				have = append(have, l)
			}
		}
		if len(have) == 0 {
			return lotQtys(lots)
		}
		out := []stock.LotQty{}
		for range 1 + rng.IntN(2) {
			l := have[rng.IntN(len(have))]
			out = append(out, stock.LotQty{LotID: l.LotID, Qty: 1 + rng.Int64N(*stock.BucketOf(&l, bucket))})
		}
		return out
	}
	// transfers are the transfer requests drawn so far, so that receipts, cancels and
	// requests name them again, mostly on their SKU.
	var transfers []*stock.TransferRequest
	earlier := func(sku string) (string, string, int64) {
		if len(transfers) == 0 || rng.IntN(12) == 0 {
			return sku, "TRX", 1 + int64(rng.IntN(6))
		}
		t := transfers[rng.IntN(len(transfers))]
		if rng.IntN(8) == 0 {
			return sku, t.TransferID, t.Qty
		}
		return t.SKU, t.TransferID, t.Qty
	}
	var steps []genStep
	for i := range nOps {
		op := fmt.Sprintf("op%d", i)
		sku, lots := skuOf()
		if rng.IntN(100) < 12 {
			// Transfers: requests between the locations (sometimes under a taken id, to
			// the source itself, or with junban's mark), receipts counting what was sent,
			// less, or more, cancels.
			var st genStep
			switch k := rng.IntN(10); {
			case k < 5:
				locs := []string{stock.DefaultLocation, "wh-2", "store-1"}
				rng.Shuffle(len(locs), func(i, j int) { locs[i], locs[j] = locs[j], locs[i] })
				t := &stock.TransferRequest{OpID: op, SKU: sku, TransferID: fmt.Sprintf("TR%d", i), From: locs[0], To: locs[1], Qty: 1 + int64(rng.IntN(4)), ArrivesAt: pick("2026-12-04", "2026-12-08")}
				switch rng.IntN(20) {
				case 0, 1:
					_, t.TransferID, _ = earlier(sku)
				case 2:
					t.TransferID = "T~1" // invalid
				case 3:
					t.To = t.From // invalid
				case 4:
					t.Qty = qty()
				}
				transfers = append(transfers, t)
				st = genStep{name: "transfer", transfer: t}
			case k < 8:
				s, id, q := earlier(sku)
				sku = s
				q = max(1, q-int64(rng.IntN(3))+int64(rng.IntN(8)/7))
				if rng.IntN(30) == 0 {
					q = 0 // invalid
				}
				st = genStep{name: "transfer_receive", treceive: &stock.TransferReceiveRequest{OpID: op, SKU: sku, TransferID: id, Qty: q}}
			default:
				s, id, _ := earlier(sku)
				sku = s
				st = genStep{name: "transfer_cancel", tcancel: &stock.TransferCancelRequest{OpID: op, SKU: sku, TransferID: id}}
			}
			st.sku = sku
			steps = append(steps, st)
			continue
		}
		if rng.IntN(100) < 14 {
			// Waiting demand: backorders of the orders' lines (sometimes of a line queued
			// already, in a class, or invalid), dequeues of some or all, fills.
			var st genStep
			who, line := pick("o1", "o2", "o3"), pick("1", "2")
			switch k := rng.IntN(20); {
			case k < 12:
				b := &stock.BackorderRequest{OpID: op, SKU: sku, Holder: who, Line: line, Qty: qty(),
					TargetDate: pick(genDates...), Mode: stock.Mode(pick("ship", "reserve")), Class: pick2(rng, 0, 0, 0, 1, 2), QueuedAt: 1_700_000_000_000 + int64(i)}
				switch rng.IntN(40) {
				case 0:
					b.Holder = "" // invalid
				case 1:
					b.Class = stock.MaxClass + 1 // invalid
				case 2:
					b.Line = "l\t1" // invalid
				}
				st = genStep{name: "backorder", backord: b}
			case k < 17:
				d := &stock.DequeueRequest{OpID: op, SKU: sku, Holder: who, Line: line}
				if rng.IntN(2) == 0 {
					d.Qty = qty()
				}
				st = genStep{name: "dequeue", dequeue: d}
			default:
				st = genStep{name: "fill", fill: &stock.FillRequest{OpID: op, SKU: sku}}
			}
			st.sku = sku
			steps = append(steps, st)
			continue
		}
		// An order's operations sometimes carry a legacy op id: an earlier step's (whose
		// record, if that step left one on this SKU, is replayed), one never used, or an
		// invalid one.
		var legacy string
		switch k := rng.IntN(40); {
		case k < 8 && i > 0:
			legacy = fmt.Sprintf("op%d", rng.IntN(i))
		case k < 10:
			legacy = "old" + op
		case k == 10:
			legacy = "old\x01"
		}
		var st genStep
		switch k := rng.IntN(100); {
		case k < 10 && len(steps) > 0:
			// Replay an earlier op id, sometimes with other arguments: the same request gets
			// the first answer, another is refused (ErrOpConflict).
			st = steps[rng.IntN(len(steps))]
			if st.alloc != nil && rng.IntN(2) == 0 {
				a := *st.alloc
				a.Qty = 1 + int64(rng.IntN(6))
				st.alloc = &a
			}
			if st.change != nil && rng.IntN(2) == 0 {
				c := *st.change
				c.Release, c.Allocate = nil, []int64{1 + int64(rng.IntN(6))}
				st.change = &c
			}
			st.name = "replay " + strings.TrimPrefix(st.name, "replay ")
			sku = st.sku
		case k < 33:
			// An order's change on the SKU: releases of its lines, then allocations that
			// may take what the releases gave back.
			c := &stock.ChangeRequest{OpID: op, LegacyOpID: legacy, SKU: sku, TargetDate: pick(genDates...), Mode: stock.Mode(pick("ship", "reserve")), Holder: holderOf()}
			switch rng.IntN(5) {
			case 0:
			case 1:
				c.Release = lotQtys(lots)
			default:
				c.Release = heldIn(lots, stock.ModeBucket(c.Mode))
			}
			for range rng.IntN(4) {
				c.Allocate = append(c.Allocate, qty())
			}
			if len(c.Release) == 0 && len(c.Allocate) == 0 && rng.IntN(10) != 0 {
				c.Allocate = []int64{qty()}
			}
			if rng.IntN(3) == 0 {
				c.Route = genRoute(rng)
			}
			st = genStep{name: "change", change: c}
		case k < 37:
			// A line's allocation moved to one location: releases of its lots, then their
			// sum allocated there alone.
			m := &stock.MoveAllocationRequest{OpID: op, SKU: sku, TargetDate: pick(genDates...), Mode: stock.Mode(pick("ship", "reserve")),
				To: pick(stock.DefaultLocation, "wh-2", "store-1"), Holder: holderOf()}
			switch rng.IntN(6) {
			case 0:
				m.Release = lotQtys(lots)
			default:
				m.Release = heldIn(lots, stock.ModeBucket(m.Mode))
			}
			if rng.IntN(40) == 0 {
				m.To = pick("", "wh 2") // invalid
			}
			st = genStep{name: "move_alloc", moveTo: m}
		case k < 45:
			st = genStep{name: "allocate", alloc: &stock.AllocateRequest{OpID: op, LegacyOpID: legacy, SKU: sku, Qty: qty(),
				TargetDate: pick(genDates...), Mode: stock.Mode(pick("ship", "reserve")), Holder: holderOf()}}
			if rng.IntN(40) == 0 {
				st.alloc.Mode = "both" // invalid
			}
			if rng.IntN(3) == 0 {
				st.alloc.Route = genRoute(rng)
			}
		case k < 55:
			st = genStep{name: "release", release: &stock.ReleaseRequest{OpID: op, LegacyOpID: legacy, SKU: sku, From: pick(stock.Reserved, stock.Allocated), Lots: lotQtys(lots), Holder: holderOf()}}
		case k < 62:
			st = genStep{name: "confirm", lots: &stock.LotsRequest{OpID: op, LegacyOpID: legacy, SKU: sku, Lots: lotQtys(lots), Holder: holderOf()}}
		case k < 68:
			st = genStep{name: "ship", lots: &stock.LotsRequest{OpID: op, LegacyOpID: legacy, SKU: sku, Lots: lotQtys(lots), Holder: holderOf()}}
		case k < 75:
			q := int64(0)
			if rng.IntN(2) == 0 {
				q = qty()
			}
			st = genStep{name: "receive", receive: &stock.ReceiveRequest{OpID: op, SKU: sku, LotID: lotOf(lots),
				BestBefore: pick("", "2026-12-20", "2027-01-01", "2027-03-01"), Qty: q, Location: locOf()}}
		case k < 78:
			st = genStep{name: pick("hold", "release_hold", "damage"), hold: &stock.HoldRequest{OpID: op, SKU: sku, LotID: lotOf(lots), Qty: qty(), Reason: pick("count", "qa", ""), Location: locOf()}}
		case k < 80:
			st = genStep{name: "recall", recall: &stock.RecallRequest{OpID: op, SKU: sku, LotID: lotOf(lots), Reason: pick("supplier", ""), Location: locOf()}}
		case k < 83:
			st = genStep{name: "return", ret: &stock.ReturnRequest{OpID: op, LegacyOpID: legacy, SKU: sku, Lots: lotQtys(lots), Defective: rng.IntN(3) == 0}}
		case k < 85:
			from, to := pick(stock.Sellable, stock.Sellable, stock.Reserved, stock.Allocated, stock.Shipped), pick(stock.Reserved, stock.Allocated, stock.Sellable, stock.Shipped)
			st = genStep{name: "undo", undo: &stock.UndoRequest{OpID: op, LegacyOpID: legacy, SKU: sku, From: from, To: to, Lots: lotQtys(lots), Holder: holderOf()}}
			if rng.IntN(3) == 0 { // the undo of a change: its allocations, then its releases
				b := pick(stock.Reserved, stock.Allocated)
				st.undo.From, st.undo.To, st.undo.Lots, st.undo.Back = stock.Sellable, b, heldIn(lots, b), heldIn(lots, stock.Sellable)
				if rng.IntN(8) == 0 {
					st.undo.From = stock.Reserved // Allocated -> Reserved has no way back: refused
				}
			}
		case k < 87:
			n := stock.NewLot{LotID: fmt.Sprintf("N%d", i), Kind: pick(stock.KindOnHand, stock.KindPlanned), Good: rng.IntN(6) != 0,
				ArrivesAt: pick("", "2026-12-04"), ValidFrom: pick("", "", "2026-12-01"), ValidTo: pick("", "", "2026-12-10"), Sellable: qty(), Location: locOf()}
			if n.Kind == stock.KindOnHand {
				n.BestBefore = pick("", "2026-12-20", "2027-01-01")
			}
			if rng.IntN(10) == 0 && len(lots) > 0 {
				n.LotID = lotOf(lots) // exists
			}
			st = genStep{name: "register_lot", regLot: &stock.RegisterLotRequest{OpID: op, SKU: sku, Lot: n}}
			if sku != "S9" && n.Sellable > 0 {
				l := stock.Lot{LotID: n.LotID}
				added[sku] = append(added[sku], l)
			}
		case k < 88:
			ssku := sku
			if rng.IntN(2) == 0 {
				ssku = "S8"
			}
			st = genStep{name: "register_sku", regSKU: &stock.RegisterSKURequest{OpID: op, SKU: ssku, SafetyStock: int64(rng.IntN(5)) - int64(rng.IntN(40)/39)}}
			sku = ssku
		case k < 89:
			st = genStep{name: "safety_stock", ss: &stock.SafetyStockRequest{OpID: op, SKU: sku, SafetyStock: int64(rng.IntN(8)),
				Location: pick("", "", stock.DefaultLocation, "wh-2", "store-1")}}
		case k < 96:
			d := qty()
			if rng.IntN(2) == 0 {
				d = -d
			}
			st = genStep{name: "adjust", adjust: &stock.AdjustRequest{OpID: op, SKU: sku, LotID: lotOf(lots), Delta: d, Reason: pick("count", "damaged", ""), Location: locOf()}}
		default:
			st = genStep{name: "snapshot", snapshot: true}
		}
		if i > 0 && !st.snapshot && !strings.HasPrefix(st.name, "replay ") && rng.IntN(25) == 0 {
			// Another request under an earlier op id (of any kind, on any SKU).
			st.setOpID(fmt.Sprintf("op%d", rng.IntN(i)))
			st.name = "reuse " + st.name
		}
		st.sku = sku
		steps = append(steps, st)
	}
	return skus, steps
}

// setOpID gives the step's request another op id.
func (s *genStep) setOpID(id string) {
	for _, v := range []any{&s.alloc, &s.release, &s.lots, &s.receive, &s.hold, &s.recall, &s.ret, &s.undo, &s.change, &s.moveTo, &s.regSKU, &s.regLot, &s.ss, &s.adjust, &s.transfer, &s.treceive, &s.tcancel, &s.backord, &s.dequeue, &s.fill} {
		p := reflect.ValueOf(v).Elem()
		if p.IsNil() {
			continue
		}
		c := reflect.New(p.Type().Elem())
		c.Elem().Set(p.Elem())
		c.Elem().FieldByName("OpID").SetString(id)
		p.Set(c)
	}
}

func (s genStep) run(inv Inventory) (stock.Result, error) {
	name := strings.TrimPrefix(strings.TrimPrefix(s.name, "replay "), "reuse ")
	switch {
	case s.alloc != nil:
		return inv.Apply(ctx, *s.alloc)
	case s.release != nil:
		return inv.Apply(ctx, *s.release)
	case s.lots != nil && name == "ship":
		return inv.Apply(ctx, stock.ShipRequest(*s.lots))
	case s.lots != nil:
		return inv.Apply(ctx, stock.ConfirmRequest(*s.lots))
	case s.receive != nil:
		return inv.Apply(ctx, *s.receive)
	case s.adjust != nil:
		return inv.Apply(ctx, *s.adjust)
	case s.hold != nil && name == "hold":
		return inv.Apply(ctx, *s.hold)
	case s.hold != nil && name == "release_hold":
		return inv.Apply(ctx, stock.ReleaseHoldRequest(*s.hold))
	case s.hold != nil:
		return inv.Apply(ctx, stock.DamageRequest(*s.hold))
	case s.recall != nil:
		return inv.Apply(ctx, *s.recall)
	case s.ret != nil:
		return inv.Apply(ctx, *s.ret)
	case s.undo != nil:
		return inv.Apply(ctx, *s.undo)
	case s.change != nil:
		return inv.Apply(ctx, *s.change)
	case s.moveTo != nil:
		return inv.Apply(ctx, *s.moveTo)
	case s.regSKU != nil:
		return inv.Apply(ctx, *s.regSKU)
	case s.regLot != nil:
		return inv.Apply(ctx, *s.regLot)
	case s.ss != nil:
		return inv.Apply(ctx, *s.ss)
	case s.transfer != nil:
		return inv.Apply(ctx, *s.transfer)
	case s.treceive != nil:
		return inv.Apply(ctx, *s.treceive)
	case s.tcancel != nil:
		return inv.Apply(ctx, *s.tcancel)
	case s.backord != nil:
		return inv.Apply(ctx, *s.backord)
	case s.dequeue != nil:
		return inv.Apply(ctx, *s.dequeue)
	case s.fill != nil:
		return inv.Apply(ctx, *s.fill)
	}
	return stock.Result{}, nil
}

// checkSequence runs steps against l and a fresh Model and returns the first
// disagreement or broken invariant.
func checkSequence(l *Ledger, skus []stock.SKU, steps []genStep) error {
	m := stock.NewModel(newMemLoader(skus...))
	snaps := map[string]stock.SKU{}
	queues := map[string][]stock.QueueEntry{}
	for i, st := range steps {
		if st.snapshot {
			continue
		}
		rr, rerr := st.run(l)
		mr, merr := st.run(m)
		where := fmt.Sprintf("step %d (%v)", i, st)
		if stock.Reason(rerr) != stock.Reason(merr) {
			return fmt.Errorf("%s: redis error %v, model error %v", where, rerr, merr)
		}
		if stock.Reason(rerr) == "ERR_INTERNAL" {
			return fmt.Errorf("%s: %v", where, rerr)
		}
		if !reflect.DeepEqual(normal(rr), normal(mr)) {
			return fmt.Errorf("%s: results differ\nredis %+v\nmodel %+v", where, rr, mr)
		}
		// One read gives the state and the index chunks.
		h, err := l.rc.HGetAll(ctx, Key(l.prefix, st.sku)).Result()
		if err != nil {
			return err
		}
		var rs stock.SKU
		var rserr error
		if len(h) == 0 {
			rserr = stock.ErrNotLoaded
		} else if rs, err = decodeHash(st.sku, h); err != nil {
			return err
		}
		ms, mserr := m.Snapshot(ctx, st.sku)
		if stock.Reason(rserr) != stock.Reason(mserr) {
			return fmt.Errorf("%s: snapshot errors %v / %v", where, rserr, mserr)
		}
		if rserr != nil {
			continue
		}
		if !reflect.DeepEqual(rs, ms) {
			return fmt.Errorf("%s: states differ\nredis %+v\nmodel %+v", where, rs, ms)
		}
		// Who holds what: the script's holder hashes and the model's.
		for _, lt := range rs.Lots {
			hh, err := l.rc.HGetAll(ctx, Key(l.prefix, st.sku)+":h:"+lt.LotID).Result()
			if err != nil {
				return err
			}
			var have []stock.Holder
			for lcid, q := range hh {
				n, _ := strconv.ParseInt(q, 10, 64)
				have = append(have, stock.Holder{LCID: lcid, LotID: lt.LotID, Qty: n})
			}
			slices.SortFunc(have, func(a, b stock.Holder) int { return strings.Compare(a.LCID, b.LCID) })
			if want := m.Holders(st.sku, lt.LotID); !reflect.DeepEqual(have, want) {
				return fmt.Errorf("%s: holders of %s differ\nredis %+v\nmodel %+v", where, lt.LotID, have, want)
			}
			for _, h := range have {
				if h.Qty <= 0 {
					return fmt.Errorf("%s: holder entry %+v", where, h)
				}
			}
		}
		// The transfer a step names is the same in both, state and lots.
		var tid string
		switch {
		case st.transfer != nil:
			tid = st.transfer.TransferID
		case st.treceive != nil:
			tid = st.treceive.TransferID
		case st.tcancel != nil:
			tid = st.tcancel.TransferID
		}
		if tid != "" {
			rt, rok, err := l.Transfer(ctx, st.sku, tid)
			if err != nil {
				return err
			}
			if mt, mok := m.Transfer(st.sku, tid); rok != mok || !reflect.DeepEqual(rt, mt) {
				return fmt.Errorf("%s: transfer %s differs\nredis %v %+v\nmodel %v %+v", where, tid, rok, rt, mok, mt)
			}
		}
		// The queue is the same in both, qw is its demand, and it changed only as the
		// step says.
		rq, err := l.Queue(ctx, st.sku)
		if err != nil {
			return err
		}
		if mq := m.Queue(st.sku); !reflect.DeepEqual(rq, mq) {
			return fmt.Errorf("%s: queues differ\nredis %v\nmodel %v", where, rq, mq)
		}
		var demand int64
		for _, e := range rq {
			demand += e.Want
		}
		if qw, _ := strconv.ParseInt(cmp.Or(h["qw"], "0"), 10, 64); qw != demand {
			return fmt.Errorf("%s: qw %s, the queue waits for %d: %v", where, h["qw"], demand, rq)
		}
		if err := queueChange(queues[st.sku], rq, rr, rerr, st); err != nil {
			return fmt.Errorf("%s: %v", where, err)
		}
		queues[st.sku] = rq
		// The candidate index the script maintains is exactly the one a fresh load builds.
		if err := checkIndex(h, rs.Lots); err != nil {
			return fmt.Errorf("%s: %v", where, err)
		}
		prev, seen := snaps[st.sku]
		snaps[st.sku] = rs
		if err := invariants(prev, seen, rs, rr, rerr, st); err != nil {
			return fmt.Errorf("%s: %v", where, err)
		}
	}
	return nil
}

func normal(r stock.Result) stock.Result {
	if len(r.Moves) == 0 {
		r.Moves = nil
	}
	if len(r.Lots) == 0 {
		r.Lots = nil
	}
	if len(r.Holders) == 0 {
		r.Holders = nil
	}
	return r
}

// invariants checks one step's effect: no bucket negative; the step's moves applied to
// the state before give the state after (so every unit is conserved); only receive,
// adjust and lot registration change a lot's total; a registered lot comes after every
// lot in registration order;
// a successful op bumps the version by one, anything else changes nothing.
func invariants(prev stock.SKU, seen bool, now stock.SKU, r stock.Result, err error, st genStep) error {
	for _, lt := range now.Lots {
		for _, q := range []int64{lt.Sellable, lt.Reserved, lt.Allocated, lt.Hidden, lt.Shipped, lt.Defective} {
			if q < 0 {
				return fmt.Errorf("negative bucket in %+v", lt)
			}
		}
	}
	if !seen {
		return nil // loaded by this step: no state before it to compare with
	}
	applied := err == nil && !r.Replayed
	want := cloneSKU(prev)
	if applied {
		want.Version++
		if st.regLot != nil {
			// The registered lot enters empty, with the SKU's next registration number;
			// its quantity comes in by its move.
			i := slices.IndexFunc(now.Lots, func(l stock.Lot) bool { return l.LotID == st.regLot.Lot.LotID })
			if i < 0 {
				return fmt.Errorf("registered lot %s missing", st.regLot.Lot.LotID)
			}
			nl := now.Lots[i]
			for _, l := range prev.Lots {
				if l.RegSeq >= nl.RegSeq {
					return fmt.Errorf("registered lot %s has reg_seq %d, not after %s's %d", nl.LotID, nl.RegSeq, l.LotID, l.RegSeq)
				}
			}
			// Its location is the request's, the default's stored as none; no other
			// operation changes a lot's location (the metadata copied below leaves it out).
			want.Lots = append(want.Lots, stock.Lot{LotID: nl.LotID, Kind: nl.Kind, Good: nl.Good, BestBefore: nl.BestBefore,
				RegSeq: nl.RegSeq, ArrivesAt: nl.ArrivesAt, ValidFrom: nl.ValidFrom, ValidTo: nl.ValidTo,
				Location: st.regLot.Lot.WithDefaults().Location})
		}
		if st.transfer != nil {
			// The transit lots enter empty, after every lot in registration order, at the
			// destination; their units come by their moves from transit.
			for _, mv := range r.Moves {
				if mv.From != stock.Transit {
					continue
				}
				i := slices.IndexFunc(now.Lots, func(l stock.Lot) bool { return l.LotID == mv.LotID })
				nl := now.Lots[i]
				for _, l := range want.Lots {
					if l.RegSeq >= nl.RegSeq {
						return fmt.Errorf("transit lot %s has reg_seq %d, not after %s's %d", nl.LotID, nl.RegSeq, l.LotID, l.RegSeq)
					}
				}
				if stock.LocationOf(nl) != st.transfer.To || nl.Kind != stock.KindPlanned {
					return fmt.Errorf("transit lot %+v of a transfer to %s", nl, st.transfer.To)
				}
				want.Lots = append(want.Lots, stock.Lot{LotID: nl.LotID, Kind: nl.Kind, Good: nl.Good, BestBefore: nl.BestBefore,
					RegSeq: nl.RegSeq, ArrivesAt: nl.ArrivesAt, ValidFrom: nl.ValidFrom, ValidTo: nl.ValidTo, Location: nl.Location})
			}
		}
		if st.ss != nil && st.ss.Location == "" {
			want.SafetyStock = st.ss.SafetyStock
		}
		if st.ss != nil && st.ss.Location != "" {
			want.LocationSafety = maps.Clone(want.LocationSafety)
			if want.LocationSafety == nil {
				want.LocationSafety = map[string]int64{}
			}
			want.LocationSafety[st.ss.Location] = st.ss.SafetyStock
			if st.ss.SafetyStock == 0 {
				delete(want.LocationSafety, st.ss.Location)
			}
			if len(want.LocationSafety) == 0 {
				want.LocationSafety = nil
			}
		}
		if e := transferResult(st, r); e != nil {
			return e
		}
		if r.Transfer != nil {
			want.Transfers = withTransfer(want.Transfers, *r.Transfer)
		}
		idx := map[string]int{}
		for i, lt := range want.Lots {
			idx[lt.LotID] = i
		}
		// The fill's moves come last: the checks of where the operation's own moves
		// took do not apply to them.
		own := len(r.Moves)
		for _, f := range r.Fills {
			own -= len(f.Lots)
		}
		for mi, mv := range r.Moves {
			i, ok := idx[mv.LotID]
			if !ok {
				return fmt.Errorf("move of unknown lot %+v; before %+v", mv, prev)
			}
			lt := &want.Lots[i]
			if mv.Qty <= 0 {
				return fmt.Errorf("move of %d", mv.Qty)
			}
			if mi >= own && (mv.From != stock.Sellable || mv.To != stock.Allocated && mv.To != stock.Reserved) {
				return fmt.Errorf("a fill moved %+v", mv)
			}
			if st.alloc != nil && st.alloc.Route != nil {
				// A routed allocation takes only at eligible locations, and with no_split
				// at one.
				at := stock.LocationOf(*lt)
				if _, ok := st.alloc.Route.Positions()[at]; !ok {
					return fmt.Errorf("routed allocation took lot %s at %s, not eligible", lt.LotID, at)
				}
				if rt := st.alloc.Route; len(rt.Plan) > 0 && !rt.NoSplit && rt.Strategies[0] == stock.StrategyFewestSplits && !slices.Contains(rt.Plan, at) {
					return fmt.Errorf("planned allocation took lot %s at %s, not in its plan %v", lt.LotID, at, rt.Plan)
				}
				if first := stock.LocationOf(want.Lots[idx[r.Moves[0].LotID]]); st.alloc.Route.NoSplit && at != first {
					return fmt.Errorf("no-split allocation took at %s and %s", first, at)
				}
			}
			if st.change != nil && st.change.Route != nil && mv.From == stock.Sellable && mi < own {
				// A routed change's allocations take only at eligible locations.
				if at := stock.LocationOf(*lt); !mapHas(st.change.Route.Positions(), at) {
					return fmt.Errorf("routed change took lot %s at %s, not eligible", lt.LotID, at)
				}
			}
			if st.moveTo != nil && mv.From == stock.Sellable && mi < own && stock.LocationOf(*lt) != st.moveTo.To {
				return fmt.Errorf("move to %s took lot %s at %s", st.moveTo.To, lt.LotID, stock.LocationOf(*lt))
			}
			if loc := st.location(); loc != "" && mi < own && stock.LocationOf(*lt) != loc {
				return fmt.Errorf("%s named location %s and moved lot %s at %s", st.name, loc, lt.LotID, stock.LocationOf(*lt))
			}
			if (mv.From == stock.External || mv.To == stock.External) && st.receive == nil && st.adjust == nil && st.regLot == nil {
				return fmt.Errorf("%s moved from/to external: %+v", st.name, mv)
			}
			if (mv.From == stock.Transit || mv.To == stock.Transit) && st.transfer == nil && st.tcancel == nil {
				return fmt.Errorf("%s moved from/to transit: %+v", st.name, mv)
			}
			if st.transfer != nil && mv.From == stock.Sellable && mv.To == stock.Transit &&
				(stock.LocationOf(*lt) != st.transfer.From || lt.Kind != stock.KindOnHand || !lt.Good) {
				return fmt.Errorf("transfer from %s took from lot %+v", st.transfer.From, *lt)
			}
			if p := stock.BucketOf(lt, mv.From); p != nil {
				*p -= mv.Qty
			}
			if p := stock.BucketOf(lt, mv.To); p != nil {
				*p += mv.Qty
			}
		}
		// Metadata (kind, best-before, good) is the operation's, not the moves'.
		for i := range want.Lots {
			c := now.Lots[i]
			want.Lots[i].Kind, want.Lots[i].BestBefore, want.Lots[i].Good = c.Kind, c.BestBefore, c.Good
		}
	}
	if err := conserved(prev, now, r); err != nil {
		return err
	}
	if !reflect.DeepEqual(want, now) {
		return fmt.Errorf("state is not the state before plus the moves\nbefore %+v\nmoves  %+v\nwant   %+v\nnow    %+v", prev, r.Moves, want, now)
	}
	return nil
}

// transferResult checks that a transfer's operations, and they alone, say the transfer as
// they left it.
func transferResult(st genStep, r stock.Result) error {
	var id, state string
	switch {
	case st.transfer != nil:
		id, state = st.transfer.TransferID, stock.TransferInTransit
	case st.treceive != nil:
		id, state = st.treceive.TransferID, stock.TransferReceived
	case st.tcancel != nil:
		id, state = st.tcancel.TransferID, stock.TransferCancelled
	}
	if t := r.Transfer; (t == nil) != (id == "") || t != nil && (t.TransferID != id || t.State != state) {
		return fmt.Errorf("%s's result says transfer %+v", st.name, t)
	}
	return nil
}

// withTransfer is ts with t in place of its transfer by t's id, or added, by id.
func withTransfer(ts []stock.Transfer, t stock.Transfer) []stock.Transfer {
	out := slices.DeleteFunc(slices.Clone(ts), func(x stock.Transfer) bool { return x.TransferID == t.TransferID })
	out = append(out, t)
	stock.SortTransfers(out)
	return out
}

// TestScriptMatchesModel runs thousands of random operation sequences against the
// scripts on real Redis and against the Model, comparing every result, every move and
// the state after every step (-ledger.seqs, -ledger.ops to run more).
func TestScriptMatchesModel(t *testing.T) {
	rc, prefix := testenv.Redis(t)
	seqs := *flagSeqs
	const workers = 4
	var wg sync.WaitGroup
	var once sync.Once
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < seqs; i += workers {
				seed := uint64(i)
				skus, steps := genSequence(rand.New(rand.NewPCG(seed, 0x1ed9e5)), *flagOps)
				l, err := New(Config{Redis: rc, Prefix: fmt.Sprintf("%s:%d", prefix, i), Loader: newMemLoader(skus...)})
				if err != nil {
					t.Error(err)
					return
				}
				if err := checkSequence(l, skus, steps); err != nil {
					once.Do(func() { t.Errorf("seed %d: %v", seed, err) })
					return
				}
			}
		}()
	}
	wg.Wait()
}

// FuzzScriptMatchesModel runs the same generator from fuzzed seeds:
// go test -run '^$' -fuzz FuzzScriptMatchesModel ./internal/ledger/
func FuzzScriptMatchesModel(f *testing.F) {
	rc, prefix := testenv.Redis(f)
	for _, s := range []uint64{1, 2, 3, 42, 1 << 40} {
		f.Add(s, uint8(25))
	}
	var n int
	var mu sync.Mutex
	f.Fuzz(func(t *testing.T, seed uint64, ops uint8) {
		mu.Lock()
		n++
		p := fmt.Sprintf("%s:f%d", prefix, n)
		mu.Unlock()
		skus, steps := genSequence(rand.New(rand.NewPCG(seed, 0x1ed9e5)), int(ops%64))
		l, err := New(Config{Redis: rc, Prefix: p, Loader: newMemLoader(skus...)})
		if err != nil {
			t.Fatal(err)
		}
		if err := checkSequence(l, skus, steps); err != nil {
			t.Fatal(err)
		}
		rc.Del(ctx, Key(p, "S0"), Key(p, "S1"), Key(p, "S2"))
	})
}

// TestHotSKUNeverOversold runs 64 goroutines allocating from one SKU until it runs
// out: the allocated total never exceeds the stock and every unit is accounted for.
func TestHotSKUNeverOversold(t *testing.T) {
	rc, prefix := testenv.Redis(t)
	const units, workers = 600, 64
	s := stock.SKU{SKU: "HOT", SafetyStock: 10, Lots: []stock.Lot{}}
	for i := range 6 {
		s.Lots = append(s.Lots, lot(fmt.Sprint("L", i), stock.KindOnHand, int64(i), fmt.Sprintf("2027-0%d-01", 1+i%3), units/6))
	}
	l, err := New(Config{Redis: rc, Prefix: prefix, Loader: newMemLoader(s)})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var reserved, allocated int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for i := 0; ; i++ {
				mode := stock.ModeShip
				if rng.IntN(2) == 0 {
					mode = stock.ModeReserve
				}
				q := 1 + rng.Int64N(4)
				_, err := l.Apply(ctx, alloc(fmt.Sprintf("w%d-%d", w, i), "HOT", q, "2026-12-01", mode))
				if errors.Is(err, stock.ErrShortage) && q == 1 {
					return // nothing left for anyone
				}
				if err != nil && !errors.Is(err, stock.ErrShortage) && !errors.Is(err, stock.ErrSafetyStock) {
					t.Error(err)
					return
				}
				if err == nil {
					mu.Lock()
					if mode == stock.ModeShip {
						allocated += q
					} else {
						reserved += q
					}
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	snap, err := l.Snapshot(ctx, "HOT")
	if err != nil {
		t.Fatal(err)
	}
	var sell, res, all int64
	for _, lt := range snap.Lots {
		if lt.Sellable < 0 || lt.Reserved < 0 || lt.Allocated < 0 {
			t.Fatalf("negative bucket %+v", lt)
		}
		sell, res, all = sell+lt.Sellable, res+lt.Reserved, all+lt.Allocated
	}
	if res != reserved || all != allocated || sell+res+all != units || sell != 0 {
		t.Fatalf("sellable %d reserved %d (callers saw %d) allocated %d (callers saw %d), stock %d",
			sell, res, reserved, all, allocated, units)
	}
}

// checkIndex compares the SKU's index chunks in Redis with those a fresh load writes: the
// same records in the same order, in `on` chunks that are never empty (but a lone o:0) and
// hold at most twice the load's chunk (ledger.lua edits one chunk, splitting or dropping
// it, where a load writes chunks of indexChunk records); and its layout stamp and every
// lot's stored key with AllocKey's.
func checkIndex(h map[string]string, lots []stock.Lot) error {
	if h[fieldLayout] != keyLayout {
		return fmt.Errorf("layout stamp %q, want %q", h[fieldLayout], keyLayout)
	}
	for _, l := range lots {
		if have, want := h["k:"+l.LotID], storedKey(l, h["m:"+l.LotID]); have != want {
			return fmt.Errorf("stored key of %s is %q, want %q", l.LotID, have, want)
		}
	}
	want := buildIndex(lots)
	var have []string
	for i := 0; ; i++ {
		c, ok := h["o:"+strconv.Itoa(i)]
		if !ok {
			break
		}
		have = append(have, c)
	}
	bad := func(why string) error {
		return fmt.Errorf("candidate index drifted (%s): on=%s\nhave %q\nwant %q", why, h[fieldChunks], have, want)
	}
	if h[fieldChunks] != strconv.Itoa(len(have)) {
		return bad("chunk count")
	}
	if strings.Join(have, "") != strings.Join(want, "") {
		return bad("records")
	}
	for _, c := range have {
		if n := strings.Count(c, "\n"); (n == 0 && len(have) > 1) || n > 2*indexChunk {
			return bad(fmt.Sprintf("a chunk of %d records", n))
		}
	}
	return nil
}

// conserved checks an operation's effect on the stock's counts: per location, the units
// in its lots' buckets change by the moves into and out of its lots (its imports and its
// moves equal its buckets); over the SKU, only by what came from or went to external:
// a transfer's moves to and from transit net to zero, so a unit in transit is counted
// once, in its transit lot, which is on hand nowhere until its receipt.
func conserved(prev, now stock.SKU, r stock.Result) error {
	units := func(l stock.Lot) int64 {
		return l.Sellable + l.Reserved + l.Allocated + l.Hidden + l.Shipped + l.Defective
	}
	at := map[string]string{}
	delta := map[string]int64{}
	for _, l := range prev.Lots {
		at[l.LotID] = stock.LocationOf(l)
		delta[stock.LocationOf(l)] -= units(l)
	}
	for _, l := range now.Lots {
		at[l.LotID] = stock.LocationOf(l)
		delta[stock.LocationOf(l)] += units(l)
	}
	var network, transit int64
	for _, mv := range r.Moves {
		if r.Replayed {
			break
		}
		inside := func(b string) bool { return b != stock.External && b != stock.Transit }
		if inside(mv.From) {
			delta[at[mv.LotID]] += mv.Qty
		}
		if inside(mv.To) {
			delta[at[mv.LotID]] -= mv.Qty
		}
		switch {
		case mv.From == stock.External:
			network += mv.Qty
		case mv.To == stock.External:
			network -= mv.Qty
		case mv.To == stock.Transit:
			transit += mv.Qty
		case mv.From == stock.Transit:
			transit -= mv.Qty
		}
	}
	for loc, d := range delta {
		if d != 0 {
			return fmt.Errorf("location %s: its buckets changed by %d more than its moves", loc, d)
		}
	}
	if transit != 0 {
		return fmt.Errorf("%d units went to transit and did not come out of it", transit)
	}
	var before, after int64
	for _, l := range prev.Lots {
		before += units(l)
	}
	for _, l := range now.Lots {
		after += units(l)
	}
	if after-before != network {
		return fmt.Errorf("the network's units changed by %d, its external moves by %d", after-before, network)
	}
	return nil
}

// queueChange checks that a step changed the queue (before, after: in serving order) only
// as its result says: a backorder adds its line waiting for what it did not take, a
// dequeue takes what it says off, each fill takes its quantity off a line that waited
// for that much, and nothing else changes (a failed or replayed step: nothing). Within a
// class, a fill never passes over a line of the same mode and date that still waits.
func queueChange(before, after []stock.QueueEntry, r stock.Result, err error, st genStep) error {
	key := func(e stock.QueueEntry) string { return e.Holder + "/" + e.Line }
	want := map[string]stock.QueueEntry{}
	for _, e := range before {
		want[key(e)] = e
	}
	if err == nil && !r.Replayed {
		if b := st.backord; b != nil {
			var took int64
			for _, mv := range r.Moves {
				took += mv.Qty
			}
			if took+r.Queued != b.Qty {
				return fmt.Errorf("backorder of %d took %d and queued %d", b.Qty, took, r.Queued)
			}
			if r.Queued > 0 {
				var seq int64
				for _, e := range after {
					if key(e) == b.Holder+"/"+b.Line {
						seq = e.Seq
					}
				}
				want[b.Holder+"/"+b.Line] = stock.QueueEntry{Holder: b.Holder, Line: b.Line, Want: r.Queued, Mode: b.Mode, TargetDate: b.TargetDate, Class: b.Class, Seq: seq, QueuedAt: b.QueuedAt}
			}
		}
		if d := st.dequeue; d != nil {
			e, ok := want[d.Holder+"/"+d.Line]
			off := e.Want
			if d.Qty != 0 {
				off = min(off, d.Qty)
			}
			if !ok && r.Dequeued != 0 || ok && (r.Dequeued != off || r.Queued != e.Want-off) {
				return fmt.Errorf("dequeue of %+v: dequeued %d, queued %d, the line waited for %d", d, r.Dequeued, r.Queued, e.Want)
			}
			e.Want -= off
			want[key(e)] = e
		}
		for _, f := range r.Fills {
			e, ok := want[f.Holder+"/"+f.Line]
			var sum int64
			for _, l := range f.Lots {
				sum += l.Qty
			}
			if !ok || f.Qty <= 0 || f.Qty > e.Want || sum != f.Qty {
				return fmt.Errorf("fill %+v of a line that waited for %+v", f, e)
			}
			e.Want -= f.Qty
			want[key(e)] = e
		}
		for i, e := range before {
			filled := slices.ContainsFunc(r.Fills, func(f stock.Fill) bool { return f.Holder == e.Holder && f.Line == e.Line })
			if !filled {
				continue
			}
			for _, ahead := range before[:i] {
				if ahead.Class == e.Class && ahead.Mode == e.Mode && ahead.TargetDate == e.TargetDate && want[key(ahead)].Want > 0 &&
					!(st.dequeue != nil && key(ahead) == st.dequeue.Holder+"/"+st.dequeue.Line) {
					return fmt.Errorf("fill of %v passed over %v, which still waits", e, want[key(ahead)])
				}
			}
		}
	}
	// The result says each line it changed as it left it (persistence keeps these).
	changed := map[string]stock.QueueEntry{}
	for _, e := range r.Queue {
		changed[key(e)] = e
	}
	for k, e := range want {
		if e != (stock.QueueEntry{}) && e != before0(before, k) && changed[k] != e && !(r.Replayed || err != nil) {
			return fmt.Errorf("the result's queue %v lacks %v", r.Queue, e)
		}
	}
	var exp []stock.QueueEntry
	for _, e := range want {
		if e.Want > 0 {
			exp = append(exp, e)
		}
	}
	slices.SortFunc(exp, func(a, b stock.QueueEntry) int {
		return cmp.Or(cmp.Compare(b.Class, a.Class), cmp.Compare(a.Seq, b.Seq))
	})
	if !reflect.DeepEqual(exp, after) && !(len(exp) == 0 && len(after) == 0) {
		return fmt.Errorf("queue %v after %s, want %v (before %v)", after, st.name, exp, before)
	}
	return nil
}

// before0 is the entry keyed k ("holder/line") in before, the zero entry when none.
func before0(before []stock.QueueEntry, k string) stock.QueueEntry {
	for _, e := range before {
		if e.Holder+"/"+e.Line == k {
			return e
		}
	}
	return stock.QueueEntry{}
}
