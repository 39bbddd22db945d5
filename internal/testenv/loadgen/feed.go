package loadgen

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/ledger/stock"
)

// The warehouse feed: what a WMS and an ERP tell junban while the shop sells. Purchase
// orders register planned lots that are received later (inventory.received, with the
// quantity counted), unplanned deliveries register on-hand lots, a new SKU is registered
// now and then (its lots next, then orders name it), safety stock changes, units are
// held and released, damage is found on counts, a lot is recalled, and shipped orders
// come back (order.returned, good or defective). Every event decodes; the feed keeps a
// rough book of each lot's stock (what it registered, minus what the orders ahead of it
// asked for) so that most of its events apply, and a few are refused as they would be
// in a shop: a release after a recall took the held units, a count that finds less than
// orders already reserved of a planned lot, a return of a shipment that was refused.

// Shares within the feed. Returns ride on the orders (an order's own entity); the rest
// run in their SKU's turn.
const (
	feedReturnShare = 0.15
	// A new SKU costs three events (the SKU and two lots): about one in a hundred of
	// the feed's events introduces one.
	feedNewSKUShare = 0.03
)

// feedKinds are the feed's own draws (receipts and hold releases follow their purchase
// order or hold later), with their weights.
var feedKinds = []struct {
	kind   string
	weight float64
}{
	{"purchase", 0.22}, {"delivery", 0.10}, {"safety", 0.10}, {"hold", 0.23}, {"damage", 0.17}, {"count", 0.05}, {"recall", 0.03},
	{"transfer", 0.06},
}

type bookLot struct {
	id         string
	kind       string
	good       bool
	bestBefore string
	// sellable and hidden are the feed's estimate: registered, less what orders asked.
	sellable, hidden int64
	// registered is the quantity the lot was registered with (a planned lot's order).
	registered int64
	// transit: a transfer's lot at its destination, whose id holds junban's "~": no event
	// names it.
	transit bool
	// location is where the lot is ("" the default location).
	location string
}

type bookSKU struct {
	name     string
	safety   int64
	lots     []*bookLot // in registration order
	maxBB    string
	purchase int // lots registered by the feed, for their ids
	delivery int
	transfer int // transfers sent, for their ids
}

// fefoFirst is the lot an allocation takes first: on-hand lots by best-before (none
// last), then registration; planned lots after them, newest first.
func (s *bookSKU) fefoFirst() *bookLot {
	var first *bookLot
	for _, l := range s.lots {
		if !l.good || l.kind != stock.KindOnHand {
			continue
		}
		if first == nil || bbKey(l.bestBefore) < bbKey(first.bestBefore) {
			first = l
		}
	}
	if first != nil {
		return first
	}
	for i := len(s.lots) - 1; i >= 0; i-- {
		if s.lots[i].good {
			return s.lots[i]
		}
	}
	return nil
}

func bbKey(bb string) string {
	if bb == "" {
		return "\xff"
	}
	return bb
}

// take books qty units as an order's allocation would take them: FEFO over the on-hand
// lots, then the planned ones, newest first.
func (s *bookSKU) take(qty int64) {
	var order []*bookLot
	for _, l := range s.lots {
		if l.good && l.kind == stock.KindOnHand {
			order = append(order, l)
		}
	}
	slices.SortStableFunc(order, func(a, b *bookLot) int { return strings.Compare(bbKey(a.bestBefore), bbKey(b.bestBefore)) })
	for i := len(s.lots) - 1; i >= 0; i-- {
		if l := s.lots[i]; l.good && l.kind == stock.KindPlanned {
			order = append(order, l)
		}
	}
	for _, l := range order {
		t := min(l.sellable, qty)
		l.sellable -= t
		qty -= t
	}
}

type scheduled struct {
	due int // order events emitted
	fn  func(f *feed, w *Workload)
}

type feed struct {
	rng    *rand.Rand
	s      Spec
	target time.Time
	// rate is the feed's events in its SKUs' turns per order event sent.
	rate, budget float64
	// ratio is the feed's distinct events per order event (share / (1 - share)).
	ratio float64
	skus  []*bookSKU
	by    map[string]*bookSKU
	// newAt[j] is the order index from which the j-th new SKU may be ordered;
	// introduced[j] whether its registration was sent.
	newAt      []int
	introduced []bool
	n          int // feed events made, for their ids
	emitted    int // order events sent
	later      []scheduled
	seen       map[string]bool
}

func newFeed(rng *rand.Rand, s Spec, target time.Time, inv []stock.SKU) *feed {
	f := &feed{rng: rng, s: s, target: target, by: map[string]*bookSKU{}, seen: map[string]bool{}}
	for _, sku := range inv {
		b := &bookSKU{name: sku.SKU, safety: sku.SafetyStock}
		for _, l := range sku.Lots {
			b.lots = append(b.lots, &bookLot{id: l.LotID, kind: l.Kind, good: l.Good, bestBefore: l.BestBefore, sellable: l.Sellable, location: l.Location})
			b.maxBB = max(b.maxBB, l.BestBefore)
		}
		f.add(b)
	}
	share := min(max(s.WarehouseShare, 0), 0.5)
	if share == 0 {
		return f
	}
	f.ratio = share / (1 - share)
	f.rate = f.ratio * (1 - feedReturnShare)
	perOrder := 3 + s.ReserveShare*(1-s.CancelShare) + s.ChangeShare + float64(s.ExtraChanges)
	total := f.ratio * perOrder * float64(s.Orders)
	n := int(total*feedNewSKUShare/3 + 0.5)
	if n == 0 && s.Orders >= 20 {
		n = 1
	}
	for j := range n {
		f.newAt = append(f.newAt, s.Orders*(j+1)/(n+1))
	}
	f.introduced = make([]bool, n)
	return f
}

func (f *feed) add(b *bookSKU) {
	f.skus = append(f.skus, b)
	f.by[b.name] = b
}

// newSKUsFrom is how many new SKUs become orderable with order o.
func (f *feed) newSKUsFrom(o int) int {
	n := 0
	for _, at := range f.newAt {
		if at == o {
			n++
		}
	}
	return n
}

// returnChance is the chance that a shipped order of n events comes back.
func (f *feed) returnChance(n int, cancelShare float64) float64 {
	return f.ratio * float64(n) * feedReturnShare / max(1-cancelShare, 0.01)
}

// returned is the data of a return of up to most units of line lineID.
func (f *feed) returned(lineID string, most int64) event.ReturnedData {
	return event.ReturnedData{
		Lines:     []event.ReturnLine{{LineID: lineID, Qty: 1 + f.rng.Int64N(max(1, most))}},
		Defective: f.rng.Float64() < 0.25,
	}
}

// orderStarts runs before the first event of an order with index o, whose lines name
// the new SKUs newSKUs: every new SKU orderable by then is registered first.
func (f *feed) orderStarts(w *Workload, o int, newSKUs []int) {
	for j, at := range f.newAt {
		if !f.introduced[j] && (at <= o || slices.Contains(newSKUs, j)) {
			f.introduce(w, j)
		}
	}
}

// orderEvent books what an order's event asks of the stock, and the feed's share of it.
func (f *feed) orderEvent(ev event.Order, p orderPlan) {
	if f.seen[ev.EventID] {
		return // a duplicate: no event of its own
	}
	f.seen[ev.EventID] = true
	f.budget += f.rate
	if ev.Type == event.OrderPlaced && p.holds {
		for _, l := range p.lines {
			if b := f.by[l.SKU]; b != nil {
				b.take(l.Qty)
			}
		}
	}
}

// between runs after each order event: the feed's events due by now.
func (f *feed) between(w *Workload) {
	f.emitted++
	for i := 0; i < len(f.later); i++ {
		if f.later[i].due <= f.emitted {
			sc := f.later[i]
			f.later = slices.Delete(f.later, i, i+1)
			i--
			sc.fn(f, w)
		}
	}
	// A draw that finds nothing to act on (no lot with stock to hold) is a quiet moment.
	for ; f.budget >= 1; f.budget-- {
		f.draw(w)
	}
}

// finish sends what is still scheduled.
func (f *feed) finish(w *Workload) {
	for len(f.later) > 0 {
		sc := f.later[0]
		f.later = f.later[1:]
		sc.fn(f, w)
	}
}

func (f *feed) date(t time.Time) string { return t.Format(time.DateOnly) }

// nextBestBefore is a best-before after every lot the SKU has: newer stock keeps
// longer, so FEFO takes it last.
func (f *feed) nextBestBefore(b *bookSKU) string {
	base := f.target
	if b.maxBB != "" {
		base, _ = time.Parse(time.DateOnly, b.maxBB)
	}
	bb := f.date(base.AddDate(0, 0, 3+f.rng.IntN(18)))
	b.maxBB = bb
	return bb
}

// emit appends one feed event and maybe, a little later, its duplicate (a WMS's retry).
func (f *feed) emit(w *Workload, t event.Type, data any) string {
	f.n++
	ev := event.Order{EventID: fmt.Sprintf("%s-WH-%05d", f.s.Run, f.n), Type: t, OccurredAt: f.target.Add(-time.Hour)}
	ev.Data, _ = json.Marshal(data)
	w.Events = append(w.Events, ev)
	w.Distinct++
	if f.rng.Float64() < f.s.DuplicateShare {
		f.schedule(1+f.rng.IntN(50), func(_ *feed, w *Workload) { w.Events = append(w.Events, ev) })
	}
	return ev.EventID
}

func (f *feed) schedule(after int, fn func(*feed, *Workload)) {
	f.later = append(f.later, scheduled{due: f.emitted + after, fn: fn})
}

func (f *feed) validity() (string, string) {
	return f.date(f.target.AddDate(0, -1, 0)), f.date(f.target.AddDate(0, 6, 0))
}

// introduce registers the j-th new SKU and its two lots, each step behind a gate.
func (f *feed) introduce(w *Workload, j int) {
	f.introduced[j] = true
	name := SKUName(f.s.Run, f.s.SKUs+j)
	w.NewSKUs = append(w.NewSKUs, name)
	b := &bookSKU{name: name, safety: f.s.SafetyStock}
	f.add(b)
	id := f.emit(w, event.InventorySKURegistered, event.SKURegisteredData{SKU: name, SafetyStock: b.safety})
	w.Gates = append(w.Gates, Gate{At: len(w.Events), After: []string{id}})
	from, to := f.validity()
	var ids []string
	for i := range 2 {
		l := &bookLot{id: fmt.Sprintf("L%02d", i), kind: stock.KindOnHand, good: true, sellable: max(1, f.s.StockPerLot), location: f.s.locationAt(i)}
		l.bestBefore = f.date(f.target.AddDate(0, 1+i, 0))
		b.maxBB = l.bestBefore
		b.lots = append(b.lots, l)
		ids = append(ids, f.emit(w, event.InventoryLotRegistered, event.LotRegisteredData{
			SKU: name, LotID: l.id, Kind: l.kind, BestBefore: l.bestBefore, ValidFrom: from, ValidTo: to, Sellable: l.sellable,
			Location: f.s.locationAt(i)}))
	}
	w.Gates = append(w.Gates, Gate{At: len(w.Events), After: ids})
	f.budget -= 3
}

// draw makes one event of a kind drawn by weight, unless the kind finds nothing to act on.
func (f *feed) draw(w *Workload) {
	total := 0.0
	for _, k := range feedKinds {
		total += k.weight
	}
	x := f.rng.Float64() * total
	kind := feedKinds[len(feedKinds)-1].kind
	for _, k := range feedKinds {
		if x < k.weight {
			kind = k.kind
			break
		}
		x -= k.weight
	}
	b := f.skus[f.rng.IntN(len(f.skus))]
	from, to := f.validity()
	switch kind {
	case "purchase":
		b.purchase++
		q := max(1, f.s.StockPerLot/2)
		l := &bookLot{id: fmt.Sprintf("PO%03d", b.purchase), kind: stock.KindPlanned, good: true, sellable: q, registered: q, location: f.s.locationAt(b.purchase)}
		b.lots = append(b.lots, l)
		f.emit(w, event.InventoryLotRegistered, event.LotRegisteredData{SKU: b.name, LotID: l.id, Kind: l.kind,
			ArrivesAt: f.date(f.target.AddDate(0, 0, -5+f.rng.IntN(15))), ValidFrom: from, ValidTo: to, Sellable: l.sellable,
			Location: f.s.locationAt(b.purchase)})
		f.schedule(50+f.rng.IntN(350), func(f *feed, w *Workload) { f.receive(w, b, l) })
	case "delivery":
		b.delivery++
		l := &bookLot{id: fmt.Sprintf("DL%03d", b.delivery), kind: stock.KindOnHand, good: true, sellable: max(1, f.s.StockPerLot/2), location: f.s.locationAt(b.delivery)}
		l.bestBefore = f.nextBestBefore(b)
		b.lots = append(b.lots, l)
		f.emit(w, event.InventoryLotRegistered, event.LotRegisteredData{SKU: b.name, LotID: l.id, Kind: l.kind,
			BestBefore: l.bestBefore, ValidFrom: from, ValidTo: to, Sellable: l.sellable, Location: f.s.locationAt(b.delivery)})
	case "safety":
		if len(f.s.Locations) > 0 && f.rng.Float64() < 0.4 {
			// A location's own safety stock (0 removes it): units it keeps off the web shop.
			loc := f.s.Locations[f.rng.IntN(len(f.s.Locations))].ID
			f.emit(w, event.InventorySafetyStockChanged, event.SafetyStockChangedData{SKU: b.name, SafetyStock: f.rng.Int64N(4), Location: loc})
			return
		}
		ss := f.s.SafetyStock/2 + f.rng.Int64N(f.s.SafetyStock+3)
		if ss == b.safety {
			ss++
		}
		b.safety = ss
		f.emit(w, event.InventorySafetyStockChanged, event.SafetyStockChangedData{SKU: b.name, SafetyStock: ss})
	case "hold", "damage":
		l := f.lotWith(b, func(l *bookLot) bool { return l.kind == stock.KindOnHand && l.sellable > 0 })
		if l == nil {
			return
		}
		if kind == "damage" {
			q := 1 + f.rng.Int64N(min(2, l.sellable))
			l.sellable -= q
			f.emit(w, event.InventoryDamaged, event.LotQtyData{SKU: b.name, LotID: l.id, Qty: q, Reason: pick(f.rng, "found damaged on a count", "crushed carton", "water damage")})
			return
		}
		q := 1 + f.rng.Int64N(min(3, l.sellable))
		l.sellable -= q
		l.hidden += q
		f.emit(w, event.InventoryHeld, event.LotQtyData{SKU: b.name, LotID: l.id, Qty: q, Reason: pick(f.rng, "quality check", "label check", "customer complaint")})
		if f.rng.Float64() < 0.7 {
			f.schedule(30+f.rng.IntN(270), func(f *feed, w *Workload) { f.release(w, b, l, q) })
		}
	case "count":
		// A stock count corrects an on-hand lot: mostly units found, sometimes units missing.
		// With FeedCommutes it spares the lot orders take from (as a recall does).
		spare := (*bookLot)(nil)
		if f.s.FeedCommutes {
			spare = b.fefoFirst()
		}
		l := f.lotWith(b, func(l *bookLot) bool { return l != spare && l.kind == stock.KindOnHand && l.sellable > 1 })
		if l == nil {
			return
		}
		d := 1 + f.rng.Int64N(3)
		if f.rng.Float64() < 0.3 {
			d = -1
		}
		l.sellable += d
		f.emit(w, event.InventoryAdjusted, event.InventoryAdjustedData{SKU: b.name, LotID: l.id, Delta: d, Reason: pick(f.rng, "cycle count", "found on a count", "missing on a count")})
	case "transfer":
		// A unit sent from the location of the lot orders take from first to the next of
		// the spec's locations: half of them called back, the others received there. Only with two
		// locations or more, and not with FeedCommutes (it takes from that lot).
		l := b.fefoFirst()
		if f.s.FeedCommutes || len(f.s.Locations) < 2 || l == nil || l.sellable < 2 {
			return
		}
		from := cmp.Or(l.location, stock.DefaultLocation)
		to := f.s.Locations[0].ID
		if i := slices.IndexFunc(f.s.Locations, func(loc stock.Location) bool { return loc.ID == from }); i >= 0 {
			to = f.s.Locations[(i+1)%len(f.s.Locations)].ID
		}
		b.transfer++
		id := fmt.Sprintf("TR%03d", b.transfer)
		l.sellable--
		f.emit(w, event.InventoryTransferRequested, event.TransferRequestedData{SKU: b.name, TransferID: id,
			FromLocation: from, ToLocation: to, Qty: 1, ArrivesAt: f.date(f.target.AddDate(0, 0, 2))})
		f.schedule(20+f.rng.IntN(200), func(f *feed, w *Workload) {
			f.budget--
			if f.rng.Float64() < 0.5 {
				l.sellable++
				f.emit(w, event.InventoryTransferCancelled, event.TransferCancelledData{SKU: b.name, TransferID: id})
				return
			}
			b.lots = append(b.lots, &bookLot{id: stock.TransitLotID(id, l.id), kind: stock.KindOnHand, good: true,
				bestBefore: l.bestBefore, sellable: 1, transit: true, location: to})
			f.emit(w, event.InventoryTransferReceived, event.TransferReceivedData{SKU: b.name, TransferID: id, Qty: 1})
		})
	case "recall":
		spare := (*bookLot)(nil)
		if f.s.FeedCommutes {
			spare = b.fefoFirst()
		}
		l := f.lotWith(b, func(l *bookLot) bool { return l != spare })
		if l == nil {
			return
		}
		l.good, l.sellable, l.hidden = false, 0, 0
		f.emit(w, event.InventoryLotRecalled, event.LotRecalledData{SKU: b.name, LotID: l.id, Reason: "supplier recall"})
	}
}

// lotWith picks a good lot of b that ok accepts, or nil.
func (f *feed) lotWith(b *bookSKU, ok func(*bookLot) bool) *bookLot {
	var c []*bookLot
	for _, l := range b.lots {
		if l.good && !l.transit && ok(l) {
			c = append(c, l)
		}
	}
	if len(c) == 0 {
		return nil
	}
	return c[f.rng.IntN(len(c))]
}

// receive is a purchase order's delivery: mostly the quantity ordered, now and then a
// count that differs by a few units.
func (f *feed) receive(w *Workload, b *bookSKU, l *bookLot) {
	d := event.InventoryReceivedData{SKU: b.name, LotID: l.id, BestBefore: f.nextBestBefore(b)}
	if f.rng.Float64() < 0.3 {
		d.Qty = max(1, l.registered+f.rng.Int64N(6)-2)
		l.sellable += d.Qty - l.registered
	}
	if l.good {
		l.kind, l.bestBefore = stock.KindOnHand, d.BestBefore
	}
	f.emit(w, event.InventoryReceived, d)
	f.budget--
}

// release gives held units back, unless a recall took them meanwhile.
func (f *feed) release(w *Workload, b *bookSKU, l *bookLot, q int64) {
	if !l.good || l.hidden < q {
		return
	}
	l.hidden -= q
	l.sellable += q
	f.emit(w, event.InventoryReleasedHold, event.LotQtyData{SKU: b.name, LotID: l.id, Qty: q, Reason: "check passed"})
	f.budget--
}

func pick(rng *rand.Rand, s ...string) string { return s[rng.IntN(len(s))] }
