// Package resultgen makes realistic streams of result events for the tests and the
// benchmark of package persist: orders with lines that go through placement, payment,
// allocation for shipment, shipment or cancellation, with the moves and the touched
// lots that an in-memory ledger computes, and SKU versions that rise with every
// operation, as the order-worker would publish them.
package resultgen

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/ledger/stock"
)

// Config sizes a generator.
type Config struct {
	// Seed makes the stream reproducible.
	Seed uint64
	// SKUs is the number of SKUs in the catalog.
	SKUs int
	// LotsPerSKU is the number of lots per SKU.
	LotsPerSKU int
	// Active is the number of orders in progress at once; their events interleave.
	Active int
	// Prefix starts every SKU, lcid and event id, so streams of different runs never meet.
	Prefix string
	// Start is the processed_at of the first result; each next one is a millisecond later.
	Start time.Time
}

// Gen produces results. It is not safe for concurrent use.
type Gen struct {
	cfg    Config
	rng    *rand.Rand
	skus   []*stock.SKU
	active []*order
	nextID int
	now    time.Time
}

type order struct {
	lcid    string
	seq     int64
	snap    event.OrderSnapshot
	steps   []event.Type
	nextEvt int
}

// New returns a generator with a fresh catalog: every SKU at version 1 with its lots
// stocked.
func New(cfg Config) *Gen {
	if cfg.SKUs <= 0 {
		cfg.SKUs = 50
	}
	if cfg.LotsPerSKU <= 0 {
		cfg.LotsPerSKU = 3
	}
	if cfg.Active <= 0 {
		cfg.Active = 20
	}
	if cfg.Start.IsZero() {
		cfg.Start = time.Now().UTC().Truncate(time.Millisecond)
	}
	g := &Gen{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)), now: cfg.Start}
	for i := range cfg.SKUs {
		s := &stock.SKU{SKU: fmt.Sprintf("%sSKU-%04d", cfg.Prefix, i), SafetyStock: int64(g.rng.IntN(5)), Version: 1}
		for j := range cfg.LotsPerSKU {
			l := stock.Lot{
				LotID: fmt.Sprintf("L%02d", j), Kind: stock.KindOnHand, Good: true, RegSeq: int64(j + 1),
				BestBefore: cfg.Start.AddDate(0, 1+j, 0).Format(time.DateOnly),
				ValidFrom:  cfg.Start.AddDate(0, -1, 0).Format(time.DateOnly),
				ValidTo:    cfg.Start.AddDate(1, 0, 0).Format(time.DateOnly),
				Sellable:   1_000_000,
			}
			if j == cfg.LotsPerSKU-1 && j > 0 {
				l.Kind, l.BestBefore = stock.KindPlanned, ""
				l.ArrivesAt = cfg.Start.AddDate(0, 0, 14).Format(time.DateOnly)
			}
			s.Lots = append(s.Lots, l)
		}
		g.skus = append(g.skus, s)
	}
	return g
}

// Catalog returns the SKUs as they were before the first result (version 1).
func Catalog(cfg Config) []stock.SKU {
	g := New(cfg)
	out := make([]stock.SKU, len(g.skus))
	for i, s := range g.skus {
		out[i] = cloneSKU(*s)
	}
	return out
}

// Next returns the next result of the stream.
func (g *Gen) Next() event.Result {
	for len(g.active) < g.cfg.Active {
		g.active = append(g.active, g.newOrder())
	}
	i := g.rng.IntN(len(g.active))
	o := g.active[i]
	r := g.step(o)
	if o.nextEvt >= len(o.steps) {
		g.active[i] = g.active[len(g.active)-1]
		g.active = g.active[:len(g.active)-1]
	}
	return r
}

// Results returns the next n results.
func (g *Gen) Results(n int) []event.Result {
	out := make([]event.Result, n)
	for i := range out {
		out[i] = g.Next()
	}
	return out
}

// Order returns every result of one order's life, in seq order, and nothing else.
func (g *Gen) Order() []event.Result {
	o := g.newOrder()
	var out []event.Result
	for o.nextEvt < len(o.steps) {
		out = append(out, g.step(o))
	}
	return out
}

func (g *Gen) newOrder() *order {
	g.nextID++
	o := &order{lcid: fmt.Sprintf("%sLC-%07d", g.cfg.Prefix, g.nextID)}
	mode := stock.ModeShip
	if g.rng.IntN(3) == 0 {
		mode = stock.ModeReserve
	}
	o.snap = event.OrderSnapshot{LCID: o.lcid, Mode: mode, TargetDate: g.cfg.Start.AddDate(0, 0, 2).Format(time.DateOnly)}
	nLines := 1 + g.rng.IntN(3)
	for l := range nLines {
		s := g.skus[g.rng.IntN(len(g.skus))]
		o.snap.Lines = append(o.snap.Lines, event.SnapshotLine{LineID: fmt.Sprint(l + 1), SKU: s.SKU, Qty: int64(1 + g.rng.IntN(5))})
	}
	o.steps = []event.Type{event.OrderPlaced, event.PaymentConfirmed}
	if mode == stock.ModeReserve {
		o.steps = append(o.steps, event.OrderAllocateForShipment)
	}
	switch g.rng.IntN(10) {
	case 0:
		o.steps = []event.Type{event.OrderPlaced, event.OrderCancelled}
	case 1:
		o.steps = append(o.steps, event.OrderLinesChanged, event.OrderShipped)
	default:
		o.steps = append(o.steps, event.OrderShipped)
	}
	return o
}

// step runs the order's next event against the in-memory ledger and returns its result.
func (g *Gen) step(o *order) event.Result {
	typ := o.steps[o.nextEvt]
	o.nextEvt++
	o.seq++
	g.now = g.now.Add(time.Millisecond)
	evt := fmt.Sprintf("%sevt-%s-%d", g.cfg.Prefix, o.lcid, o.seq)
	r := event.Result{
		EventID: evt, Entity: o.lcid, LCID: o.lcid, Seq: o.seq, Arrival: o.seq,
		Type: typ, Outcome: event.Applied, ProcessedAt: g.now,
	}
	touched := map[string]map[string]bool{}
	move := func(opID string, s *stock.SKU, lot int, from, to string, qty int64, idx int) {
		l := &s.Lots[lot]
		*bucket(l, from) -= qty
		*bucket(l, to) += qty
		r.Moves = append(r.Moves, stock.Move{OpID: opID, Index: idx, SKU: s.SKU, LotID: l.LotID, From: from, To: to, Qty: qty})
		if touched[s.SKU] == nil {
			touched[s.SKU] = map[string]bool{}
		}
		touched[s.SKU][l.LotID] = true
	}
	// moveHeld moves every lot quantity of every line from one bucket to another.
	moveHeld := func(step, from, to string) {
		for li := range o.snap.Lines {
			line := &o.snap.Lines[li]
			s := g.sku(line.SKU)
			opID := fmt.Sprintf("%s:%s:%s", evt, line.LineID, step)
			for k, lq := range line.Lots {
				move(opID, s, g.lotIndex(s, lq.LotID), from, to, lq.Qty, k)
			}
			s.Version++
		}
	}
	held := stock.Allocated
	if o.snap.Allocation == "reserved" {
		held = stock.Reserved
	}

	switch typ {
	case event.OrderPlaced:
		to, alloc := stock.Allocated, "allocated"
		if o.snap.Mode == stock.ModeReserve {
			to, alloc = stock.Reserved, "reserved"
		}
		for li := range o.snap.Lines {
			line := &o.snap.Lines[li]
			s := g.sku(line.SKU)
			opID := fmt.Sprintf("%s:%s:alloc", evt, line.LineID)
			need, k := line.Qty, 0
			for lot := range s.Lots {
				if need == 0 || s.Lots[lot].Kind != stock.KindOnHand {
					continue
				}
				q := min(need, s.Lots[lot].Sellable)
				if q == 0 {
					continue
				}
				move(opID, s, lot, stock.Sellable, to, q, k)
				line.Lots = append(line.Lots, stock.LotQty{LotID: s.Lots[lot].LotID, Qty: q})
				need -= q
				k++
			}
			s.Version++
		}
		o.snap.Status, o.snap.Allocation = event.StatusPlaced, alloc
	case event.PaymentConfirmed:
		o.snap.Paid = true
	case event.OrderAllocateForShipment:
		moveHeld("confirm", stock.Reserved, stock.Allocated)
		o.snap.Allocation = "allocated"
	case event.OrderLinesChanged:
		// Lower the first line by one (if it can), releasing from its last lot.
		line := &o.snap.Lines[0]
		if line.Qty > 1 {
			s := g.sku(line.SKU)
			last := &line.Lots[len(line.Lots)-1]
			move(fmt.Sprintf("%s:%s:release", evt, line.LineID), s, g.lotIndex(s, last.LotID), held, stock.Sellable, 1, 0)
			s.Version++
			line.Qty--
			last.Qty--
			if last.Qty == 0 {
				line.Lots = line.Lots[:len(line.Lots)-1]
			}
		} else {
			r.Outcome, r.Reason = event.Rejected, "ERR_INVALID_TRANSITION"
		}
	case event.OrderCancelled:
		moveHeld("release", held, stock.Sellable)
		o.snap.Status = event.StatusCancelled
	case event.OrderShipped:
		moveHeld("ship", stock.Allocated, stock.Shipped)
		o.snap.Status = event.StatusShipped
	}

	snap := cloneSnapshot(o.snap)
	r.Order = &snap
	for _, s := range g.skus {
		lots := touched[s.SKU]
		if lots == nil {
			continue
		}
		// As the order-worker sends it: version and touched lots, no settings.
		out := stock.SKU{SKU: s.SKU, Version: s.Version}
		for _, l := range s.Lots {
			if lots[l.LotID] {
				out.Lots = append(out.Lots, l)
			}
		}
		r.SKUs = append(r.SKUs, out)
	}
	return r
}

func (g *Gen) sku(name string) *stock.SKU {
	for _, s := range g.skus {
		if s.SKU == name {
			return s
		}
	}
	panic("resultgen: unknown sku " + name)
}

func (g *Gen) lotIndex(s *stock.SKU, lotID string) int {
	for i, l := range s.Lots {
		if l.LotID == lotID {
			return i
		}
	}
	panic("resultgen: unknown lot " + lotID)
}

func bucket(l *stock.Lot, name string) *int64 {
	switch name {
	case stock.Sellable:
		return &l.Sellable
	case stock.Reserved:
		return &l.Reserved
	case stock.Allocated:
		return &l.Allocated
	case stock.Hidden:
		return &l.Hidden
	case stock.Shipped:
		return &l.Shipped
	}
	panic("resultgen: unknown bucket " + name)
}

func cloneSnapshot(s event.OrderSnapshot) event.OrderSnapshot {
	out := s
	out.Lines = make([]event.SnapshotLine, len(s.Lines))
	for i, l := range s.Lines {
		out.Lines[i] = l
		out.Lines[i].Lots = append([]stock.LotQty(nil), l.Lots...)
	}
	return out
}

func cloneSKU(s stock.SKU) stock.SKU {
	out := s
	out.Lots = append([]stock.Lot(nil), s.Lots...)
	return out
}
