package ledger

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/junban/junban/internal/ledger/stock"
)

// NetworkAvailability is what the storefront may sell: the candidates at the network's
// locations (enabled, shipping online orders), and what an order without routing fields
// would get from them, routed as the order-worker routes such an order once the shop has
// registered locations: by rank (docs/ledger.md, "Locations").
type NetworkAvailability struct {
	// Sellable is the network's candidates' sellable quantity; Available is Sellable less
	// the SKU's safety stock for ModeShip (never below 0).
	Sellable  int64 `json:"sellable"`
	Available int64 `json:"available"`
	// OK tells whether an allocation of the request's Qty over the network would succeed,
	// Take what it would take, in order; Reason and Detail why it would fail.
	OK     bool           `json:"ok"`
	Take   []stock.LotQty `json:"take,omitempty"`
	Reason string         `json:"reason,omitempty"`
	Detail string         `json:"detail,omitempty"`
}

// Network answers a for the network of the shop's locations locs: its candidates at the
// enabled locations that ship, ordered by their location's rank, then in the allocation
// order, with the refusal rules of an allocation (ERR_SHORTAGE, then ERR_SAFETY_STOCK
// for the SKU's safety stock, then for the locations' own) and, for ship, no more at a
// location than its own safety stock leaves.
func (a Availability) Network(locs []stock.Location) NetworkAvailability {
	pos := (&stock.Route{Strategies: []stock.Strategy{stock.StrategyRanked}, Locations: locs}).Positions()
	var el []Candidate
	for _, c := range a.Candidates {
		if _, ok := pos[cmp.Or(c.Location, stock.DefaultLocation)]; ok {
			el = append(el, c)
		}
	}
	slices.SortStableFunc(el, func(x, y Candidate) int {
		return cmp.Compare(pos[cmp.Or(x.Location, stock.DefaultLocation)], pos[cmp.Or(y.Location, stock.DefaultLocation)])
	})
	var n NetworkAvailability
	caps := map[string]int64{} // per location: what a ship allocation may take there
	for _, c := range el {
		n.Sellable += c.Sellable
		caps[cmp.Or(c.Location, stock.DefaultLocation)] += c.Sellable
	}
	need, capped := a.Qty, n.Sellable
	n.Available = n.Sellable
	if a.Mode == stock.ModeShip {
		capped = 0
		for loc, s := range caps {
			caps[loc] = max(0, s-a.LocationSafety[loc])
			capped += caps[loc]
		}
		n.Available = max(0, min(n.Sellable-a.SafetyStock, capped))
		need += a.SafetyStock
	}
	switch {
	case a.Qty == 0:
	case n.Sellable < a.Qty:
		n.Reason, n.Detail = "ERR_SHORTAGE", fmt.Sprintf("requested=%d available=%d", a.Qty, n.Sellable)
	case n.Sellable < need:
		n.Reason, n.Detail = "ERR_SAFETY_STOCK", fmt.Sprintf("requested=%d available=%d safety_stock=%d", a.Qty, n.Sellable, a.SafetyStock)
	case capped < a.Qty:
		n.Reason, n.Detail = "ERR_SAFETY_STOCK", fmt.Sprintf("requested=%d available=%d capped=%d", a.Qty, n.Sellable, capped)
	default:
		n.OK = true
		n.Take = takeCapped(el, a.Qty, caps, a.Mode == stock.ModeShip)
	}
	return n
}

// takeCapped takes qty from the candidates el in order, with capped no more at a location
// than caps allows.
func takeCapped(el []Candidate, qty int64, caps map[string]int64, capped bool) []stock.LotQty {
	var take []stock.LotQty
	for _, c := range el {
		if qty == 0 {
			break
		}
		loc := cmp.Or(c.Location, stock.DefaultLocation)
		q := min(qty, c.Sellable)
		if capped {
			q = min(q, caps[loc])
			caps[loc] -= q
		}
		if q > 0 {
			take = append(take, stock.LotQty{LotID: c.LotID, Qty: q})
			qty -= q
		}
	}
	return take
}
