// Package loadgen makes realistic order workloads: inventory, orders over skewed SKUs,
// their lifecycles, duplicate deliveries and out-of-order arrivals. The same generator
// feeds `junbanctl loadgen`, the demo, the end-to-end test and the chaos run.
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
	"github.com/junban/junban/internal/ledger"
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
	// SKUSkew is the Zipf exponent of SKU popularity (> 1 is skewed; 0 uniform).
	SKUSkew float64
	// ReserveShare of orders are placed in reserve mode (then allocated for shipment).
	ReserveShare float64
	// ChangeShare of orders get an order.lines_changed.
	ChangeShare float64
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
}

// DefaultSpec is a small, lively workload.
func DefaultSpec(run string) Spec {
	return Spec{
		Run: run, Seed: 1, Orders: 200, SKUs: 20, LotsPerSKU: 4, StockPerLot: 60, SafetyStock: 5,
		MaxLines: 3, MaxQty: 4, SKUSkew: 1.2, ReserveShare: 0.5, ChangeShare: 0.3,
		CancelShare: 0.15, OutOfOrderShare: 0.2, DuplicateShare: 0.2, TargetDate: "2026-12-15",
	}
}

// Workload is what a Spec generates.
type Workload struct {
	// Inventory is every SKU with its lots, for the import.
	Inventory []ledger.SKU
	// Events in sending order, duplicates included.
	Events []event.Order
	// Distinct is the number of distinct event ids.
	Distinct int
	// Orders lists every lcid.
	Orders []string
	// EarlyPayments are the payment events sent before their order's placement.
	EarlyPayments []string
}

// SKUName is the i-th SKU of a run.
func SKUName(run string, i int) string { return fmt.Sprintf("%s-SKU-%03d", run, i) }

// Generate makes the workload of s.
func Generate(s Spec) Workload {
	rng := rand.New(rand.NewPCG(s.Seed, s.Seed^0x9e3779b97f4a7c15))
	var w Workload
	target, err := time.Parse(time.DateOnly, s.TargetDate)
	if err != nil {
		target = time.Now().AddDate(0, 0, 14)
		s.TargetDate = target.Format(time.DateOnly)
	}
	for i := 0; i < s.SKUs; i++ {
		sku := ledger.SKU{SKU: SKUName(s.Run, i), SafetyStock: s.SafetyStock}
		for j := 0; j < s.LotsPerSKU; j++ {
			lot := ledger.Lot{
				LotID:     fmt.Sprintf("L%02d", j),
				Kind:      ledger.KindOnHand,
				Good:      true,
				RegSeq:    int64(j + 1),
				ValidFrom: target.AddDate(0, -1, 0).Format(time.DateOnly),
				ValidTo:   target.AddDate(0, 6, 0).Format(time.DateOnly),
				Sellable:  s.StockPerLot,
			}
			// Best-before dates out of registration order, so FEFO is visible.
			lot.BestBefore = target.AddDate(0, 1+(j*7)%s.LotsPerSKU, 0).Format(time.DateOnly)
			if j == s.LotsPerSKU-1 && s.LotsPerSKU > 1 {
				lot.Kind = ledger.KindPlanned
				lot.BestBefore = ""
				lot.ArrivesAt = target.AddDate(0, 0, -3).Format(time.DateOnly)
				lot.Sellable = s.StockPerLot / 2
			}
			sku.Lots = append(sku.Lots, lot)
		}
		w.Inventory = append(w.Inventory, sku)
	}
	pick := skuPicker(rng, s.SKUs, s.SKUSkew)
	var perOrder [][]event.Order
	for o := 0; o < s.Orders; o++ {
		lcid := fmt.Sprintf("%s-LC-%05d", s.Run, o)
		w.Orders = append(w.Orders, lcid)
		mk := func(n int, t event.Type, data any) event.Order {
			ev := event.Order{EventID: fmt.Sprintf("%s-e%02d", lcid, n), Type: t, LCID: lcid, OccurredAt: target.Add(-time.Hour)}
			if data != nil {
				ev.Data, _ = json.Marshal(data)
			}
			return ev
		}
		nLines := 1 + rng.IntN(max(1, s.MaxLines))
		used := map[int]bool{}
		var lines []event.Line
		for l := 0; l < nLines; l++ {
			k := pick()
			if used[k] {
				continue
			}
			used[k] = true
			lines = append(lines, event.Line{LineID: fmt.Sprint(l + 1), SKU: SKUName(s.Run, k), Qty: 1 + rng.Int64N(max(1, s.MaxQty))})
		}
		mode := ledger.ModeShip
		reserve := rng.Float64() < s.ReserveShare
		if reserve {
			mode = ledger.ModeReserve
		}
		evs := []event.Order{mk(1, event.OrderPlaced, event.OrderData{Mode: mode, TargetDate: s.TargetDate, Lines: lines})}
		if rng.Float64() < s.ChangeShare {
			changed := append([]event.Line(nil), lines...)
			changed[0].Qty = 1 + rng.Int64N(max(1, s.MaxQty))
			if len(changed) > 1 && rng.IntN(2) == 0 {
				changed = changed[:len(changed)-1]
			}
			evs = append(evs, mk(2, event.OrderLinesChanged, event.OrderData{Lines: changed}))
		}
		for c := 0; c < s.ExtraChanges; c++ {
			changed := append([]event.Line(nil), lines...)
			k := rng.IntN(len(changed))
			changed[k].Qty = 1 + rng.Int64N(max(1, s.MaxQty))
			evs = append(evs, mk(10+c, event.OrderLinesChanged, event.OrderData{Lines: changed}))
		}
		payment := mk(3, event.PaymentConfirmed, nil)
		if rng.Float64() < s.OutOfOrderShare {
			evs = append([]event.Order{payment}, evs...)
			w.EarlyPayments = append(w.EarlyPayments, payment.EventID)
		} else {
			evs = append(evs, payment)
		}
		if rng.Float64() < s.CancelShare {
			evs = append(evs, mk(4, event.OrderCancelled, nil))
		} else {
			if reserve {
				evs = append(evs, mk(5, event.OrderAllocateForShipment, nil))
			}
			evs = append(evs, mk(6, event.OrderShipped, nil))
		}
		if rng.Float64() < s.ShuffleShare {
			rng.Shuffle(len(evs), func(i, j int) { evs[i], evs[j] = evs[j], evs[i] })
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
		perOrder = append(perOrder, evs)
	}
	// Interleave the orders: each order's events keep their relative order (but for the
	// out-of-order payments and the duplicates at their end), orders mix at random.
	next := make([]int, len(perOrder))
	live := make([]int, 0, len(perOrder))
	for i := range perOrder {
		live = append(live, i)
	}
	for len(live) > 0 {
		j := rng.IntN(len(live))
		o := live[j]
		w.Events = append(w.Events, perOrder[o][next[o]])
		next[o]++
		if next[o] == len(perOrder[o]) {
			live[j] = live[len(live)-1]
			live = live[:len(live)-1]
		}
	}
	return w
}

// skuPicker draws SKU indexes with Zipf popularity (index 0 the hottest).
func skuPicker(rng *rand.Rand, n int, skew float64) func() int {
	if skew <= 1 || n < 2 {
		return func() int { return rng.IntN(n) }
	}
	weights := make([]float64, n)
	total := 0.0
	for i := range weights {
		weights[i] = 1 / math.Pow(float64(i+1), skew)
		total += weights[i]
	}
	return func() int {
		x := rng.Float64() * total
		for i, w := range weights {
			if x < w {
				return i
			}
			x -= w
		}
		return n - 1
	}
}

// Loader serves the workload's inventory, as PostgreSQL would after the import: the
// reference model (ledger.Model) loads from it.
func (w Workload) Loader() ledger.Loader { return staticLoader(w.Inventory) }

type staticLoader []ledger.SKU

func (s staticLoader) LoadSKU(_ context.Context, sku string) (ledger.SKU, error) {
	for _, k := range s {
		if k.SKU == sku {
			k.Lots = append([]ledger.Lot(nil), k.Lots...)
			return k, nil
		}
	}
	return ledger.SKU{}, fmt.Errorf("sku=%s: %w", sku, ledger.ErrUnknownSKU)
}
