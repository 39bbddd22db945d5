// Package event is junban's wire contract: the order events on the orders queue and
// the result events on the results queue.
package event

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// MaxIDLength bounds, in bytes, every id an event or a result carries: event_id, lcid,
// line_id, sku, lot_id, op_id (as the webhook gateway bounds a provider's event id). An
// inventory event's entity is "sku:" and its SKU, so an entity may be 4 bytes longer.
// PostgreSQL indexes these ids and refuses an index row over about 2.7 KB.
const MaxIDLength = 255

// ErrInvalidID: an id holds a character junban cannot carry. A brace would break the hash
// tag of every Redis key the id names (an order's keys carry its lcid, a SKU's keys its
// SKU); a control character or NUL would break the ledger's text records, logs and the
// DLQ's attributes. Such an event can never apply, however often it is retried.
var ErrInvalidID = errors.New("event: invalid id")

// OwnMark marks every name junban makes for itself: a quarantine's record
// ("<event_id>~q<n>"), a redriven event's ledger operations ("<event_id>~<n>:..."), a
// reservation's expiry ("~expiry:..."). CheckID refuses it in every id a sender sends, so
// no event can take one of these names before junban does.
const OwnMark = "~"

// CheckID reports whether id may name anything in an event: no "{" or "}", no OwnMark, no
// control character (NUL included), valid UTF-8, and nothing SQS and SNS cannot carry
// (Carriable). It does not bound the length (each field has its own bound); the errors
// wrap ErrInvalidID, and ErrReservedID for OwnMark. The order-worker's Decode and the
// webhook gateway both call it, so that an id the gateway forwards always decodes.
func CheckID(id string) error {
	for i, r := range id {
		switch {
		case r == '{' || r == '}':
			return fmt.Errorf("%w: %.40q contains a brace at byte %d", ErrInvalidID, id, i)
		case r == utf8.RuneError && !validRuneAt(id, i):
			return fmt.Errorf("%w: %.40q is not valid UTF-8 at byte %d", ErrInvalidID, id, i)
		case unicode.IsControl(r):
			return fmt.Errorf("%w: %.40q contains the control character %U at byte %d", ErrInvalidID, id, r, i)
		case !carriableRune(r):
			return fmt.Errorf("%w: %.40q contains %U at byte %d, which SQS and SNS cannot carry", ErrInvalidID, id, r, i)
		case r == rune(OwnMark[0]):
			return fmt.Errorf("%w: %.40q contains %q at byte %d", ErrReservedID, id, OwnMark, i)
		}
	}
	return nil
}

// Carriable reports whether SQS and SNS can carry s in a message: valid UTF-8 of the
// characters they document (#x9, #xA, #xD, #x20-#xD7FF, #xE000-#xFFFD, #x10000-#x10FFFF).
// JSON escapes the control characters of a body, but not U+FFFE or U+FFFF.
func Carriable(s string) bool {
	for i, r := range s {
		if r == utf8.RuneError && !validRuneAt(s, i) {
			return false
		}
		if r < 0x20 && r != '\t' && r != '\n' && r != '\r' || !carriableRune(r) {
			return false
		}
	}
	return true
}

// carriableRune: r is not one of the characters above 0x1F that SQS and SNS refuse (valid
// UTF-8 holds no surrogate).
func carriableRune(r rune) bool { return r != 0xFFFE && r != 0xFFFF }

// SKUEntityPrefix begins the entity of a SKU's inventory events: "sku:" and the SKU. Every
// other entity is an order's lcid (a drain names one of either kind; the hash tag of
// lockhandoff's backlog index names no entity, and its key's suffix is no entity's), so
// CheckLCID reserves this prefix alone: an order's events and a SKU's never share a turn,
// a state or a key.
const SKUEntityPrefix = "sku:"

var (
	// ErrIDTooLong: an id is longer than its bound (MaxIDLength for an lcid). It wraps
	// ErrInvalidID.
	ErrIDTooLong = fmt.Errorf("%w: too long", ErrInvalidID)
	// ErrReservedLCID: an lcid names an entity that is not an order's (it begins with
	// SKUEntityPrefix): its events would run in a SKU's turn, among the warehouse's
	// events, and write the order's state under the SKU's keys. It wraps ErrInvalidID.
	ErrReservedLCID = fmt.Errorf("%w: reserved lcid", ErrInvalidID)
	// ErrReservedID: an id holds OwnMark, which only the names junban makes for itself
	// hold. It wraps ErrInvalidID.
	ErrReservedID = fmt.Errorf("%w: holds junban's own mark %q", ErrInvalidID, OwnMark)
)

// CheckLCID reports whether lcid may name an order: at most MaxIDLength bytes, nothing
// CheckID refuses, and not in another entity's namespace (SKUEntityPrefix). "" passes:
// whether an event needs an lcid is its type's rule. The errors wrap ErrInvalidID, and
// ErrIDTooLong or ErrReservedLCID where they say so. The order-worker's Decode holds every
// event's lcid to it but a drain's (a drain names an entity, which may be a SKU's), and
// the webhook gateway every payload's, so that an lcid the gateway forwards always
// decodes into the order's own turn.
func CheckLCID(lcid string) error {
	if len(lcid) > MaxIDLength {
		return fmt.Errorf("%w: %.40q... is %d bytes, longer than %d", ErrIDTooLong, lcid, len(lcid), MaxIDLength)
	}
	if err := CheckID(lcid); err != nil {
		return err
	}
	if strings.HasPrefix(lcid, SKUEntityPrefix) {
		return fmt.Errorf("%w: %.40q begins with %q, which names a SKU's entity", ErrReservedLCID, lcid, SKUEntityPrefix)
	}
	return nil
}

// validRuneAt tells a U+FFFD written in s from an invalid byte at i.
func validRuneAt(s string, i int) bool {
	_, size := utf8.DecodeRuneInString(s[i:])
	return size > 1
}

// Type names an order event.
type Type string

// Event types.
const (
	OrderPlaced              Type = "order.placed"
	OrderLinesChanged        Type = "order.lines_changed"
	PaymentConfirmed         Type = "payment.confirmed"
	OrderAllocateForShipment Type = "order.allocate_for_shipment"
	OrderCancelled           Type = "order.cancelled"
	OrderShipped             Type = "order.shipped"
	InventoryReceived        Type = "inventory.received"
	InventoryAdjusted        Type = "inventory.adjusted"
	// The warehouse's side of the ledger (docs/events.md has an example body of each).
	InventorySKURegistered      Type = "inventory.sku_registered"
	InventoryLotRegistered      Type = "inventory.lot_registered"
	InventorySafetyStockChanged Type = "inventory.safety_stock_changed"
	InventoryHeld               Type = "inventory.held"
	InventoryReleasedHold       Type = "inventory.released_hold"
	InventoryDamaged            Type = "inventory.damaged"
	InventoryLotRecalled        Type = "inventory.lot_recalled"
	// Transfers of a SKU's units between two locations (docs/ledger.md, "Transfers").
	InventoryTransferRequested Type = "inventory.transfer_requested"
	InventoryTransferReceived  Type = "inventory.transfer_received"
	InventoryTransferCancelled Type = "inventory.transfer_cancelled"
	OrderReturned              Type = "order.returned"
	// OrderAllocationMoved moves one line's allocation to one location (customer service).
	OrderAllocationMoved Type = "order.allocation_moved"
	// OrderReservationExtended moves a reserve-mode order's hold_until (docs/events.md).
	OrderReservationExtended Type = "order.reservation_extended"
	// OrderReservationExpired is junban's own: the order-worker submits it into the
	// order's turn when the order's hold_until has passed; its step releases the reserved
	// units and the order becomes expired. Its event id is ExpiryEventID.
	OrderReservationExpired Type = "order.reservation_expired"
	// Drain is junban's own nudge: a holder that left an entity's turn with a backlog
	// sends it so that another replica takes the turn and drains the wait list.
	Drain Type = "junban.drain"
)

// Version is the version of the wire contract junban writes and reads by default: an
// order event without a version follows it, and every outbound message carries it. Within
// a version the contract changes only by addition (docs/events.md, "Versions").
const Version = "1"

// Versions are the versions of the order events the decoder takes, oldest first.
var Versions = []string{Version}

// Order is the body of a message on the orders queue.
type Order struct {
	EventID string `json:"event_id"`
	Type    Type   `json:"type"`
	// Version is the contract's version the sender wrote the event to; absent means
	// Version. The decoder refuses one it does not know (ERR_UNSUPPORTED_VERSION).
	Version    string          `json:"version,omitempty"`
	LCID       string          `json:"lcid,omitempty"`
	OccurredAt time.Time       `json:"occurred_at"`
	Data       json.RawMessage `json:"data,omitempty"`
	// TraceParent and TraceState are the W3C trace context of the message that submitted
	// the event to its turn, and QueuedAt the time it did: the order-worker writes them
	// while it traces, so that the turn that runs the event (another replica's, later, or
	// a later event's step when it was parked) continues the event's own trace and shows
	// its wait. The order-worker replaces what a sender wrote there.
	TraceParent string     `json:"traceparent,omitempty"`
	TraceState  string     `json:"tracestate,omitempty"`
	QueuedAt    *time.Time `json:"queued_at,omitempty"`
}

// Line is one order line.
type Line struct {
	LineID string `json:"line_id"`
	SKU    string `json:"sku"`
	Qty    int64  `json:"qty"`
}

// OrderData is the data of order.placed and order.lines_changed.
type OrderData struct {
	Mode       Mode   `json:"mode,omitempty"`
	TargetDate string `json:"target_date,omitempty"`
	Lines      []Line `json:"lines"`
	// Hold is when a reserve-mode order.placed's reservation ends (at most one of its two
	// fields; neither: JUNBAN_RESERVATION_TTL, whose 0 means never). Not for ship mode,
	// nor for order.lines_changed.
	Hold
	// Routing, order.placed only: where the lines may be allocated from. Allocation names
	// the strategies, chained as tie-breakers ("ranked", "closest", "pinned",
	// "fefo_network", "fewest_splits"; none: the worker's JUNBAN_ALLOCATION_STRATEGIES); ShipTo is where
	// the order goes ("closest"); PickupLocation pins the one location the order is
	// collected at; NoSplit takes each line from one location.
	Allocation     []string     `json:"allocation,omitempty"`
	ShipTo         *Coordinates `json:"ship_to,omitempty"`
	PickupLocation string       `json:"pickup_location,omitempty"`
	NoSplit        bool         `json:"no_split,omitempty"`
}

// Coordinates are a point in degrees: latitude -90..90, longitude -180..180.
type Coordinates struct {
	Lat float64 `json:"lat"`
	Lon float64 `json:"lon"`
}

// Routed tells an order.placed that names where its lines are allocated from.
func (d *OrderData) Routed() bool {
	return len(d.Allocation) > 0 || d.ShipTo != nil || d.PickupLocation != "" || d.NoSplit
}

// Routing returns the data's routing fields, nil when it names none.
func (d *OrderData) Routing() *Routing {
	if !d.Routed() {
		return nil
	}
	return &Routing{Allocation: d.Allocation, ShipTo: d.ShipTo, PickupLocation: d.PickupLocation, NoSplit: d.NoSplit}
}

// Hold names the end of a reservation: HoldUntil, an instant (RFC 3339), or HoldFor, a
// duration from the event's occurred_at (Go syntax: "30m", "72h"). At most one is set.
type Hold struct {
	HoldUntil *time.Time `json:"hold_until,omitempty"`
	HoldFor   string     `json:"hold_for,omitempty"`
}

// ReservationExtendedData is the data of order.reservation_extended: the reservation's
// new end (exactly one of the two fields).
type ReservationExtendedData struct {
	Hold
}

// ReservationExpiredData is the data of order.reservation_expired: the hold_until it
// expires. An order whose hold has moved since (extended, or ended by a payment) refuses it
// with ERR_HOLD_NOT_DUE and keeps its reservation.
type ReservationExpiredData struct {
	HoldUntil time.Time `json:"hold_until"`
}

// ExpiryEventID is the event id of the order.reservation_expired for lcid's hold that
// ends at holdUntil: "~expiry:<hold_until in unix µs>:<lcid>", in junban's own namespace
// (OwnMark), so one hold expires under one id however many replicas find it due, and no
// sender's event can take the id first. An id that would be longer than MaxIDLength names
// the lcid by its SHA-256 instead ("~expiry:<µs>:h:<hex>").
func ExpiryEventID(lcid string, holdUntil time.Time) string {
	id := fmt.Sprintf("%sexpiry:%d:%s", OwnMark, holdUntil.UnixMicro(), lcid)
	if len(id) <= MaxIDLength {
		return id
	}
	sum := sha256.Sum256([]byte(lcid))
	return fmt.Sprintf("%sexpiry:%d:h:%s", OwnMark, holdUntil.UnixMicro(), hex.EncodeToString(sum[:]))
}

// InventoryReceivedData is the data of inventory.received: a planned lot arrived and
// becomes on-hand with its best-before date and the quantity actually counted.
type InventoryReceivedData struct {
	SKU        string `json:"sku"`
	LotID      string `json:"lot_id"`
	BestBefore string `json:"best_before"`
	// Qty is the quantity counted on arrival; the difference to the planned sellable
	// quantity is an adjustment. Zero or absent keeps the planned quantity.
	Qty int64 `json:"qty,omitempty"`
	// Location is the lot's location: optional; when given, the lot must be stored
	// there (ERR_LOCATION otherwise).
	Location string `json:"location,omitempty"`
}

// InventoryAdjustedData is the data of inventory.adjusted: a stock count correction of
// one lot's sellable quantity.
type InventoryAdjustedData struct {
	SKU    string `json:"sku"`
	LotID  string `json:"lot_id"`
	Delta  int64  `json:"delta"`
	Reason string `json:"reason"`
	// Location is the lot's location: optional; when given, the lot must be stored
	// there (ERR_LOCATION otherwise).
	Location string `json:"location,omitempty"`
	// TransferID, when given, names a transit lot: the lot the transfer made at its
	// destination for the units it took from lot LotID (docs/ledger.md, "Transfers").
	// Absent: LotID names the lot itself.
	TransferID string `json:"transfer_id,omitempty"`
}

// SKURegisteredData is the data of inventory.sku_registered: a new SKU and its settings.
type SKURegisteredData struct {
	SKU         string `json:"sku"`
	SafetyStock int64  `json:"safety_stock"`
}

// SafetyStockChangedData is the data of inventory.safety_stock_changed.
type SafetyStockChangedData struct {
	SKU         string `json:"sku"`
	SafetyStock int64  `json:"safety_stock"`
	// Location, when set, is the registered location whose own safety stock this sets;
	// absent: the SKU's network-wide safety stock.
	Location string `json:"location,omitempty"`
}

// LotRegisteredData is the data of inventory.lot_registered: a new lot of a SKU, planned
// (a purchase order's expected delivery) or on hand (an unplanned delivery). The names
// are the import's columns; the registration order is the SKU's next, so a new planned
// lot is the first that LIFO takes.
type LotRegisteredData struct {
	SKU   string `json:"sku"`
	LotID string `json:"lot_id"`
	Kind  string `json:"kind"`
	// Good defaults to true.
	Good       *bool  `json:"good,omitempty"`
	BestBefore string `json:"best_before,omitempty"`
	ArrivesAt  string `json:"arrives_at,omitempty"`
	ValidFrom  string `json:"valid_from,omitempty"`
	ValidTo    string `json:"valid_to,omitempty"`
	// Sellable is the lot's quantity.
	Sellable int64 `json:"sellable"`
	// Location is the location the lot is stored at; absent: the default location.
	Location string `json:"location,omitempty"`
}

// LotQtyData is the data of inventory.held, inventory.released_hold and
// inventory.damaged: a quantity of one lot, and why.
type LotQtyData struct {
	SKU    string `json:"sku"`
	LotID  string `json:"lot_id"`
	Qty    int64  `json:"qty"`
	Reason string `json:"reason"`
	// Location is the lot's location: optional; when given, the lot must be stored
	// there (ERR_LOCATION otherwise).
	Location string `json:"location,omitempty"`
	// TransferID, when given, names a transit lot: the lot the transfer made at its
	// destination for the units it took from lot LotID (docs/ledger.md, "Transfers").
	// Absent: LotID names the lot itself.
	TransferID string `json:"transfer_id,omitempty"`
}

// TransferRequestedData is the data of inventory.transfer_requested: Qty units of a SKU
// leave From's on-hand lots, earliest expiry first, and are in transit to To until
// ArrivesAt.
type TransferRequestedData struct {
	SKU        string `json:"sku"`
	TransferID string `json:"transfer_id"`
	// FromLocation and ToLocation are location ids ("default" for the default one).
	FromLocation string `json:"from_location"`
	ToLocation   string `json:"to_location"`
	Qty          int64  `json:"qty"`
	// ArrivesAt is the date the units are expected at the destination (YYYY-MM-DD).
	ArrivesAt string `json:"arrives_at"`
}

// TransferReceivedData is the data of inventory.transfer_received: the transfer arrived
// and Qty units were counted; what is short of what was sent is a loss (defective).
type TransferReceivedData struct {
	SKU        string `json:"sku"`
	TransferID string `json:"transfer_id"`
	Qty        int64  `json:"qty"`
}

// TransferCancelledData is the data of inventory.transfer_cancelled: the units go back
// to the lots they left.
type TransferCancelledData struct {
	SKU        string `json:"sku"`
	TransferID string `json:"transfer_id"`
}

// LotRecalledData is the data of inventory.lot_recalled: the whole lot is defective.
type LotRecalledData struct {
	SKU    string `json:"sku"`
	LotID  string `json:"lot_id"`
	Reason string `json:"reason"`
	// Location is the lot's location: optional; when given, the lot must be stored
	// there (ERR_LOCATION otherwise).
	Location string `json:"location,omitempty"`
	// TransferID, when given, names a transit lot: the lot the transfer made at its
	// destination for the units it took from lot LotID (docs/ledger.md, "Transfers").
	// Absent: LotID names the lot itself.
	TransferID string `json:"transfer_id,omitempty"`
}

// ReturnedData is the data of order.returned: units of a shipped order come back.
type ReturnedData struct {
	Lines []ReturnLine `json:"lines"`
	// Defective sends the units to the lots' defective bucket instead of sellable.
	Defective bool `json:"defective,omitempty"`
}

// AllocationMovedData is the data of order.allocation_moved: the units line LineID holds
// at other locations are given back and allocated at ToLocation instead.
type AllocationMovedData struct {
	LineID     string `json:"line_id"`
	ToLocation string `json:"to_location"`
}

// ReturnLine is a quantity of one order line that came back.
type ReturnLine struct {
	LineID string `json:"line_id"`
	Qty    int64  `json:"qty"`
}

// Outcome of an event.
const (
	Applied  = "applied"
	Rejected = "rejected"
)

// Result is the body of a message on the results queue: what one order event did.
type Result struct {
	EventID string `json:"event_id"`
	// Entity is the turn the event ran in: the lcid, or "sku:<sku>" for inventory events.
	Entity string `json:"entity"`
	LCID   string `json:"lcid,omitempty"`
	// Seq is the entity's fencing sequence of this event: persistence keeps the newest.
	Seq int64 `json:"seq"`
	// Arrival is the turn sequence at which the event reached the entity's turn; a
	// parked event keeps the arrival of its first attempt.
	Arrival int64  `json:"arrival"`
	Type    Type   `json:"type"`
	Outcome string `json:"outcome"`
	Reason  string `json:"reason,omitempty"`
	// Detail is what the ledger said when it refused the event (and, with
	// ERR_UNDO_REFUSED, each undo it refused); for operators, not for machines.
	Detail string         `json:"detail,omitempty"`
	Order  *OrderSnapshot `json:"order,omitempty"`
	Moves  []Move         `json:"moves,omitempty"`
	SKUs   []SKU          `json:"skus,omitempty"`
	// Holders are, for inventory.lot_recalled, the orders that hold reserved or
	// allocated units of the recalled lot (at most the ledger's MaxResultHolders, 100);
	// HolderCount counts them all.
	Holders     []Holder  `json:"holders,omitempty"`
	HolderCount int       `json:"holder_count,omitempty"`
	ProcessedAt time.Time `json:"processed_at"`
	// TraceID is the OpenTelemetry trace the order-worker's step ran in (32 hex digits),
	// when the step was traced and sampled; the console links it (JUNBAN_TRACE_URL).
	TraceID string `json:"trace_id,omitempty"`
}

// OrderSnapshot is an order's state after an event.
type OrderSnapshot struct {
	LCID       string         `json:"lcid"`
	Status     string         `json:"status"`
	Allocation string         `json:"allocation,omitempty"`
	Paid       bool           `json:"paid"`
	Mode       Mode           `json:"mode,omitempty"`
	TargetDate string         `json:"target_date,omitempty"`
	Lines      []SnapshotLine `json:"lines"`
	// HoldUntil is when a placed reserve-mode order's reservation expires (absent: never,
	// or no longer: paid, allocated for shipment, or finished). Microsecond precision.
	HoldUntil *time.Time `json:"hold_until,omitempty"`
	// Route is where its order.placed said the lines are allocated from (absent: it named
	// none): order.lines_changed allocates the same way.
	Route *Routing `json:"route,omitempty"`
}

// Routing are an order.placed's routing fields, as its order keeps them.
type Routing struct {
	Allocation     []string     `json:"allocation,omitempty"`
	ShipTo         *Coordinates `json:"ship_to,omitempty"`
	PickupLocation string       `json:"pickup_location,omitempty"`
	NoSplit        bool         `json:"no_split,omitempty"`
}

// SnapshotLine is an order line with the lots that hold its quantity.
type SnapshotLine struct {
	LineID string `json:"line_id"`
	SKU    string `json:"sku"`
	Qty    int64  `json:"qty"`
	// Lots hold the line's quantity, in allocation order.
	Lots []LotQty `json:"lots,omitempty"`
	// Returned is what came back of the line's shipped units (order.returned), per lot.
	Returned []LotQty `json:"returned,omitempty"`
}

// Order statuses.
const (
	StatusPlaced    = "placed"
	StatusCancelled = "cancelled"
	StatusShipped   = "shipped"
	StatusRejected  = "rejected"
	// StatusExpired: a reserve-mode order whose hold_until passed before it was paid or
	// allocated for shipment; its reserved units were released.
	StatusExpired = "expired"
)

// Statuses are every order status, in the order above.
var Statuses = []string{StatusPlaced, StatusCancelled, StatusShipped, StatusRejected, StatusExpired}
