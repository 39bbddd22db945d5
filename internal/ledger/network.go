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
	// the SKU's safety stock for ModeShip, less the SKU's waiting demand, never below 0
	// (and for ModeShip no more than the locations' caps sum to, less the demand).
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
// for the SKU's safety stock, then for the locations' own, each over what a.Waiting
// leaves of the sum) and, for ship, no more at a location than its own safety stock
// leaves.
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
	// The queue's demand is held back from the sum and from the caps' total, as ledger.lua's
	// routedCandidates does; the caps themselves stay whole.
	need, capped := a.Qty, n.Sellable
	if a.Mode == stock.ModeShip {
		capped = 0
		for loc, s := range caps {
			caps[loc] = max(0, s-a.LocationSafety[loc])
			capped += caps[loc]
		}
		need += a.SafetyStock
	}
	free, capped := max(0, n.Sellable-a.Waiting), max(0, capped-a.Waiting)
	n.Available = free
	if a.Mode == stock.ModeShip {
		n.Available = max(0, min(free-a.SafetyStock, capped))
	}
	n.Reason, n.Detail = networkRefusal(a, free, need, capped)
	if a.Qty > 0 && n.Reason == "" {
		n.OK = true
		n.Take = takeCapped(el, a.Qty, caps, a.Mode == stock.ModeShip)
	}
	return n
}

// networkRefusal is the reason and detail of a routed allocation of a.Qty whose eligible
// candidates leave free once the waiting demand is held back, need the sum it must reach
// and capped the locations' caps' total less the demand ("" when it fits or a.Qty is 0).
func networkRefusal(a Availability, free, need, capped int64) (reason, detail string) {
	switch {
	case a.Qty == 0:
		return "", ""
	case free < a.Qty:
		reason, detail = "ERR_SHORTAGE", fmt.Sprintf("requested=%d available=%d", a.Qty, free)
	case free < need:
		reason, detail = "ERR_SAFETY_STOCK", fmt.Sprintf("requested=%d available=%d safety_stock=%d", a.Qty, free, a.SafetyStock)
	case capped < a.Qty:
		reason, detail = "ERR_SAFETY_STOCK", fmt.Sprintf("requested=%d available=%d capped=%d", a.Qty, free, capped)
	default:
		return "", ""
	}
	if a.Waiting > 0 {
		detail += fmt.Sprintf(" queued=%d", a.Waiting)
	}
	return reason, detail
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
