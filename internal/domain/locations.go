package domain

import (
	"fmt"

	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/ledger/stock"
)

// ReasonUnknownLocation rejects an event that names a location the shop has not registered
// (a lot registered there, a lot named there, a pickup there): every lot of a shop is at
// one of its registered locations or the default one, so a routed allocation, which takes
// only at the shop's eligible locations, finds every lot it may take.
const ReasonUnknownLocation = "ERR_UNKNOWN_LOCATION"

// shop is the shop's locations, from the policy's source (nil: the default location
// alone). The step keeps its first read, and a fresh one when it makes one, so that every
// line and check of an event sees the same locations.
func (t *txn) shop(fresh bool) (stock.ShopLocations, error) {
	if t.pol.Locations == nil {
		return stock.DefaultShopLocations(), nil
	}
	if t.locs != nil && !fresh {
		return *t.locs, nil
	}
	s, err := t.pol.Locations.Shop(t.ctx, fresh)
	if err != nil {
		return stock.ShopLocations{}, err
	}
	t.locs = &s
	return s, nil
}

// unknownLocation is ReasonUnknownLocation when location ("" or the default: none named)
// is not one of the shop's locations, read anew before refusing it so that a location
// just registered is known whatever the cache's age.
func (t *txn) unknownLocation(location string) (string, error) {
	if location == "" || location == stock.DefaultLocation {
		return "", nil
	}
	for _, fresh := range []bool{false, true} {
		s, err := t.shop(fresh)
		if err != nil {
			return "", err
		}
		if s.Has(location) {
			return "", nil
		}
	}
	t.refusals = append(t.refusals, fmt.Sprintf("location %s is not one of the shop's locations", location))
	return ReasonUnknownLocation, nil
}

// atKnownLocation runs op unless location is unknown (ReasonUnknownLocation, nothing
// runs).
func (t *txn) atKnownLocation(location string, op stock.Op) (transition, error) {
	if reason, err := t.unknownLocation(location); err != nil || reason != "" {
		return transition{reason: reason}, err
	}
	return t.warehouseOp(op)
}

// route is an order's route: its order.placed's routing fields with the shop's default
// strategies (those that need a field the order lacks left out; ranked when the shop has
// registered locations and configured none), over the shop's locations. nil (every lot
// alike) for an order without routing fields in a shop that has registered no location
// and has no default strategies: every lot is at the default location.
func (t *txn) route(d *event.Routing) (*stock.Route, error) {
	s, err := t.shop(false)
	if err != nil {
		return nil, err
	}
	if d == nil && !s.Registered && len(t.pol.Strategies) == 0 {
		return nil, nil
	}
	chain := t.pol.Strategies
	if len(chain) == 0 && s.Registered {
		chain = []stock.Strategy{stock.StrategyRanked}
	}
	var defaults []stock.Strategy
	for _, st := range chain {
		if (st == stock.StrategyClosest && (d == nil || d.ShipTo == nil)) || (st == stock.StrategyPinned && (d == nil || d.PickupLocation == "")) {
			continue
		}
		defaults = append(defaults, st)
	}
	r := routeOf(d, defaults)
	r.Locations = s.All
	return r, nil
}
