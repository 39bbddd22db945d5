package domain

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

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

// LocationStock is what a fewest_splits plan reads: per location, the sellable of sku's
// candidates on date. *ledger.Ledger and *stock.Model provide it; with a ledger that does
// not, an order is not planned.
type LocationStock interface {
	SellableByLocation(ctx context.Context, sku, date string) (map[string]int64, error)
}

// Names of the allocations of an order.placed's line in turn (txn.opID's step): by the
// first plan, by the one replan after a stale plan, and by the rest of the chain after
// that. OwnMark keeps the later ones apart from every name a sender's line id can make.
var allocRounds = []string{"alloc", "alloc" + event.OwnMark + "replan", "alloc" + event.OwnMark + "unplanned"}

// allocatePlanned allocates lines by a route with fewest_splits. It plans the order from
// a read of its SKUs and allocates each line with its SKU's plan. When a line's plan is
// stale (ERR_STALE_PLAN: the stock moved since the read; nothing moved), the lines before
// it keep what they took, and the lines from it on are planned once more from a fresh
// read, the locations the lines before took at first; when a line's plan is stale again,
// the lines from it on are allocated by the rest of the chain, without fewest_splits.
// Every line is allocated once, so a placement makes no more operations than without a
// plan (WorstCaseResult).
func (t *txn) allocatePlanned(lines []event.Line, date string, mode stock.Mode, route *stock.Route) ([][]stock.LotQty, string, error) {
	stale := stock.Reason(stock.ErrStalePlan)
	held := make([][]stock.LotQty, len(lines))
	next := 0 // the first line not allocated yet
	for round, step := range allocRounds {
		r, plans := route, map[string][]string(nil)
		if round < len(allocRounds)-1 {
			var err error
			if plans, err = t.plan(lines[next:], date, route, usedLocations(held[:next])); err != nil {
				return nil, "", err
			}
		} else {
			un := *route
			un.Strategies = slices.DeleteFunc(slices.Clone(route.Strategies), func(s stock.Strategy) bool { return s == stock.StrategyFewestSplits })
			r = &un
		}
		for ; next < len(lines); next++ {
			lots, reason, err := t.allocateLine(lines[next], date, mode, step, r, plans)
			if err != nil || (reason != "" && (reason != stale || round == len(allocRounds)-1)) {
				return nil, reason, err
			}
			if reason == stale {
				break
			}
			held[next] = lots
		}
		if next == len(lines) {
			break
		}
	}
	return held, "", nil
}

// usedLocations are the locations held's lots are at, in order of first use.
func usedLocations(held [][]stock.LotQty) []string {
	var out []string
	for _, lots := range held {
		for _, lq := range lots {
			l := cmp.Or(lq.Location, stock.DefaultLocation)
			if !slices.Contains(out, l) {
				out = append(out, l)
			}
		}
	}
	return out
}

// plan is each SKU's planned locations for lines (stock.PlanFewestSplits) over route's
// eligible locations, first the eligible ones of first, then PlanOrder's, from a read of
// each SKU; nil when the ledger cannot be read so, a SKU's read is refused (the
// allocation answers why), or the locations cannot cover the lines.
func (t *txn) plan(lines []event.Line, date string, route *stock.Route, first []string) (map[string][]string, error) {
	if t.stock == nil {
		return nil, nil
	}
	demand := map[string]int64{}
	for _, ln := range lines {
		demand[ln.SKU] += ln.Qty
	}
	sellable := map[string]map[string]int64{}
	for _, sku := range slices.Sorted(maps.Keys(demand)) {
		s, err := t.stock.SellableByLocation(t.ctx, sku, date)
		if err != nil {
			if _, ok := rejectable(err); ok && !errors.Is(err, stock.ErrNotLoaded) {
				return nil, nil
			}
			return nil, err
		}
		sellable[sku] = s
	}
	eligible := route.PlanOrder()
	order := slices.DeleteFunc(slices.Clone(first), func(l string) bool { return !slices.Contains(eligible, l) })
	for _, l := range eligible {
		if !slices.Contains(order, l) {
			order = append(order, l)
		}
	}
	plans, ok := stock.PlanFewestSplits(demand, sellable, order)
	if !ok {
		return nil, nil
	}
	return plans, nil
}
