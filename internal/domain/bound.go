package domain

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/ledger/stock"
)

// ResultMarginDivisor sets the margin CheckResultBound keeps below the results queue's
// maximum message size: the worst-case result may take at most (divisor-1)/divisor of it.
// The rest is for the message's attributes and for what the model does not count (a
// refusal's detail longer than modelDetailBytes, JSON escapes of "<", ">" and "&" in ids).
const ResultMarginDivisor = 8

// ResultLotsPerLine is the number of lots CheckResultBound assumes one order line holds
// (and one ledger operation of a line moves). The ledger takes as many lots as the line's
// quantity needs, in allocation order; nothing bounds that yet, so a line spread over more
// lots than this makes results larger than the check computes, and the margin is all that
// is left.
const ResultLotsPerLine = 2

// modelDetailBytes is the refusal text the model puts in a result's detail: the ledger's
// refusal of one operation (op id, SKU and lot ids at their maximum, the counts). A refused
// undo adds its own text, but then leaves no moves and no SKU version, which the model
// counts for every undo and which take more room than that text.
const modelDetailBytes = 2048

// ResultShape is the shape of a kind's largest result, what the result-size bound counts
// for it (Kind.Result).
type ResultShape int

const (
	// NoResult: the kind makes none (junban.drain).
	NoResult ResultShape = iota
	// OrderLines: an order's event, whose result grows with the order's lines
	// (WorstCaseResult).
	OrderLines
	// OneLot: a SKU's event whose one operation touches one lot.
	OneLot
	// OneLotWithHolders: OneLot, and the orders that hold the lot (at most
	// stock.MaxResultHolders of them: inventory.lot_recalled).
	OneLotWithHolders
	// TransferLots: a transfer's event, whose one operation touches at most
	// stock.MaxTransferLots source lots and as many transit lots, two moves each.
	TransferLots
)

// WorstCaseResultOf builds the largest result an event of kind k can make, with at most
// lines lines of lotsPerLine lots for an order's event (WorstCaseResult), and ok false for
// a kind that makes none.
func WorstCaseResultOf(k *Kind, lines, lotsPerLine int) (r event.Result, ok bool) {
	switch k.Result {
	case OrderLines:
		r = WorstCaseResult(lines, lotsPerLine)
	case OneLot, OneLotWithHolders:
		r = worstSKUResult(k.Result == OneLotWithHolders)
		if k.Result == OneLot { // a recall fills nothing
			addFills(&r, stock.MaxResultFills)
		}
	case TransferLots:
		r = worstSKUResult(false)
		lots := make([]stock.Lot, 0, 2*stock.MaxTransferLots)
		moves := make([]stock.Move, 0, 2*stock.MaxTransferLots)
		for range 2 * stock.MaxTransferLots {
			lots = append(lots, worstLot())
			moves = append(moves, r.Moves[0])
		}
		r.SKUs[0].Lots, r.Moves = lots, moves
		addFills(&r, stock.MaxTransferFills)
	default:
		return event.Result{}, false
	}
	r.Type = k.Type
	return r, true
}

// worstSKUResult is the largest result of a SKU's event: one operation on one lot (two
// moves at most: a recall moves sellable and hidden units), its SKU version with that lot,
// a refusal's detail, and with holders, the most a recall lists. WorstCaseResultOf adds
// the queue's fill the operation ends with (addFills).
func worstSKUResult(holders bool) event.Result {
	ledgerID := func(c string) string { return strings.Repeat(c, stock.MaxIDLen) }
	r := WorstCaseResult(0, 0)
	r.Order, r.Moves, r.SKUs = nil, nil, nil
	r.Entity = event.SKUEntityPrefix + ledgerID("s")
	move := stock.Move{OpID: ledgerID("o"), Index: 1, SKU: ledgerID("s"), LotID: ledgerID("l"),
		From: stock.Defective, To: stock.Defective, Qty: stock.MaxQty, Version: 1 << 53}
	r.Moves = []stock.Move{move, move}
	r.SKUs = []stock.SKU{{SKU: ledgerID("s"), SafetyStock: stock.MaxQty, Version: 1 << 53, Lots: []stock.Lot{worstLot()}}}
	if holders {
		for range stock.MaxResultHolders {
			r.Holders = append(r.Holders, stock.Holder{LCID: strings.Repeat("c", event.MaxIDLength), LotID: ledgerID("l"), Qty: stock.MaxQty})
		}
		r.HolderCount = 1 << 53
	}
	return r
}

// addFills adds to a SKU's event's result the most a fill of its SKU's queue can add:
// n waiting lines filled (stock.MaxResultFills, a transfer's stock.MaxTransferFills),
// each from ResultLotsPerLine lots (a move and a lot in the SKU version each), and each
// line's queue entry as the fill left it.
func addFills(r *event.Result, n int) {
	id := func(c string) string { return strings.Repeat(c, event.MaxIDLength) }
	move := stock.Move{OpID: strings.Repeat("o", stock.MaxIDLen), Index: 1 << 30, SKU: strings.Repeat("s", stock.MaxIDLen),
		LotID: strings.Repeat("l", stock.MaxIDLen), From: stock.Defective, To: stock.Defective, Qty: stock.MaxQty, Version: 1 << 53}
	s := &r.SKUs[0]
	for range n {
		for range ResultLotsPerLine {
			r.Moves = append(r.Moves, move)
			s.Lots = append(s.Lots, worstLot())
		}
		s.Queue = append(s.Queue, event.QueueEntry{Holder: id("c"), Line: id("i"), Want: stock.MaxQty,
			Mode: stock.ModeReserve, TargetDate: "9999-12-31", Class: stock.MaxClass, Seq: 1 << 53, QueuedAt: 1 << 53})
	}
}

// WorstCaseResult builds the largest result an order event of at most lines lines can
// make when each line holds at most lotsPerLine lots, with every id at its maximum length
// (event.MaxIDLength, stock.MaxIDLen) and every number at its widest.
//
// The largest is an order.lines_changed that replaces each of an order's lines by a new
// one and is refused at its last release: the processor's step (step.go) then allocated
// every new line and released all but one old line (2*lines-1 operations), undid them all
// (as many again), and the result lists each operation's moves and the SKU version it
// left with the lots it touched, beside the order's snapshot (the old lines and their
// lots). Every other event makes fewer operations: a placement at most 2*lines-1 (its
// lines and their undos), a cancellation, confirmation or shipment the same.
func WorstCaseResult(lines, lotsPerLine int) event.Result {
	id := func(c string) string { return strings.Repeat(c, event.MaxIDLength) }
	ledgerID := func(c string) string { return strings.Repeat(c, stock.MaxIDLen) }
	const (
		wideSeq  = 1 << 53 // Lua numbers count versions and registration sequences
		wideDate = "9999-12-31"
	)
	when := time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.FixedZone("", -(23*3600+59*60)))
	snap := &event.OrderSnapshot{
		LCID: id("c"), Status: event.StatusCancelled, Allocation: "allocated", Paid: true,
		Mode: stock.ModeReserve, TargetDate: wideDate,
		Route: &event.Routing{Allocation: []string{"fewest_splits", "fefo_network", "closest", "ranked", "pinned", "ranked", "ranked", "ranked"},
			ShipTo: &event.Coordinates{Lat: -89.12345678901234, Lon: -179.12345678901234}, PickupLocation: strings.Repeat("w", stock.MaxLocationLen), NoSplit: true},
	}
	lot := stock.LotQty{LotID: ledgerID("l"), Qty: stock.MaxQty}
	for range lines {
		ln := event.SnapshotLine{LineID: id("i"), SKU: ledgerID("s"), Qty: stock.MaxQty}
		for range lotsPerLine {
			ln.Lots = append(ln.Lots, lot)
			// A shipped order's line also records what came back (order.returned).
			ln.Returned = append(ln.Returned, lot)
		}
		snap.Lines = append(snap.Lines, ln)
	}
	r := event.Result{
		EventID: id("e"), Entity: id("c"), LCID: id("c"), Seq: wideSeq, Arrival: wideSeq,
		// The longest type, outcome and reason names, whichever event it is.
		Type: event.OrderAllocateForShipment, Outcome: event.Rejected, Reason: ReasonUndoRefused,
		Detail: strings.Repeat("d", modelDetailBytes), Order: snap, ProcessedAt: when,
		TraceID: strings.Repeat("f", 32),
	}
	move := stock.Move{
		OpID: ledgerID("o"), Index: lotsPerLine, SKU: ledgerID("s"), LotID: ledgerID("l"),
		From: stock.Allocated, To: stock.Allocated, Qty: stock.MaxQty, Version: wideSeq,
	}
	full := worstLot()
	for range 2 * (2*lines - 1) {
		sku := stock.SKU{SKU: ledgerID("s"), SafetyStock: stock.MaxQty, Version: wideSeq}
		for range lotsPerLine {
			r.Moves = append(r.Moves, move)
			sku.Lots = append(sku.Lots, full)
		}
		r.SKUs = append(r.SKUs, sku)
	}
	return r
}

// worstLot is a lot with every field at its widest.
func worstLot() stock.Lot {
	const wideSeq, wideDate = 1 << 53, "9999-12-31"
	ledgerID := strings.Repeat("l", stock.MaxIDLen)
	return stock.Lot{
		LotID: ledgerID, Kind: "planned", Good: true, BestBefore: wideDate, RegSeq: wideSeq,
		ArrivesAt: wideDate, ValidFrom: wideDate, ValidTo: wideDate, Sellable: stock.MaxQty,
		Reserved: stock.MaxQty, Allocated: stock.MaxQty, Hidden: stock.MaxQty, Shipped: stock.MaxQty,
		Defective: stock.MaxQty, Location: strings.Repeat("w", stock.MaxLocationLen),
	}
}

// WorstCaseResultBytes is the size of the largest result any kind can make (the registry's
// WorstCaseResultOf of each), with at most lines lines of lotsPerLine lots.
func WorstCaseResultBytes(lines, lotsPerLine int) int {
	worst := 0
	for _, k := range Kinds() {
		r, ok := WorstCaseResultOf(k, lines, lotsPerLine)
		if !ok {
			continue
		}
		b, err := json.Marshal(r)
		if err != nil {
			panic(err) // plain structs of strings and numbers always marshal
		}
		worst = max(worst, len(b))
	}
	return worst
}

// CheckResultBound reports, with an error that names the settings, whether the largest
// result an accepted event of any kind can make (maxLines lines, ResultLotsPerLine lots each)
// fits in a message of maxMessageSize bytes with ResultMarginDivisor's margin: a result
// that does not fit can never be published, and its order would wait for ever.
func CheckResultBound(maxLines, maxMessageSize int) error {
	worst := WorstCaseResultBytes(maxLines, ResultLotsPerLine)
	room := maxMessageSize - maxMessageSize/ResultMarginDivisor
	if worst > room {
		return fmt.Errorf("order: JUNBAN_MAX_LINES=%d lets an event's result grow to %d bytes (%d lots per line, every id at its maximum length), more than %d of the results queue's %d-byte messages; lower JUNBAN_MAX_LINES (at most %d fits) or raise the queue's MaximumMessageSize",
			maxLines, worst, ResultLotsPerLine, room, maxMessageSize, MaxLinesFitting(maxMessageSize))
	}
	return nil
}

// MaxLinesFitting is the largest lines bound that CheckResultBound accepts for a results
// queue of maxMessageSize bytes (0 when not even one line fits).
func MaxLinesFitting(maxMessageSize int) int {
	lo, hi := 0, MaxLinesLimit
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if WorstCaseResultBytes(mid, ResultLotsPerLine) <= maxMessageSize-maxMessageSize/ResultMarginDivisor {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}
