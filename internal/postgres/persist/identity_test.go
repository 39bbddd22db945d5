package persist_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/postgres/persist"
	"github.com/junban/junban/internal/testenv"
)

// allocation is the result of an order.placed for lcid whose line allocated one unit of
// lot <sku>-L1 (10 units) under the ledger operation op, leaving the SKU at version v with
// allocated units allocated in the lot.
func allocation(lcid, eventID string, seq int64, lineID, sku, op string, v, allocated int64) event.Result {
	lot := sku + "-L1"
	return event.Result{
		EventID: eventID, Entity: lcid, LCID: lcid, Seq: seq, Type: event.OrderPlaced, Outcome: event.Applied,
		ProcessedAt: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC),
		Order: &event.OrderSnapshot{LCID: lcid, Status: event.StatusPlaced, Allocation: "allocated", Mode: stock.ModeShip,
			Lines: []event.SnapshotLine{{LineID: lineID, SKU: sku, Qty: 1, Lots: []event.LotQty{{LotID: lot, Qty: 1}}}}},
		SKUs: []stock.SKU{{SKU: sku, Version: v, Lots: []stock.Lot{{LotID: lot, Kind: stock.KindOnHand, Good: true, RegSeq: 1,
			ValidFrom: "2026-01-01", ValidTo: "2027-12-31", Sellable: 10 - allocated, Allocated: allocated}}}},
		Moves: []stock.Move{{OpID: op, SKU: sku, LotID: lot, From: "sellable", To: "allocated", Qty: 1, Version: v}},
	}
}

// identityRows are the rows that say which results PostgreSQL holds: the inbox's
// (entity, event id, seq), the orders' (lcid, last event id) and the moves' (entity,
// event id, sku, op id).
func identityRows(t *testing.T, db *gorm.DB) (inbox, orders, moves []string) {
	t.Helper()
	q := func(sql string) []string {
		var out []string
		if err := db.Raw(sql).Scan(&out).Error; err != nil {
			t.Fatal(err)
		}
		return out
	}
	return q(`SELECT entity || ' ' || event_id || ' ' || seq FROM inbox ORDER BY entity, event_id`),
		q(`SELECT lcid || ' ' || last_event_id FROM orders ORDER BY lcid`),
		q(`SELECT entity || ' ' || event_id || ' ' || sku || ' ' || op_id FROM moves ORDER BY entity, sku, op_id`)
}

func sameRows(t *testing.T, what string, got, want []string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s:\n got %q\nwant %q", what, got, want)
	}
}

// Two orders whose order.placed share an event id (upstream systems reuse ids) are two
// results: the order-worker keys its done marker by entity and event id and applies
// both, and PostgreSQL keeps both, whether they arrive in one batch or two. Sent again,
// each is a duplicate. The order-worker names a ledger operation "<event_id>:<line>:<step>"
// on a SKU, so with lines on different SKUs both results carry the op id dup-1:1:alloc:
// the moves are the ledger's operations, keyed by SKU and op id as the ledger keys them.
// Against the inbox keyed by event_id alone, LC-P2's result was a duplicate: one inbox
// row, no LC-P2 order, one move, nothing logged; against moves keyed by (op_id, idx),
// LC-P2's move on Q was dropped.
func TestApplyKeepsOrdersSharingAnEventID(t *testing.T) {
	cases := []struct {
		name   string
		p1, p2 event.Result
	}{
		{"one SKU, two lines", allocation("LC-P1", "dup-1", 1, "1", "P", "dup-1:1:alloc", 2, 1),
			allocation("LC-P2", "dup-1", 1, "2", "P", "dup-1:2:alloc", 3, 2)},
		{"two SKUs, one op id", allocation("LC-P1", "dup-1", 1, "1", "P", "dup-1:1:alloc", 2, 1),
			allocation("LC-P2", "dup-1", 1, "1", "Q", "dup-1:1:alloc", 2, 1)},
	}
	for _, c := range cases {
		wantInbox := []string{"LC-P1 dup-1 1", "LC-P2 dup-1 1"}
		wantOrders := []string{"LC-P1 dup-1", "LC-P2 dup-1"}
		wantMoves := []string{"LC-P1 dup-1 " + c.p1.Moves[0].SKU + " " + c.p1.Moves[0].OpID,
			"LC-P2 dup-1 " + c.p2.Moves[0].SKU + " " + c.p2.Moves[0].OpID}
		for _, split := range []bool{false, true} {
			name := c.name + ", one batch"
			if split {
				name = c.name + ", two batches"
			}
			t.Run(name, func(t *testing.T) {
				db := testenv.Postgres(t)
				var rep persist.Report
				if split {
					rep = apply(t, db, []event.Result{c.p1})
					rep.Results = append(rep.Results, apply(t, db, []event.Result{c.p2}).Results...)
				} else {
					rep = apply(t, db, []event.Result{c.p1, c.p2})
				}
				if n := rep.Count(persist.Applied); n != 2 {
					t.Errorf("applied %d of the two orders' results: %+v", n, rep.Results)
				}
				inbox, orders, moves := identityRows(t, db)
				sameRows(t, "inbox", inbox, wantInbox)
				sameRows(t, "orders", orders, wantOrders)
				sameRows(t, "moves", moves, wantMoves)
				before := dump(t, db)

				// A real redelivery, alone or together: nothing written, nothing reported.
				for _, again := range [][]event.Result{{c.p2}, {c.p1, c.p2, c.p1}} {
					rep := apply(t, db, again)
					if n := rep.Count(persist.Duplicate); n != len(again) {
						t.Errorf("redelivery of %d: %d duplicates: %+v", len(again), n, rep.Results)
					}
					if len(rep.MoveConflicts) != 0 {
						t.Errorf("redelivery reported move conflicts: %+v", rep.MoveConflicts)
					}
				}
				diff(t, "after the redeliveries", before, dump(t, db))
			})
		}
	}
}

// A result whose entity and event id the inbox holds with another seq, type, outcome or
// reason (the order-worker applied the event again once its done marker expired, or an
// upstream system reused the id within one order) is not a redelivery: it is Conflict,
// with an error that names the entity, the event id and what differs, and nothing of it
// is written. In one batch the first copy wins and the second is Conflict. Against the
// inbox's ON CONFLICT DO NOTHING alone it was a Duplicate: deleted, without a word.
func TestApplySameEventIDOtherBodyIsConflict(t *testing.T) {
	first := allocation("LC-P1", "dup-1", 1, "1", "P", "dup-1:1:alloc", 2, 1)
	second := allocation("LC-P1", "dup-1", 2, "1", "P", "dup-1~again:1:alloc", 3, 2)
	second.Order.Paid = true

	check := func(t *testing.T, db *gorm.DB, rr persist.ResultReport) {
		t.Helper()
		if rr.Status != persist.Conflict {
			t.Fatalf("status %v (%v), want Conflict", rr.Status, rr.Err)
		}
		if !errors.Is(rr.Err, persist.ErrConflict) {
			t.Errorf("error %v does not wrap ErrConflict", rr.Err)
		}
		for _, want := range []string{"LC-P1", "dup-1", "seq"} {
			if !strings.Contains(rr.Err.Error(), want) {
				t.Errorf("error %q does not name %q", rr.Err, want)
			}
		}
		inbox, orders, moves := identityRows(t, db)
		sameRows(t, "inbox", inbox, []string{"LC-P1 dup-1 1"})
		sameRows(t, "orders", orders, []string{"LC-P1 dup-1"})
		sameRows(t, "moves", moves, []string{"LC-P1 dup-1 P dup-1:1:alloc"})
	}
	t.Run("later batch", func(t *testing.T) {
		db := testenv.Postgres(t)
		apply(t, db, []event.Result{first})
		rep := apply(t, db, []event.Result{second})
		check(t, db, rep.Results[0])
	})
	t.Run("one batch", func(t *testing.T) {
		db := testenv.Postgres(t)
		rep := apply(t, db, []event.Result{first, second})
		if rep.Results[0].Status != persist.Applied {
			t.Errorf("first copy: %v, want Applied", rep.Results[0].Status)
		}
		check(t, db, rep.Results[1])
	})
}

// A move is a ledger operation's, keyed by SKU, op id and index as the ledger keys the
// operation. Two entities' results that carry the same move (the ledger answered the
// second the first one's operation: an op id that does not name the order) are both
// persisted, the move once, and the second is reported as a move conflict naming both
// results. Against ON CONFLICT DO NOTHING alone the second entity's move vanished
// without a word.
func TestApplyMoveOfAnotherEntityIsReported(t *testing.T) {
	db := testenv.Postgres(t)
	p1 := allocation("LC-P1", "dup-1", 1, "1", "P", "dup-1:1:alloc", 2, 1)
	p2 := allocation("LC-P2", "dup-1", 1, "1", "P", "dup-1:1:alloc", 2, 1) // the ledger's replay of p1's operation
	for i, batch := range [][]event.Result{{p1, p2}, {p1}, {p2}} {
		rep := apply(t, db, batch)
		if i == 0 {
			if n := rep.Count(persist.Applied); n != 2 {
				t.Errorf("applied %d of 2", n)
			}
			if len(rep.MoveConflicts) != 1 {
				t.Fatalf("move conflicts %+v, want one", rep.MoveConflicts)
			}
			mc := rep.MoveConflicts[0]
			if mc.Move.Entity != "LC-P2" || mc.Stored.Entity != "LC-P1" || mc.Move.OpID != "dup-1:1:alloc" || mc.Move.SKU != "P" {
				t.Errorf("move conflict %+v, want LC-P2's move against LC-P1's", mc)
			}
			for _, want := range []string{"LC-P1", "LC-P2", "dup-1", "dup-1:1:alloc"} {
				if !strings.Contains(mc.Error(), want) {
					t.Errorf("move conflict %q does not name %q", mc.Error(), want)
				}
			}
			continue
		}
		// Redelivered, each is a duplicate: its moves are not looked at again.
		if rep.Count(persist.Duplicate) != 1 || len(rep.MoveConflicts) != 0 {
			t.Errorf("redelivery %d: %+v", i, rep)
		}
	}
	inbox, orders, moves := identityRows(t, db)
	sameRows(t, "inbox", inbox, []string{"LC-P1 dup-1 1", "LC-P2 dup-1 1"})
	sameRows(t, "orders", orders, []string{"LC-P1 dup-1", "LC-P2 dup-1"})
	sameRows(t, "moves", moves, []string{"LC-P1 dup-1 P dup-1:1:alloc"})
}

// The same move twice in one batch, from one result sent twice, is recorded once and
// is no conflict.
func TestApplyMoveTwiceInABatchIsNoConflict(t *testing.T) {
	db := testenv.Postgres(t)
	r := allocation("LC-P1", "dup-1", 1, "1", "P", "dup-1:1:alloc", 2, 1)
	r.Moves = append(r.Moves, r.Moves[0])
	rep := apply(t, db, []event.Result{r})
	if rep.Count(persist.Applied) != 1 || len(rep.MoveConflicts) != 0 || rep.Skips.DuplicateMoves != 1 {
		t.Errorf("report %+v: want applied, one duplicate move, no conflict", rep)
	}
	_, _, moves := identityRows(t, db)
	sameRows(t, "moves", moves, []string{"LC-P1 dup-1 P dup-1:1:alloc"})
}
