package event

// The ledger's values as the wire carries them: internal/ledger uses these types (as
// aliases), so their JSON form is defined here, with the rest of the contract.

// Bucket names where a lot's quantity sits. External is the outside world: stock
// adjustments and receipts move quantity in from it or out to it, and no other
// operation touches it, so a lot's total changes only through those.
const (
	Sellable  = "sellable"
	Reserved  = "reserved"
	Allocated = "allocated"
	Hidden    = "hidden"
	Shipped   = "shipped"
	// Defective holds the units of a lot found damaged on a count, recalled, or returned
	// broken: accounted for, never sellable (docs/ledger.md).
	Defective = "defective"
	External  = "external"
	// Transit is where a transfer's units are between two locations' lots: a transfer's
	// moves take units out of the source's lots to it and into the destination's transit
	// lots from it (and back on a cancel), each operation's transit moves netting to zero,
	// so a unit in transit is counted once, in its transit lot (docs/ledger.md, "Transfers").
	Transit = "transit"
)

// Lot kinds.
const (
	KindOnHand  = "onhand"
	KindPlanned = "planned"
)

// Mode of an allocation.
type Mode string

const (
	// ModeShip allocates for shipment (出荷引当): sellable -> allocated, with the safety-stock check.
	ModeShip Mode = "ship"
	// ModeReserve reserves (予約・仮引当): sellable -> reserved, without the safety-stock check.
	ModeReserve Mode = "reserve"
)

// Move is one quantity moved between two buckets of one lot by one operation.
type Move struct {
	OpID  string `json:"op_id"`
	Index int    `json:"index"`
	SKU   string `json:"sku"`
	LotID string `json:"lot_id"`
	From  string `json:"from"`
	To    string `json:"to"`
	Qty   int64  `json:"qty"`
	// Version is the SKU's version after the operation that made the move. An event can
	// touch one SKU in several operations, with other orders' operations in between, so a
	// move's version is its own operation's, not the newest the event saw. 0 in results
	// published before the field existed.
	Version int64 `json:"version,omitempty"`
}

// Lot is a lot of one SKU with its buckets. Dates are ISO dates (YYYY-MM-DD).
type Lot struct {
	LotID      string `json:"lot_id"`
	Kind       string `json:"kind"`
	Good       bool   `json:"good"`
	BestBefore string `json:"best_before,omitempty"`
	// RegSeq is the registration order within the SKU: FEFO tie-break and LIFO key of planned lots.
	RegSeq    int64  `json:"reg_seq"`
	ArrivesAt string `json:"arrives_at,omitempty"`
	ValidFrom string `json:"valid_from"`
	ValidTo   string `json:"valid_to"`
	Sellable  int64  `json:"sellable"`
	Reserved  int64  `json:"reserved"`
	Allocated int64  `json:"allocated"`
	Hidden    int64  `json:"hidden"`
	Shipped   int64  `json:"shipped"`
	Defective int64  `json:"defective"`
	// Location is the location the lot is stored at; empty (absent on the wire): the
	// shop's default location, DefaultLocation.
	Location string `json:"location,omitempty"`
}

// DefaultLocation is the id of the shop's default location: the location of every lot
// registered without one, and of every lot from before locations.
const DefaultLocation = "default"

// SKU is a SKU's settings, version and lots.
type SKU struct {
	SKU         string `json:"sku"`
	SafetyStock int64  `json:"safety_stock"`
	// LocationSafety is the safety stock of each location that has one (docs/ledger.md,
	// "Safety stock per location"), by location id; nil when none has.
	LocationSafety map[string]int64 `json:"location_safety_stock,omitempty"`
	Version        int64            `json:"version"`
	Lots           []Lot            `json:"lots"`
	// Transfers are, in a load or a snapshot, every transfer of the SKU, by id; in a
	// result, the transfer the operation requested, received or cancelled, as it left it.
	Transfers []Transfer `json:"transfers,omitempty"`
	// Queue is, in a load or a snapshot, every line waiting for the SKU's stock, in
	// serving order; in a result, the waiting lines the operation changed, as it left
	// them (Want 0: the line left the queue).
	Queue []QueueEntry `json:"queue,omitempty"`
	// QueueSeq is, in a load, the last sequence number the SKU's queue gave (a line that
	// left the queue may have had it), so that a line queued after the load comes after
	// every line queued before; 0 in a result.
	QueueSeq int64 `json:"queue_seq,omitempty"`
}

// QueueEntry is one line waiting in a SKU's queue for stock (a backorder).
type QueueEntry struct {
	Holder     string `json:"holder"`
	Line       string `json:"line"`
	Want       int64  `json:"want"`
	Mode       Mode   `json:"mode"`
	TargetDate string `json:"target_date"`
	Class      int    `json:"class,omitempty"`
	// Seq is the ledger's own number of the entry in the SKU: the order it was queued in.
	Seq int64 `json:"seq"`
	// QueuedAt is when the line was queued (Unix milliseconds, the order-worker's clock).
	QueuedAt int64 `json:"queued_at"`
}

// Transfer is a transfer of one SKU's units between two locations as the ledger keeps
// it (docs/ledger.md, "Transfers").
type Transfer struct {
	TransferID string `json:"transfer_id"`
	// State is in_transit, received or cancelled.
	State string `json:"state"`
	// From and To are location ids (DefaultLocation for the default one).
	From string `json:"from"`
	To   string `json:"to"`
	// Lots are the source lots the request took from, in the order it took them, each
	// with its transit lot and the quantity sent.
	Lots []TransferLot `json:"lots"`
}

// TransferLot is what a transfer took from one source lot: Qty units into its transit
// lot Transit.
type TransferLot struct {
	Source  string `json:"source"`
	Transit string `json:"transit"`
	Qty     int64  `json:"qty"`
}

// LotQty is a quantity held in one lot.
type LotQty struct {
	LotID string `json:"lot_id"`
	Qty   int64  `json:"qty"`
	// Location is, in an order's snapshot, the location of the lot a line holds, when it
	// is not the default one (what each location must ship). Requests ignore it.
	Location string `json:"location,omitempty"`
}

// Holder is an order holding reserved or allocated units of a lot: what a recall
// reports, so that a caller can cancel or re-allocate those orders.
type Holder struct {
	LCID  string `json:"lcid"`
	LotID string `json:"lot_id"`
	Qty   int64  `json:"qty"`
}
