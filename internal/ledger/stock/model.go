package stock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
)

// Model is the ledger's reference semantics in plain Go, in memory: the same
// operations, moves, results and errors as Ledger, without Redis. Tests replay events
// through it and compare. Op ids are remembered forever (no retention). It is safe for
// concurrent use.
type Model struct {
	mu     sync.Mutex
	loader Loader
	skus   map[string]*SKU
	ops    map[[2]string]modelOutcome
	// fences: the fence (Fenced) each remembered operation was made at, when it had one.
	fences map[[2]string]string
	// holders: sku -> lot -> lcid -> reserved+allocated units the order holds.
	holders map[string]map[string]map[string]int64
	// transfers: sku -> transfer id -> the transfer (transfer.go).
	transfers map[string]map[string]*Transfer
	// queues: sku -> its waiting lines (queue.go).
	queues map[string]*modelQueue
}

// modelOutcome is a remembered operation: its answer and its request's fingerprint.
type modelOutcome struct {
	res Result
	err error
	fp  string
}

// NewModel returns an empty Model that loads SKUs from loader (nil: only Put loads).
func NewModel(loader Loader) *Model {
	return &Model{loader: loader, skus: map[string]*SKU{}, ops: map[[2]string]modelOutcome{},
		fences:  map[[2]string]string{},
		holders: map[string]map[string]map[string]int64{}, transfers: map[string]map[string]*Transfer{},
		queues: map[string]*modelQueue{}}
}

// Put loads s unless its SKU is loaded already (like Load); it reports whether it did.
func (m *Model) Put(s SKU) (bool, error) {
	if err := CheckSKUState(s); err != nil {
		return false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.skus[s.SKU]; ok {
		return false, nil
	}
	c := cloneSKU(s)
	c.Transfers, c.Queue, c.QueueSeq = nil, nil, 0 // m.transfers and m.queues keep them
	m.skus[s.SKU] = &c
	if len(s.Queue) > 0 || s.QueueSeq > 0 {
		q := &modelQueue{seq: s.QueueSeq, entries: slices.Clone(s.Queue)}
		for _, e := range q.entries {
			q.seq = max(q.seq, e.Seq)
		}
		slices.SortFunc(q.entries, serveOrder)
		m.queues[s.SKU] = q
	}
	for _, t := range s.Transfers {
		if m.transfers[s.SKU] == nil {
			m.transfers[s.SKU] = map[string]*Transfer{}
		}
		m.transfers[s.SKU][t.TransferID] = cloneTransfer(&t)
	}
	return true, nil
}

func cloneSKU(s SKU) SKU {
	s.LocationSafety = maps.Clone(s.LocationSafety)
	s.Lots = slices.Clone(s.Lots)
	if s.Lots == nil {
		s.Lots = []Lot{}
	}
	SortLots(s.Lots)
	return s
}

// Load implements Inventory.
func (m *Model) Load(ctx context.Context, sku string) error {
	if err := CheckSKU(sku); err != nil {
		return err
	}
	if m.loader == nil {
		return fmt.Errorf("ledger: load sku=%s: no loader: %w", sku, ErrNotLoaded)
	}
	s, err := m.loader.LoadSKU(ctx, sku)
	if err != nil {
		return fmt.Errorf("ledger: load sku=%s: %w", sku, err)
	}
	s.SKU = sku
	if err := CheckSKUState(s); err != nil {
		return fmt.Errorf("ledger: load: %w", err)
	}
	_, err = m.Put(s)
	return err
}

// Snapshot implements Inventory.
func (m *Model) Snapshot(ctx context.Context, sku string) (SKU, error) {
	if err := CheckSKU(sku); err != nil {
		return SKU{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.skus[sku]
	if !ok {
		return SKU{}, OpError("snapshot", sku, ErrNotLoaded, "")
	}
	c := cloneSKU(*s)
	for _, t := range m.transfers[sku] {
		c.Transfers = append(c.Transfers, *cloneTransfer(t))
	}
	SortTransfers(c.Transfers)
	return c, nil
}

// modelOp is one operation's work on a SKU; it returns the error reason and detail of
// a failure, and otherwise records moves and touched lots in the op.
type modelOp struct {
	sku     *SKU
	work    []Lot // copies of touched lots, written back on success
	touched map[string]int
	moves   []Move
	reason  string
	// holder is the order whose holdings the moves change ("": none; a fill's moves
	// change its line's order's); held the change per holder and lot, applied on success.
	holder string
	held   map[[2]string]int64
	// queue is the SKU's queue as the operation changed it, written back on success;
	// fills are the lines the operation's fill served (queue.go).
	queue     *modelQueue
	fills     []Fill
	fillsMore bool
	// changed are the queue's entries the operation changed, as it left them.
	changed []QueueEntry
	// queued, position and dequeued are a backorder's or a dequeue's result fields.
	queued, position, dequeued int64
	// result fields of the operations that set them
	safety      int64
	safetyAt    string
	holderList  []Holder
	holderCount int
	transfer    *Transfer
}

func (o *modelOp) lot(id string) *Lot {
	if i, ok := o.touched[id]; ok {
		return &o.work[i]
	}
	for _, l := range o.sku.Lots {
		if l.LotID == id {
			o.touched[id] = len(o.work)
			o.work = append(o.work, l)
			return &o.work[len(o.work)-1]
		}
	}
	return nil
}

func BucketOf(l *Lot, b string) *int64 {
	switch b {
	case Sellable:
		return &l.Sellable
	case Reserved:
		return &l.Reserved
	case Allocated:
		return &l.Allocated
	case Hidden:
		return &l.Hidden
	case Shipped:
		return &l.Shipped
	case Defective:
		return &l.Defective
	}
	return nil
}

func (o *modelOp) move(l *Lot, from, to string, q int64) {
	if p := BucketOf(l, from); p != nil {
		*p -= q
	}
	if p := BucketOf(l, to); p != nil {
		*p += q
	}
	o.moves = append(o.moves, Move{Index: len(o.moves), LotID: l.LotID, From: from, To: to, Qty: q})
	if o.holder != "" {
		if d := heldBy(to)*q - heldBy(from)*q; d != 0 {
			if o.held == nil {
				o.held = map[[2]string]int64{}
			}
			o.held[[2]string{o.holder, l.LotID}] += d
		}
	}
}

// heldBy is 1 for the buckets whose units an order holds (reserved, allocated).
func heldBy(bucket string) int64 {
	if bucket == Reserved || bucket == Allocated {
		return 1
	}
	return 0
}

// applyHeld adds an operation's holder changes; an entry that falls to zero or below
// leaves (a release of more than the holder held, which junban never sends, clamps).
func (m *Model) applyHeld(sku string, o *modelOp) {
	for hl, d := range o.held {
		holder, lot := hl[0], hl[1]
		byLot := m.holders[sku]
		if byLot == nil {
			byLot = map[string]map[string]int64{}
			m.holders[sku] = byLot
		}
		h := byLot[lot]
		if h == nil {
			h = map[string]int64{}
			byLot[lot] = h
		}
		if n := h[holder] + d; n > 0 {
			h[holder] = n
		} else {
			delete(h, holder)
		}
	}
}

// Holders returns the orders holding reserved or allocated units of a lot, by lcid.
func (m *Model) Holders(sku, lot string) []Holder {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.holdersOf(sku, lot)
}

func (m *Model) holdersOf(sku, lot string) []Holder {
	var out []Holder
	for lcid, q := range m.holders[sku][lot] {
		out = append(out, Holder{LCID: lcid, LotID: lot, Qty: q})
	}
	slices.SortFunc(out, func(a, b Holder) int { return strings.Compare(a.LCID, b.LCID) })
	return out
}

// apply runs fn as one operation: replay memory, auto-load, all-or-nothing. fp is the
// request's fingerprint: a remembered outcome answers only a request with its fingerprint.
func (m *Model) apply(ctx context.Context, name, fp, opID, sku string, valid error, fn func(o *modelOp) (error, string)) (Result, error) {
	return m.applyAs(ctx, name, fp, opID, "", sku, "", valid, fn)
}

// applyAs is apply for an operation of an order's event: its moves change holder's
// holdings, and legacy ("" for none) is the op id an older worker named it by, whose
// outcome is replayed when opID has none (as ledger.lua's KEYS[3]).
func (m *Model) applyAs(ctx context.Context, name, fp, opID, legacy, sku, holder string, valid error, fn func(o *modelOp) (error, string)) (Result, error) {
	if valid != nil {
		return Result{OpID: opID, SKU: sku}, valid
	}
	r, err := m.applyOp(ctx, name, fp, opID, legacy, sku, holder, fn)
	r.LegacyOpID = legacy
	return r, err
}

func (m *Model) applyOp(ctx context.Context, name, fp, opID, legacy, sku, holder string, fn func(o *modelOp) (error, string)) (Result, error) {
	for attempt := 0; ; attempt++ {
		m.mu.Lock()
		prev, ok := m.ops[[2]string{sku, opID}]
		if ok && prev.fp != fp {
			m.mu.Unlock()
			return Result{OpID: opID, SKU: sku}, opConflict(name, sku, opID)
		}
		if !ok && legacy != "" {
			// A legacy record of another request is another operation's (ledger.lua).
			prev, ok = m.ops[[2]string{sku, legacy}]
			ok = ok && prev.fp == fp
		}
		if ok {
			m.mu.Unlock()
			r := prev.res
			r.Moves, r.Lots, r.Holders, r.Transfer, r.Fills = slices.Clone(r.Moves), slices.Clone(r.Lots), slices.Clone(r.Holders), cloneTransfer(r.Transfer), slices.Clone(r.Fills)
			r.Queue = slices.Clone(r.Queue)
			// The result names the operation asked for, as Ledger's decodes the record
			// under the op id it was asked for.
			r.OpID = opID
			for i := range r.Moves {
				r.Moves[i].OpID = opID
			}
			r.Replayed = true
			return r, prev.err
		}
		s, ok := m.skus[sku]
		if !ok {
			m.mu.Unlock()
			if attempt > 0 {
				return Result{OpID: opID, SKU: sku}, OpError(name, sku, ErrNotLoaded, "")
			}
			if err := m.Load(ctx, sku); err != nil {
				// The Loader's unknown SKU is remembered as a refusal (Ledger's
				// rememberUnknownSKU), unless another run's record came first.
				if name != "regsku" && errors.Is(err, ErrUnknownSKU) {
					m.mu.Lock()
					if _, had := m.ops[[2]string{sku, opID}]; had {
						m.mu.Unlock()
						continue
					}
					m.ops[[2]string{sku, opID}] = modelOutcome{res: Result{OpID: opID, SKU: sku}, err: err, fp: fp}
					m.mu.Unlock()
				}
				return Result{OpID: opID, SKU: sku}, err
			}
			continue
		}
		o := &modelOp{sku: s, touched: map[string]int{}, holder: holder, queue: m.queues[sku].clone()}
		sentinel, detail := fn(o)
		if sentinel != nil {
			err := OpError(name, sku, sentinel, detail)
			m.ops[[2]string{sku, opID}] = modelOutcome{res: Result{OpID: opID, SKU: sku}, err: err, fp: fp}
			m.mu.Unlock()
			return Result{OpID: opID, SKU: sku}, err
		}
		for _, w := range o.work {
			for i := range s.Lots {
				if s.Lots[i].LotID == w.LotID {
					s.Lots[i] = w
				}
			}
		}
		if fillsAfter(name) && len(o.queue.entries) > 0 {
			o.fill(fillLimit(name))
			for _, w := range o.work {
				for i := range s.Lots {
					if s.Lots[i].LotID == w.LotID {
						s.Lots[i] = w
					}
				}
			}
		}
		m.queues[sku] = o.queue
		m.applyHeld(sku, o)
		s.Version++
		r := Result{OpID: opID, SKU: sku, Moves: o.moves, Version: s.Version, Lots: o.work, Reason: o.reason,
			SafetyStock: o.safety, SafetyLocation: o.safetyAt, Holders: o.holderList, HolderCount: o.holderCount, Transfer: o.transfer,
			Queued: o.queued, Position: o.position, Dequeued: o.dequeued, Fills: o.fills, FillsMore: o.fillsMore, Queue: o.changed}
		if r.Moves == nil {
			r.Moves = []Move{}
		}
		for i := range r.Moves {
			r.Moves[i].OpID, r.Moves[i].SKU, r.Moves[i].Version = opID, sku, s.Version
		}
		m.ops[[2]string{sku, opID}] = modelOutcome{res: r, fp: fp}
		m.mu.Unlock()
		r.Moves, r.Lots, r.Holders, r.Transfer, r.Fills = slices.Clone(r.Moves), slices.Clone(r.Lots), slices.Clone(r.Holders), cloneTransfer(r.Transfer), slices.Clone(r.Fills)
		r.Queue = slices.Clone(r.Queue)
		return r, nil
	}
}

// candidatesOf returns the lots that may serve an allocation on date, in allocation order:
// by AllocKey, as the script's index holds them.
func candidatesOf(lots []Lot, date string) []Lot {
	type keyed struct {
		key string
		lot Lot
	}
	var ks []keyed
	for _, l := range lots {
		if l.Good && l.ValidFrom <= date && date <= l.ValidTo {
			ks = append(ks, keyed{AllocKey(l), l})
		}
	}
	slices.SortFunc(ks, func(a, b keyed) int { return strings.Compare(a.key, b.key) })
	out := make([]Lot, len(ks))
	for i, k := range ks {
		out[i] = k.lot
	}
	return out
}

// now returns the SKU's lots as the operation has changed them so far.
func (o *modelOp) now() []Lot {
	lots := slices.Clone(o.sku.Lots)
	for i, l := range lots {
		if j, ok := o.touched[l.LotID]; ok {
			lots[i] = o.work[j]
		}
	}
	return lots
}

// routed keeps the candidates at the route's eligible locations, ordered by their
// location's position, then by AllocKey (cands are in AllocKey order).
func routed(cands []Lot, route *Route) []Lot {
	pos := route.Positions()
	var out []Lot
	for _, c := range cands {
		if _, ok := pos[LocationOf(c)]; ok {
			out = append(out, c)
		}
	}
	slices.SortStableFunc(out, func(a, b Lot) int { return cmp.Compare(pos[LocationOf(a)], pos[LocationOf(b)]) })
	return out
}

// oneLocation keeps the candidates of the first location whose sellable (its cap, when
// caps apply) covers qty, the locations taken in the order of their first candidate with
// sellable stock; ok false when none does, with the largest location's sellable (cap)
// and whether some location's sellable alone would have covered qty.
func oneLocation(cands []Lot, qty int64, caps map[string]int64) (out []Lot, best int64, ok, uncapped bool) {
	sums := map[string]int64{}
	var order []string
	for _, c := range cands {
		if c.Sellable == 0 {
			continue // no candidate in the script's index
		}
		l := LocationOf(c)
		if _, seen := sums[l]; !seen {
			order = append(order, l)
		}
		sums[l] += c.Sellable
	}
	for _, l := range order {
		if have := capped(caps, l, sums[l]); have >= qty {
			for _, c := range cands {
				if LocationOf(c) == l {
					out = append(out, c)
				}
			}
			return out, 0, true, false
		}
		best = max(best, capped(caps, l, sums[l]))
		uncapped = uncapped || sums[l] >= qty
	}
	return nil, best, false, uncapped
}

// allocateVia moves qty from the candidates' sellable to mode's bucket, in allocation
// order (routed by route; nil: every lot alike), at most each location's cap for ship,
// or returns why it cannot.
func (o *modelOp) allocateVia(qty int64, date string, mode Mode, route *Route) (error, string) {
	cands := candidatesOf(o.now(), date)
	if route != nil {
		cands = routed(cands, route)
	}
	var sum int64
	for _, c := range cands {
		sum += c.Sellable
	}
	// The queue's demand is held back from every allocation (queue.go).
	queued := o.queue.demand()
	sum = max(0, sum-queued)
	if sum < qty {
		return ErrShortage, fmt.Sprintf("requested=%d available=%d", qty, sum) + queuedDetail(queued)
	}
	if mode == ModeShip && sum < o.sku.SafetyStock+qty {
		return ErrSafetyStock, fmt.Sprintf("requested=%d available=%d safety_stock=%d", qty, sum, o.sku.SafetyStock) + queuedDetail(queued)
	}
	caps, total := o.capsFor(cands, mode)
	if caps != nil && total-queued < qty {
		return ErrSafetyStock, fmt.Sprintf("requested=%d available=%d capped=%d", qty, sum, max(0, total-queued)) + queuedDetail(queued)
	}
	if err, detail := checkPlan(cands, qty, route, caps); err != nil {
		return err, detail
	}
	if route != nil && route.NoSplit {
		one, best, ok, uncapped := oneLocation(cands, qty, caps)
		switch {
		case uncapped:
			return ErrSafetyStock, fmt.Sprintf("requested=%d available=%d no_split", qty, best)
		case !ok:
			return ErrShortage, fmt.Sprintf("requested=%d available=%d no_split", qty, best)
		}
		cands = one
	}
	o.take(cands, qty, ModeBucket(mode), caps)
	return nil, ""
}

// checkPlan refuses with ErrStalePlan a route whose plan's locations no longer cover qty
// (under their caps, when caps apply).
func checkPlan(cands []Lot, qty int64, route *Route, caps map[string]int64) (error, string) {
	if route == nil || len(route.Plan) == 0 {
		return nil, ""
	}
	by := map[string]int64{}
	for _, c := range cands {
		if slices.Contains(route.Plan, LocationOf(c)) {
			by[LocationOf(c)] += c.Sellable
		}
	}
	var planned int64
	for l, s := range by {
		planned += capped(caps, l, s)
	}
	if planned < qty {
		return ErrStalePlan, fmt.Sprintf("requested=%d planned=%d", qty, planned)
	}
	return nil, ""
}

// take moves qty from cands' sellable to bucket to, in their order, each emptied before
// the next, at most each location's cap (caps nil: no cap).
func (o *modelOp) take(cands []Lot, qty int64, to string, caps map[string]int64) {
	left := maps.Clone(caps)
	rem := qty
	for _, c := range cands {
		if rem == 0 {
			break
		}
		t := min(c.Sellable, rem)
		if left != nil {
			t = min(t, left[LocationOf(c)])
			left[LocationOf(c)] -= t
		}
		if t > 0 {
			o.move(o.lot(c.LotID), Sellable, to, t)
			rem -= t
		}
	}
}

// SellableByLocation is the sellable of sku's candidates on date per location (only
// locations with candidates), less each location's safety stock (a location left with
// none is absent): what a fewest_splits plan reads.
func (m *Model) SellableByLocation(ctx context.Context, sku, date string) (map[string]int64, error) {
	s, err := m.Snapshot(ctx, sku)
	if errors.Is(err, ErrNotLoaded) {
		if err = m.Load(ctx, sku); err == nil {
			s, err = m.Snapshot(ctx, sku)
		}
	}
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, c := range candidatesOf(s.Lots, date) {
		if c.Sellable > 0 {
			out[LocationOf(c)] += c.Sellable
		}
	}
	return LessLocationSafety(out, s.LocationSafety), nil
}

// ModeBucket is the bucket an allocation of mode moves to.
func ModeBucket(mode Mode) string {
	if mode == ModeShip {
		return Allocated
	}
	return Reserved
}

// moveEach moves lots from one bucket to another, each after checking that its bucket
// holds it, or returns why it cannot. Every lot must exist (findLots).
func (o *modelOp) moveEach(from, to string, lots []LotQty) (error, string) {
	for _, q := range lots {
		l := o.lot(q.LotID)
		if have := *BucketOf(l, from); have < q.Qty {
			return ErrInsufficient, fmt.Sprintf("lot=%s %s=%d requested=%d", q.LotID, from, have, q.Qty)
		}
		o.move(l, from, to, q.Qty)
	}
	return nil, ""
}

// findLots returns the first unknown lot of lists, in order.
func (o *modelOp) findLots(lists ...[]LotQty) (error, string) {
	for _, lots := range lists {
		for _, q := range lots {
			if o.lot(q.LotID) == nil {
				return ErrUnknownLot, "lot=" + q.LotID
			}
		}
	}
	return nil, ""
}

// atLocation checks that lot l is stored at location (empty: any).
func atLocation(l *Lot, location string) (error, string) {
	if location == "" || LocationOf(*l) == location {
		return nil, ""
	}
	return ErrLocation, "lot=" + l.LotID + " location=" + LocationOf(*l) + " requested=" + location
}

// moveLots moves lots from -> to, then back to -> from; location, when not empty, is
// where every lot moved must be stored.
func (m *Model) moveLots(ctx context.Context, name, fp, opID, legacy, sku, holder, reason string, valid error, from, to string, lots, back []LotQty, location string) (Result, error) {
	return m.applyAs(ctx, name, fp, opID, legacy, sku, holder, valid, func(o *modelOp) (error, string) {
		if err, detail := o.findLots(lots, back); err != nil {
			return err, detail
		}
		for _, q := range lots {
			if err, detail := atLocation(o.lot(q.LotID), location); err != nil {
				return err, detail
			}
		}
		if err, detail := o.moveEach(from, to, lots); err != nil {
			return err, detail
		}
		if err, detail := o.moveEach(to, from, back); err != nil {
			return err, detail
		}
		o.reason = reason
		return nil, ""
	})
}
