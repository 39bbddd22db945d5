package inventorydb

import (
	"context"
	"encoding/json"
	"fmt"

	"gorm.io/gorm"

	"github.com/junban/junban/internal/ledger/stock"
)

// PutLocation inserts or replaces a location in table locations (migrations/00009).
func PutLocation(ctx context.Context, db *gorm.DB, l stock.Location) error {
	if err := l.Validate(); err != nil {
		return err
	}
	markets, err := json.Marshal(append([]string{}, l.Markets...))
	if err != nil {
		return err
	}
	err = db.WithContext(ctx).Exec(`INSERT INTO locations (location, kind, rank, ships, pickup, lat, lon, markets, enabled, updated_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ARRAY(SELECT json_array_elements_text(?::json)), ?, now())
ON CONFLICT (location) DO UPDATE SET kind = excluded.kind, rank = excluded.rank, ships = excluded.ships,
	pickup = excluded.pickup, lat = excluded.lat, lon = excluded.lon, markets = excluded.markets,
	enabled = excluded.enabled, updated_at = excluded.updated_at`,
		l.ID, l.Kind, l.Rank, l.Ships, l.Pickup, l.Lat, l.Lon, string(markets), l.Enabled).Error
	if err != nil {
		return fmt.Errorf("locations: %s: %w", l.ID, err)
	}
	return nil
}

// Locations returns every location in table locations, by rank, then id.
func Locations(ctx context.Context, db *gorm.DB) ([]stock.Location, error) {
	var rows []struct {
		Location, Kind string
		Rank           int
		Ships, Pickup  bool
		Lat, Lon       *float64
		Markets        string
		Enabled        bool
	}
	err := db.WithContext(ctx).Raw(`SELECT location, kind, rank, ships, pickup, lat, lon,
	array_to_json(markets)::text AS markets, enabled FROM locations`).Scan(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("locations: %w", err)
	}
	out := make([]stock.Location, 0, len(rows))
	for _, r := range rows {
		l := stock.Location{ID: r.Location, Kind: r.Kind, Rank: r.Rank, Ships: r.Ships, Pickup: r.Pickup,
			Lat: r.Lat, Lon: r.Lon, Enabled: r.Enabled}
		if err := json.Unmarshal([]byte(r.Markets), &l.Markets); err != nil {
			return nil, fmt.Errorf("locations: %s: markets: %w", r.Location, err)
		}
		if len(l.Markets) == 0 {
			l.Markets = nil
		}
		out = append(out, l)
	}
	stock.SortLocations(out)
	return out, nil
}
