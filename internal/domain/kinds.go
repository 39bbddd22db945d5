package domain

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/junban/junban/internal/event"
)

// Entity says whose turn a kind's events run in.
type Entity int

const (
	// OnOrder: the order's turn, named by the event's lcid (required).
	OnOrder Entity = iota + 1
	// OnSKU: the SKU's turn, "sku:" and the SKU its data names (SKUEntity).
	OnSKU
	// OnNamed: the entity the event's lcid names, an order's or a SKU's (junban.drain).
	OnNamed
)

// Origin says who makes a kind's events, and so where they may come from.
type Origin int

const (
	// FromSender: a shop's system sends the events, on the orders queue or through the
	// webhook gateway.
	FromSender Origin = iota + 1
	// Own: junban makes the events and submits them into the turn itself
	// (order.reservation_expired): the orders queue refuses them (ERR_JUNBAN_EVENT), and
	// their event id may be in junban's namespace (event.OwnMark).
	Own
	// Nudge: junban's own message on the orders queue (junban.drain): a replica takes the
	// turn of the entity its lcid names and drains its wait list; it never reaches the
	// state machine, so it has no step and no result.
	Nudge
)

// Kind is everything junban knows of one event type, declared once, in this file: its
// data and how it is checked, whose turn it runs in, what it does to the order or the
// SKU (and so which ledger operations it runs: stock.Op, whose Reversal is the
// quarantine's undo policy), what persistence does with its result beyond the common
// rows, and a valid example. Decode, Step, persistence (SetsSafetyStock), the result
// bound and the tests of docs/events.md, the OpenAPI document and loadgen all read the
// registry (Kinds, KindOf); a kind lacking a piece fails TestKindsAreComplete, and
// internal/domain/kindsgen writes the OpenAPI document's EventType and the kinds index of
// docs/events.md from it (go generate; TestGeneratedIsCurrent fails when they are stale).
type Kind struct {
	Type   event.Type
	Entity Entity
	// Origin says who makes the events: the worker refuses an Own kind from the queue and
	// takes a Nudge's turn instead of submitting it.
	Origin Origin
	// Opens: the kind's events open their order (order.placed), so a turn with no state in
	// Redis has no order to look for in PostgreSQL (Event.AboutExistingOrder).
	Opens bool
	// Doc says in one line what the event means (docs/events.md has the whole story).
	Doc string
	// SetsSafetyStock: the kind's applied result carries the safety stock its SKU was
	// set to (every other result's SKUs carry 0, which means nothing): persistence
	// writes it.
	SetsSafetyStock bool
	// Example is a valid data object of the kind, or nil for a kind without data.
	Example json.RawMessage
	// Result is the shape of the largest result the kind makes: what the result-size
	// bound (CheckResultBound) counts for it.
	Result ResultShape

	// newData returns a new zero value of the kind's data type, a pointer.
	newData func() any
	// decode checks raw data (absent: nil) and returns what Step gets.
	decode func(raw json.RawMessage, lim Limits) (any, error)
	// sku is an OnSKU kind's SKU in its data.
	sku func(data any) string
	// step is the transition (nil for junban.drain, which never reaches a step).
	step func(t *txn, cur *event.OrderSnapshot, data any) (transition, error)
}

// transition is what one event does to the state: the order it leaves (nil: unchanged),
// the reason it is rejected ("" when applied), or park: its precondition does not hold
// yet (a payment before its order), so it waits in the state for a later event.
type transition struct {
	next   *event.OrderSnapshot
	reason string
	park   bool
}

func rejected(reason string) (transition, error) { return transition{reason: reason}, nil }

// noData is the data of a kind that takes none.
type noData struct{}

// spec is a kind's declaration with its data type D.
type spec[D any] struct {
	Type            event.Type
	Entity          Entity
	Origin          Origin
	Opens           bool
	Doc             string
	SetsSafetyStock bool
	// Result: the shape of its largest result (every kind but the drain).
	Result ResultShape
	// Example: a valid D (for a kind with data).
	Example D
	// Check validates decoded data: nil when any D decoded strictly is valid.
	Check func(d *D, lim Limits) error
	// SKU: an OnSKU kind's SKU.
	SKU func(d *D) string
	// Step: the transition.
	Step func(t *txn, cur *event.OrderSnapshot, d *D) (transition, error)
}

var kinds = map[event.Type]*Kind{}

// register declares a kind; a type twice, an OnSKU kind without SKU, or a kind without
// a step (but the drain) is a programming error that every test of the package meets.
func register[D any](s spec[D]) {
	if _, dup := kinds[s.Type]; dup {
		panic(fmt.Sprintf("domain: kind %s registered twice", s.Type))
	}
	_, none := any(new(D)).(*noData)
	k := &Kind{Type: s.Type, Entity: s.Entity, Origin: s.Origin, Opens: s.Opens, Doc: s.Doc, SetsSafetyStock: s.SetsSafetyStock, Result: s.Result}
	if !none {
		ex, err := json.Marshal(s.Example)
		if err != nil {
			panic(fmt.Sprintf("domain: kind %s: example: %v", s.Type, err))
		}
		k.Example = ex
	}
	k.newData = func() any { return new(D) }
	k.decode = func(raw json.RawMessage, lim Limits) (any, error) {
		d := new(D)
		if none {
			return d, nil // data of a kind without data is ignored, as it always was
		}
		if err := strictData(raw, d); err != nil {
			return nil, err
		}
		if s.Check != nil {
			if err := s.Check(d, lim); err != nil {
				return nil, err
			}
		}
		return d, nil
	}
	if s.SKU != nil {
		k.sku = func(data any) string { return s.SKU(data.(*D)) }
	}
	if s.Step != nil {
		k.step = func(t *txn, cur *event.OrderSnapshot, data any) (transition, error) {
			return s.Step(t, cur, data.(*D))
		}
	}
	if (s.Step == nil) != (s.Entity == OnNamed) || (s.Result == NoResult) != (s.Entity == OnNamed) ||
		(s.Origin == Nudge) != (s.Entity == OnNamed) {
		panic(fmt.Sprintf("domain: kind %s: every kind but junban's drain has a Step and a Result shape", s.Type))
	}
	if (s.Entity == OnSKU) != (s.SKU != nil) {
		panic(fmt.Sprintf("domain: kind %s: an OnSKU kind, and only one, names its SKU", s.Type))
	}
	kinds[s.Type] = k
}

// NewData returns a new zero value of the kind's data type, a pointer (a *noData for a
// kind without data): what internal/domain/kindsgen reads the data's fields from.
func (k *Kind) NewData() any { return k.newData() }

// HasData reports whether the kind's events carry data.
func (k *Kind) HasData() bool { return k.Example != nil }

// KindOf returns the kind of t, or nil when junban knows no such event.
func KindOf(t event.Type) *Kind { return kinds[t] }

// Kinds returns every kind, by type.
func Kinds() []*Kind {
	out := make([]*Kind, 0, len(kinds))
	for _, k := range kinds {
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b *Kind) int { return cmp.Compare(a.Type, b.Type) })
	return out
}

// The OpenAPI document's EventType and the kinds index of docs/events.md are written from
// the registry.
//go:generate go run ./kindsgen -openapi ../http/api/openapi.json -events ../../docs/events.md -contracts ../../docs/contracts

// The kinds. Each step function is a method of txn in step.go.
func init() {
	lines3 := []event.Line{{LineID: "1", SKU: "SKU-0001", Qty: 2}, {LineID: "2", SKU: "SKU-0002", Qty: 1}}
	register(spec[event.OrderData]{
		Type: event.OrderPlaced, Entity: OnOrder, Origin: FromSender, Opens: true, Result: OrderLines,
		Doc:     "a new order: its lines are allocated (mode ship) or reserved (mode reserve) for its target date",
		Example: event.OrderData{Mode: event.ModeShip, TargetDate: "2026-12-03", Lines: lines3},
		Check: func(d *event.OrderData, lim Limits) error {
			return cmp.Or(validateLines(event.OrderPlaced, d, lim.maxLines()), checkHold(&d.Hold))
		},
		Step: func(t *txn, cur *event.OrderSnapshot, d *event.OrderData) (transition, error) {
			return t.placed(cur, d)
		},
	})
	register(spec[event.OrderData]{
		Type: event.OrderLinesChanged, Entity: OnOrder, Origin: FromSender, Result: OrderLines,
		Doc:     "the order's lines become these: lowered and removed lines give units back, raised and new ones allocate",
		Example: event.OrderData{Lines: []event.Line{{LineID: "1", SKU: "SKU-0001", Qty: 3}}},
		Check: func(d *event.OrderData, lim Limits) error {
			return cmp.Or(validateLines(event.OrderLinesChanged, d, lim.maxLines()), checkHold(&d.Hold))
		},
		Step: func(t *txn, cur *event.OrderSnapshot, d *event.OrderData) (transition, error) {
			return t.linesChanged(cur, d)
		},
	})
	register(spec[noData]{
		Type: event.PaymentConfirmed, Entity: OnOrder, Origin: FromSender, Result: OrderLines,
		Doc: "the order is paid (a shipment waits for it)",
		Step: func(_ *txn, cur *event.OrderSnapshot, _ *noData) (transition, error) {
			return paymentConfirmed(cur), nil
		},
	})
	register(spec[noData]{
		Type: event.OrderAllocateForShipment, Entity: OnOrder, Origin: FromSender, Result: OrderLines,
		Doc: "a reserved order's units become allocated for shipment",
		Step: func(t *txn, cur *event.OrderSnapshot, _ *noData) (transition, error) {
			return t.allocateForShipment(cur)
		},
	})
	register(spec[noData]{
		Type: event.OrderCancelled, Entity: OnOrder, Origin: FromSender, Result: OrderLines,
		Doc:  "the order is cancelled: what it holds goes back to sale",
		Step: func(t *txn, cur *event.OrderSnapshot, _ *noData) (transition, error) { return t.cancelled(cur) },
	})
	register(spec[noData]{
		Type: event.OrderShipped, Entity: OnOrder, Origin: FromSender, Result: OrderLines,
		Doc:  "a paid, allocated order left the warehouse",
		Step: func(t *txn, cur *event.OrderSnapshot, _ *noData) (transition, error) { return t.shipped(cur) },
	})
	register(spec[event.ReturnedData]{
		Type: event.OrderReturned, Entity: OnOrder, Origin: FromSender, Result: OrderLines,
		Doc:     "units of a shipped order came back, to sale or (defective) to the defective bucket",
		Example: event.ReturnedData{Lines: []event.ReturnLine{{LineID: "1", Qty: 1}}},
		Check:   func(d *event.ReturnedData, lim Limits) error { return validateReturn(d, lim.maxLines()) },
		Step: func(t *txn, cur *event.OrderSnapshot, d *event.ReturnedData) (transition, error) {
			return t.returned(cur, d)
		},
	})
	register(spec[event.AllocationMovedData]{
		Type: event.OrderAllocationMoved, Entity: OnOrder, Origin: FromSender, Result: OrderLines,
		Doc:     "a placed order's line takes its units from to_location only: what it holds elsewhere goes back, the same quantity is allocated there",
		Example: event.AllocationMovedData{LineID: "1", ToLocation: "store-1"},
		Check:   checkAllocationMoved,
		Step: func(t *txn, cur *event.OrderSnapshot, d *event.AllocationMovedData) (transition, error) {
			return t.allocationMoved(cur, d)
		},
	})
	holdUntil := time.Date(2026, 12, 3, 18, 0, 0, 0, time.UTC)
	register(spec[event.ReservationExtendedData]{
		Type: event.OrderReservationExtended, Entity: OnOrder, Origin: FromSender, Result: OrderLines,
		Doc:     "a reserve-mode order's hold moves to hold_until, or to hold_for after occurred_at",
		Example: event.ReservationExtendedData{Hold: event.Hold{HoldUntil: &holdUntil}},
		Check:   func(d *event.ReservationExtendedData, _ Limits) error { return checkHold(&d.Hold) },
		Step: func(t *txn, cur *event.OrderSnapshot, d *event.ReservationExtendedData) (transition, error) {
			return t.extended(cur, d)
		},
	})
	register(spec[event.ReservationExpiredData]{
		Type: event.OrderReservationExpired, Entity: OnOrder, Origin: Own, Result: OrderLines,
		Doc:     "junban's own: the order's hold_until passed; its reserved units go back to sale and the order is expired",
		Example: event.ReservationExpiredData{HoldUntil: holdUntil},
		Check:   checkExpired,
		Step: func(t *txn, cur *event.OrderSnapshot, d *event.ReservationExpiredData) (transition, error) {
			return t.expired(cur, d)
		},
	})
	register(spec[event.InventoryReceivedData]{
		Type: event.InventoryReceived, Entity: OnSKU, Origin: FromSender, Result: OneLot,
		Doc:     "a planned lot arrived: it becomes on hand with its best-before and the quantity counted",
		Example: event.InventoryReceivedData{SKU: "SKU-0001", LotID: "LOT-P1", BestBefore: "2027-06-30", Qty: 48},
		Check:   checkReceived,
		SKU:     func(d *event.InventoryReceivedData) string { return d.SKU },
		Step: func(t *txn, _ *event.OrderSnapshot, d *event.InventoryReceivedData) (transition, error) {
			return t.received(d)
		},
	})
	register(spec[event.InventoryAdjustedData]{
		Type: event.InventoryAdjusted, Entity: OnSKU, Origin: FromSender, Result: OneLot,
		Doc:     "a stock count corrected a lot's sellable quantity",
		Example: event.InventoryAdjustedData{SKU: "SKU-0001", LotID: "LOT-A1", Delta: -2, Reason: "count"},
		Check:   checkAdjusted,
		SKU:     func(d *event.InventoryAdjustedData) string { return d.SKU },
		Step: func(t *txn, _ *event.OrderSnapshot, d *event.InventoryAdjustedData) (transition, error) {
			return t.adjusted(d)
		},
	})
	register(spec[event.SKURegisteredData]{
		Type: event.InventorySKURegistered, Entity: OnSKU, Origin: FromSender, Result: OneLot, SetsSafetyStock: true,
		Doc:     "a new SKU and its safety stock",
		Example: event.SKURegisteredData{SKU: "SKU-0100", SafetyStock: 5},
		Check:   func(d *event.SKURegisteredData, _ Limits) error { return checkSafetyStock(d.SKU, d.SafetyStock) },
		SKU:     func(d *event.SKURegisteredData) string { return d.SKU },
		Step: func(t *txn, _ *event.OrderSnapshot, d *event.SKURegisteredData) (transition, error) {
			return t.registerSKU(d)
		},
	})
	register(spec[event.SafetyStockChangedData]{
		Type: event.InventorySafetyStockChanged, Entity: OnSKU, Origin: FromSender, Result: OneLot, SetsSafetyStock: true,
		Doc:     "a SKU's safety stock changed, network-wide or at one location",
		Example: event.SafetyStockChangedData{SKU: "SKU-0001", SafetyStock: 8},
		Check: func(d *event.SafetyStockChangedData, _ Limits) error {
			return cmp.Or(checkSafetyStock(d.SKU, d.SafetyStock), checkLocation(d.Location))
		},
		SKU: func(d *event.SafetyStockChangedData) string { return d.SKU },
		Step: func(t *txn, _ *event.OrderSnapshot, d *event.SafetyStockChangedData) (transition, error) {
			return t.setSafetyStock(d)
		},
	})
	register(spec[event.LotRegisteredData]{
		Type: event.InventoryLotRegistered, Entity: OnSKU, Origin: FromSender, Result: OneLot,
		Doc: "a new lot of a SKU, planned (a purchase order's delivery) or on hand",
		Example: event.LotRegisteredData{SKU: "SKU-0001", LotID: "LOT-P2", Kind: event.KindPlanned, ArrivesAt: "2026-12-20",
			ValidFrom: "2026-12-01", ValidTo: "2027-12-31", Sellable: 48},
		Check: func(d *event.LotRegisteredData, _ Limits) error { return validateLot(d) },
		SKU:   func(d *event.LotRegisteredData) string { return d.SKU },
		Step: func(t *txn, _ *event.OrderSnapshot, d *event.LotRegisteredData) (transition, error) {
			return t.registerLot(d)
		},
	})
	lotQty := func(typ event.Type, doc string, step func(t *txn, d *event.LotQtyData) (transition, error)) {
		register(spec[event.LotQtyData]{
			Type: typ, Entity: OnSKU, Origin: FromSender, Result: OneLot, Doc: doc,
			Example: event.LotQtyData{SKU: "SKU-0001", LotID: "LOT-A1", Qty: 2, Reason: "quality check"},
			Check:   checkLotQty,
			SKU:     func(d *event.LotQtyData) string { return d.SKU },
			Step:    func(t *txn, _ *event.OrderSnapshot, d *event.LotQtyData) (transition, error) { return step(t, d) },
		})
	}
	lotQty(event.InventoryHeld, "units of a lot are kept back from sale (sellable -> hidden)", (*txn).hold)
	lotQty(event.InventoryReleasedHold, "held units go back to sale (hidden -> sellable)", (*txn).releaseHold)
	lotQty(event.InventoryDamaged, "units of a lot were found damaged (sellable -> defective)", (*txn).damage)
	register(spec[event.LotRecalledData]{
		Type: event.InventoryLotRecalled, Entity: OnSKU, Origin: FromSender, Result: OneLotWithHolders,
		Doc:     "a whole lot is defective: never a candidate again; the result lists the orders holding it",
		Example: event.LotRecalledData{SKU: "SKU-0001", LotID: "LOT-A1", Reason: "supplier recall"},
		Check:   checkRecalled,
		SKU:     func(d *event.LotRecalledData) string { return d.SKU },
		Step:    func(t *txn, _ *event.OrderSnapshot, d *event.LotRecalledData) (transition, error) { return t.recall(d) },
	})
	register(spec[event.TransferRequestedData]{
		Type: event.InventoryTransferRequested, Entity: OnSKU, Origin: FromSender, Result: TransferLots,
		Doc: "units leave a location's on-hand lots, earliest expiry first, into transit to another location, which may promise them as planned stock",
		Example: event.TransferRequestedData{SKU: "SKU-0001", TransferID: "TR-1", FromLocation: "default", ToLocation: "store-1",
			Qty: 12, ArrivesAt: "2026-12-05"},
		Check: checkTransferRequested,
		SKU:   func(d *event.TransferRequestedData) string { return d.SKU },
		Step: func(t *txn, _ *event.OrderSnapshot, d *event.TransferRequestedData) (transition, error) {
			return t.transferRequested(d)
		},
	})
	register(spec[event.TransferReceivedData]{
		Type: event.InventoryTransferReceived, Entity: OnSKU, Origin: FromSender, Result: TransferLots,
		Doc:     "a transfer arrived: its units are on hand at the destination, and what the count is short of what was sent is defective",
		Example: event.TransferReceivedData{SKU: "SKU-0001", TransferID: "TR-1", Qty: 11},
		Check:   checkTransferReceived,
		SKU:     func(d *event.TransferReceivedData) string { return d.SKU },
		Step: func(t *txn, _ *event.OrderSnapshot, d *event.TransferReceivedData) (transition, error) {
			return t.transferReceived(d)
		},
	})
	register(spec[event.TransferCancelledData]{
		Type: event.InventoryTransferCancelled, Entity: OnSKU, Origin: FromSender, Result: TransferLots,
		Doc:     "a transfer in transit is called off: its units go back to the lots they left",
		Example: event.TransferCancelledData{SKU: "SKU-0001", TransferID: "TR-1"},
		Check:   checkTransferCancelled,
		SKU:     func(d *event.TransferCancelledData) string { return d.SKU },
		Step: func(t *txn, _ *event.OrderSnapshot, d *event.TransferCancelledData) (transition, error) {
			return t.transferCancelled(d)
		},
	})
	register(spec[noData]{
		Type: event.Drain, Entity: OnNamed, Origin: Nudge, // no Step: a drain never reaches the state machine
		Doc: "junban's own nudge: a replica takes the named entity's turn and drains its wait list",
	})
}
