package stock

import (
	"context"
	"errors"
)

// Fenced is an operation made at one step of its entity: Fence names the step (the
// order's, or the SKU's, result counter before the event's result, as text). The ledger
// keeps the fence in the operation's record, and a replay of the record answers only a
// request made at the same fence: one made at another fails with ErrOpFenced and moves
// nothing, so an old operation's answer is never taken for a moved-on entity's. A record
// without a fence (written before fences, or by a caller with none) answers any fence,
// and an empty Fence replays any record, as before fences.
type Fenced struct {
	Op    Op
	Fence string
}

func (f Fenced) Validate() error {
	if f.Op == nil {
		return ErrNoOp
	}
	if err := CheckFence(f.Fence); err != nil {
		return err
	}
	return f.Op.Validate()
}

// ErrNoOp refuses a Fenced without an operation.
var ErrNoOp = OpError("fenced", "", ErrInvalidRequest, "no operation")

// CheckFence accepts "" and up to 20 ASCII digits: the ledger stores a fence between the
// fingerprint and the outcome, which starts with a digit or 'E', ended by '|'.
func CheckFence(fence string) error {
	if len(fence) > 20 {
		return OpError("fence", "", ErrInvalidRequest, "fence longer than 20 digits")
	}
	for i := 0; i < len(fence); i++ {
		if fence[i] < '0' || fence[i] > '9' {
			return OpError("fence", "", ErrInvalidRequest, "fence "+fence+" is not a number")
		}
	}
	return nil
}

func (f Fenced) reversal() Reversal { return f.Op.reversal() }

// Fingerprint is the operation's: the fence names the step, it does not decide the effect.
func (f Fenced) Fingerprint() string { return f.Op.Fingerprint() }

// model runs the operation and keeps its fence beside the record; a replay of a record
// kept at another fence is refused, as ledger.lua refuses it (a replay moves nothing, so
// refusing after it leaves the model as it was).
func (f Fenced) model(ctx context.Context, m *Model) (Result, error) {
	if f.Op == nil {
		return Result{}, ErrNoOp
	}
	if err := CheckFence(f.Fence); err != nil {
		return Result{}, err
	}
	r, err := f.Op.model(ctx, m)
	key := [2]string{r.SKU, r.OpID}
	m.mu.Lock()
	defer m.mu.Unlock()
	if r.Replayed {
		if was := m.fences[key]; was != "" && f.Fence != "" && was != f.Fence {
			return Result{OpID: r.OpID, SKU: r.SKU}, opFenced(r.OpID, r.SKU, was, f.Fence)
		}
		return r, err
	}
	// A conflict leaves the other request's record, and its fence, as they were.
	if _, kept := m.ops[key]; kept && f.Fence != "" && !errors.Is(err, ErrOpConflict) {
		m.fences[key] = f.Fence
	}
	return r, err
}

// Unfenced returns the operation a Fenced wraps (op itself otherwise) and its fence.
func Unfenced(op Op) (Op, string) {
	if f, ok := op.(Fenced); ok {
		return f.Op, f.Fence
	}
	return op, ""
}

// opFenced is the model's ErrOpFenced, worded as ledger.lua's.
func opFenced(opID, sku, was, asked string) error {
	return OpError("replay", sku, ErrOpFenced, "op_id="+opID+" made at fence "+was+", asked at "+asked)
}
