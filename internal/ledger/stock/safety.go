package stock

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Safety stock per location (docs/ledger.md, "Safety stock per location"): a location L
// with safety stock ss_L lets a ship allocation take at most max(0, S_L - ss_L) of its
// candidates' sellable S_L; the SKU's network-wide safety stock keeps applying over the
// eligible sum. A reserve allocation reads neither.

// EncodeLocationSafety is the SKU hash's sl field for a SKU's per-location safety stocks:
// "loc \t n \t loc \t n ...", by location id; "" for none.
func EncodeLocationSafety(m map[string]int64) string {
	var b strings.Builder
	for _, loc := range slices.Sorted(maps.Keys(m)) {
		if b.Len() > 0 {
			b.WriteByte('\t')
		}
		b.WriteString(loc)
		b.WriteByte('\t')
		b.WriteString(strconv.FormatInt(m[loc], 10))
	}
	return b.String()
}

// DecodeLocationSafety reads an sl field back; nil for "".
func DecodeLocationSafety(s string) (map[string]int64, error) {
	if s == "" {
		return nil, nil
	}
	f := strings.Split(s, "\t")
	if len(f)%2 != 0 {
		return nil, fmt.Errorf("ledger: bad location safety stock %q", s)
	}
	m := make(map[string]int64, len(f)/2)
	for i := 0; i < len(f); i += 2 {
		n, err := strconv.ParseInt(f[i+1], 10, 64)
		if err != nil || CheckLocation(f[i]) != nil || n <= 0 || n > MaxQty {
			return nil, fmt.Errorf("ledger: bad location safety stock %q", s)
		}
		m[f[i]] = n
	}
	return m, nil
}

// setLocationSafety returns m with location's safety stock set to n (0 removes it; nil
// when none is left).
func setLocationSafety(m map[string]int64, location string, n int64) map[string]int64 {
	m = maps.Clone(m)
	if n == 0 {
		delete(m, location)
	} else {
		if m == nil {
			m = map[string]int64{}
		}
		m[location] = n
	}
	if len(m) == 0 {
		return nil
	}
	return m
}

// locationCaps returns, for a ship allocation over cands, the most it may take at each of
// their locations (max(0, S_L - ss_L)) and the caps' sum; nil when no location has a
// safety stock.
func locationCaps(cands []Lot, safety map[string]int64) (map[string]int64, int64) {
	if len(safety) == 0 {
		return nil, 0
	}
	caps := map[string]int64{}
	for _, c := range cands {
		caps[LocationOf(c)] += c.Sellable
	}
	var total int64
	for l, s := range caps {
		caps[l] = max(0, s-safety[l])
		total += caps[l]
	}
	return caps, total
}

// capsFor are the caps of an allocation of mode over cands: none for reserve.
func (o *modelOp) capsFor(cands []Lot, mode Mode) (map[string]int64, int64) {
	if mode != ModeShip {
		return nil, 0
	}
	return locationCaps(cands, o.sku.LocationSafety)
}

// capped is what a location may give: its sellable, or its cap when caps apply.
func capped(caps map[string]int64, loc string, sellable int64) int64 {
	if caps == nil {
		return sellable
	}
	return caps[loc]
}

// LessLocationSafety takes each location's safety stock off its sellable (by, changed in
// place and returned), dropping the locations left with none.
func LessLocationSafety(by, safety map[string]int64) map[string]int64 {
	for l, ss := range safety {
		if s, ok := by[l]; ok {
			if s <= ss {
				delete(by, l)
			} else {
				by[l] = s - ss
			}
		}
	}
	return by
}
