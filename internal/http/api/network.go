package api

import (
	"context"
	"slices"

	"github.com/junban/junban/internal/ledger"
	"github.com/junban/junban/internal/ledger/stock"
)

// AvailabilityAnswer is an availability as the API answers it: the ledger's, and when it
// answers per location, which locations count toward the network (the storefront's
// figures) and the network's figures.
type AvailabilityAnswer struct {
	ledger.Availability
	// Locations are the ledger's per location, each marked.
	Locations []LocationAnswer `json:"locations,omitempty"`
	// Network sums the locations that count toward the network; absent with Locations.
	Network *NetworkAvailability `json:"network,omitempty"`
}

// LocationAnswer is one location's availability and whether it counts toward the network.
type LocationAnswer struct {
	ledger.LocationAvailability
	// Network: the location is enabled and ships online orders (docs/outbound.md, "The
	// network and its locations").
	Network bool `json:"network"`
}

// NetworkAvailability is what the storefront may sell: the candidates at locations that
// count toward the network, less the SKU's safety stock for ship, and no more than each
// location's sellable less its own safety stock.
type NetworkAvailability struct {
	Sellable  int64 `json:"sellable"`
	Available int64 `json:"available"`
	// OK tells whether the network's Available covers the request's Qty.
	OK bool `json:"ok"`
}

// networkOf marks a's locations by the shop's locations locs: a location counts when it
// is enabled and ships; one the shop lacks does not.
func networkOf(a ledger.Availability, locs []stock.Location) AvailabilityAnswer {
	out := AvailabilityAnswer{Availability: a}
	if len(a.Locations) == 0 {
		return out
	}
	n := &NetworkAvailability{}
	var capped int64
	for _, l := range a.Locations {
		i := slices.IndexFunc(locs, func(s stock.Location) bool { return s.ID == l.Location })
		counts := i >= 0 && locs[i].Enabled && locs[i].Ships
		out.Locations = append(out.Locations, LocationAnswer{LocationAvailability: l, Network: counts})
		if counts {
			n.Sellable += l.Sellable
			capped += max(0, l.Sellable-a.LocationSafety[l.Location])
		}
	}
	n.Available = n.Sellable
	if a.Mode == stock.ModeShip {
		// A ship allocation takes no more at a location than its own safety stock leaves.
		n.Available = max(0, min(n.Sellable-a.SafetyStock, capped))
	}
	n.OK = a.Qty > 0 && n.Available >= a.Qty
	out.Network = n
	return out
}

// WithNetwork answers a with its locations marked, reading the shop's locations only when
// a answers per location: what the API answers and junbanctl stock prints.
func (d Deps) WithNetwork(ctx context.Context, a ledger.Availability) (AvailabilityAnswer, error) {
	if len(a.Locations) == 0 {
		return AvailabilityAnswer{Availability: a}, nil
	}
	locs, err := ledger.ReadLocations(ctx, d.Redis, d.Prefix)
	if err != nil {
		return AvailabilityAnswer{}, err
	}
	return networkOf(a, locs), nil
}
