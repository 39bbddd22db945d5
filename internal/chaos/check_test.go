package chaos

import (
	"maps"
	"strings"
	"testing"

	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/ledger"
)

// consistent is the state after two events of one order, each applied once: LC-1 placed
// in reserve mode with 3 units of SKU-A lot L1 (of 10), then paid.
func consistent() snapshot {
	k := lotKey{"SKU-A", "L1"}
	o := &event.OrderSnapshot{LCID: "LC-1", Status: event.StatusPlaced, Allocation: "reserved", Paid: true,
		Lines: []event.SnapshotLine{{LineID: "1", SKU: "SKU-A", Qty: 3, Lots: []ledger.LotQty{{LotID: "L1", Qty: 3}}}}}
	return snapshot{
		imported:    map[lotKey]buckets{k: {10, 0, 0, 0, 0}},
		redisLots:   map[lotKey]buckets{k: {7, 3, 0, 0, 0}},
		pgLots:      map[lotKey]buckets{k: {7, 3, 0, 0, 0}},
		moved:       map[lotKey]buckets{k: {-3, 3, 0, 0, 0}},
		redisOrders: map[string]orderState{"LC-1": {Seq: 2, Order: o}},
		pgOrders:    map[string]orderState{"LC-1": {Seq: 2, Order: o}},
		inbox:       map[string][]int64{"LC-1": {2, 1}},
		sent:        []string{"e1", "e2"},
		persisted:   map[string]bool{"e1": true, "e2": true},
	}
}

func clone(s snapshot) snapshot {
	s.imported, s.redisLots, s.pgLots, s.moved = maps.Clone(s.imported), maps.Clone(s.redisLots), maps.Clone(s.pgLots), maps.Clone(s.moved)
	s.redisOrders, s.pgOrders, s.persisted = maps.Clone(s.redisOrders), maps.Clone(s.pgOrders), maps.Clone(s.persisted)
	s.inbox = maps.Clone(s.inbox)
	return s
}

func TestCheckConsistent(t *testing.T) {
	f := check(consistent())
	if n := len(f.Lost) + f.doubleApplied() + len(f.Unconserved) + len(f.Oversold); n != 0 {
		t.Fatalf("findings on a consistent state: %+v", f)
	}
}

// Each broken variant is what one kind of failure leaves behind; the checks must name it.
func TestCheckBrokenVariants(t *testing.T) {
	k := lotKey{"SKU-A", "L1"}
	for _, tc := range []struct {
		name   string
		break_ func(*snapshot)
		want   func(findings) bool
	}{
		{
			// A zombie re-ran order.placed with a fresh op id: the ledger moved 3 more units
			// and the result reached PostgreSQL, so every store and the moves agree with
			// each other; only the orders' holdings show it.
			name: "allocation applied twice under a new op id",
			break_: func(s *snapshot) {
				s.redisLots[k] = buckets{4, 6, 0, 0, 0}
				s.pgLots[k] = buckets{4, 6, 0, 0, 0}
				s.moved[k] = buckets{-6, 6, 0, 0, 0}
			},
			want: func(f findings) bool {
				return len(f.HoldingMismatch) == 2 && len(f.Unconserved) == 0 && f.doubleApplied() > 0
			},
		},
		{
			// The event's done marker was gone: it was processed again in a later turn and
			// took seq 3, while the inbox kept its first result.
			name:   "event processed twice in the turn",
			break_: func(s *snapshot) { s.redisOrders["LC-1"] = orderState{Seq: 3, Order: s.redisOrders["LC-1"].Order} },
			want:   func(f findings) bool { return len(f.SeqBroken) == 1 && f.doubleApplied() == 1 },
		},
		{
			// The ledger moved twice under the same op id (its op-id memory lost); the
			// moves table kept one of them by its primary key.
			name: "ledger move repeated under the same op id",
			break_: func(s *snapshot) {
				s.redisLots[k] = buckets{4, 6, 0, 0, 0}
			},
			want: func(f findings) bool {
				return len(f.Unconserved) > 0 && len(f.HoldingMismatch) == 1 && strings.HasPrefix(f.HoldingMismatch[0], "redis ")
			},
		},
		{
			name: "result lost on the way to PostgreSQL",
			break_: func(s *snapshot) {
				delete(s.persisted, "e2")
				s.inbox["LC-1"] = []int64{1}
			},
			want: func(f findings) bool { return len(f.Lost) == 1 && len(f.SeqBroken) == 1 },
		},
		{
			name: "oversold",
			break_: func(s *snapshot) {
				s.redisLots[k] = buckets{-1, 11, 0, 0, 0}
			},
			want: func(f findings) bool { return len(f.Oversold) == 1 && len(f.Unconserved) > 0 },
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := clone(consistent())
			tc.break_(&s)
			if f := check(s); !tc.want(f) {
				t.Fatalf("the checks missed it: %+v", f)
			}
		})
	}
}
