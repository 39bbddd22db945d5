package ledger

import (
	"context"
	"fmt"
	"slices"
	"sort"
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
}

type modelOutcome struct {
	res Result
	err error
}

// NewModel returns an empty Model that loads SKUs from loader (nil: only Put loads).
func NewModel(loader Loader) *Model {
	return &Model{loader: loader, skus: map[string]*SKU{}, ops: map[[2]string]modelOutcome{}}
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
	m.skus[s.SKU] = &c
	return true, nil
}

func cloneSKU(s SKU) SKU {
	s.Lots = slices.Clone(s.Lots)
	if s.Lots == nil {
		s.Lots = []Lot{}
	}
	sortLots(s.Lots)
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
		return SKU{}, opError("snapshot", sku, ErrNotLoaded, "")
	}
	return cloneSKU(*s), nil
}

// modelOp is one operation's work on a SKU; it returns the error reason and detail of
// a failure, and otherwise records moves and touched lots in the op.
type modelOp struct {
	sku     *SKU
	work    []Lot // copies of touched lots, written back on success
	touched map[string]int
	moves   []Move
	reason  string
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

func bucketOf(l *Lot, b string) *int64 {
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
	}
	return nil
}

func (o *modelOp) move(l *Lot, from, to string, q int64) {
	if p := bucketOf(l, from); p != nil {
		*p -= q
	}
	if p := bucketOf(l, to); p != nil {
		*p += q
	}
	o.moves = append(o.moves, Move{Index: len(o.moves), LotID: l.LotID, From: from, To: to, Qty: q})
}

// apply runs fn as one operation: replay memory, auto-load, all-or-nothing.
func (m *Model) apply(ctx context.Context, name, opID, sku string, valid error, fn func(o *modelOp) (error, string)) (Result, error) {
	if valid != nil {
		return Result{OpID: opID, SKU: sku}, valid
	}
	for attempt := 0; ; attempt++ {
		m.mu.Lock()
		if prev, ok := m.ops[[2]string{sku, opID}]; ok {
			m.mu.Unlock()
			r := prev.res
			r.Moves, r.Lots = slices.Clone(r.Moves), slices.Clone(r.Lots)
			r.Replayed = true
			return r, prev.err
		}
		s, ok := m.skus[sku]
		if !ok {
			m.mu.Unlock()
			if attempt > 0 {
				return Result{OpID: opID, SKU: sku}, opError(name, sku, ErrNotLoaded, "")
			}
			if err := m.Load(ctx, sku); err != nil {
				return Result{OpID: opID, SKU: sku}, err
			}
			continue
		}
		o := &modelOp{sku: s, touched: map[string]int{}}
		sentinel, detail := fn(o)
		if sentinel != nil {
			err := opError(name, sku, sentinel, detail)
			m.ops[[2]string{sku, opID}] = modelOutcome{res: Result{OpID: opID, SKU: sku}, err: err}
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
		s.Version++
		r := Result{OpID: opID, SKU: sku, Moves: o.moves, Version: s.Version, Lots: o.work, Reason: o.reason}
		if r.Moves == nil {
			r.Moves = []Move{}
		}
		for i := range r.Moves {
			r.Moves[i].OpID, r.Moves[i].SKU, r.Moves[i].Version = opID, sku, s.Version
		}
		m.ops[[2]string{sku, opID}] = modelOutcome{res: r}
		m.mu.Unlock()
		r.Moves, r.Lots = slices.Clone(r.Moves), slices.Clone(r.Lots)
		return r, nil
	}
}

// candidates returns the lots that may serve an allocation on date, in allocation order.
func candidates(s *SKU, date string) []Lot {
	var onhand, planned []Lot
	for _, l := range s.Lots {
		if !l.Good || date < l.ValidFrom || date > l.ValidTo {
			continue
		}
		if l.Kind == KindPlanned {
			planned = append(planned, l)
		} else {
			onhand = append(onhand, l)
		}
	}
	bb := func(l Lot) string {
		if l.BestBefore == "" {
			return "\xff" // no best-before: after every dated lot
		}
		return l.BestBefore
	}
	sort.Slice(onhand, func(i, j int) bool {
		if bb(onhand[i]) != bb(onhand[j]) {
			return bb(onhand[i]) < bb(onhand[j])
		}
		return onhand[i].RegSeq < onhand[j].RegSeq
	})
	sort.Slice(planned, func(i, j int) bool { return planned[i].RegSeq > planned[j].RegSeq })
	return append(onhand, planned...)
}

// Allocate implements Inventory.
func (m *Model) Allocate(ctx context.Context, r AllocateRequest) (Result, error) {
	return m.apply(ctx, "alloc", r.OpID, r.SKU, r.validate(), func(o *modelOp) (error, string) {
		cands := candidates(o.sku, r.TargetDate)
		var sum int64
		for _, c := range cands {
			sum += c.Sellable
		}
		if sum < r.Qty {
			return ErrShortage, fmt.Sprintf("requested=%d available=%d", r.Qty, sum)
		}
		if r.Mode == ModeShip && sum < o.sku.SafetyStock+r.Qty {
			return ErrSafetyStock, fmt.Sprintf("requested=%d available=%d safety_stock=%d", r.Qty, sum, o.sku.SafetyStock)
		}
		to := Reserved
		if r.Mode == ModeShip {
			to = Allocated
		}
		rem := r.Qty
		for _, c := range cands {
			if rem == 0 {
				break
			}
			if c.Sellable > 0 {
				t := min(c.Sellable, rem)
				o.move(o.lot(c.LotID), Sellable, to, t)
				rem -= t
			}
		}
		return nil, ""
	})
}

func (m *Model) moveLots(ctx context.Context, name, opID, sku string, valid error, from, to string, lots []LotQty) (Result, error) {
	return m.apply(ctx, name, opID, sku, valid, func(o *modelOp) (error, string) {
		for _, q := range lots {
			if o.lot(q.LotID) == nil {
				return ErrUnknownLot, "lot=" + q.LotID
			}
		}
		for _, q := range lots {
			l := o.lot(q.LotID)
			if have := *bucketOf(l, from); have < q.Qty {
				return ErrInsufficient, fmt.Sprintf("lot=%s %s=%d requested=%d", q.LotID, from, have, q.Qty)
			}
			o.move(l, from, to, q.Qty)
		}
		return nil, ""
	})
}

// Release implements Inventory.
func (m *Model) Release(ctx context.Context, r ReleaseRequest) (Result, error) {
	return m.moveLots(ctx, "move", r.OpID, r.SKU, r.validate(), r.From, Sellable, r.Lots)
}

// Confirm implements Inventory.
func (m *Model) Confirm(ctx context.Context, r LotsRequest) (Result, error) {
	return m.moveLots(ctx, "move", r.OpID, r.SKU, r.validate(), Reserved, Allocated, r.Lots)
}

// Ship implements Inventory.
func (m *Model) Ship(ctx context.Context, r LotsRequest) (Result, error) {
	return m.moveLots(ctx, "move", r.OpID, r.SKU, r.validate(), Allocated, Shipped, r.Lots)
}

// Undo implements Inventory.
func (m *Model) Undo(ctx context.Context, r UndoRequest) (Result, error) {
	return m.moveLots(ctx, "move", r.OpID, r.SKU, r.validate(), r.To, r.From, r.Lots)
}

// Hide implements Inventory.
func (m *Model) Hide(ctx context.Context, r LotRequest) (Result, error) {
	return m.moveLots(ctx, "move", r.OpID, r.SKU, r.validate(true), Sellable, Hidden, []LotQty{{r.LotID, r.Qty}})
}

// Unhide implements Inventory.
func (m *Model) Unhide(ctx context.Context, r LotRequest) (Result, error) {
	return m.moveLots(ctx, "move", r.OpID, r.SKU, r.validate(true), Hidden, Sellable, []LotQty{{r.LotID, r.Qty}})
}

// Receive implements Inventory.
func (m *Model) Receive(ctx context.Context, r ReceiveRequest) (Result, error) {
	return m.apply(ctx, "receive", r.OpID, r.SKU, r.validate(), func(o *modelOp) (error, string) {
		l := o.lot(r.LotID)
		if l == nil {
			return ErrUnknownLot, "lot=" + r.LotID
		}
		if l.Kind != KindPlanned {
			return ErrLotState, "lot=" + r.LotID + " kind=" + l.Kind
		}
		if r.Qty > 0 {
			diff := r.Qty - (l.Sellable + l.Reserved + l.Allocated + l.Hidden)
			switch {
			case diff > 0:
				o.move(l, External, Sellable, diff)
			case diff < 0 && l.Sellable < -diff:
				return ErrInsufficient, fmt.Sprintf("lot=%s sellable=%d short_by=%d", r.LotID, l.Sellable, -diff)
			case diff < 0:
				o.move(l, Sellable, External, -diff)
			}
		}
		l.Kind, l.BestBefore = KindOnHand, r.BestBefore
		return nil, ""
	})
}

// MarkDefective implements Inventory.
func (m *Model) MarkDefective(ctx context.Context, r LotRequest) (Result, error) {
	return m.apply(ctx, "defect", r.OpID, r.SKU, r.validate(false), func(o *modelOp) (error, string) {
		l := o.lot(r.LotID)
		if l == nil {
			return ErrUnknownLot, "lot=" + r.LotID
		}
		l.Good = false
		return nil, ""
	})
}

// Adjust implements Inventory.
func (m *Model) Adjust(ctx context.Context, r AdjustRequest) (Result, error) {
	return m.apply(ctx, "adjust", r.OpID, r.SKU, r.validate(), func(o *modelOp) (error, string) {
		l := o.lot(r.LotID)
		if l == nil {
			return ErrUnknownLot, "lot=" + r.LotID
		}
		if r.Delta > 0 {
			o.move(l, External, Sellable, r.Delta)
		} else {
			if l.Sellable < -r.Delta {
				return ErrInsufficient, fmt.Sprintf("lot=%s sellable=%d requested=%d", r.LotID, l.Sellable, -r.Delta)
			}
			o.move(l, Sellable, External, -r.Delta)
		}
		o.reason = r.Reason
		return nil, ""
	})
}
