// Package persist writes result events to PostgreSQL, the durable copy of every order
// and every stock movement, and compares that copy with Redis (reconcile).
//
// Apply is idempotent and order-insensitive: an inbox keyed by (entity, event_id), as the
// order-worker identifies a result, skips a result seen before (and refuses, loudly, one
// that differs from it), an order row changes only for a newer seq, SKU and lot rows only
// for a newer SKU version, and moves are an append-only ledger keyed by (sku, op_id, idx),
// as the ledger keys its operations. So the same results applied twice, or in any order,
// leave the same rows. A SKU's safety stock
// has a version of its own (settings_version), raised only by the results that set it; a
// location's safety stock of a SKU (sku_location_safety) changes only for a newer version.
package persist

import (
	"encoding/json"
	"time"
)

// SKURow is a row of skus: a SKU's settings and the ledger version its lot rows reflect.
type SKURow struct {
	SKU         string `gorm:"column:sku;primaryKey"`
	SafetyStock int64
	// SettingsVersion is the SKU version SafetyStock was written at: a row carrying
	// settings writes them only over older ones, whatever Version says. 0 in a row that
	// carries no settings (a result of an operation that does not read them back).
	SettingsVersion int64
	Version         int64
	UpdatedAt       time.Time
	// LocationSafety are the locations' safety stocks the row's result set (0: removed),
	// or a whole SKU's, as of Version: rows of sku_location_safety (LocationSafetyRow).
	LocationSafety map[string]int64 `gorm:"-"`
}

// LocationSafetyRow is a row of sku_location_safety: a location's own safety stock of a
// SKU (0: none), as of the SKU version that set it.
type LocationSafetyRow struct {
	SKU         string `gorm:"column:sku;primaryKey"`
	Location    string `gorm:"primaryKey"`
	SafetyStock int64
	Version     int64
	UpdatedAt   time.Time
}

// TableName is the table of LocationSafetyRow.
func (LocationSafetyRow) TableName() string { return "sku_location_safety" }

// TableName is the table of SKURow.
func (SKURow) TableName() string { return "skus" }

// LotRow is a row of lots: one lot of a SKU with its buckets, as of Version.
type LotRow struct {
	SKU        string `gorm:"column:sku;primaryKey"`
	LotID      string `gorm:"primaryKey"`
	Kind       string
	Good       bool
	BestBefore *time.Time `gorm:"type:date"`
	RegSeq     int64
	ArrivesAt  *time.Time `gorm:"type:date"`
	ValidFrom  time.Time  `gorm:"type:date"`
	ValidTo    time.Time  `gorm:"type:date"`
	Sellable   int64
	Reserved   int64
	Allocated  int64
	Hidden     int64
	Shipped    int64
	Defective  int64
	// Version is the SKU version this row was written at.
	Version int64
	// Location is the location the lot is stored at ("default" for the default one).
	Location  string
	UpdatedAt time.Time
}

// TableName is the table of LotRow.
func (LotRow) TableName() string { return "lots" }

// TransferRow is a row of transfers: one transfer of a SKU, as of Version.
type TransferRow struct {
	SKU          string `gorm:"column:sku;primaryKey"`
	TransferID   string `gorm:"primaryKey"`
	State        string
	FromLocation string
	ToLocation   string
	// Lots are the transfer's lots ([]event.TransferLot) as JSON.
	Lots json.RawMessage `gorm:"type:jsonb"`
	// Version is the SKU version this row was written at.
	Version   int64
	UpdatedAt time.Time
}

// TableName is the table of TransferRow.
func (TransferRow) TableName() string { return "transfers" }

// BackorderRow is a row of backorders: one waiting line of a SKU's queue, as of Version
// (Want 0: the line left the queue).
type BackorderRow struct {
	SKU        string `gorm:"column:sku;primaryKey"`
	Holder     string `gorm:"primaryKey"`
	Line       string `gorm:"primaryKey"`
	Want       int64
	Mode       string
	TargetDate time.Time `gorm:"type:date"`
	Class      int
	Seq        int64
	// QueuedAt is Unix milliseconds.
	QueuedAt int64
	// Version is the SKU version this row was written at.
	Version   int64
	UpdatedAt time.Time
}

// TableName is the table of BackorderRow.
func (BackorderRow) TableName() string { return "backorders" }

// OrderRow is a row of orders: an order's state after the result with the highest seq.
type OrderRow struct {
	LCID       string `gorm:"column:lcid;primaryKey"`
	Status     string
	Allocation *string
	Paid       bool
	Mode       *string
	TargetDate *time.Time `gorm:"type:date"`
	// Lines are the snapshot's lines ([]event.SnapshotLine) as JSON.
	Lines json.RawMessage `gorm:"type:jsonb"`
	// HoldUntil is when a placed reserve-mode order's reservation expires (nil: never, or
	// no longer), from the snapshot, to the microsecond.
	HoldUntil *time.Time
	// Route is the order's route (event.Routing) as JSON; nil: none.
	Route       json.RawMessage `gorm:"type:jsonb"`
	Seq         int64
	LastEventID string
	UpdatedAt   time.Time
}

// TableName is the table of OrderRow.
func (OrderRow) TableName() string { return "orders" }

// InboxRow is a row of inbox: one result event that was persisted, applied or rejected.
type InboxRow struct {
	EventID string `gorm:"primaryKey"`
	// Entity is the turn the result's event ran in (an lcid, or "sku:" and a SKU); with
	// EventID it identifies the result.
	Entity      string `gorm:"primaryKey"`
	Seq         int64
	Type        string
	Outcome     string
	Reason      string
	ProcessedAt time.Time
	// TraceID is the trace the result was decided in ("" when none).
	TraceID string
	// CommittedAt is set by PostgreSQL (the transaction's start).
	CommittedAt time.Time `gorm:"->"`
}

// TableName is the table of InboxRow.
func (InboxRow) TableName() string { return "inbox" }

// MoveRow is a row of moves: one quantity moved between two buckets of a lot.
type MoveRow struct {
	OpID string `gorm:"primaryKey"`
	Idx  int    `gorm:"primaryKey;autoIncrement:false"`
	// Entity and EventID identify the result that recorded the move.
	Entity     string
	EventID    string
	SKU        string `gorm:"column:sku;primaryKey"`
	LotID      string
	FromBucket string
	ToBucket   string
	Qty        int64
	// SKUVersion is the SKU's version after the operation that made the move.
	SKUVersion int64 `gorm:"column:sku_version"`
	// CreatedAt is set by PostgreSQL.
	CreatedAt time.Time `gorm:"->"`
}

// TableName is the table of MoveRow.
func (MoveRow) TableName() string { return "moves" }
