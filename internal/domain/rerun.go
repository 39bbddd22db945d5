package domain

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/ledger/stock"
)

// Rerun is what the quarantine learns by running an event once more on a recording
// ledger (each operation a failed run made answers its remembered result; one it never
// reached runs now): the result and state of the run when it succeeded, and every
// operation it met.
type Rerun struct {
	// Result, State and Parked are the run's, when Err is nil.
	Result event.Result
	State  State
	Parked bool
	// Err is the run's error: it failed again (a panic is an error too).
	Err error
	// Completed: an irreversible operation applied (stock.ReversalOf), so the event
	// cannot be undone; when Err is nil the quarantine commits Result as a normal run's.
	Completed bool
	all, open []stock.Result
	// seq is the state's result counter the run started from: its operations' fence.
	seq int64
}

// RerunEvent runs ev against st (Step's one event, without the parked ones) through l,
// recording what each ledger operation answered.
func RerunEvent(ctx context.Context, l Ledger, pol Policy, st State, ev Event, arrival int64, now time.Time) Rerun {
	rec := &recorder{next: l}
	run := Rerun{State: st, seq: st.Seq}
	func() {
		defer func() {
			if r := recover(); r != nil {
				run.Err = fmt.Errorf("domain: step panicked: %v", r)
			}
		}()
		run.Result, run.Parked, run.Err = apply(ctx, rec, pol, &run.State, ev, arrival, now)
	}()
	run.Completed = rec.irreversible
	run.all, run.open = rec.all, rec.open
	return run
}

// Undone is what undoing a Rerun's open operations did.
type Undone struct {
	// Undone counts the operations moved back.
	Undone int
	Moves  []stock.Move
	// SKUs are the lots every recorded operation and undo left, one entry per SKU
	// version, by SKU then version.
	SKUs []stock.SKU
}

// Undo moves back, newest first, what run's reversible operations moved and the run did
// not move back itself, each by an op id of ev's (see undoOpID). A refused undo is an
// error: the quarantine then leaves the event in its turn.
func (run Rerun) Undo(ctx context.Context, l Ledger, ev Event) (Undone, error) {
	// The undos are made at the run's fence, as the step's own rollback made them.
	undo := &txn{ctx: ctx, l: fenced(l, run.seq), ev: ev, skus: map[skuAt]stock.SKU{}}
	for _, r := range run.all {
		undo.record(r)
	}
	undo.done = slices.Clone(run.open)
	if _, err := undo.rollback(""); err != nil {
		return Undone{}, err
	}
	if len(undo.refusals) > 0 {
		return Undone{}, fmt.Errorf("the ledger refused undos: %v", undo.refusals)
	}
	out := Undone{Undone: len(run.open), Moves: undo.moves}
	for _, s := range undo.skus {
		out.SKUs = append(out.SKUs, s)
	}
	slices.SortFunc(out.SKUs, compareSKUAt)
	return out, nil
}

// recorder is a Ledger that keeps what each operation answered: all of them (their moves
// and lots go into the quarantine's result), the reversible ones still open (moved
// something, not undone since: what the quarantine moves back), and the irreversible ones
// (stock.ReversalOf), which the quarantine completes instead of undoing.
type recorder struct {
	next Ledger
	all  []stock.Result
	open []stock.Result
	// irreversible: an irreversible operation applied.
	irreversible bool
}

// Apply runs op and records what it answered.
func (r *recorder) Apply(ctx context.Context, op stock.Op) (stock.Result, error) {
	res, err := r.next.Apply(ctx, op)
	if err != nil {
		return res, err
	}
	r.all = append(r.all, res)
	switch stock.ReversalOf(op) {
	case stock.Reversible:
		if len(res.Moves) > 0 {
			r.open = append(r.open, res)
		}
	case stock.Reverses:
		// The step's own rollback moved the operation it undoes back already.
		r.open = slices.DeleteFunc(r.open, func(o stock.Result) bool { return undoOpID(o.OpID) == res.OpID })
	case stock.Irreversible:
		// A receive changes a lot even when it moves nothing (planned becomes on hand).
		r.irreversible = true
	}
	return res, nil
}
