// Package orderdb is the order's PostgreSQL side: PGLoader, which gives the order's step
// (internal/order) an order Redis lost, from the orders table persist writes.
package orderdb

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/ledger/stock"
)

// PGLoader reads orders from PostgreSQL's orders table.
type PGLoader struct{ DB *gorm.DB }

// LoadOrder implements order.Loader.
func (p PGLoader) LoadOrder(ctx context.Context, lcid string) (*event.OrderSnapshot, int64, bool, error) {
	var rows []struct {
		Status     string
		Allocation *string
		Paid       bool
		Mode       *string
		TargetDate *string
		Lines      []byte
		Seq        int64
		HoldUntil  *time.Time
		Route      *string
	}
	// hold_until (migration 00007) is read through the row's JSON, so that a worker whose
	// database has not had that migration yet reads no hold instead of failing.
	err := p.DB.WithContext(ctx).Raw(`SELECT status, allocation, paid, mode, to_char(target_date, 'YYYY-MM-DD') AS target_date, lines, seq,
		(to_jsonb(orders) ->> 'hold_until')::timestamptz AS hold_until,
		(to_jsonb(orders) -> 'route')::text AS route
		FROM orders WHERE lcid = ?`, lcid).Scan(&rows).Error
	if err != nil {
		return nil, 0, false, fmt.Errorf("order: load %s from postgres: %w", lcid, err)
	}
	if len(rows) == 0 {
		return nil, 0, false, nil
	}
	r := rows[0]
	o := &event.OrderSnapshot{LCID: lcid, Status: r.Status, Paid: r.Paid}
	if r.Allocation != nil {
		o.Allocation = *r.Allocation
	}
	if r.Mode != nil {
		o.Mode = stock.Mode(*r.Mode)
	}
	if r.TargetDate != nil {
		o.TargetDate = *r.TargetDate
	}
	if r.HoldUntil != nil {
		h := r.HoldUntil.UTC().Truncate(time.Microsecond)
		o.HoldUntil = &h
	}
	if r.Route != nil && *r.Route != "null" {
		o.Route = new(event.Routing)
		if err := json.Unmarshal([]byte(*r.Route), o.Route); err != nil {
			return nil, 0, false, fmt.Errorf("order: route of %s: %w", lcid, err)
		}
	}
	if err := json.Unmarshal(r.Lines, &o.Lines); err != nil {
		return nil, 0, false, fmt.Errorf("order: lines of %s: %w", lcid, err)
	}
	return o, r.Seq, true, nil
}
