package stock

import (
	"cmp"
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
)

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
		case StrategyRanked, StrategyFEFONetwork:
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
