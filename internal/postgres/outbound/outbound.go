// Package outbound tells the rest of the shop what junban decided: order and stock events,
// written into PostgreSQL's outbox table in the transaction that applies a batch of results
// (Write), relayed to an SNS topic in batches (Relay), and served from the table to
// consumers that cannot take SNS (Page, behind GET /v1/events).
//
// Every message carries a stable id (consumers drop copies by it), its entity's seq (1, 2,
// 3, ... with no gap: consumers order by it), when junban decided it and the event that
// caused it. The relay publishes at least once: a copy is possible, a loss is not, and
// nothing is published that was not committed. docs/outbound.md describes each kind; the
// JSON Schemas in schemas/ are the contract, and the tests validate what they receive
// against them.
package outbound

import (
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/junban/junban/internal/event"
)

// Kind names an outbound event.
type Kind string

// The outbound kinds.
const (
	// OrderStatusChanged: an order's status, allocation, paid flag or lines (with their
	// lots) changed.
	OrderStatusChanged Kind = "order.status_changed"
	// OrderRefused: an event about an order was refused (ERR_SHORTAGE, ERR_SAFETY_STOCK, ...).
	OrderRefused Kind = "order.refused"
	// StockChanged: a SKU's stock figures changed.
	StockChanged Kind = "stock.changed"
	// StockLow: a SKU's available-to-ship (the network's: docs/outbound.md, "The network")
	// fell to its low-stock threshold or below (and is still above 0).
	StockLow Kind = "stock.low"
	// StockOut: a SKU's available-to-ship fell to 0.
	StockOut Kind = "stock.out"
	// StockBack: a SKU's available-to-ship rose to a better level (from out to low or ok,
	// from low to ok).
	StockBack Kind = "stock.back"
	// StockLocationLow, StockLocationOut and StockLocationBack are stock.low, stock.out and
	// stock.back of one location's stock of a SKU (the message's Location), whether or not
	// the location counts toward the network.
	StockLocationLow  Kind = "stock.location_low"
	StockLocationOut  Kind = "stock.location_out"
	StockLocationBack Kind = "stock.location_back"
)

// Kinds are the outbound kinds, in the order docs/outbound.md describes them.
var Kinds = []Kind{OrderStatusChanged, OrderRefused, StockChanged, StockLow, StockOut, StockBack,
	StockLocationLow, StockLocationOut, StockLocationBack}

// Message is one outbound event, as published (the SNS message's body) and as
// GET /v1/events serves it.
type Message struct {
	// ID is the message's stable id (a UUID): a copy has the same.
	ID   string `json:"id"`
	Kind Kind   `json:"kind"`
	// Version is the contract's version the message follows: every message carries it,
	// an empty one encodes as event.Version (docs/events.md, "Versions").
	Version string `json:"version"`
	// Entity is the order's lcid, or "sku:" and the SKU (event.SKUEntityPrefix).
	Entity string `json:"entity"`
	// LCID is the order's, on order kinds; SKU the SKU's, on stock kinds.
	LCID string `json:"lcid,omitempty"`
	SKU  string `json:"sku,omitempty"`
	// Location is the location a stock.location_* message tells about; absent on every
	// other kind.
	Location string `json:"location,omitempty"`
	// Seq is the entity's outbound sequence: 1 for its first message, then one more for
	// each, with no gap. Consumers order an entity's messages by it.
	Seq int64 `json:"seq"`
	// OccurredAt is when junban decided what the message tells (the causing result's
	// processed_at).
	OccurredAt time.Time `json:"occurred_at"`
	// CausedBy is the event that caused it (for a message that sums up several results of
	// a batch, the newest of them).
	CausedBy Cause `json:"caused_by"`
	// Data is the kind's payload: OrderStatusData, OrderRefusedData, StockData or
	// StockLevelData.
	Data json.RawMessage `json:"data"`
}

// MarshalJSON encodes m with its version, event.Version when m names none.
func (m Message) MarshalJSON() ([]byte, error) {
	type plain Message
	if m.Version == "" {
		m.Version = event.Version
	}
	return json.Marshal(plain(m))
}

// Cause names the event a message tells the effect of.
type Cause struct {
	EventID string     `json:"event_id"`
	Type    event.Type `json:"type"`
}

// OrderStatusData is the data of order.status_changed: the order as it is now, and what
// changed since its last order.status_changed.
type OrderStatusData struct {
	// From is the status its last order.status_changed told; null on the order's first.
	From *string `json:"from"`
	// To is its status now: placed, cancelled, shipped, rejected or expired.
	To string `json:"to"`
	// Allocation is reserved, allocated or null.
	Allocation *string    `json:"allocation"`
	Paid       bool       `json:"paid"`
	Mode       event.Mode `json:"mode,omitempty"`
	TargetDate string     `json:"target_date,omitempty"`
	// Lines are the order's lines with the lots allocated to each (and returned from it).
	Lines []event.SnapshotLine `json:"lines"`
	// Locations group the lots the lines hold by the lots' location, by id: what each
	// location must ship. Absent when no line holds a lot.
	Locations []OrderLocation `json:"locations,omitempty"`
	// HoldUntil is when a placed reserve-mode order's reservation expires (absent: never,
	// or no longer).
	HoldUntil *time.Time `json:"hold_until,omitempty"`
	// Changed names what changed: "status", "allocation", "paid", "lines" (every one on the
	// order's first message), "hold_until" (when the order has a hold, and when it moves
	// or ends).
	Changed []string `json:"changed"`
}

// OrderLocation is one location's part of an order: the lines holding lots stored there,
// each with those lots alone.
type OrderLocation struct {
	Location string              `json:"location"`
	Lines    []OrderLocationLine `json:"lines"`
}

// OrderLocationLine is a line's lots at one location.
type OrderLocationLine struct {
	LineID string         `json:"line_id"`
	SKU    string         `json:"sku"`
	Lots   []event.LotQty `json:"lots"`
}

// ByLocation groups the lots lines hold by their location (event.DefaultLocation for a lot
// that names none), locations by id, lines and lots in their order; nil when no line
// holds a lot.
func ByLocation(lines []event.SnapshotLine) []OrderLocation {
	var out []OrderLocation
	for _, l := range lines {
		for _, lot := range l.Lots {
			loc := lot.Location
			if loc == "" {
				loc = event.DefaultLocation
			}
			i := slices.IndexFunc(out, func(o OrderLocation) bool { return o.Location == loc })
			if i < 0 {
				out, i = append(out, OrderLocation{Location: loc}), len(out)
			}
			o := &out[i]
			if n := len(o.Lines); n == 0 || o.Lines[n-1].LineID != l.LineID || o.Lines[n-1].SKU != l.SKU {
				o.Lines = append(o.Lines, OrderLocationLine{LineID: l.LineID, SKU: l.SKU})
			}
			last := &o.Lines[len(o.Lines)-1]
			last.Lots = append(last.Lots, event.LotQty{LotID: lot.LotID, Qty: lot.Qty})
		}
	}
	slices.SortStableFunc(out, func(a, b OrderLocation) int { return strings.Compare(a.Location, b.Location) })
	return out
}

// OrderRefusedData is the data of order.refused.
type OrderRefusedData struct {
	// Reason is the refusal's code: ERR_SHORTAGE, ERR_SAFETY_STOCK, ... (docs/events.md).
	Reason string `json:"reason"`
	// Detail says more, for a person.
	Detail string `json:"detail,omitempty"`
	// Status is the order's status after the refusal; "" when junban holds no order.
	Status string `json:"status,omitempty"`
}

// Stock levels: what a SKU's available-to-ship is against its low-stock threshold.
const (
	// LevelOK: above the threshold.
	LevelOK = "ok"
	// LevelLow: above 0 and at or below the threshold.
	LevelLow = "low"
	// LevelOut: 0.
	LevelOut = "out"
)

// StockData is the data of stock.changed: a SKU's figures in PostgreSQL after the batch
// that changed them. The SKU's figures are the network's: they count only the lots at
// locations that count toward it (LocationStock.Network).
type StockData struct {
	// Version is the SKU's ledger version of the newest result applied.
	Version     int64 `json:"version"`
	SafetyStock int64 `json:"safety_stock"`
	// Sellable, Reserved and Allocated sum the SKU's good lots.
	Sellable  int64 `json:"sellable"`
	Reserved  int64 `json:"reserved"`
	Allocated int64 `json:"allocated"`
	// AvailableToShip is what an order to ship on AsOf could take: the sellable units of
	// good lots valid on that day, less the safety stock, never below 0, and no more than
	// each location's sellable less its own safety stock; less Waiting.
	AvailableToShip int64 `json:"available_to_ship"`
	// Waiting is what the SKU's waiting lines (backorders) wait for: held back from every
	// new order, the network's and each location's (absent: none).
	Waiting int64 `json:"waiting,omitempty"`
	// AsOf is the day (UTC) AvailableToShip counts lots valid on.
	AsOf string `json:"as_of"`
	// Level is AvailableToShip against Threshold: ok, low or out.
	Level     string `json:"level"`
	Threshold int64  `json:"threshold"`
	// Locations are the figures per location holding lots of the SKU, by id; absent when
	// every lot is at the default location and it counts toward the network (the SKU's
	// figures are then its figures).
	Locations []LocationStock `json:"locations,omitempty"`
}

// LocationStock is one location's stock of a SKU: its good lots' sums, its
// available-to-ship (less the larger of the SKU's whole safety stock and the location's
// own, as an allocation pinned there counts them) and level.
type LocationStock struct {
	Location string `json:"location"`
	// Network tells whether the location counts toward the SKU's figures: it is enabled
	// and ships, or it is the default location and the shop has not described it.
	Network         bool   `json:"network"`
	Sellable        int64  `json:"sellable"`
	Reserved        int64  `json:"reserved"`
	Allocated       int64  `json:"allocated"`
	AvailableToShip int64  `json:"available_to_ship"`
	Level           string `json:"level"`
}

// StockLevelData is the data of stock.low, stock.out and stock.back, and of their
// stock.location_* (of one location's figures).
type StockLevelData struct {
	AvailableToShip int64  `json:"available_to_ship"`
	Threshold       int64  `json:"threshold"`
	Level           string `json:"level"`
	// Previous is the level the SKU's (the location's) last level message, or before any
	// ok, told.
	Previous string `json:"previous"`
	AsOf     string `json:"as_of"`
}
