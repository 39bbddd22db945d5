package stock

import (
	"cmp"
	"encoding/json"
	"math"
	"slices"
)

// Location kinds.
const (
	LocationWarehouse = "warehouse"
	LocationStore     = "store"
)

// Location is one place a shop keeps stock, as a shop registers it (junbanctl locations
// set): kept in PostgreSQL (table locations) and published to Redis for the workers.
type Location struct {
	ID string `json:"location"`
	// Kind is LocationWarehouse or LocationStore.
	Kind string `json:"kind"`
	// Rank orders locations for the "ranked" allocation: lower first.
	Rank int `json:"rank"`
	// Ships: the location ships online orders. Pickup: it hands orders over in person.
	Ships  bool `json:"ships"`
	Pickup bool `json:"pickup"`
	// Lat and Lon are its coordinates in degrees, both or neither.
	Lat *float64 `json:"lat,omitempty"`
	Lon *float64 `json:"lon,omitempty"`
	// Markets are the markets (shop-defined codes) it serves; none: every market.
	Markets []string `json:"markets,omitempty"`
	// Enabled: a disabled location keeps its stock but is no candidate of any allocation.
	Enabled bool `json:"enabled"`
}

// MaxMarkets bounds a location's markets.
const MaxMarkets = 64

// DefaultLocationSettings are the default location's settings until the shop sets them:
// a warehouse of rank 0 that ships and is enabled.
func DefaultLocationSettings() Location {
	return Location{ID: DefaultLocation, Kind: LocationWarehouse, Ships: true, Enabled: true}
}

// Validate checks a location's fields (ErrInvalidRequest).
func (l Location) Validate() error {
	if err := CheckLocation(l.ID); err != nil {
		return err
	}
	if l.Kind != LocationWarehouse && l.Kind != LocationStore {
		return Invalidf("location %s: kind %q is neither %q nor %q", l.ID, l.Kind, LocationWarehouse, LocationStore)
	}
	if l.Rank < 0 || l.Rank > 1_000_000 {
		return Invalidf("location %s: rank %d is not in 0..1000000", l.ID, l.Rank)
	}
	if (l.Lat == nil) != (l.Lon == nil) {
		return Invalidf("location %s: lat and lon go together", l.ID)
	}
	if l.Lat != nil && (math.IsNaN(*l.Lat) || *l.Lat < -90 || *l.Lat > 90 || math.IsNaN(*l.Lon) || *l.Lon < -180 || *l.Lon > 180) {
		return Invalidf("location %s: coordinates %v,%v out of range (lat -90..90, lon -180..180)", l.ID, *l.Lat, *l.Lon)
	}
	if len(l.Markets) > MaxMarkets {
		return Invalidf("location %s: more than %d markets", l.ID, MaxMarkets)
	}
	for _, m := range l.Markets {
		if err := CheckLocation(m); err != nil {
			return Invalidf("location %s: market %q: only 1..%d letters, digits, '.', '_' and '-'", l.ID, m, MaxLocationLen)
		}
	}
	return nil
}

// EncodeLocation is a location's published form: its JSON.
func EncodeLocation(l Location) (string, error) {
	b, err := json.Marshal(l)
	return string(b), err
}

// DecodeLocation reads a published location back and validates it.
func DecodeLocation(s string) (Location, error) {
	var l Location
	if err := json.Unmarshal([]byte(s), &l); err != nil {
		return l, Invalidf("location: %v", err)
	}
	return l, l.Validate()
}

// SortLocations orders locations by rank, then id.
func SortLocations(ls []Location) {
	slices.SortFunc(ls, func(a, b Location) int { return cmp.Or(cmp.Compare(a.Rank, b.Rank), cmp.Compare(a.ID, b.ID)) })
}

// ShopLocations are the shop's locations as the workers read them.
type ShopLocations struct {
	// All are the locations by rank, then id, the default location among them (with
	// DefaultLocationSettings until the shop sets it).
	All []Location
	// Registered: the shop has registered locations (the published hash is not empty).
	// Without, every lot is at the default location and an order needs no route.
	Registered bool
}

// Has tells whether id is one of the shop's locations; the default location always is.
func (s ShopLocations) Has(id string) bool {
	return id == "" || id == DefaultLocation || slices.ContainsFunc(s.All, func(l Location) bool { return l.ID == id })
}

// DefaultShopLocations are a shop's locations before it registers any: the default one.
func DefaultShopLocations() ShopLocations {
	return ShopLocations{All: []Location{DefaultLocationSettings()}}
}
