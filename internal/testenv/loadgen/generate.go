// Package loadgen makes realistic order workloads: inventory, orders over skewed SKUs,
// their lifecycles, duplicate deliveries and out-of-order arrivals, and the warehouse's
// feed beside them (feed.go). The same generator feeds `junbanlab loadgen`, the demo, the
// end-to-end test and the chaos run.
package loadgen

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/ledger/stock"
)

// Spec describes a workload. Shares are fractions in [0, 1].
type Spec struct {
	// Run names the workload; every id (SKU, lcid, event id) starts with it.
	Run string
	// Seed makes the workload reproducible.
	Seed uint64
	// Orders is the number of orders.
	Orders int
	// SKUs and LotsPerSKU shape the inventory.
	SKUs, LotsPerSKU int
	// StockPerLot is each on-hand lot's sellable quantity (planned lots get half).
	StockPerLot int64
	// SafetyStock of every SKU.
	SafetyStock int64
	// MaxLines per order (at least 1) and MaxQty per line.
	MaxLines int
	MaxQty   int64
	// SKUSkew is the exponent of SKU popularity: the i-th SKU (from 1) is ordered in
	// proportion to 1/i^SKUSkew (Zipf's law; above 1 a few SKUs take most orders, below
	// 1 popularity falls off gently; 0 uniform).
	SKUSkew float64
	// ReserveShare of orders are placed in reserve mode (then allocated for shipment).
	ReserveShare float64
	// ChangeShare of orders get an order.lines_changed.
	ChangeShare float64
	// MoveShare of orders get an order.allocation_moved for their first line (0 for a
	// workload a fleet without that event must take: bench cost's baselines).
	MoveShare float64
	// ExtraChanges is the number of further order.lines_changed events every order gets
	// (lifecycles of 20 events and more, for the ordering tests).
	ExtraChanges int
	// ShuffleShare of orders send all their events in random order.
	ShuffleShare float64
	// CancelShare of orders are cancelled instead of shipped.
	CancelShare float64
	// OutOfOrderShare of orders send their payment before their placement.
	OutOfOrderShare float64
	// DuplicateShare of events are delivered a second time.
	DuplicateShare float64
	// TargetDate of every order (YYYY-MM-DD).
	TargetDate string
	// Window is how many orders are under way at once: an order's events start once one
	// of the orders before it has sent its last (0: every order from the start). Orders
	// then arrive over the run, so a SKU registered during it can get orders.
	Window int
	// WarehouseShare is the warehouse feed's share of the distinct events (0: no feed):
	// lots registered and received, holds, damage, recalls, safety stock changes, new
	// SKUs and returns of shipped orders (feed.go).
	WarehouseShare float64
	// AbandonedShare of the reserve-mode orders are abandoned checkouts: placed with a
	// hold of HoldFor, then never paid, cancelled nor shipped, so that junban expires them
	// (status expired). Their placements (and extensions) occur when Run first sends
	// them, so their holds run on the wall clock.
	AbandonedShare float64
	// HoldFor is an abandoned order's hold (order.placed's hold_for).
	HoldFor time.Duration
	// ExtendShare of the abandoned orders get an order.reservation_extended, right after
	// their placement, that moves the hold to twice HoldFor from then.
	ExtendShare float64
	// FeedCommutes keeps the feed's effects independent of how its events interleave
	// with the orders' while no SKU runs short, for the tests that compare a run with a
	// replay one entity at a time: recalls spare each SKU's first lot in FEFO order (the
	// one orders take from while it lasts). New lots and receipts always carry a
	// best-before after every lot the SKU has, so FEFO takes them last either way.
	FeedCommutes bool
	// Locations are the shop's locations (as registered: junbanctl locations set). With
	// some, the lots are spread over them in turn, and every order is routed: a share
	// PickupShare is collected at a location that offers pickup (pickup_location), the
	// others ship to a point near one of the shipping locations (ship_to). Without, every
	// lot is at the default location and no order names a route.
	Locations []stock.Location
	// PickupShare of the orders are pickups (with Locations).
	PickupShare float64
}

// Defaults of DefaultSpec that the demo and `junbanlab loadgen` quote.
const (
	// WarehouseShareDefault: a few percent of the events are the warehouse's.
	WarehouseShareDefault = 0.04
	// WindowDefault orders under way at once.
	WindowDefault = 40
)

// DefaultSpec is a small, lively workload: a shop whose orders mostly succeed, with a
// few hot SKUs that sell out, and the warehouse's feed beside it.
func DefaultSpec(run string) Spec {
	return Spec{
		Run: run, Seed: 1, Orders: 200, SKUs: 20, LotsPerSKU: 4, StockPerLot: 60, SafetyStock: 5,
		MaxLines: 3, MaxQty: 4, SKUSkew: 1.2, ReserveShare: 0.5, ChangeShare: 0.3, MoveShare: 0.075,
		CancelShare: 0.15, OutOfOrderShare: 0.2, DuplicateShare: 0.2, TargetDate: "2026-12-15",
		Window: WindowDefault, WarehouseShare: WarehouseShareDefault,
	}
}

// Workload is what a Spec generates.
type Workload struct {
	// Inventory is every SKU with its lots, for the import.
	Inventory []stock.SKU
	// NewSKUs are the SKUs the feed registers during the run (inventory.sku_registered),
	// in registration order; they are not in Inventory.
	NewSKUs []string
	// Events in sending order, duplicates included.
	Events []event.Order
	// Gates are the points in Events that wait for earlier events' results.
	Gates []Gate
	// Distinct is the number of distinct event ids.
	Distinct int
	// Orders lists every lcid.
	Orders []string
	// EarlyPayments are the payment events sent before their order's placement.
	EarlyPayments []string
	// Abandoned lists the abandoned orders' lcids (Spec.AbandonedShare).
	Abandoned []string
	// Locations are the spec's locations the lots are spread over (Spec.Locations).
	Locations []stock.Location
	// AtSend are the events whose occurred_at Run sets to the moment it first sends them:
	// the abandoned orders' placements and extensions.
	AtSend map[string]bool
}

// Gate is a point in Workload.Events that a sender holds at until the results of After
// are in: a new SKU's registration before its lots, its lots before the orders on it.
// A shop lists a product once the warehouse confirmed it; without the wait the queue may
// deliver an order before the SKU exists, and the order is rejected (ERR_UNKNOWN_SKU).
type Gate struct {
	// At is the index in Events of the first event sent after the wait.
	At int
	// After are the event ids whose results must be in first.
	After []string
}

// SKUs returns every SKU of the workload: the imported ones, then the new ones.
func (w Workload) SKUs() []string {
	out := make([]string, 0, len(w.Inventory)+len(w.NewSKUs))
	for _, s := range w.Inventory {
		out = append(out, s.SKU)
	}
	return append(out, w.NewSKUs...)
}

// SKUName is the i-th SKU of a run.
func SKUName(run string, i int) string { return fmt.Sprintf("%s-SKU-%03d", run, i) }

// orderPlan is one order as generated: its events in its own sending order, and what
// the feed's bookkeeping needs of it.
type orderPlan struct {
	events []event.Order
	lines  []event.Line
	// holds: the order keeps its stock (it is not cancelled).
	holds bool
	// newSKUs are the indexes (in Workload.NewSKUs) of the new SKUs its lines name.
	newSKUs []int
}

// Generate makes the workload of s.
func Generate(s Spec) Workload {
	rng := rand.New(rand.NewPCG(s.Seed, s.Seed^0x9e3779b97f4a7c15))
	w := Workload{Locations: s.Locations}
	target, err := time.Parse(time.DateOnly, s.TargetDate)
	if err != nil {
		target = time.Now().AddDate(0, 0, 14)
		s.TargetDate = target.Format(time.DateOnly)
	}
	for i := 0; i < s.SKUs; i++ {
		sku := stock.SKU{SKU: SKUName(s.Run, i), SafetyStock: s.SafetyStock}
		for j := 0; j < s.LotsPerSKU; j++ {
			lot := stock.Lot{
				LotID:     fmt.Sprintf("L%02d", j),
				Kind:      stock.KindOnHand,
				Good:      true,
				RegSeq:    int64(j + 1),
				ValidFrom: target.AddDate(0, -1, 0).Format(time.DateOnly),
				ValidTo:   target.AddDate(0, 6, 0).Format(time.DateOnly),
				Sellable:  s.StockPerLot,
			}
			// Best-before dates out of registration order, so FEFO is visible.
			lot.BestBefore = target.AddDate(0, 1+(j*7)%s.LotsPerSKU, 0).Format(time.DateOnly)
			if j == s.LotsPerSKU-1 && s.LotsPerSKU > 1 {
				lot.Kind = stock.KindPlanned
				lot.BestBefore = ""
				lot.ArrivesAt = target.AddDate(0, 0, -3).Format(time.DateOnly)
				lot.Sellable = s.StockPerLot / 2
			}
			lot.Location = s.locationAt(i + j)
			sku.Lots = append(sku.Lots, lot)
		}
		w.Inventory = append(w.Inventory, sku)
	}
	f := newFeed(rng, s, target, w.Inventory)
	pick := newSKUPicker(rng, s.SKUs, s.SKUSkew)
	// Routes draw from their own source, so that a spec without locations makes the
	// workload it always made.
	route := newRouter(s)
	plans := make([]orderPlan, 0, s.Orders)
	for o := 0; o < s.Orders; o++ {
		for range f.newSKUsFrom(o) {
			// A new product sells like one of the shop's others: now and then a hit.
			pick.add(1 + rng.IntN(max(1, s.SKUs)))
		}
		lcid := fmt.Sprintf("%s-LC-%05d", s.Run, o)
		w.Orders = append(w.Orders, lcid)
		mk := func(n int, t event.Type, data any) event.Order {
			ev := event.Order{EventID: fmt.Sprintf("%s-e%02d", lcid, n), Type: t, LCID: lcid, OccurredAt: target.Add(-time.Hour)}
			if data != nil {
				ev.Data, _ = json.Marshal(data)
			}
			return ev
		}
		var plan orderPlan
		nLines := 1 + rng.IntN(max(1, s.MaxLines))
		used := map[int]bool{}
		var lines []event.Line
		for l := 0; l < nLines; l++ {
			k := pick.pick()
			if used[k] {
				continue
			}
			used[k] = true
			if k >= s.SKUs {
				plan.newSKUs = append(plan.newSKUs, k-s.SKUs)
			}
			lines = append(lines, event.Line{LineID: fmt.Sprint(l + 1), SKU: SKUName(s.Run, k), Qty: 1 + rng.Int64N(max(1, s.MaxQty))})
		}
		plan.lines = lines
		// The least the first line ever asks for: what a return of it may bring back.
		firstMin := lines[0].Qty
		mode := stock.ModeShip
		reserve := rng.Float64() < s.ReserveShare
		if reserve {
			mode = stock.ModeReserve
		}
		if reserve && s.HoldFor > 0 && rng.Float64() < s.AbandonedShare {
			w.Abandoned = append(w.Abandoned, lcid)
			plan = abandoned(&w, rng, s, plan, lines, mk, route)
			plans = append(plans, plan)
			continue
		}
		placed := event.OrderData{Mode: mode, TargetDate: s.TargetDate, Lines: lines}
		route.apply(&placed)
		evs := []event.Order{mk(1, event.OrderPlaced, placed)}
		if rng.Float64() < s.ChangeShare {
			changed := append([]event.Line(nil), lines...)
			changed[0].Qty = 1 + rng.Int64N(max(1, s.MaxQty))
			firstMin = min(firstMin, changed[0].Qty)
			if len(changed) > 1 && rng.IntN(2) == 0 {
				changed = changed[:len(changed)-1]
			}
			evs = append(evs, mk(2, event.OrderLinesChanged, event.OrderData{Lines: changed}))
		}
		for c := 0; c < s.ExtraChanges; c++ {
			changed := append([]event.Line(nil), lines...)
			k := rng.IntN(len(changed))
			changed[k].Qty = 1 + rng.Int64N(max(1, s.MaxQty))
			if k == 0 {
				firstMin = min(firstMin, changed[0].Qty)
			}
			evs = append(evs, mk(10+c, event.OrderLinesChanged, event.OrderData{Lines: changed}))
		}
		// Customer service moves the first line to one of the spec's locations (without
		// locations, to the default one, where every generated lot is: rejected,
		// ERR_ALREADY_AT_LOCATION; ERR_INVALID_TRANSITION once the order ended).
		if rng.Float64() < s.MoveShare {
			evs = append(evs, mk(9, event.OrderAllocationMoved, event.AllocationMovedData{LineID: lines[0].LineID, ToLocation: route.moveTarget()}))
		}
		payment := mk(3, event.PaymentConfirmed, nil)
		if rng.Float64() < s.OutOfOrderShare {
			evs = append([]event.Order{payment}, evs...)
			w.EarlyPayments = append(w.EarlyPayments, payment.EventID)
		} else {
			evs = append(evs, payment)
		}
		shipped := rng.Float64() >= s.CancelShare
		if !shipped {
			evs = append(evs, mk(4, event.OrderCancelled, nil))
		} else {
			if reserve {
				evs = append(evs, mk(5, event.OrderAllocateForShipment, nil))
			}
			evs = append(evs, mk(6, event.OrderShipped, nil))
		}
		plan.holds = shipped
		if rng.Float64() < s.ShuffleShare {
			rng.Shuffle(len(evs), func(i, j int) { evs[i], evs[j] = evs[j], evs[i] })
		}
		// A return comes days after the shipment, whatever order the rest arrived in.
		if shipped && rng.Float64() < f.returnChance(len(evs), s.CancelShare) {
			evs = append(evs, mk(7, event.OrderReturned, f.returned(lines[0].LineID, firstMin)))
		}
		w.Distinct += len(evs)
		// A duplicate arrives anywhere after its original: right behind it (a
		// provider's timeout retry) or much later (an SQS redelivery).
		originals := slices.Clone(evs)
		for _, ev := range originals {
			if rng.Float64() >= s.DuplicateShare {
				continue
			}
			pos := slices.IndexFunc(evs, func(e event.Order) bool { return e.EventID == ev.EventID })
			evs = slices.Insert(evs, pos+1+rng.IntN(len(evs)-pos), ev)
		}
		plan.events = evs
		plans = append(plans, plan)
	}
	// Interleave the orders: each order's events keep their relative order (but for the
	// out-of-order payments and the duplicates at their end), orders mix at random, at
	// most Window of them under way at once. The feed's events go between them.
	window := s.Window
	if window <= 0 {
		window = len(plans)
	}
	next := make([]int, len(plans))
	live := make([]int, 0, min(window, len(plans)))
	started := 0
	for len(live) > 0 || started < len(plans) {
		for len(live) < window && started < len(plans) {
			live = append(live, started)
			started++
		}
		j := rng.IntN(len(live))
		o := live[j]
		if next[o] == 0 {
			f.orderStarts(&w, o, plans[o].newSKUs)
		}
		ev := plans[o].events[next[o]]
		f.orderEvent(ev, plans[o])
		w.Events = append(w.Events, ev)
		next[o]++
		if next[o] == len(plans[o].events) {
			live[j] = live[len(live)-1]
			live = live[:len(live)-1]
		}
		f.between(&w)
	}
	f.finish(&w)
	return w
}

// abandoned plans an abandoned checkout: a reserve-mode placement with a hold, perhaps an
// extension of it, a duplicate now and then, and nothing after; its stock is released
// only when junban expires the hold.
func abandoned(w *Workload, rng *rand.Rand, s Spec, plan orderPlan, lines []event.Line, mk func(int, event.Type, any) event.Order, route *router) orderPlan {
	if w.AtSend == nil {
		w.AtSend = map[string]bool{}
	}
	data := event.OrderData{Mode: stock.ModeReserve, TargetDate: s.TargetDate, Lines: lines, Hold: event.Hold{HoldFor: s.HoldFor.String()}}
	route.apply(&data)
	placed := mk(1, event.OrderPlaced, data)
	evs := []event.Order{placed}
	w.AtSend[placed.EventID] = true
	if rng.Float64() < s.ExtendShare {
		ext := mk(8, event.OrderReservationExtended, event.ReservationExtendedData{Hold: event.Hold{HoldFor: (2 * s.HoldFor).String()}})
		evs = append(evs, ext)
		w.AtSend[ext.EventID] = true
	}
	w.Distinct += len(evs)
	if rng.Float64() < s.DuplicateShare {
		evs = append(evs, evs[len(evs)-1])
	}
	// Until junban expires it, the order holds its stock as a shipped one does.
	plan.events, plan.holds = evs, true
	return plan
}

// skuPicker draws SKU indexes with Zipf popularity (index 0 the hottest, Spec.SKUSkew);
// SKUs added later take the popularity of a given rank.
type skuPicker struct {
	rng     *rand.Rand
	skew    float64
	weights []float64
	total   float64
}

func newSKUPicker(rng *rand.Rand, n int, skew float64) *skuPicker {
	p := &skuPicker{rng: rng, skew: skew}
	for i := range n {
		p.add(i + 1)
	}
	return p
}

// add appends a SKU as popular as the rank-th (1: the hottest).
func (p *skuPicker) add(rank int) {
	w := 1.0
	if p.skew > 0 {
		w = 1 / math.Pow(float64(rank), p.skew)
	}
	p.weights = append(p.weights, w)
	p.total += w
}

func (p *skuPicker) pick() int {
	x := p.rng.Float64() * p.total
	for i, w := range p.weights {
		if x < w {
			return i
		}
		x -= w
	}
	return len(p.weights) - 1
}

// Loader serves the workload's inventory, as PostgreSQL would after the import: the
// reference model (stock.Model) loads from it.
func (w Workload) Loader() stock.Loader { return staticLoader(w.Inventory) }

type staticLoader []stock.SKU

func (s staticLoader) LoadSKU(_ context.Context, sku string) (stock.SKU, error) {
	for _, k := range s {
		if k.SKU == sku {
			k.Lots = append([]stock.Lot(nil), k.Lots...)
			return k, nil
		}
	}
	return stock.SKU{}, fmt.Errorf("sku=%s: %w", sku, stock.ErrUnknownSKU)
}

// locationAt is the location of the n-th lot spread over the spec's locations in turn;
// "" (the default location) without locations.
func (s Spec) locationAt(n int) string {
	if len(s.Locations) == 0 {
		return ""
	}
	return s.Locations[n%len(s.Locations)].ID
}

// router gives orders their routes over a spec's locations (Spec.Locations).
type router struct {
	rng     *rand.Rand
	share   float64
	pickups []string
	ships   []stock.Location // shipping locations with coordinates
	enabled []string
}

func newRouter(s Spec) *router {
	r := &router{rng: rand.New(rand.NewPCG(s.Seed^0x10ca7e, s.Seed)), share: s.PickupShare}
	for _, l := range s.Locations {
		if !l.Enabled {
			continue
		}
		r.enabled = append(r.enabled, l.ID)
		if l.Pickup {
			r.pickups = append(r.pickups, l.ID)
		}
		if l.Ships && l.Lat != nil {
			r.ships = append(r.ships, l)
		}
	}
	return r
}

// moveTarget is where an order.allocation_moved moves a line: one of the spec's enabled
// locations, the default one without.
func (r *router) moveTarget() string {
	if len(r.enabled) == 0 {
		return stock.DefaultLocation
	}
	return r.enabled[r.rng.IntN(len(r.enabled))]
}

// apply routes an order.placed: a pickup at a location that offers it (a share of the
// orders), else a ship_to within about two degrees of a shipping location. Without
// locations it leaves the order unrouted.
func (r *router) apply(d *event.OrderData) {
	if len(r.pickups) > 0 && r.rng.Float64() < r.share {
		d.PickupLocation = r.pickups[r.rng.IntN(len(r.pickups))]
		return
	}
	if len(r.ships) == 0 {
		return
	}
	l := r.ships[r.rng.IntN(len(r.ships))]
	d.ShipTo = &event.Coordinates{
		Lat: math.Round((max(-89, min(89, *l.Lat+4*r.rng.Float64()-2)))*1e4) / 1e4,
		Lon: math.Round((max(-179, min(179, *l.Lon+4*r.rng.Float64()-2)))*1e4) / 1e4,
	}
}
