package persist

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/junban/junban/internal/event"
)

// What the identity checks say about two results or two moves under one key, for any
// content a message on the results queue can carry: a row equals itself (a redelivery
// is never a conflict), any difference in seq, type, outcome or reason is a conflict
// (inbox) and any difference in entity, event id, lot, buckets, quantity or version is
// one (moves), and the error stays bounded whatever the ids' length, naming the entity
// and event id when they are short and printable.
func FuzzIdentityChecks(f *testing.F) {
	f.Add("LC-P1", "dup-1", int64(1), "order.placed", "applied", "", int64(2), "order.placed", "applied", "", "P-L1", int64(1))
	f.Add("sku:P", "evt-9", int64(7), "inventory.adjusted", "rejected", "ERR_SHORTAGE", int64(7), "inventory.adjusted", "rejected", "ERR_NEGATIVE", "L", int64(0))
	f.Add("LC-\x00\xff", strings.Repeat("e", 300), int64(-1), "", "", strings.Repeat("r", 5000), int64(-1), "", "", "", "", int64(-5))
	f.Add("LC-\"q\"", "id\n", int64(0), "t", "applied", "\u00e9", int64(0), "t", "applied", "\u00e9", "lot\t", int64(1<<40))
	f.Fuzz(func(t *testing.T, entity, eventID string, seqA int64, typeA, outcomeA, reasonA string, seqB int64, typeB, outcomeB, reasonB, lot string, qty int64) {
		a := InboxRow{Entity: entity, EventID: eventID, Seq: seqA, Type: typeA, Outcome: outcomeA, Reason: reasonA}
		b := InboxRow{Entity: entity, EventID: eventID, Seq: seqB, Type: typeB, Outcome: outcomeB, Reason: reasonB}
		if d := inboxDiff(a, a); d != "" {
			t.Fatalf("a row differs from itself: %s", d)
		}
		same := seqA == seqB && typeA == typeB && outcomeA == outcomeB && reasonA == reasonB
		d := inboxDiff(a, b)
		if (d == "") != same {
			t.Fatalf("inboxDiff %q for rows equal=%v", d, same)
		}
		if d != "" {
			err := conflictError(b, d)
			if !errors.Is(err, ErrConflict) {
				t.Fatalf("%v does not wrap ErrConflict", err)
			}
			if len(err.Error()) > 8*(maxEntityLength+event.MaxIDLength+4*64)+512 {
				t.Fatalf("conflict error of %d bytes", len(err.Error()))
			}
			if printable(entity) && printable(eventID) && len(entity) <= maxEntityLength && len(eventID) <= event.MaxIDLength &&
				(!strings.Contains(err.Error(), entity) || !strings.Contains(err.Error(), eventID)) {
				t.Fatalf("conflict error %q does not name %q and %q", err, entity, eventID)
			}
		}

		m := MoveRow{SKU: "S", OpID: eventID + ":1:alloc", Idx: 0, Entity: entity, EventID: eventID, LotID: lot,
			FromBucket: typeA, ToBucket: outcomeA, Qty: qty, SKUVersion: seqA}
		if !sameMove(m, m) {
			t.Fatal("a move differs from itself")
		}
		for _, change := range []func(*MoveRow){
			func(r *MoveRow) { r.Entity += "x" }, func(r *MoveRow) { r.EventID += "x" }, func(r *MoveRow) { r.LotID += "x" },
			func(r *MoveRow) { r.FromBucket += "x" }, func(r *MoveRow) { r.ToBucket += "x" }, func(r *MoveRow) { r.Qty++ },
			func(r *MoveRow) { r.SKUVersion++ },
		} {
			o := m
			change(&o)
			if sameMove(m, o) {
				t.Fatalf("moves %+v and %+v taken as the same", m, o)
			}
			msg := MoveConflict{Move: o, Stored: m}.Error()
			if len(msg) > 16*(maxEntityLength+event.MaxIDLength)+512 {
				t.Fatalf("move conflict of %d bytes", len(msg))
			}
		}
	})
}

// printable is true for a string that %q leaves as it is.
func printable(s string) bool { return strconv.Quote(s) == `"`+s+`"` }
