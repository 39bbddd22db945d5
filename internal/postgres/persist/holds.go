package persist

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// holdPage is how many holds ScanHolds reads at a time.
const holdPage = 1000

// nextHoldsSQL reads the placed orders with a hold after a (hold_until, lcid), soonest
// first: the partial index orders_hold_due serves it.
const nextHoldsSQL = `SELECT lcid, hold_until FROM orders
WHERE status = 'placed' AND hold_until IS NOT NULL AND (hold_until, lcid) > (?, ?)
ORDER BY hold_until, lcid LIMIT ?`

// Hold is a placed order's reservation end as PostgreSQL holds it.
type Hold struct {
	LCID      string
	HoldUntil time.Time
}

// ScanHolds calls fn with every placed order that has a hold in PostgreSQL, soonest
// first, a page at a time (no transaction spans the scan: an order persisted meanwhile
// may or may not be seen), and returns how many it passed to fn. It stops at fn's first
// error.
func ScanHolds(ctx context.Context, db *gorm.DB, fn func(Hold) error) (int, error) {
	var last Hold
	n := 0
	for {
		page, err := holdsAfter(ctx, db, last)
		if err != nil {
			return n, fmt.Errorf("persist: holds: %w", err)
		}
		for _, h := range page {
			if err := fn(h); err != nil {
				return n, err
			}
			n++
		}
		if len(page) < holdPage {
			return n, nil
		}
		last = page[len(page)-1]
	}
}

// holdsAfter reads the page of holds after last (the zero Hold: from the first).
func holdsAfter(ctx context.Context, db *gorm.DB, last Hold) ([]Hold, error) {
	rows, err := db.WithContext(ctx).Raw(nextHoldsSQL, last.HoldUntil, last.LCID, holdPage).Rows()
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var page []Hold
	for rows.Next() {
		var h Hold
		if err := rows.Scan(&h.LCID, &h.HoldUntil); err != nil {
			return nil, err
		}
		page = append(page, h)
	}
	return page, rows.Err()
}
