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
// order, with the refusal rules of an allocation (ERR_SHORTAGE, then ERR_SAFETY_STOCK).
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
	for _, c := range el {
		n.Sellable += c.Sellable
	}
	need := a.Qty
	n.Available = n.Sellable
	if a.Mode == stock.ModeShip {
		n.Available = max(n.Sellable-a.SafetyStock, 0)
		need += a.SafetyStock
	}
	switch {
	case a.Qty == 0:
	case n.Sellable < a.Qty:
		n.Reason, n.Detail = "ERR_SHORTAGE", fmt.Sprintf("requested=%d available=%d", a.Qty, n.Sellable)
	case n.Sellable < need:
		n.Reason, n.Detail = "ERR_SAFETY_STOCK", fmt.Sprintf("requested=%d available=%d safety_stock=%d", a.Qty, n.Sellable, a.SafetyStock)
	default:
		n.OK = true
		for rem, i := a.Qty, 0; rem > 0; i++ {
			q := min(rem, el[i].Sellable)
			n.Take = append(n.Take, stock.LotQty{LotID: el[i].LotID, Qty: q})
			rem -= q
		}
	}
	return n
}
