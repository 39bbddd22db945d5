package ledger

import (
	"context"
	"errors"
	"strconv"
)

// The warehouse's operations: what a WMS or an ERP tells the ledger (docs/ledger.md).

// Hold keeps Qty units of a lot back from sale: sellable -> hidden.
func (l *Ledger) Hold(ctx context.Context, r HoldRequest) (Result, error) {
	if err := r.validate(); err != nil {
		return Result{OpID: r.OpID, SKU: r.SKU}, err
	}
	return l.moveLots(ctx, r.OpID, "", r.SKU, "s", "h", "", r.Reason, []LotQty{{LotID: r.LotID, Qty: r.Qty}}, nil)
}

// ReleaseHold gives held units back to sale: hidden -> sellable.
func (l *Ledger) ReleaseHold(ctx context.Context, r HoldRequest) (Result, error) {
	if err := r.validate(); err != nil {
		return Result{OpID: r.OpID, SKU: r.SKU}, err
	}
	return l.moveLots(ctx, r.OpID, "", r.SKU, "h", "s", "", r.Reason, []LotQty{{LotID: r.LotID, Qty: r.Qty}}, nil)
}

// Damage records Qty units of a lot found damaged on a count: sellable -> defective.
// They are never a candidate again and stay accounted for in the lot.
func (l *Ledger) Damage(ctx context.Context, r HoldRequest) (Result, error) {
	if err := r.validate(); err != nil {
		return Result{OpID: r.OpID, SKU: r.SKU}, err
	}
	return l.moveLots(ctx, r.OpID, "", r.SKU, "s", "d", "", r.Reason, []LotQty{{LotID: r.LotID, Qty: r.Qty}}, nil)
}

// Recall marks a whole lot defective: it is never a candidate again, its sellable and
// hidden units move to defective, and its reserved and allocated units stay with the
// orders that hold them, which the result lists (Result.Holders) so that the caller can
// cancel or re-allocate them. Recalling a recalled lot moves what came back since.
func (l *Ledger) Recall(ctx context.Context, r RecallRequest) (Result, error) {
	if err := r.validate(); err != nil {
		return Result{OpID: r.OpID, SKU: r.SKU}, err
	}
	return l.run(ctx, "recall", r.OpID, "", r.SKU, r.LotID, r.Reason, MaxResultHolders)
}

// Return brings shipped units back to the lots they left: shipped -> sellable, or
// shipped -> defective with r.Defective.
func (l *Ledger) Return(ctx context.Context, r ReturnRequest) (Result, error) {
	if err := r.validate(); err != nil {
		return Result{OpID: r.OpID, SKU: r.SKU}, err
	}
	to := "s"
	if r.Defective {
		to = "d"
	}
	return l.moveLots(ctx, r.OpID, r.LegacyOpID, r.SKU, "x", to, "", "", r.Lots, nil)
}

// SetSafetyStock sets a SKU's safety stock; the result carries it.
func (l *Ledger) SetSafetyStock(ctx context.Context, r SafetyStockRequest) (Result, error) {
	if err := r.validate(); err != nil {
		return Result{OpID: r.OpID, SKU: r.SKU}, err
	}
	return l.run(ctx, "ss", r.OpID, "", r.SKU, r.SafetyStock)
}

// RegisterLot adds a lot to a SKU, as the SKU's newest registration (so a planned lot is
// the first LIFO takes, and an on-hand lot the last of its best-before in FEFO order). Its
// Sellable moves in from External. ErrLotExists when the SKU has the lot id.
func (l *Ledger) RegisterLot(ctx context.Context, r RegisterLotRequest) (Result, error) {
	if err := r.validate(); err != nil {
		return Result{OpID: r.OpID, SKU: r.SKU}, err
	}
	n := r.Lot.withDefaults()
	return l.run(ctx, "reglot", r.OpID, "", r.SKU, n.LotID, n.Kind, boolCode(n.Good), n.BestBefore,
		n.ArrivesAt, n.ValidFrom, n.ValidTo, n.Sellable)
}

func boolCode(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// RegisterSKU creates a SKU with its safety stock at version 1. ErrSKUExists when Redis
// has it, or the Loader does (it is loaded then, as any operation would).
func (l *Ledger) RegisterSKU(ctx context.Context, r RegisterSKURequest) (Result, error) {
	if err := r.validate(); err != nil {
		return Result{OpID: r.OpID, SKU: r.SKU}, err
	}
	ss := strconv.FormatInt(r.SafetyStock, 10)
	// Without creation the script answers ERR_NOT_LOADED for a SKU Redis does not have;
	// run then asks the Loader. Only a SKU the Loader does not know either is created.
	if l.loader != nil {
		res, err := l.run(ctx, "regsku", r.OpID, "", r.SKU, ss, "0")
		if !errors.Is(err, ErrUnknownSKU) {
			return res, err
		}
	}
	return l.run(ctx, "regsku", r.OpID, "", r.SKU, ss, "1")
}
