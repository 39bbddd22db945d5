package domain_test

import (
	"testing"

	"github.com/junban/junban/internal/domain"
	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/ledger/stock"
)

// giveBackRules are the sentences of docs/events.md's "Which units go back, and in which
// order" and docs/ledger.md's "Give-back order", one case each (the case's name is the
// sentence it holds the code to). Stock: A2 (5, expires first) and A1 (5) of A, safety
// stock 2; B1 (3) of B; L1 (4, default), L2 (3, west), L3 (5, store, expires first) of L.
func giveBackRules() []transitionCase {
	return []transitionCase{
		{name: "a line lists its lots in the order it first took them; a lot it takes again keeps its place",
			before: []event.Order{place(reserve, line("2", "A", 3), line("1", "A", 4))},
			ev:     change(line("1", "A", 7)),
			want: expect{outcome: applied, order: "placed/reserved/unpaid",
				lines: []event.SnapshotLine{snap("1", "A", 7, at("A2", 5), at("A1", 2))},
				lots:  map[string]buckets{"A/A2": {0, 5}, "A/A1": {3, 2}}}},
		{name: "a lowered line gives back from the end of its list: the lot it took again last stays, the later-expiring one goes",
			before: []event.Order{place(reserve, line("2", "A", 3), line("1", "A", 4)), change(line("1", "A", 7))},
			ev:     change(line("1", "A", 5)),
			want: expect{outcome: applied, order: "placed/reserved/unpaid",
				lines: []event.SnapshotLine{snap("1", "A", 5, at("A2", 5))},
				lots:  map[string]buckets{"A/A2": {0, 5}, "A/A1": {5}}}},
		{name: "locations do not change the give-back order: the end of the list first, wherever its lots are",
			before: []event.Order{place(ship, line("1", "L", 6))},
			ev:     change(line("1", "L", 2)),
			want: expect{outcome: applied, order: "placed/allocated/unpaid",
				lines: []event.SnapshotLine{snap("1", "L", 2, atLoc("L3", 2, "store"))},
				lots:  map[string]buckets{"L/L2": {3}, "L/L3": {3, 0, 2}}}},
		{name: "a return takes from the end of the line's list too, at any location",
			before: []event.Order{place(ship, line("1", "L", 6)), pay(), shipIt()},
			ev:     giveBack(false, back("1", 2)),
			want: expect{outcome: applied, order: "shipped/allocated/paid",
				lots: map[string]buckets{"L/L2": {3}, "L/L3": {1, 0, 0, 0, 4}}}},
		{name: "within a SKU, the lines that grow allocate in the event's order: the first takes the earliest-expiring lot",
			before: []event.Order{place(reserve, line("1", "B", 1))},
			ev:     change(line("1", "B", 1), line("3", "A", 4), line("2", "A", 4)),
			want: expect{outcome: applied, order: "placed/reserved/unpaid",
				lines: []event.SnapshotLine{snap("1", "B", 1, at("B1", 1)), snap("3", "A", 4, at("A2", 4)), snap("2", "A", 4, at("A2", 1), at("A1", 3))},
				lots:  map[string]buckets{"A/A2": {0, 5}, "A/A1": {2, 3}}, moves: ops(":A:change")}},
		{name: "a SKU's releases all come back before its first allocation, so a line may take a unit another line gave back",
			before: []event.Order{place(reserve, line("1", "A", 5), line("2", "A", 5))},
			ev:     change(line("2", "A", 5), line("3", "A", 4), line("1", "A", 1)),
			want: expect{outcome: applied, order: "placed/reserved/unpaid",
				lines: []event.SnapshotLine{snap("2", "A", 5, at("A1", 5)), snap("3", "A", 4, at("A2", 4)), snap("1", "A", 1, at("A2", 1))}}},
		{name: "SKUs go in the order the event's lines first name them: the first SKU that refuses gives the reason (ERR_SAFETY_STOCK)",
			before: []event.Order{place(ship, line("1", "A", 1), line("2", "B", 1))},
			ev:     change(line("1", "A", 9), line("2", "B", 5)),
			want:   expect{outcome: rejected, reason: "ERR_SAFETY_STOCK", order: "placed/allocated/unpaid", moves: ops()}},
		{name: "SKUs go in the order the event's lines first name them: the first SKU that refuses gives the reason (ERR_SHORTAGE)",
			before: []event.Order{place(ship, line("1", "A", 1), line("2", "B", 1))},
			ev:     change(line("2", "B", 5), line("1", "A", 9)),
			want:   expect{outcome: rejected, reason: "ERR_SHORTAGE", order: "placed/allocated/unpaid", moves: ops()}},
		{name: "a SKU that only gives back goes after every SKU that grows, whatever the event's order",
			before: []event.Order{place(ship, line("1", "A", 3), line("2", "B", 1))},
			ev:     change(line("1", "A", 1), line("2", "B", 5)),
			want:   expect{outcome: rejected, reason: "ERR_SHORTAGE", order: "placed/allocated/unpaid", moves: ops()}},
		{name: "within the refusing SKU, a release the ledger no longer holds (ERR_INSUFFICIENT) comes before any allocation's reason",
			before: []event.Order{place(ship, line("1", "A", 3), line("2", "A", 1))},
			tamper: stock.ReleaseRequest{OpID: "other:steal", SKU: "A", From: stock.Allocated, Lots: []stock.LotQty{at("A2", 3)}},
			ev:     change(line("1", "A", 1), line("2", "A", 20)),
			want:   expect{outcome: rejected, reason: "ERR_INSUFFICIENT", order: "placed/allocated/unpaid", moves: ops()}},
		{name: "the SKUs changed before a refusing one are moved back, and the reason is the refusing SKU's",
			before: []event.Order{place(ship, line("1", "A", 1), line("2", "B", 1))},
			ev:     change(line("1", "A", 2), line("2", "B", 5)),
			want:   expect{outcome: rejected, reason: "ERR_SHORTAGE", order: "placed/allocated/unpaid", moves: ops(":A:change", ":A:change-undo")}},
		{name: "a routed order's raise takes again, in the route's order, what a lowered line gave back",
			pol:    domain.Policy{Strategies: []stock.Strategy{stock.StrategyRanked}, Locations: testLocations{}},
			before: []event.Order{place(ship, line("1", "L", 6), line("2", "L", 1))},
			ev:     change(line("1", "L", 3), line("2", "L", 4)),
			want: expect{outcome: applied, order: "placed/allocated/unpaid",
				lines: []event.SnapshotLine{snap("1", "L", 3, atLoc("L2", 3, "west")), snap("2", "L", 4, at("L1", 4))},
				lots:  map[string]buckets{"L/L1": {0, 0, 4}, "L/L2": {0, 0, 3}}}},
	}
}

func TestGiveBackRules(t *testing.T) {
	for _, c := range giveBackRules() {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			runTransition(t, c)
		})
	}
}
