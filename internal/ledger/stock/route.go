package stock

import (
	"cmp"
	"maps"
	"math"
	"slices"
	"strconv"
)

// Strategy names an ordering of the locations an allocation takes from.
type Strategy string

// The strategies. A Route chains them: each breaks the ties the ones before it left, and
// the lots' own order (AllocKey: FEFO on hand, then LIFO planned) breaks the rest.
const (
	// StrategyRanked: locations by rank, lower first.
	StrategyRanked Strategy = "ranked"
	// StrategyClosest: locations by great-circle distance from Route.ShipTo, closer
	// first; locations without coordinates after every one with them.
	StrategyClosest Strategy = "closest"
	// StrategyPinned: the pinned location first (Route.Pinned, which is then the only
	// eligible location: a pickup).
	StrategyPinned Strategy = "pinned"
	// StrategyFEFONetwork: the earliest-expiring valid lot anywhere eligible: the lots'
	// own order, over every eligible location alike; strategies after it never decide.
	StrategyFEFONetwork Strategy = "fefo_network"
	// StrategyFewestSplits: the locations of the route's Plan first, in the plan's order
	// (PlanFewestSplits: one location that covers the whole order, else a greedy cover by
	// the fewest locations), the other eligible locations after them. The plan is made on
	// the Go side from a read of the order's SKUs; the allocation refuses with
	// ErrStalePlan when the plan's locations no longer cover its quantity.
	StrategyFewestSplits Strategy = "fewest_splits"
)

// MaxPlan bounds a Route's Plan.
const MaxPlan = 1000

// MaxStrategies bounds a Route's chain.
const MaxStrategies = 8

// Coordinates are a point in degrees.
type Coordinates struct {
	Lat float64 `json:"lat"`
	Lon float64 `json:"lon"`
}

// Route says which locations an allocation may take from and in which order. A request
// without one takes from every lot alike, in the lots' own order, as before locations.
type Route struct {
	Strategies []Strategy `json:"strategies,omitempty"`
	// ShipTo is where the order goes (StrategyClosest).
	ShipTo *Coordinates `json:"ship_to,omitempty"`
	// Pinned, when set, is the one eligible location (a pickup), enabled or not shipping.
	Pinned string `json:"pinned,omitempty"`
	// NoSplit: the whole quantity comes from one location.
	NoSplit bool `json:"no_split,omitempty"`
	// Locations are the shop's locations as the caller read them (ledger.ReadLocations):
	// the environment of the request, like the stock, not part of it (not in its
	// fingerprint: a re-run after the shop changed a location replays the first answer).
	Locations []Location `json:"-"`
	// Plan are the locations a StrategyFewestSplits allocation planned for its line, in
	// order; none: no plan (the strategy then tells no location apart). The environment
	// of the request, like Locations (made from a read of the stock), so not in its
	// fingerprint: a re-run of a step that planned otherwise replays the first answer.
	Plan []string `json:"-"`
}

// Validate checks the route's own fields (ErrInvalidRequest).
func (r *Route) Validate() error {
	if r == nil {
		return nil
	}
	if len(r.Strategies) > MaxStrategies {
		return Invalidf("more than %d strategies", MaxStrategies)
	}
	seen := map[Strategy]bool{}
	for _, s := range r.Strategies {
		switch s {
		case StrategyRanked, StrategyFEFONetwork, StrategyFewestSplits:
		case StrategyClosest:
			if r.ShipTo == nil {
				return Invalidf("strategy closest without ship_to")
			}
		case StrategyPinned:
			if r.Pinned == "" {
				return Invalidf("strategy pinned without a pinned location")
			}
		default:
			return Invalidf("unknown strategy %q", s)
		}
		if seen[s] {
			return Invalidf("strategy %s twice", s)
		}
		seen[s] = true
	}
	if c := r.ShipTo; c != nil && (math.IsNaN(c.Lat) || math.IsNaN(c.Lon) || c.Lat < -90 || c.Lat > 90 || c.Lon < -180 || c.Lon > 180) {
		return Invalidf("ship_to %v,%v out of range (lat -90..90, lon -180..180)", c.Lat, c.Lon)
	}
	if r.Pinned != "" {
		if err := CheckLocation(r.Pinned); err != nil {
			return err
		}
	}
	if len(r.Plan) > 0 && !seen[StrategyFewestSplits] {
		return Invalidf("a plan without strategy %s", StrategyFewestSplits)
	}
	if len(r.Plan) > MaxPlan {
		return Invalidf("a plan of more than %d locations", MaxPlan)
	}
	for i, l := range r.Plan {
		if err := CheckLocation(l); err != nil {
			return err
		}
		if slices.Contains(r.Plan[:i], l) {
			return Invalidf("location %s twice in the plan", l)
		}
	}
	return nil
}

// Positions returns each eligible location's position in the allocation order: lots sort
// by their location's position, then by AllocKey. Eligible are the enabled locations that
// ship, or the pinned one alone when the route pins one (if the shop has it enabled). A
// location the route's Locations lack is not eligible. Locations that no strategy before
// StrategyFEFONetwork (or the chain's end) tells apart share a position.
func (r *Route) Positions() map[string]int {
	var el []Location
	for _, l := range r.Locations {
		switch {
		case r.Pinned != "":
			if l.ID == r.Pinned && l.Enabled {
				el = append(el, l)
			}
		case l.Enabled && l.Ships:
			el = append(el, l)
		}
	}
	keys := make(map[string][]float64, len(el))
	for _, l := range el {
		var k []float64
	chain:
		for _, s := range r.Strategies {
			switch s {
			case StrategyRanked:
				k = append(k, float64(l.Rank))
			case StrategyClosest:
				k = append(k, distanceKm(r.ShipTo, l))
			case StrategyPinned:
				if l.ID == r.Pinned {
					k = append(k, 0)
				} else {
					k = append(k, 1)
				}
			case StrategyFewestSplits:
				k = append(k, float64(planIndex(r.Plan, l.ID)))
			case StrategyFEFONetwork:
				break chain
			}
		}
		keys[l.ID] = k
	}
	slices.SortFunc(el, func(a, b Location) int {
		return cmp.Or(slices.Compare(keys[a.ID], keys[b.ID]), cmp.Compare(a.ID, b.ID))
	})
	pos := make(map[string]int, len(el))
	p := 0
	for i, l := range el {
		if i > 0 && slices.Compare(keys[l.ID], keys[el[i-1].ID]) != 0 {
			p++
		}
		pos[l.ID] = p
	}
	return pos
}

// planIndex is id's place in plan, len(plan) for a location the plan lacks.
func planIndex(plan []string, id string) int {
	if i := slices.Index(plan, id); i >= 0 {
		return i
	}
	return len(plan)
}

// PlanOrder is the order in which PlanFewestSplits considers the eligible locations:
// by their positions without a plan (the chain's other strategies), then id.
func (r *Route) PlanOrder() []string {
	un := *r
	un.Plan = nil
	pos := un.Positions()
	ids := make([]string, 0, len(pos))
	for id := range pos {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b string) int { return cmp.Or(cmp.Compare(pos[a], pos[b]), cmp.Compare(a, b)) })
	return ids
}

// PlanFewestSplits plans an order over locations (in PlanOrder's order): demand is each
// SKU's quantity over the order's lines, sellable each SKU's candidates' sellable per
// location. The first location whose sellable covers every SKU's demand serves the whole
// order. Else locations are chosen greedily: each time the one that covers the most of
// the units still uncovered (summing, per SKU, the smaller of what is uncovered and its
// sellable there), the first in order on a tie, until every unit is covered. Returns,
// per SKU, the chosen locations that serve it, in the order chosen; ok false when the
// locations cannot cover the order.
func PlanFewestSplits(demand map[string]int64, sellable map[string]map[string]int64, locations []string) (map[string][]string, bool) {
	skus := slices.Sorted(maps.Keys(demand))
	for _, l := range locations {
		if !slices.ContainsFunc(skus, func(s string) bool { return sellable[s][l] < demand[s] }) {
			plan := make(map[string][]string, len(skus))
			for _, s := range skus {
				plan[s] = []string{l}
			}
			return plan, true
		}
	}
	left := maps.Clone(demand)
	plan := make(map[string][]string, len(skus))
	chosen := map[string]bool{}
	for {
		var best string
		var gain int64
		for _, l := range locations {
			if chosen[l] {
				continue
			}
			var g int64
			for _, s := range skus {
				g += min(left[s], sellable[s][l])
			}
			if g > gain {
				best, gain = l, g
			}
		}
		if gain == 0 {
			return nil, false
		}
		chosen[best] = true
		done := true
		for _, s := range skus {
			if t := min(left[s], sellable[s][best]); t > 0 {
				plan[s] = append(plan[s], best)
				left[s] -= t
			}
			done = done && left[s] == 0
		}
		if done {
			return plan, true
		}
	}
}

// distanceKm is the great-circle distance from c to l, +Inf when l has no coordinates.
// Rounded to whole metres, so that two machines' floating point cannot order alike
// locations differently.
func distanceKm(c *Coordinates, l Location) float64 {
	if l.Lat == nil || l.Lon == nil {
		return math.Inf(1)
	}
	const r = 6371.0088
	rad := math.Pi / 180
	dLat, dLon := (*l.Lat-c.Lat)*rad, (*l.Lon-c.Lon)*rad
	a := math.Sin(dLat/2)*math.Sin(dLat/2) + math.Cos(c.Lat*rad)*math.Cos(*l.Lat*rad)*math.Sin(dLon/2)*math.Sin(dLon/2)
	d := 2 * r * math.Asin(math.Min(1, math.Sqrt(a)))
	return math.Round(d*1000) / 1000
}

// fingerprint writes the route's own fields (not Locations).
func (f *fingerprint) route(r *Route) *fingerprint {
	if r == nil {
		return f
	}
	f.str("route").num(int64(len(r.Strategies)))
	for _, s := range r.Strategies {
		f.str(string(s))
	}
	if r.ShipTo != nil {
		f.str(strconv.FormatFloat(r.ShipTo.Lat, 'g', -1, 64)).str(strconv.FormatFloat(r.ShipTo.Lon, 'g', -1, 64))
	} else {
		f.str("")
	}
	return f.str(r.Pinned).flag(r.NoSplit)
}
