package outbound

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// Stats is the outbox's state, as the relay's gauges and the console's overview show it.
type Stats struct {
	// Unpublished counts the rows the relay has still to publish (the outbox's depth):
	// neither published nor parked.
	Unpublished int64
	// Parked counts the parked rows: SNS can never take them, and the relay passes them by.
	Parked int64
	// OldestUnpublished is the age of the oldest unpublished row (the relay's lag); 0 when none.
	OldestUnpublished time.Duration
	// Rows counts every row (what the retention keeps).
	Rows int64
}

// ReadStats reads the outbox's Stats. The unpublished and parked rows are read through
// their partial indexes; Rows is PostgreSQL's estimate (pg_class.reltuples), not a count.
func ReadStats(ctx context.Context, db *gorm.DB) (Stats, error) {
	var r struct {
		Unpublished int64
		Parked      int64
		OldestAgeMs *float64
		Rows        float64
	}
	err := db.WithContext(ctx).Raw(`SELECT
	(SELECT count(*) FROM outbox WHERE published_at IS NULL AND parked_at IS NULL) AS unpublished,
	(SELECT count(*) FROM outbox WHERE parked_at IS NOT NULL) AS parked,
	(SELECT extract(epoch FROM now() - min(created_at)) * 1000 FROM outbox WHERE published_at IS NULL AND parked_at IS NULL) AS oldest_age_ms,
	(SELECT greatest(reltuples, 0) FROM pg_class WHERE oid = 'outbox'::regclass) AS rows`).Scan(&r).Error
	if err != nil {
		return Stats{}, fmt.Errorf("outbound: stats: %w", err)
	}
	s := Stats{Unpublished: r.Unpublished, Parked: r.Parked, Rows: int64(r.Rows)}
	if r.OldestAgeMs != nil && *r.OldestAgeMs > 0 {
		s.OldestUnpublished = time.Duration(*r.OldestAgeMs * float64(time.Millisecond))
	}
	return s, nil
}

// Labels of junban_outbox_stock_levels that are no location's id ("~" is junban's own
// mark, refused in every id a sender or the shop names).
const (
	// NetworkLabel stands for the network's levels (stock.low, stock.out).
	NetworkLabel = "~network"
	// OtherLocationLabel stands for every location the shop has not described, so that the
	// label's values stay the shop's few locations whatever ids lots name.
	OtherLocationLabel = "~other"
)

// StockLevel counts the SKUs at one level at one location, as the outbound events last
// told it.
type StockLevel struct {
	// Location is a described location's id, NetworkLabel or OtherLocationLabel.
	Location string
	// Level is LevelLow or LevelOut.
	Level string
	SKUs  int64 `gorm:"column:skus"`
}

// ReadStockLevels counts the SKUs whose last level message (stock.low, stock.out, or a
// location's stock.location_*) left them low or out, for the network and per location.
// It reads every SKU's outbox_entities row that holds such a level.
func ReadStockLevels(ctx context.Context, db *gorm.DB) ([]StockLevel, error) {
	var out []StockLevel
	err := db.WithContext(ctx).Raw(`SELECT ? AS location, state->>'level' AS level, count(*) AS skus
FROM outbox_entities WHERE state->>'level' IN ('low', 'out') GROUP BY 2
UNION ALL
SELECT coalesce(l.location, ?), e.value, count(*)
FROM outbox_entities o CROSS JOIN LATERAL jsonb_each_text(o.state->'location_levels') e
LEFT JOIN locations l ON l.location = e.key
WHERE o.state->'location_levels' IS NOT NULL GROUP BY 1, 2
ORDER BY 1, 2`, NetworkLabel, OtherLocationLabel).Scan(&out).Error
	if err != nil {
		return nil, fmt.Errorf("outbound: stock levels: %w", err)
	}
	return out, nil
}
