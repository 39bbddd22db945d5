// Package inventorydb is the ledger's PostgreSQL side: PGLoader, which gives the ledger a
// SKU for its first load into Redis, and the inventory import (junbanctl inventory import),
// which writes SKUs and lots that are not live yet. Once a SKU is in Redis its changes
// reach PostgreSQL only as results, through internal/postgres/persist.
package inventorydb

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"gorm.io/gorm"

	"github.com/junban/junban/internal/ledger/stock"
)

// PGLoader loads SKUs from PostgreSQL (tables skus and lots, migrations/00001_init.sql,
// 00003, which added the defective bucket, 00009, which added the lot's location: the
// default location reads as none, as the ledger keeps it, 00011, the locations' own
// safety stocks, transfers, 00012, and the queue's waiting lines, 00013).
type PGLoader struct{ DB *gorm.DB }

// LoadQuerySKU and LoadQueryLots are the queries PGLoader runs, in one repeatable-read
// transaction so the SKU row and its lots come from one snapshot.
// LotColumns are the columns of a lot row as Lot reads them; LoadQueryLots selects them.
const (
	LoadQuerySKU = `SELECT safety_stock, version FROM skus WHERE sku = ?`
	LotColumns   = `lot_id, kind, good,
       coalesce(to_char(best_before, 'YYYY-MM-DD'), '') AS best_before,
       reg_seq,
       coalesce(to_char(arrives_at, 'YYYY-MM-DD'), '') AS arrives_at,
       to_char(valid_from, 'YYYY-MM-DD') AS valid_from,
       to_char(valid_to, 'YYYY-MM-DD') AS valid_to,
       sellable, reserved, allocated, hidden, shipped, defective,
       CASE WHEN location = 'default' THEN '' ELSE location END AS location`
	LoadQueryLots = `SELECT ` + LotColumns + `
  FROM lots WHERE sku = ? ORDER BY reg_seq, lot_id`
	// LoadQueryTransfers reads the SKU's transfers, by id (as a snapshot lists them).
	LoadQueryTransfers = `SELECT transfer_id, state, from_location, to_location, lots::text AS lots
  FROM transfers WHERE sku = ? ORDER BY transfer_id COLLATE "C"`
	// LoadQueryLocationSafety reads the locations' own safety stocks (00011); 0 is none.
	LoadQueryLocationSafety = `SELECT location, safety_stock FROM sku_location_safety
  WHERE sku = ? AND safety_stock > 0 ORDER BY location`
	// LoadQueryBackorders reads the SKU's waiting lines in serving order, and the last
	// sequence number of all its rows (a line that left the queue, want 0, included).
	LoadQueryBackorders = `SELECT holder, line, want, mode, to_char(target_date, 'YYYY-MM-DD') AS target_date,
       class, seq, queued_at, max(seq) OVER () AS last_seq
  FROM backorders WHERE sku = ? ORDER BY want > 0 DESC, class DESC, seq`
)

// LoadSKU implements Loader.
func (p PGLoader) LoadSKU(ctx context.Context, sku string) (stock.SKU, error) {
	s := stock.SKU{SKU: sku, Lots: []stock.Lot{}}
	err := p.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var head []struct{ SafetyStock, Version int64 }
		if err := tx.Raw(LoadQuerySKU, sku).Scan(&head).Error; err != nil {
			return err
		}
		if len(head) == 0 {
			return fmt.Errorf("sku=%s: %w", sku, stock.ErrUnknownSKU)
		}
		s.SafetyStock, s.Version = head[0].SafetyStock, head[0].Version
		var ls []struct {
			Location    string
			SafetyStock int64
		}
		if err := tx.Raw(LoadQueryLocationSafety, sku).Scan(&ls).Error; err != nil {
			return err
		}
		for _, l := range ls {
			if s.LocationSafety == nil {
				s.LocationSafety = map[string]int64{}
			}
			s.LocationSafety[l.Location] = l.SafetyStock
		}
		if err := tx.Raw(LoadQueryLots, sku).Scan(&s.Lots).Error; err != nil {
			return err
		}
		var err error
		if s.Transfers, err = loadTransfers(tx, sku); err != nil {
			return err
		}
		s.Queue, s.QueueSeq, err = loadQueue(tx, sku)
		return err
	}, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	return s, err
}

// loadTransfers reads a SKU's transfer rows (nil when it has none).
func loadTransfers(tx *gorm.DB, sku string) ([]stock.Transfer, error) {
	var rows []struct{ TransferID, State, FromLocation, ToLocation, Lots string }
	if err := tx.Raw(LoadQueryTransfers, sku).Scan(&rows).Error; err != nil {
		return nil, err
	}
	var out []stock.Transfer
	for _, r := range rows {
		t := stock.Transfer{TransferID: r.TransferID, State: r.State, From: r.FromLocation, To: r.ToLocation}
		if err := json.Unmarshal([]byte(r.Lots), &t.Lots); err != nil {
			return nil, fmt.Errorf("sku=%s transfer=%s: lots: %w", sku, r.TransferID, err)
		}
		out = append(out, t)
	}
	return out, nil
}

// loadQueue reads a SKU's waiting lines (nil when none waits) and its queue's last
// sequence number.
func loadQueue(tx *gorm.DB, sku string) ([]stock.QueueEntry, int64, error) {
	var rows []struct {
		stock.QueueEntry
		LastSeq int64
	}
	if err := tx.Raw(LoadQueryBackorders, sku).Scan(&rows).Error; err != nil {
		return nil, 0, err
	}
	var out []stock.QueueEntry
	var last int64
	for _, r := range rows {
		last = r.LastSeq
		if r.Want > 0 {
			out = append(out, r.QueueEntry)
		}
	}
	return out, last, nil
}
