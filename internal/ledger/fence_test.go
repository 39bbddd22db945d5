package ledger

import (
	"errors"
	"strings"
	"testing"

	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/testenv"
)

// A remembered operation answers a replay only at the fence it was made at (the entity's
// step): the same request at another fence is refused with ErrOpFenced, naming the op id
// and both fences, and moves nothing; at its own fence, or without a fence, it replays.
// A remembered failure is fenced alike.
//
// Failed against the script and model before fences (the record kept the fingerprint
// alone): the allocation made at fence 3 answered the request at fence 5 with its old
// answer, Replayed set, no error.
func TestReplayAtAnotherFenceIsRefused(t *testing.T) {
	s := stock.SKU{SKU: "A", Lots: []stock.Lot{lot("L", stock.KindOnHand, 1, "2027-01-01", 5)}}
	each(t, []stock.SKU{s}, func(t *testing.T, inv Inventory) {
		a := alloc("o1", "A", 2, "2026-12-01", stock.ModeReserve)
		first, err := inv.Apply(ctx, stock.Fenced{Op: a, Fence: "3"})
		wantMoves(t, first, err, mv{"L", stock.Sellable, stock.Reserved, 2})
		if r, err := inv.Apply(ctx, stock.Fenced{Op: a, Fence: "3"}); err != nil || !r.Replayed {
			t.Fatalf("at its own fence: %+v %v, want the first answer replayed", r, err)
		}
		r, err := inv.Apply(ctx, stock.Fenced{Op: a, Fence: "5"})
		if !errors.Is(err, stock.ErrOpFenced) {
			t.Fatalf("at another fence: %+v %v, want ErrOpFenced", r, err)
		}
		if msg := err.Error(); !strings.Contains(msg, "op_id=o1") || !strings.Contains(msg, "fence 3") || !strings.Contains(msg, "asked at 5") {
			t.Fatalf("error %q does not name the op id and both fences", msg)
		}
		if r.Replayed || len(r.Moves) != 0 {
			t.Fatalf("a fenced replay answered %+v", r)
		}
		if r, err := inv.Apply(ctx, a); err != nil || !r.Replayed {
			t.Fatalf("without a fence: %+v %v, want the first answer replayed", r, err)
		}
		// Another request under the op id is a conflict, and leaves the record's fence.
		other := alloc("o1", "A", 1, "2026-12-01", stock.ModeReserve)
		if _, err := inv.Apply(ctx, stock.Fenced{Op: other, Fence: "9"}); !errors.Is(err, stock.ErrOpConflict) {
			t.Fatalf("another request: %v, want ErrOpConflict", err)
		}
		if r, err := inv.Apply(ctx, stock.Fenced{Op: a, Fence: "3"}); err != nil || !r.Replayed {
			t.Fatalf("at its own fence after a conflict: %+v %v, want the first answer replayed", r, err)
		}

		short := alloc("o2", "A", 9, "2026-12-01", stock.ModeReserve)
		_, err = inv.Apply(ctx, stock.Fenced{Op: short, Fence: "3"})
		wantErr(t, err, stock.ErrShortage)
		if _, err := inv.Apply(ctx, stock.Fenced{Op: short, Fence: "4"}); !errors.Is(err, stock.ErrOpFenced) {
			t.Fatalf("a remembered failure at another fence: %v, want ErrOpFenced", err)
		}
		if snap, _ := inv.Snapshot(ctx, "A"); snap.Version != 1 || snap.Lots[0].Sellable != 3 {
			t.Fatalf("the refused replays moved stock: %+v", snap)
		}
		if _, err := inv.Apply(ctx, stock.Fenced{Op: a, Fence: "x1"}); !errors.Is(err, stock.ErrInvalidRequest) {
			t.Fatalf("a fence that is no number: %v, want ErrInvalidRequest", err)
		}
	})
}

// A record written without a fence (before fences, or by a caller with none) answers a
// request at any fence, so a step an older worker applied and did not commit replays
// after an upgrade; a fenced request that finds no record applies and keeps its fence.
//
// Broken variant tried: ledger.lua refusing every replay whose record has no fence: the
// unfenced record answered ErrOpFenced.
func TestRecordsWithoutFenceAreReplayed(t *testing.T) {
	rc, prefix := testenv.Redis(t)
	s := stock.SKU{SKU: "A", Lots: []stock.Lot{lot("L", stock.KindOnHand, 1, "2027-01-01", 5)}}
	l, err := New(Config{Redis: rc, Prefix: prefix, Loader: newMemLoader(s)})
	if err != nil {
		t.Fatal(err)
	}
	a := alloc("old", "A", 2, "2026-12-01", stock.ModeShip)
	first, err := l.Apply(ctx, a)
	wantMoves(t, first, err, mv{"L", stock.Sellable, stock.Allocated, 2})
	if rec, _ := rc.Get(ctx, opKey(prefix, "A", "old")).Result(); !strings.HasPrefix(rec, "#") {
		t.Fatalf("an unfenced record %q, want the fingerprinted form", rec)
	}
	r, err := l.Apply(ctx, stock.Fenced{Op: a, Fence: "7"})
	if err != nil || !r.Replayed || r.Version != first.Version {
		t.Fatalf("a record without fence at fence 7: %+v %v, want it replayed", r, err)
	}
	b := alloc("new", "A", 1, "2026-12-01", stock.ModeShip)
	if _, err := l.Apply(ctx, stock.Fenced{Op: b, Fence: "7"}); err != nil {
		t.Fatal(err)
	}
	rec, _ := rc.Get(ctx, opKey(prefix, "A", "new")).Result()
	if !strings.HasPrefix(rec, "%") || !strings.HasPrefix(rec[1+stock.FingerprintBytes:], "7|") {
		t.Fatalf("a fenced record %q, want %%, the fingerprint, 7|", rec)
	}
	if snap, _ := l.Snapshot(ctx, "A"); snap.Version != 2 || snap.Lots[0].Sellable != 2 {
		t.Fatalf("the replay moved stock: %+v", snap)
	}
}

// An operation whose reply is lost is sent again by the client: the second run finds the
// record the first wrote (same fingerprint, same fence) and answers its outcome, moving
// nothing: the stock moves once and the caller gets the first run's moves.
//
// Broken variant tried: ledger.lua not looking at the record before it applies: the
// second run reserved 2 more units (sellable 1, version 2).
func TestApplyTwiceMovesOnce(t *testing.T) {
	_, prefix := testenv.Redis(t)
	d := testenv.StartReplyDropper(t, testenv.RedisAddr(t), testenv.ScriptCall(ledgerScript.Hash()))
	rc := testenv.RedisVia(t, d.Addr())
	s := stock.SKU{SKU: "A", Lots: []stock.Lot{lot("L", stock.KindOnHand, 1, "2027-01-01", 5)}}
	l, err := New(Config{Redis: rc, Prefix: prefix, Loader: newMemLoader(s)})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Load(ctx, "A"); err != nil {
		t.Fatal(err)
	}
	r, err := l.Apply(ctx, stock.Fenced{Op: alloc("twice", "A", 2, "2026-12-01", stock.ModeReserve), Fence: "4"})
	if d.Dropped() != 1 {
		t.Fatalf("the proxy dropped %d replies, want 1", d.Dropped())
	}
	wantMoves(t, r, err, mv{"L", stock.Sellable, stock.Reserved, 2})
	if snap, _ := l.Snapshot(ctx, "A"); snap.Version != 1 || snap.Lots[0].Sellable != 3 {
		t.Fatalf("after one allocation run twice: version %d, sellable %d, want 1 and 3", snap.Version, snap.Lots[0].Sellable)
	}
}
