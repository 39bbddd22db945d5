package stock

import (
	"context"
	"errors"
	"fmt"
)

// Op is one ledger operation: a value of one of this package's request types
// (AllocateRequest, ReleaseRequest, ... SafetyStockRequest), each declared once, below,
// with what it does in the reference Model and whether the quarantine can undo it.
// Model.Apply and internal/ledger's Ledger.Apply (Redis: a ledger.lua call per type) run
// any of them, so a caller, the order's state machine and its quarantine recorder name no
// operation: a new operation is a new type here, the compiler asks for its model parts,
// and internal/ledger's TestApplyRunsEveryOp for its Redis run.
type Op interface {
	// Validate checks the request's fields (ErrInvalidRequest, ErrInvalidQuantity).
	Validate() error
	// model runs it on the Model.
	model(ctx context.Context, m *Model) (Result, error)
	// reversal says whether an UndoRequest of its moves takes it back.
	reversal() Reversal
	// Fingerprint identifies the request (fingerprint.go): a replay of its op id answers
	// from the record only when the fingerprints are equal.
	Fingerprint() string
}

// Reversal says what undoing an applied operation means (the order-worker's quarantine
// undoes what a failing event moved).
type Reversal int

const (
	// Reversible: an UndoRequest of the operation's moves puts the lots back as they were
	// (the operations of an order's events).
	Reversible Reversal = iota
	// Irreversible: the operation changed a lot beyond its moves (a receive makes a
	// planned lot on hand, a registration adds one, a recall marks it bad) or is a SKU's
	// own event's only operation; a quarantine completes its event instead.
	Irreversible
	// Reverses: the operation is itself an undo (UndoRequest).
	Reverses
)

// ReversalOf returns op's Reversal.
func ReversalOf(op Op) Reversal { return op.reversal() }

// Apply runs op on the model.
func (m *Model) Apply(ctx context.Context, op Op) (Result, error) { return op.model(ctx, m) }

// ConfirmRequest confirms a reservation: reserved -> allocated in the given lots.
type ConfirmRequest LotsRequest

func (r ConfirmRequest) Validate() error { return LotsRequest(r).Validate() }

// ShipRequest ships allocated units: allocated -> shipped in the given lots.
type ShipRequest LotsRequest

func (r ShipRequest) Validate() error { return LotsRequest(r).Validate() }

// ReleaseHoldRequest gives held units back to sale: hidden -> sellable.
type ReleaseHoldRequest HoldRequest

func (r ReleaseHoldRequest) Validate() error { return HoldRequest(r).Validate() }

// DamageRequest records damaged units: sellable -> defective.
type DamageRequest HoldRequest

func (r DamageRequest) Validate() error { return HoldRequest(r).Validate() }

func (AllocateRequest) reversal() Reversal       { return Reversible }
func (ReleaseRequest) reversal() Reversal        { return Reversible }
func (ConfirmRequest) reversal() Reversal        { return Reversible }
func (ShipRequest) reversal() Reversal           { return Reversible }
func (ChangeRequest) reversal() Reversal         { return Reversible }
func (MoveAllocationRequest) reversal() Reversal { return Reversible }
func (ReturnRequest) reversal() Reversal         { return Reversible }
func (UndoRequest) reversal() Reversal           { return Reverses }
func (ReceiveRequest) reversal() Reversal        { return Irreversible }
func (AdjustRequest) reversal() Reversal         { return Irreversible }
func (HoldRequest) reversal() Reversal           { return Irreversible }
func (ReleaseHoldRequest) reversal() Reversal    { return Irreversible }
func (DamageRequest) reversal() Reversal         { return Irreversible }
func (RecallRequest) reversal() Reversal         { return Irreversible }
func (RegisterSKURequest) reversal() Reversal    { return Irreversible }
func (RegisterLotRequest) reversal() Reversal    { return Irreversible }
func (SafetyStockRequest) reversal() Reversal    { return Irreversible }

// Each operation's model.

// AllocateRequest: sets aside Qty units from the lots valid on TargetDate: on-hand lots by
// best-before (FEFO), then planned lots newest first (LIFO). ModeShip moves
// sellable -> allocated and keeps safety stock (ErrSafetyStock); ModeReserve moves
// sellable -> reserved. ErrShortage when the candidates cannot cover Qty.

func (r AllocateRequest) model(ctx context.Context, m *Model) (Result, error) {
	return m.applyAs(ctx, "alloc", r.Fingerprint(), r.OpID, r.LegacyOpID, r.SKU, r.Holder, r.Validate(), func(o *modelOp) (error, string) {
		return o.allocateVia(r.Qty, r.TargetDate, r.Mode, r.Route)
	})
}

// ReleaseRequest: returns the given quantities from r.From (Reserved or Allocated) to sellable.

func (r ReleaseRequest) model(ctx context.Context, m *Model) (Result, error) {
	return m.moveLots(ctx, "move", r.Fingerprint(), r.OpID, r.LegacyOpID, r.SKU, r.Holder, "", r.Validate(), r.From, Sellable, r.Lots, nil, "")
}

// ConfirmRequest: moves reserved -> allocated in the given lots, without the safety check.

func (r ConfirmRequest) model(ctx context.Context, m *Model) (Result, error) {
	return m.moveLots(ctx, "move", r.Fingerprint(), r.OpID, r.LegacyOpID, r.SKU, r.Holder, "", r.Validate(), Reserved, Allocated, r.Lots, nil, "")
}

// ShipRequest: moves allocated -> shipped in the given lots.

func (r ShipRequest) model(ctx context.Context, m *Model) (Result, error) {
	return m.moveLots(ctx, "move", r.Fingerprint(), r.OpID, r.LegacyOpID, r.SKU, r.Holder, "", r.Validate(), Allocated, Shipped, r.Lots, nil, "")
}

// UndoRequest: moves the given quantities back from r.To to r.From: it reverses an allocation, a
// release, a confirm or a shipment that an order's event made, when a later line of the
// same event was refused. It takes back exactly those lots, with no allocation order and
// no safety check; ErrInsufficient when r.To no longer holds them.

func (r UndoRequest) model(ctx context.Context, m *Model) (Result, error) {
	return m.moveLots(ctx, "move", r.Fingerprint(), r.OpID, r.LegacyOpID, r.SKU, r.Holder, "", r.Validate(), r.To, r.From, r.Lots, r.Back, "")
}

// ChangeRequest: changes what an order holds of one SKU in one atomic operation: it releases
// r.Release from the bucket r.Mode allocates to, then allocates each quantity of
// r.Allocate in turn as Allocate would, over the state the releases left (a unit one line
// gives back may serve another). When an allocation does not fit (ErrShortage,
// ErrSafetyStock) or a release is not held (ErrInsufficient), nothing moves.

func (r ChangeRequest) model(ctx context.Context, m *Model) (Result, error) {
	return m.applyAs(ctx, "change", r.Fingerprint(), r.OpID, r.LegacyOpID, r.SKU, r.Holder, r.Validate(), func(o *modelOp) (error, string) {
		if err, detail := o.findLots(r.Release); err != nil {
			return err, detail
		}
		if err, detail := o.moveEach(ModeBucket(r.Mode), Sellable, r.Release); err != nil {
			return err, detail
		}
		for _, q := range r.Allocate {
			if err, detail := o.allocateVia(q, r.TargetDate, r.Mode, r.Route); err != nil {
				return err, detail
			}
		}
		return nil, ""
	})
}

// MoveAllocationRequest: releases r.Release from the bucket r.Mode allocates to, then
// allocates their sum at r.To alone as Allocate would there, over the state the releases
// left; when r.To cannot cover it, nothing moves and the refusal's detail names r.To.

func (r MoveAllocationRequest) model(ctx context.Context, m *Model) (Result, error) {
	return m.applyAs(ctx, "move_alloc", r.Fingerprint(), r.OpID, "", r.SKU, r.Holder, r.Validate(), func(o *modelOp) (error, string) {
		if err, detail := o.findLots(r.Release); err != nil {
			return err, detail
		}
		if err, detail := o.moveEach(ModeBucket(r.Mode), Sellable, r.Release); err != nil {
			return err, detail
		}
		var qty int64
		for _, q := range r.Release {
			qty += q.Qty
		}
		at := &Route{Pinned: r.To, Locations: []Location{{ID: r.To, Enabled: true}}}
		if err, detail := o.allocateVia(qty, r.TargetDate, r.Mode, at); err != nil {
			return err, detail + " location=" + r.To
		}
		return nil, ""
	})
}

// ReceiveRequest: turns a planned lot into an on-hand lot with its best-before; a counted
// quantity different from the planned one moves the difference from or to External.

func (r ReceiveRequest) model(ctx context.Context, m *Model) (Result, error) {
	return m.apply(ctx, "receive", r.Fingerprint(), r.OpID, r.SKU, r.Validate(), func(o *modelOp) (error, string) {
		l := o.lot(r.LotID)
		if l == nil {
			return ErrUnknownLot, "lot=" + r.LotID
		}
		if err, detail := atLocation(l, r.Location); err != nil {
			return err, detail
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

// AdjustRequest: corrects a lot's sellable quantity by Delta (to or from External); sellable
// never goes negative (ErrInsufficient).

func (r AdjustRequest) model(ctx context.Context, m *Model) (Result, error) {
	return m.apply(ctx, "adjust", r.Fingerprint(), r.OpID, r.SKU, r.Validate(), func(o *modelOp) (error, string) {
		l := o.lot(r.LotID)
		if l == nil {
			return ErrUnknownLot, "lot=" + r.LotID
		}
		if err, detail := atLocation(l, r.Location); err != nil {
			return err, detail
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

// HoldRequest: keeps Qty units of a lot back from sale: sellable -> hidden.

func (r HoldRequest) model(ctx context.Context, m *Model) (Result, error) {
	return m.moveLots(ctx, "smove", r.Fingerprint(), r.OpID, "", r.SKU, "", r.Reason, r.Validate(), Sellable, Hidden, []LotQty{{LotID: r.LotID, Qty: r.Qty}}, nil, r.Location)
}

// ReleaseHoldRequest: gives held units back to sale: hidden -> sellable.

func (r ReleaseHoldRequest) model(ctx context.Context, m *Model) (Result, error) {
	return m.moveLots(ctx, "smove", r.Fingerprint(), r.OpID, "", r.SKU, "", r.Reason, r.Validate(), Hidden, Sellable, []LotQty{{LotID: r.LotID, Qty: r.Qty}}, nil, r.Location)
}

// DamageRequest: records Qty units of a lot found damaged on a count: sellable -> defective.
// They are never a candidate again and stay accounted for in the lot.

func (r DamageRequest) model(ctx context.Context, m *Model) (Result, error) {
	return m.moveLots(ctx, "smove", r.Fingerprint(), r.OpID, "", r.SKU, "", r.Reason, r.Validate(), Sellable, Defective, []LotQty{{LotID: r.LotID, Qty: r.Qty}}, nil, r.Location)
}

// RecallRequest: marks a whole lot defective: it is never a candidate again, its sellable and
// hidden units move to defective, and its reserved and allocated units stay with the
// orders that hold them, which the result lists (Result.Holders) so that the caller can
// cancel or re-allocate them. Recalling a recalled lot moves what came back since.

func (r RecallRequest) model(ctx context.Context, m *Model) (Result, error) {
	return m.apply(ctx, "recall", r.Fingerprint(), r.OpID, r.SKU, r.Validate(), func(o *modelOp) (error, string) {
		l := o.lot(r.LotID)
		if l == nil {
			return ErrUnknownLot, "lot=" + r.LotID
		}
		if err, detail := atLocation(l, r.Location); err != nil {
			return err, detail
		}
		l.Good = false
		if l.Sellable > 0 {
			o.move(l, Sellable, Defective, l.Sellable)
		}
		if l.Hidden > 0 {
			o.move(l, Hidden, Defective, l.Hidden)
		}
		all := m.holdersOf(r.SKU, r.LotID) // m.mu is held while fn runs
		o.holderCount = len(all)
		o.holderList = all[:min(len(all), MaxResultHolders)]
		o.reason = r.Reason
		return nil, ""
	})
}

// ReturnRequest: brings shipped units back to the lots they left: shipped -> sellable, or
// shipped -> defective with r.Defective.

func (r ReturnRequest) model(ctx context.Context, m *Model) (Result, error) {
	to := Sellable
	if r.Defective {
		to = Defective
	}
	return m.moveLots(ctx, "move", r.Fingerprint(), r.OpID, r.LegacyOpID, r.SKU, "", "", r.Validate(), Shipped, to, r.Lots, nil, "")
}

// RegisterSKURequest: creates a SKU with its safety stock at version 1. ErrSKUExists when Redis
// has it, or the Loader does (it is loaded then, as any operation would).

func (r RegisterSKURequest) model(ctx context.Context, m *Model) (Result, error) {
	fail := func(err error) (Result, error) { return Result{OpID: r.OpID, SKU: r.SKU}, err }
	if err := r.Validate(); err != nil {
		return fail(err)
	}
	key, fp := [2]string{r.SKU, r.OpID}, r.Fingerprint()
	replay := func(prev modelOutcome) (Result, error) {
		if prev.fp != fp {
			return fail(opConflict("regsku", r.SKU, r.OpID))
		}
		res := prev.res
		res.Replayed = true
		return res, prev.err
	}
	m.mu.Lock()
	if prev, ok := m.ops[key]; ok {
		m.mu.Unlock()
		return replay(prev)
	}
	_, exists := m.skus[r.SKU]
	m.mu.Unlock()
	if !exists && m.loader != nil {
		switch err := m.Load(ctx, r.SKU); {
		case err == nil:
			exists = true
		case !errors.Is(err, ErrUnknownSKU):
			return fail(err)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if prev, ok := m.ops[key]; ok { // a concurrent call with the same op id
		return replay(prev)
	}
	if _, ok := m.skus[r.SKU]; exists || ok {
		err := OpError("regsku", r.SKU, ErrSKUExists, "")
		m.ops[key] = modelOutcome{res: Result{OpID: r.OpID, SKU: r.SKU}, err: err, fp: fp}
		return fail(err)
	}
	m.skus[r.SKU] = &SKU{SKU: r.SKU, SafetyStock: r.SafetyStock, Version: 1, Lots: []Lot{}}
	res := Result{OpID: r.OpID, SKU: r.SKU, Moves: []Move{}, Version: 1, Lots: []Lot{}, SafetyStock: r.SafetyStock}
	m.ops[key] = modelOutcome{res: res, fp: fp}
	return res, nil
}

// RegisterLotRequest: adds a lot to a SKU, as the SKU's newest registration (so a planned lot is
// the first LIFO takes, and an on-hand lot the last of its best-before in FEFO order). Its
// Sellable moves in from External. ErrLotExists when the SKU has the lot id.

func (r RegisterLotRequest) model(ctx context.Context, m *Model) (Result, error) {
	n := r.Lot.WithDefaults()
	return m.apply(ctx, "reglot", r.Fingerprint(), r.OpID, r.SKU, r.Validate(), func(o *modelOp) (error, string) {
		next := int64(0)
		for _, l := range o.sku.Lots {
			if l.LotID == n.LotID {
				return ErrLotExists, "lot=" + n.LotID
			}
			next = max(next, l.RegSeq+1)
		}
		if next > MaxRegSeq {
			return ErrLotState, fmt.Sprintf("lot=%s no registration number left after %d", n.LotID, next-1)
		}
		o.sku.Lots = append(o.sku.Lots, Lot{LotID: n.LotID, Kind: n.Kind, Good: n.Good, BestBefore: n.BestBefore,
			RegSeq: next, ArrivesAt: n.ArrivesAt, ValidFrom: n.ValidFrom, ValidTo: n.ValidTo, Location: n.Location})
		o.move(o.lot(n.LotID), External, Sellable, n.Sellable)
		return nil, ""
	})
}

// SafetyStockRequest: sets a SKU's safety stock, or a location's (0 removes it); the
// result carries it and the location.

func (r SafetyStockRequest) model(ctx context.Context, m *Model) (Result, error) {
	return m.apply(ctx, "ss", r.Fingerprint(), r.OpID, r.SKU, r.Validate(), func(o *modelOp) (error, string) {
		if r.Location != "" {
			o.sku.LocationSafety = setLocationSafety(o.sku.LocationSafety, r.Location, r.SafetyStock)
		} else {
			o.sku.SafetyStock = r.SafetyStock
		}
		o.safety, o.safetyAt = r.SafetyStock, r.Location
		return nil, ""
	})
}
