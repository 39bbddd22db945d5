package ledger

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/junban/junban/internal/ledger/stock"
)

// Apply runs op on Redis: one atomic script on one SKU, loading the SKU from the Loader
// first when Redis does not have it. Each operation's Redis run is its ledger.lua call
// and arguments, below; TestApplyRunsEveryOp fails when an operation has none.
//
// A stock.Fenced operation passes its fence to the script, which keeps it in the record
// and refuses (ErrOpFenced) a replay asked at another fence.
func (l *Ledger) Apply(ctx context.Context, op stock.Op) (stock.Result, error) {
	op, fence := stock.Unfenced(op)
	if op == nil {
		return stock.Result{}, stock.ErrNoOp
	}
	if err := stock.CheckFence(fence); err != nil {
		return stock.Result{}, err
	}
	switch r := op.(type) {
	case stock.AllocateRequest:
		return l.applyAllocate(ctx, r, fence)
	case stock.ReleaseRequest:
		return l.applyRelease(ctx, r, fence)
	case stock.ConfirmRequest:
		return l.applyConfirm(ctx, r, fence)
	case stock.ShipRequest:
		return l.applyShip(ctx, r, fence)
	case stock.UndoRequest:
		return l.applyUndo(ctx, r, fence)
	case stock.ChangeRequest:
		return l.applyChange(ctx, r, fence)
	case stock.MoveAllocationRequest:
		return l.applyMoveAllocation(ctx, r, fence)
	case stock.ReceiveRequest:
		return l.applyReceive(ctx, r, fence)
	case stock.AdjustRequest:
		return l.applyAdjust(ctx, r, fence)
	case stock.HoldRequest:
		return l.applyHold(ctx, r, fence)
	case stock.ReleaseHoldRequest:
		return l.applyReleaseHold(ctx, r, fence)
	case stock.DamageRequest:
		return l.applyDamage(ctx, r, fence)
	case stock.RecallRequest:
		return l.applyRecall(ctx, r, fence)
	case stock.ReturnRequest:
		return l.applyReturn(ctx, r, fence)
	case stock.RegisterSKURequest:
		return l.applyRegisterSKU(ctx, r, fence)
	case stock.RegisterLotRequest:
		return l.applyRegisterLot(ctx, r, fence)
	case stock.SafetyStockRequest:
		return l.applySafetyStock(ctx, r, fence)
	case stock.TransferRequest:
		return l.applyTransfer(ctx, r, fence)
	case stock.TransferReceiveRequest:
		return l.applyTransferReceive(ctx, r, fence)
	case stock.TransferCancelRequest:
		return l.applyTransferCancel(ctx, r, fence)
	case stock.BackorderRequest:
		return l.applyBackorder(ctx, r, fence)
	case stock.DequeueRequest:
		return l.applyDequeue(ctx, r, fence)
	case stock.FillRequest:
		return l.applyFill(ctx, r, fence)
	}
	return stock.Result{}, fmt.Errorf("ledger: %T: %w", op, errNoRedisRun)
}

// errNoRedisRun: Apply got an operation it has no ledger.lua call for.
var errNoRedisRun = errors.New("no Redis run for the operation")

func (l *Ledger) applyAllocate(ctx context.Context, r stock.AllocateRequest, fence string) (stock.Result, error) {
	if err := r.Validate(); err != nil {
		return stock.Result{OpID: r.OpID, SKU: r.SKU}, err
	}
	args := []any{r.Qty, r.TargetDate, string(r.Mode), r.Holder}
	if r.Route != nil {
		args = append(args, routeArgs(r.Route)...)
	}
	return l.run(ctx, "alloc", r.Fingerprint()+fence, r.OpID, r.LegacyOpID, r.SKU, args...)
}

func (l *Ledger) applyRelease(ctx context.Context, r stock.ReleaseRequest, fence string) (stock.Result, error) {
	if err := r.Validate(); err != nil {
		return stock.Result{OpID: r.OpID, SKU: r.SKU}, err
	}
	return l.moveLots(ctx, r.Fingerprint()+fence, r.OpID, r.LegacyOpID, r.SKU, bucketCode(r.From), "s", r.Holder, "", r.Lots, nil)
}

func (l *Ledger) applyConfirm(ctx context.Context, r stock.ConfirmRequest, fence string) (stock.Result, error) {
	if err := r.Validate(); err != nil {
		return stock.Result{OpID: r.OpID, SKU: r.SKU}, err
	}
	return l.moveLots(ctx, r.Fingerprint()+fence, r.OpID, r.LegacyOpID, r.SKU, "r", "a", r.Holder, "", r.Lots, nil)
}

func (l *Ledger) applyShip(ctx context.Context, r stock.ShipRequest, fence string) (stock.Result, error) {
	if err := r.Validate(); err != nil {
		return stock.Result{OpID: r.OpID, SKU: r.SKU}, err
	}
	return l.moveLots(ctx, r.Fingerprint()+fence, r.OpID, r.LegacyOpID, r.SKU, "a", "x", r.Holder, "", r.Lots, nil)
}

func (l *Ledger) applyUndo(ctx context.Context, r stock.UndoRequest, fence string) (stock.Result, error) {
	if err := r.Validate(); err != nil {
		return stock.Result{OpID: r.OpID, SKU: r.SKU}, err
	}
	return l.moveLots(ctx, r.Fingerprint()+fence, r.OpID, r.LegacyOpID, r.SKU, bucketCode(r.To), bucketCode(r.From), r.Holder, "", r.Lots, r.Back)
}

func (l *Ledger) applyChange(ctx context.Context, r stock.ChangeRequest, fence string) (stock.Result, error) {
	if err := r.Validate(); err != nil {
		return stock.Result{OpID: r.OpID, SKU: r.SKU}, err
	}
	args := make([]any, 0, 4+2*len(r.Release)+len(r.Allocate))
	if r.Route != nil {
		args = append(args, routeArgs(r.Route)...)
	}
	args = append(args, string(r.Mode), r.TargetDate, r.Holder, len(r.Release))
	for _, q := range r.Release {
		args = append(args, q.LotID, q.Qty)
	}
	for _, q := range r.Allocate {
		args = append(args, q)
	}
	return l.run(ctx, "change", r.Fingerprint()+fence, r.OpID, r.LegacyOpID, r.SKU, args...)
}

func (l *Ledger) applyMoveAllocation(ctx context.Context, r stock.MoveAllocationRequest, fence string) (stock.Result, error) {
	if err := r.Validate(); err != nil {
		return stock.Result{OpID: r.OpID, SKU: r.SKU}, err
	}
	args := make([]any, 0, 5+2*len(r.Release))
	args = append(args, r.To, string(r.Mode), r.TargetDate, r.Holder, len(r.Release))
	for _, q := range r.Release {
		args = append(args, q.LotID, q.Qty)
	}
	return l.run(ctx, "move_alloc", r.Fingerprint()+fence, r.OpID, "", r.SKU, args...)
}

func (l *Ledger) applyReceive(ctx context.Context, r stock.ReceiveRequest, fence string) (stock.Result, error) {
	if err := r.Validate(); err != nil {
		return stock.Result{OpID: r.OpID, SKU: r.SKU}, err
	}
	// The received lot's key needs its registration number, which Redis holds.
	reg, err := l.regSeqOf(ctx, r.SKU, r.LotID)
	if err != nil {
		return stock.Result{OpID: r.OpID, SKU: r.SKU}, fmt.Errorf("ledger: receive sku=%s: %w", r.SKU, err)
	}
	return withRegSeq("receive", r.SKU, reg, func(reg int64, _ int) (stock.Result, error) {
		key := stock.AllocKey(stock.Lot{Kind: stock.KindOnHand, BestBefore: r.BestBefore, RegSeq: reg})
		return l.run(ctx, at("receive", r.Location), r.Fingerprint()+fence, r.OpID, "", r.SKU, r.LotID, r.BestBefore, r.Qty, reg, key)
	})
}

func (l *Ledger) applyAdjust(ctx context.Context, r stock.AdjustRequest, fence string) (stock.Result, error) {
	if err := r.Validate(); err != nil {
		return stock.Result{OpID: r.OpID, SKU: r.SKU}, err
	}
	return l.run(ctx, at("adjust", r.Location), r.Fingerprint()+fence, r.OpID, "", r.SKU, r.LotID, r.Delta, r.Reason)
}

func (l *Ledger) applyHold(ctx context.Context, r stock.HoldRequest, fence string) (stock.Result, error) {
	if err := r.Validate(); err != nil {
		return stock.Result{OpID: r.OpID, SKU: r.SKU}, err
	}
	return l.moveLotsAt(ctx, r.Fingerprint()+fence, r.OpID, r.SKU, "s", "h", r.Reason, r.LotID, r.Qty, r.Location)
}

func (l *Ledger) applyReleaseHold(ctx context.Context, r stock.ReleaseHoldRequest, fence string) (stock.Result, error) {
	if err := r.Validate(); err != nil {
		return stock.Result{OpID: r.OpID, SKU: r.SKU}, err
	}
	return l.moveLotsAt(ctx, r.Fingerprint()+fence, r.OpID, r.SKU, "h", "s", r.Reason, r.LotID, r.Qty, r.Location)
}

func (l *Ledger) applyDamage(ctx context.Context, r stock.DamageRequest, fence string) (stock.Result, error) {
	if err := r.Validate(); err != nil {
		return stock.Result{OpID: r.OpID, SKU: r.SKU}, err
	}
	return l.moveLotsAt(ctx, r.Fingerprint()+fence, r.OpID, r.SKU, "s", "d", r.Reason, r.LotID, r.Qty, r.Location)
}

func (l *Ledger) applyRecall(ctx context.Context, r stock.RecallRequest, fence string) (stock.Result, error) {
	if err := r.Validate(); err != nil {
		return stock.Result{OpID: r.OpID, SKU: r.SKU}, err
	}
	return l.run(ctx, at("recall", r.Location), r.Fingerprint()+fence, r.OpID, "", r.SKU, r.LotID, r.Reason, stock.MaxResultHolders)
}

func (l *Ledger) applyReturn(ctx context.Context, r stock.ReturnRequest, fence string) (stock.Result, error) {
	if err := r.Validate(); err != nil {
		return stock.Result{OpID: r.OpID, SKU: r.SKU}, err
	}
	to := "s"
	if r.Defective {
		to = "d"
	}
	return l.moveLots(ctx, r.Fingerprint()+fence, r.OpID, r.LegacyOpID, r.SKU, "x", to, "", "", r.Lots, nil)
}

func (l *Ledger) applyRegisterSKU(ctx context.Context, r stock.RegisterSKURequest, fence string) (stock.Result, error) {
	if err := r.Validate(); err != nil {
		return stock.Result{OpID: r.OpID, SKU: r.SKU}, err
	}
	ss := strconv.FormatInt(r.SafetyStock, 10)
	// Without creation the script answers ERR_NOT_LOADED for a SKU Redis does not have;
	// run then asks the Loader. Only a SKU the Loader does not know either is created.
	if l.loader != nil {
		res, err := l.run(ctx, "regsku", r.Fingerprint()+fence, r.OpID, "", r.SKU, ss, "0")
		if !errors.Is(err, stock.ErrUnknownSKU) {
			return res, err
		}
	}
	return l.run(ctx, "regsku", r.Fingerprint()+fence, r.OpID, "", r.SKU, ss, "1")
}

func (l *Ledger) applyRegisterLot(ctx context.Context, r stock.RegisterLotRequest, fence string) (stock.Result, error) {
	if err := r.Validate(); err != nil {
		return stock.Result{OpID: r.OpID, SKU: r.SKU}, err
	}
	n := r.Lot.WithDefaults()
	// The new lot's key needs the registration number the script gives it: the SKU's next,
	// read here; the script takes the key of the number it gives from those passed.
	reg, err := l.nextRegSeq(ctx, r.SKU)
	if err != nil {
		return stock.Result{OpID: r.OpID, SKU: r.SKU}, fmt.Errorf("ledger: reglot sku=%s: %w", r.SKU, err)
	}
	return withRegSeq("reglot", r.SKU, reg, func(reg int64, window int) (stock.Result, error) {
		args := make([]any, 0, 9+window)
		args = append(args, n.LotID, n.Kind, boolCode(n.Good), n.BestBefore, n.ArrivesAt, n.ValidFrom, n.ValidTo, n.Sellable, reg)
		for i := range int64(window) {
			args = append(args, stock.AllocKey(stock.Lot{Kind: n.Kind, BestBefore: n.BestBefore, RegSeq: reg + i}))
		}
		return l.run(ctx, at("reglot", n.Location), r.Fingerprint()+fence, r.OpID, "", r.SKU, args...)
	})
}

func (l *Ledger) applySafetyStock(ctx context.Context, r stock.SafetyStockRequest, fence string) (stock.Result, error) {
	if err := r.Validate(); err != nil {
		return stock.Result{OpID: r.OpID, SKU: r.SKU}, err
	}
	return l.run(ctx, at("ss", r.Location), r.Fingerprint()+fence, r.OpID, "", r.SKU, r.SafetyStock)
}

// routeArgs are a routed allocation's arguments: "route", the no-split flag, and the
// eligible locations with their positions (stock.Route.Positions), by id; then, for a
// route with a plan, "plan", its length and its locations.
func routeArgs(r *stock.Route) []any {
	pos := r.Positions()
	ids := make([]string, 0, len(pos))
	for id := range pos {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	args := make([]any, 0, 5+2*len(ids)+len(r.Plan))
	args = append(args, "route", boolCode(r.NoSplit), len(ids))
	for _, id := range ids {
		args = append(args, id, pos[id])
	}
	if len(r.Plan) > 0 {
		args = append(args, "plan", len(r.Plan))
		for _, l := range r.Plan {
			args = append(args, l)
		}
	}
	return args
}

// at is the script's operation argument for an operation that names a location: the
// operation, a tab and the location (ledger.lua's wantLoc); the operation alone for none.
func at(op, location string) string {
	if location == "" {
		return op
	}
	return op + "\t" + location
}

func boolCode(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

func (l *Ledger) applyTransfer(ctx context.Context, r stock.TransferRequest, fence string) (stock.Result, error) {
	if err := r.Validate(); err != nil {
		return stock.Result{OpID: r.OpID, SKU: r.SKU}, err
	}
	// The transit lots' keys need the registration numbers the script gives them, as
	// RegisterLot's: from the SKU's next, one per lot taken (at most MaxTransferLots).
	reg, err := l.nextRegSeq(ctx, r.SKU)
	if err != nil {
		return stock.Result{OpID: r.OpID, SKU: r.SKU}, fmt.Errorf("ledger: transfer sku=%s: %w", r.SKU, err)
	}
	return withRegSeq("transfer", r.SKU, reg, func(reg int64, window int) (stock.Result, error) {
		window = max(window, 2*stock.MaxTransferLots)
		args := make([]any, 0, 7+window)
		args = append(args, r.TransferID, r.From, r.To, r.Qty, r.ArrivesAt, reg, stock.MaxTransferLots)
		for i := range int64(window) {
			args = append(args, stock.AllocKey(stock.Lot{Kind: stock.KindPlanned, RegSeq: reg + i}))
		}
		return l.run(ctx, "transfer", r.Fingerprint()+fence, r.OpID, "", r.SKU, args...)
	})
}

func (l *Ledger) applyTransferReceive(ctx context.Context, r stock.TransferReceiveRequest, fence string) (stock.Result, error) {
	if err := r.Validate(); err != nil {
		return stock.Result{OpID: r.OpID, SKU: r.SKU}, err
	}
	// The transit lots' on-hand keys need their best-before and registration number:
	// read from the transfer's record and their metas (fixed since the request made
	// them); the script checks that the record names the same lots.
	for range regSeqAttempts {
		args, err := l.transitKeys(ctx, r.SKU, r.TransferID)
		if err != nil {
			return stock.Result{OpID: r.OpID, SKU: r.SKU}, fmt.Errorf("ledger: transfer_receive sku=%s: %w", r.SKU, err)
		}
		res, err := l.run(ctx, "treceive", r.Fingerprint()+fence, r.OpID, "", r.SKU, append([]any{r.TransferID, r.Qty}, args...)...)
		var moved regSeqMoved
		if !errors.As(err, &moved) {
			return res, err
		}
	}
	return stock.Result{OpID: r.OpID, SKU: r.SKU}, fmt.Errorf("ledger: transfer_receive sku=%s: the transfer's record changed %d times", r.SKU, regSeqAttempts)
}

// transitKeys returns treceive's arguments after the count: the number of the transfer's
// transit lots, then each with its key as an on-hand lot (none when Redis has no record).
func (l *Ledger) transitKeys(ctx context.Context, sku, transferID string) ([]any, error) {
	key := Key(l.prefix, sku)
	rec, err := l.shared.HGet(ctx, key, "t:"+transferID).Result()
	if errors.Is(err, redis.Nil) {
		return []any{0}, nil
	}
	if err != nil {
		return nil, err
	}
	t, err := stock.DecodeTransfer(transferID, rec)
	if err != nil {
		return nil, err
	}
	fields := make([]string, len(t.Lots))
	for i, tl := range t.Lots {
		fields[i] = "m:" + tl.Transit
	}
	metas, err := l.rc.HMGet(ctx, key, fields...).Result()
	if err != nil {
		return nil, err
	}
	args := []any{len(t.Lots)}
	for i, tl := range t.Lots {
		lt := stock.Lot{LotID: tl.Transit, Kind: stock.KindOnHand}
		if m, ok := metas[i].(string); ok {
			if err := decodeMeta(&lt, m); err != nil {
				return nil, err
			}
		}
		lt.Kind = stock.KindOnHand
		args = append(args, tl.Transit, stock.AllocKey(lt))
	}
	return args, nil
}

func (l *Ledger) applyTransferCancel(ctx context.Context, r stock.TransferCancelRequest, fence string) (stock.Result, error) {
	if err := r.Validate(); err != nil {
		return stock.Result{OpID: r.OpID, SKU: r.SKU}, err
	}
	return l.run(ctx, "tcancel", r.Fingerprint()+fence, r.OpID, "", r.SKU, r.TransferID)
}

// Transfer returns a SKU's transfer as Redis holds it, ok false when it has none by that id.
func (l *Ledger) Transfer(ctx context.Context, sku, id string) (stock.Transfer, bool, error) {
	rec, err := l.shared.HGet(ctx, Key(l.prefix, sku), "t:"+id).Result()
	if errors.Is(err, redis.Nil) {
		return stock.Transfer{}, false, nil
	}
	if err != nil {
		return stock.Transfer{}, false, fmt.Errorf("ledger: transfer sku=%s: %w", sku, err)
	}
	t, err := stock.DecodeTransfer(id, rec)
	return t, err == nil, err
}

func (l *Ledger) applyBackorder(ctx context.Context, r stock.BackorderRequest, fence string) (stock.Result, error) {
	if err := r.Validate(); err != nil {
		return stock.Result{OpID: r.OpID, SKU: r.SKU}, err
	}
	return l.run(ctx, "walloc", r.Fingerprint()+fence, r.OpID, r.LegacyOpID, r.SKU, r.Qty, r.TargetDate, string(r.Mode), r.Holder, r.Line, r.Class, r.QueuedAt)
}

func (l *Ledger) applyDequeue(ctx context.Context, r stock.DequeueRequest, fence string) (stock.Result, error) {
	if err := r.Validate(); err != nil {
		return stock.Result{OpID: r.OpID, SKU: r.SKU}, err
	}
	return l.run(ctx, "dequeue", r.Fingerprint()+fence, r.OpID, r.LegacyOpID, r.SKU, r.Holder, r.Line, r.Qty)
}

func (l *Ledger) applyFill(ctx context.Context, r stock.FillRequest, fence string) (stock.Result, error) {
	if err := r.Validate(); err != nil {
		return stock.Result{OpID: r.OpID, SKU: r.SKU}, err
	}
	return l.run(ctx, "fill", r.Fingerprint()+fence, r.OpID, "", r.SKU)
}
