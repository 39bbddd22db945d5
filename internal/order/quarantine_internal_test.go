package order

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/junban/junban/internal/domain"
	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/ledger/stock"
)

// A quarantine's result id fits what persistence accepts, whatever the event id's length.
func TestQuarantineIDFitsTheIDBound(t *testing.T) {
	if got := quarantineID("evt-1", 2); got != "evt-1~q2" {
		t.Errorf("short id: %q", got)
	}
	long := strings.Repeat("e", event.MaxIDLength)
	a, b := quarantineID(long, 1), quarantineID(long, 2)
	if len(a) > event.MaxIDLength || a == b || a != quarantineID(long, 1) {
		t.Errorf("long ids: %q %q", a, b)
	}
}

// A quarantine's result is spread over several when one would not fit, each under the
// limit, with every lot of every SKU version in exactly one of them, in seq order.
func TestCompensationFitsTheLimit(t *testing.T) {
	lot := func(id string) stock.Lot {
		return stock.Lot{LotID: id, Kind: stock.KindOnHand, Good: true, BestBefore: "2027-01-01", ValidFrom: "2026-01-01", ValidTo: "2027-12-31", Sellable: 5}
	}
	var skus []stock.SKU
	want := 0
	for v := int64(1); v <= 3; v++ {
		s := stock.SKU{SKU: "A", Version: v}
		for i := range 6 {
			s.Lots = append(s.Lots, lot(fmt.Sprintf("L%d", i)))
			want++
		}
		skus = append(skus, s)
	}
	base := event.Result{EventID: "e~q1", Entity: "O1", LCID: "O1", Type: event.OrderPlaced, Outcome: event.Rejected,
		Reason: ReasonQuarantined, Moves: []stock.Move{{OpID: "e:1:alloc", SKU: "A", LotID: "L0", From: "sellable", To: "allocated", Qty: 1}}}
	st := domain.State{Seq: 7}
	one, err := compensation(base, skus, &st, 1<<20)
	if err != nil || len(one) != 1 || len(one[0].Moves) != 1 || one[0].Seq != 8 || st.Seq != 8 {
		t.Fatalf("a result that fits: %d results, %v", len(one), err)
	}
	const limit = 900
	st = domain.State{Seq: 7}
	out, err := compensation(base, skus, &st, limit)
	if err != nil || len(out) < 3 {
		t.Fatalf("spread: %d results, %v", len(out), err)
	}
	got := map[string]bool{}
	for i, r := range out {
		b, _ := json.Marshal(r)
		if len(b) > limit || r.Moves != nil || r.Seq != int64(8+i) || r.EventID != fmt.Sprintf("e~q1.%d", i+1) {
			t.Errorf("result %d: %d bytes, seq %d, id %s, moves %v", i, len(b), r.Seq, r.EventID, r.Moves)
		}
		for _, s := range r.SKUs {
			for _, l := range s.Lots {
				k := fmt.Sprintf("%s@%d/%s", s.SKU, s.Version, l.LotID)
				if got[k] {
					t.Errorf("%s twice", k)
				}
				got[k] = true
			}
		}
	}
	if len(got) != want || st.Seq != int64(7+len(out)) {
		t.Errorf("%d lots of %d; state seq %d", len(got), want, st.Seq)
	}
	if _, err := compensation(base, skus, &domain.State{}, 100); err == nil {
		t.Error("a limit below one lot's result: no error")
	}
}
