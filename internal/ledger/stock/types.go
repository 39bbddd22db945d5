// Package stock is the ledger's pure part: its operations (one request type each), their
// results, validation, fingerprints and errors, and Model, the reference semantics in
// plain Go. It imports no store: internal/ledger runs the same operations on Redis.
package stock

import (
	"crypto/sha1" //nolint:gosec // TransitLotID: ledger.lua has redis.sha1hex
	"encoding/hex"

	"github.com/junban/junban/internal/event"
)

// The ledger's values are the wire contract's (internal/event owns their names and JSON
// form): a result event carries them as they are.
type (
	// Move is one quantity moved between two buckets of one lot by one operation.
	Move = event.Move
	// Lot is a lot of one SKU with its buckets.
	Lot = event.Lot
	// SKU is a SKU's settings, version and lots.
	SKU = event.SKU
	// LotQty is a quantity held in one lot.
	LotQty = event.LotQty
	// Holder is an order holding reserved or allocated units of a lot.
	Holder = event.Holder
	// Mode of an allocation.
	Mode = event.Mode
)

// Bucket names where a lot's quantity sits (event.Sellable, ...).
const (
	Sellable  = event.Sellable
	Reserved  = event.Reserved
	Allocated = event.Allocated
	Hidden    = event.Hidden
	Shipped   = event.Shipped
	Defective = event.Defective
	External  = event.External
	Transit   = event.Transit
)

// Lot kinds.
const (
	KindOnHand  = event.KindOnHand
	KindPlanned = event.KindPlanned
)

// DefaultLocation is the id of the shop's default location. A lot's Location is empty
// for it: the location of every lot registered without one and of every lot from before
// locations.
const DefaultLocation = event.DefaultLocation

// LocationOf returns the id of the location a lot is stored at.
func LocationOf(l Lot) string {
	if l.Location == "" {
		return DefaultLocation
	}
	return l.Location
}

// Allocation modes.
const (
	ModeShip    = event.ModeShip
	ModeReserve = event.ModeReserve
)

// MaxResultHolders bounds the holders a recall's Result lists (Result.HolderCount
// counts them all), so that the result fits in one queue message.
const MaxResultHolders = 100

// AllocateRequest asks for Qty units of a SKU valid on TargetDate.
type AllocateRequest struct {
	// OpID identifies the operation; a replay of the same request with the same OpID
	// returns the first result, another request under it fails with ErrOpConflict.
	OpID string `json:"op_id"`
	// LegacyOpID is the id an older version of the caller named the same operation by;
	// empty for none. When OpID has no record, the ledger replays the record of
	// LegacyOpID if there is one (an older worker may have applied the operation before
	// it crashed), unless that record answers another request; it never writes one under
	// LegacyOpID. Release, Confirm, Ship, Undo, Change and Return take it too: the
	// operations of an order's events.
	LegacyOpID string `json:"legacy_op_id,omitempty"`
	SKU        string `json:"sku"`
	Qty        int64  `json:"qty"`
	// TargetDate is the date the lots must be valid on (YYYY-MM-DD).
	TargetDate string `json:"target_date"`
	Mode       Mode   `json:"mode"`
	// Holder is the order (lcid) the units are set aside for; empty: nobody is recorded.
	// Release, Confirm, Ship and Undo name the same holder, so that the ledger knows who
	// holds each lot's reserved and allocated units (Recall lists them).
	Holder string `json:"holder,omitempty"`
	// Route, when set, limits the candidates to the eligible locations and orders them by
	// its strategies (route.go); nil: every lot alike, in the lots' own order.
	Route *Route `json:"route,omitempty"`
}

// ReleaseRequest returns quantities held in From (Reserved or Allocated) to sellable.
type ReleaseRequest struct {
	OpID string `json:"op_id"`
	// LegacyOpID: see AllocateRequest.
	LegacyOpID string   `json:"legacy_op_id,omitempty"`
	SKU        string   `json:"sku"`
	From       string   `json:"from"`
	Lots       []LotQty `json:"lots"`
	Holder     string   `json:"holder,omitempty"`
}

// UndoRequest reverses an operation an order's event made: it moves the quantities in Lots
// back from To to From, where From and To are the buckets of the operation undone (an
// allocation: Sellable to Reserved or Allocated; a release: Reserved or Allocated to
// Sellable; a confirm: Reserved to Allocated; a shipment: Allocated to Shipped).
type UndoRequest struct {
	OpID string `json:"op_id"`
	// LegacyOpID: see AllocateRequest.
	LegacyOpID string   `json:"legacy_op_id,omitempty"`
	SKU        string   `json:"sku"`
	From       string   `json:"from"`
	To         string   `json:"to"`
	Lots       []LotQty `json:"lots"`
	// Back are quantities the operation undone moved the other way, To -> From (a
	// change's releases, when Lots are its allocations): they move back From -> To after
	// Lots, in the same operation. Empty for every operation but a change.
	Back   []LotQty `json:"back,omitempty"`
	Holder string   `json:"holder,omitempty"`
}

// ChangeRequest changes what one order holds of one SKU in one operation (Change): it
// releases Release from the bucket Mode allocates to (ship: allocated, reserve: reserved),
// then allocates each quantity of Allocate in turn, as Allocate would (candidates valid on
// TargetDate, their order, the safety check of ship), over the state the releases left.
// All or nothing: when one allocation does not fit, nothing is released either.
type ChangeRequest struct {
	OpID string `json:"op_id"`
	// LegacyOpID: see AllocateRequest.
	LegacyOpID string `json:"legacy_op_id,omitempty"`
	SKU        string `json:"sku"`
	TargetDate string `json:"target_date"`
	Mode       Mode   `json:"mode"`
	// Release are the units given back, lot by lot (at most 1000 entries).
	Release []LotQty `json:"release,omitempty"`
	// Allocate are the quantities allocated after the releases, one allocation each (at
	// most MaxChangeAllocations). The result's moves are the releases' (one per entry of
	// Release), then each allocation's in turn, which sum to its quantity.
	Allocate []int64 `json:"allocate,omitempty"`
	Holder   string  `json:"holder,omitempty"`
	// Route routes each allocation as AllocateRequest's does; nil: every lot alike.
	Route *Route `json:"route,omitempty"`
}

// MoveAllocationRequest moves what one order's line holds of one SKU to one location, in
// one operation (MoveAllocation): it releases Release (the line's units at the other
// locations) from the bucket Mode allocates to, then allocates their sum, in the same
// bucket, from the lots at To alone, in the lots' own order (on-hand by best-before, then
// planned newest first), with the safety check of ship, over the state the releases left.
// To need not ship; that it is enabled is the caller's to check (the shop's locations are
// not the ledger's). All or nothing: when To cannot cover it (ErrShortage,
// ErrSafetyStock, with a detail naming To), nothing is released either.
type MoveAllocationRequest struct {
	OpID       string `json:"op_id"`
	SKU        string `json:"sku"`
	TargetDate string `json:"target_date"`
	Mode       Mode   `json:"mode"`
	// Release are the units given back, lot by lot (at most 1000 entries); the result's
	// moves are theirs (one per entry), then the allocation's at To.
	Release []LotQty `json:"release"`
	// To is the location the units are allocated at.
	To     string `json:"to"`
	Holder string `json:"holder,omitempty"`
}

// LotsRequest names quantities in given lots (Confirm, Ship).
type LotsRequest struct {
	OpID string `json:"op_id"`
	// LegacyOpID: see AllocateRequest.
	LegacyOpID string   `json:"legacy_op_id,omitempty"`
	SKU        string   `json:"sku"`
	Lots       []LotQty `json:"lots"`
	Holder     string   `json:"holder,omitempty"`
}

// ReceiveRequest turns a planned lot into an on-hand lot.
type ReceiveRequest struct {
	OpID  string `json:"op_id"`
	SKU   string `json:"sku"`
	LotID string `json:"lot_id"`
	// BestBefore is the received lot's best-before date (YYYY-MM-DD), or empty for none
	// (such a lot sorts after every dated on-hand lot in FEFO order).
	BestBefore string `json:"best_before"`
	// Qty is the counted quantity; 0 keeps the planned quantity. The difference to the
	// lot's sellable+reserved+allocated+hidden is a move from or to External.
	Qty int64 `json:"qty"`
	// Location, when not empty, is the location the lot must be stored at
	// (ErrLocation otherwise); empty: no check (the lot id names the lot and its place).
	Location string `json:"location,omitempty"`
}

// HoldRequest names a quantity of one lot with a reason: Hold (sellable -> hidden),
// ReleaseHold (hidden -> sellable) and Damage (sellable -> defective).
type HoldRequest struct {
	OpID   string `json:"op_id"`
	SKU    string `json:"sku"`
	LotID  string `json:"lot_id"`
	Qty    int64  `json:"qty"`
	Reason string `json:"reason"`
	// Location, when not empty, is the location the lot must be stored at
	// (ErrLocation otherwise); empty: no check (the lot id names the lot and its place).
	Location string `json:"location,omitempty"`
}

// RecallRequest marks a whole lot defective (Recall).
type RecallRequest struct {
	OpID   string `json:"op_id"`
	SKU    string `json:"sku"`
	LotID  string `json:"lot_id"`
	Reason string `json:"reason"`
	// Location, when not empty, is the location the lot must be stored at
	// (ErrLocation otherwise); empty: no check (the lot id names the lot and its place).
	Location string `json:"location,omitempty"`
}

// ReturnRequest brings shipped units back (Return): to sellable, or to defective when
// Defective is set.
type ReturnRequest struct {
	OpID string `json:"op_id"`
	// LegacyOpID: see AllocateRequest.
	LegacyOpID string   `json:"legacy_op_id,omitempty"`
	SKU        string   `json:"sku"`
	Lots       []LotQty `json:"lots"`
	Defective  bool     `json:"defective"`
}

// RegisterSKURequest creates a SKU that neither Redis nor the Loader knows (RegisterSKU).
type RegisterSKURequest struct {
	OpID        string `json:"op_id"`
	SKU         string `json:"sku"`
	SafetyStock int64  `json:"safety_stock"`
}

// SafetyStockRequest sets a SKU's safety stock (SetSafetyStock): the network-wide one, or
// with Location the one of that location (0 removes it).
type SafetyStockRequest struct {
	OpID        string `json:"op_id"`
	SKU         string `json:"sku"`
	SafetyStock int64  `json:"safety_stock"`
	// Location names the location whose safety stock this sets (DefaultLocation for the
	// default one); empty: the SKU's network-wide safety stock.
	Location string `json:"location,omitempty"`
}

// NewLot is a lot to register: its fields as in Lot, but for the registration order,
// which the ledger gives (the SKU's next), and the buckets, all empty but Sellable.
type NewLot struct {
	LotID string `json:"lot_id"`
	Kind  string `json:"kind"`
	Good  bool   `json:"good"`
	// BestBefore of an on-hand lot; empty: none (after every dated lot in FEFO order).
	// A planned lot has none until it is received.
	BestBefore string `json:"best_before,omitempty"`
	// ArrivesAt is a planned lot's expected arrival; optional.
	ArrivesAt string `json:"arrives_at,omitempty"`
	// ValidFrom and ValidTo bound the dates the lot may serve; empty: MinDate, MaxDate.
	ValidFrom string `json:"valid_from,omitempty"`
	ValidTo   string `json:"valid_to,omitempty"`
	// Sellable is the lot's quantity (1..MaxQty), moved in from External.
	Sellable int64 `json:"sellable"`
	// Location is the location the lot is stored at; empty or DefaultLocation: the
	// default location (stored as empty).
	Location string `json:"location,omitempty"`
}

// RegisterLotRequest adds a lot to a SKU (RegisterLot).
type RegisterLotRequest struct {
	OpID string `json:"op_id"`
	SKU  string `json:"sku"`
	Lot  NewLot `json:"lot"`
}

// AdjustRequest corrects a lot's sellable quantity after a stock count: Delta > 0 moves
// External -> sellable, Delta < 0 moves sellable -> External.
type AdjustRequest struct {
	OpID   string `json:"op_id"`
	SKU    string `json:"sku"`
	LotID  string `json:"lot_id"`
	Delta  int64  `json:"delta"`
	Reason string `json:"reason"`
	// Location, when not empty, is the location the lot must be stored at
	// (ErrLocation otherwise); empty: no check (the lot id names the lot and its place).
	Location string `json:"location,omitempty"`
}

// TransferRequest sends Qty units of a SKU from one location to another (docs/ledger.md,
// "Transfers"): they leave the source's on-hand lots, earliest expiry first, into transit
// lots at the destination (planned, arriving ArrivesAt) named TransitLotID.
type TransferRequest struct {
	OpID string `json:"op_id"`
	SKU  string `json:"sku"`
	// TransferID names the transfer; a SKU takes each once.
	TransferID string `json:"transfer_id"`
	// From and To are location ids (DefaultLocation for the default one), not equal.
	From string `json:"from"`
	To   string `json:"to"`
	Qty  int64  `json:"qty"`
	// ArrivesAt is the date the units are expected at To (YYYY-MM-DD).
	ArrivesAt string `json:"arrives_at"`
}

// TransferReceiveRequest receives a transfer at its destination: its transit lots become
// on hand; Qty is the count, and what is short of what was sent goes to defective.
type TransferReceiveRequest struct {
	OpID       string `json:"op_id"`
	SKU        string `json:"sku"`
	TransferID string `json:"transfer_id"`
	Qty        int64  `json:"qty"`
}

// TransferCancelRequest cancels a transfer in transit: its units go back to the lots
// they left.
type TransferCancelRequest struct {
	OpID       string `json:"op_id"`
	SKU        string `json:"sku"`
	TransferID string `json:"transfer_id"`
}

// MaxTransferLots bounds the source lots one transfer takes from (ErrTransferLots beyond),
// so that its result fits in one queue message.
const MaxTransferLots = 16

// TransitLotID is the id of the lot a transfer makes at its destination for the units it
// takes from lot: the transfer id, "~" and the lot id, or, when that is longer than
// MaxIDLen, "~" and its SHA-1 in hex. "~" is junban's own mark: no sender's lot has it.
func TransitLotID(transferID, lot string) string {
	id := transferID + "~" + lot
	if len(id) <= MaxIDLen {
		return id
	}
	sum := sha1.Sum([]byte(id)) //nolint:gosec // a name, not a secret: ledger.lua's redis.sha1hex
	return "~" + hex.EncodeToString(sum[:])
}

// Result is what one operation did.
type Result struct {
	OpID string `json:"op_id"`
	// LegacyOpID is the request's (empty for none): an undo names its own legacy id
	// after it.
	LegacyOpID string `json:"legacy_op_id,omitempty"`
	SKU        string `json:"sku"`
	// Moves are the quantities moved, Index 0..n-1.
	Moves []Move `json:"moves"`
	// Version is the SKU's version after the operation (0 when the operation failed).
	Version int64 `json:"version"`
	// Lots are the lots the operation named or moved, in order of first appearance,
	// with their state right after the operation.
	Lots []Lot `json:"lots"`
	// Reason is the reason an adjustment, a hold, a damage or a recall gave.
	Reason string `json:"reason,omitempty"`
	// SafetyStock is the SKU's safety stock after RegisterSKU and SetSafetyStock (the
	// other operations leave it 0: they do not read it back).
	SafetyStock int64 `json:"safety_stock,omitempty"`
	// SafetyLocation is, after a SetSafetyStock that named a location, that location:
	// SafetyStock is then its safety stock, and the SKU's network-wide one is unchanged.
	SafetyLocation string `json:"safety_location,omitempty"`
	// Holders are, after a Recall, the orders holding reserved or allocated units of the
	// lot (at most MaxResultHolders, by lcid); HolderCount counts them all.
	Holders     []Holder `json:"holders,omitempty"`
	HolderCount int      `json:"holder_count,omitempty"`
	// Transfer is, after a transfer's request, receipt or cancel, the transfer as the
	// operation left it (its record t:<transfer id>).
	Transfer *Transfer `json:"transfer,omitempty"`
	// Queued is, after a Backorder, the units its line waits for (0: it took them all
	// now), and Position the line's place in the queue (1: its head; 0: not queued); after
	// a Dequeue, Queued is what the line still waits for and Dequeued what was taken off.
	Queued   int64 `json:"queued,omitempty"`
	Position int64 `json:"position,omitempty"`
	Dequeued int64 `json:"dequeued,omitempty"`
	// Fills are the waiting lines the operation's fill served, in serving order
	// (docs/ledger.md, "Waiting demand"); their moves are among Moves. FillsMore: the
	// fill stopped at MaxResultFills lines, and a FillRequest goes on.
	Fills     []Fill `json:"fills,omitempty"`
	FillsMore bool   `json:"fills_more,omitempty"`
	// Queue are the waiting lines the operation changed (a backorder's queued line, a
	// dequeued or filled one), each as the operation left it, Want 0 for a line that
	// left the queue, in the order changed: what persistence keeps of the queue.
	Queue []QueueEntry `json:"queue,omitempty"`
	// Replayed is true when the op id had been applied (or had failed) before: nothing moved now.
	Replayed bool `json:"replayed"`
}
