package order

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/ledger"
)

// MaxEventBytes is the default bound of an order event's body (SQS allows 256 KiB).
const MaxEventBytes = 256 * 1024

// Bounds of an order event's lines (JUNBAN_MAX_LINES). An event's result lists each line
// with its lots, and each ledger operation with its moves and the lots it left, so the
// lines bound its size; the order-worker refuses to start when the largest result they
// allow would not fit in the results queue's messages (CheckResultBound).
const (
	// MaxLinesDefault fits SQS's classic 256 KiB messages: with every id at its maximum
	// length and ResultLotsPerLine lots a line, 19 lines would.
	MaxLinesDefault = 16
	// MaxLinesLimit is the most JUNBAN_MAX_LINES may be, and the bound of an envelope
	// decoded inside a turn: an event some worker accepted under its own setting must
	// still decode in the turn that runs it, whichever worker holds it.
	MaxLinesLimit = 1000
)

// Limits bound what Decode accepts. Zero fields stand for the defaults.
type Limits struct {
	// MaxBytes bounds the body. Default MaxEventBytes.
	MaxBytes int
	// MaxLines bounds the lines of order.placed and order.lines_changed. Default
	// MaxLinesLimit (the order-worker sets MaxLinesDefault or its setting).
	MaxLines int
}

// InvalidError says why a message can never be a valid order event. Reason is a
// stable code for the DLQ attribute and for metrics.
type InvalidError struct {
	Reason string
	Detail string
}

func (e *InvalidError) Error() string { return e.Reason + ": " + e.Detail }

// Reasons of invalid messages.
const (
	ReasonTooLarge        = "ERR_TOO_LARGE"
	ReasonMalformedJSON   = "ERR_MALFORMED_JSON"
	ReasonUnknownType     = "ERR_UNKNOWN_TYPE"
	ReasonMissingField    = "ERR_MISSING_FIELD"
	ReasonInvalidQuantity = "ERR_INVALID_QUANTITY"
	ReasonDuplicateLine   = "ERR_DUPLICATE_LINE"
	ReasonInvalidMode     = "ERR_INVALID_MODE"
	ReasonInvalidDate     = "ERR_INVALID_DATE"
	ReasonIDTooLong       = "ERR_ID_TOO_LONG"
	ReasonInvalidID       = "ERR_INVALID_ID"
	ReasonTooManyLines    = "ERR_TOO_MANY_LINES"
)

func invalid(reason, format string, args ...any) error {
	return &InvalidError{Reason: reason, Detail: fmt.Sprintf(format, args...)}
}

// InvalidReason returns the reason of an *InvalidError, or "".
func InvalidReason(err error) string {
	var ie *InvalidError
	if errors.As(err, &ie) {
		return ie.Reason
	}
	return ""
}

// Event is a decoded, validated order event.
type Event struct {
	event.Order
	// Exactly one of these is set, by Type.
	Lines     *event.OrderData
	Received  *event.InventoryReceivedData
	Adjusted  *event.InventoryAdjustedData
	DrainOf   string // junban.drain: the entity to drain
	rawLength int
}

// Entity is the key of the turn the event runs in: the lcid, or "sku:<sku>" for
// inventory events.
func (e Event) Entity() string {
	switch {
	case e.Received != nil:
		return SKUEntity(e.Received.SKU)
	case e.Adjusted != nil:
		return SKUEntity(e.Adjusted.SKU)
	case e.Type == event.Drain:
		return e.DrainOf
	}
	return e.LCID
}

// SKUEntity is the entity of a SKU's inventory events.
func SKUEntity(sku string) string { return "sku:" + sku }

// Decode parses and validates an order event with the default Limits but maxBytes; an
// error is an *InvalidError: such a message can never be applied.
func Decode(body []byte, maxBytes int) (Event, error) {
	return DecodeLimits(body, Limits{MaxBytes: maxBytes})
}

// DecodeLimits parses and validates an order event within lim; an error is an
// *InvalidError: such a message can never be applied.
func DecodeLimits(body []byte, lim Limits) (Event, error) {
	maxBytes := cmp.Or(max(lim.MaxBytes, 0), MaxEventBytes)
	maxLines := cmp.Or(max(lim.MaxLines, 0), MaxLinesLimit)
	if len(body) > maxBytes {
		return Event{}, invalid(ReasonTooLarge, "body is %d bytes, the limit is %d", len(body), maxBytes)
	}
	var ev Event
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&ev.Order); err != nil {
		return Event{}, invalid(ReasonMalformedJSON, "%v", err)
	}
	if dec.More() {
		return Event{}, invalid(ReasonMalformedJSON, "trailing data after the event object")
	}
	ev.rawLength = len(body)
	if ev.EventID == "" {
		return Event{}, invalid(ReasonMissingField, "event_id is missing")
	}
	lcidLimit := event.MaxIDLength
	if ev.Type == event.Drain {
		// A drain names an entity: an lcid, or "sku:" and a SKU.
		lcidLimit += len(SKUEntity(""))
	}
	// An order's keys carry its lcid as their hash tag (lockhandoff.CheckEntity): an
	// lcid with a brace would be refused there at every attempt.
	if err := cmp.Or(checkID("event_id", ev.EventID, event.MaxIDLength), checkID("lcid", ev.LCID, lcidLimit)); err != nil {
		return Event{}, err
	}
	switch ev.Type {
	case event.OrderPlaced, event.OrderLinesChanged:
		if ev.LCID == "" {
			return Event{}, invalid(ReasonMissingField, "lcid is missing")
		}
		var d event.OrderData
		if err := strictData(ev.Data, &d); err != nil {
			return Event{}, err
		}
		if err := validateLines(ev.Type, &d, maxLines); err != nil {
			return Event{}, err
		}
		ev.Lines = &d
	case event.PaymentConfirmed, event.OrderAllocateForShipment, event.OrderCancelled, event.OrderShipped:
		if ev.LCID == "" {
			return Event{}, invalid(ReasonMissingField, "lcid is missing")
		}
	case event.InventoryReceived:
		var d event.InventoryReceivedData
		if err := strictData(ev.Data, &d); err != nil {
			return Event{}, err
		}
		if d.SKU == "" || d.LotID == "" {
			return Event{}, invalid(ReasonMissingField, "data.sku and data.lot_id are required")
		}
		if err := checkSKUAndLot(d.SKU, d.LotID); err != nil {
			return Event{}, err
		}
		if !validDate(d.BestBefore) {
			return Event{}, invalid(ReasonInvalidDate, "data.best_before %q is not a date (YYYY-MM-DD)", d.BestBefore)
		}
		if d.Qty < 0 {
			return Event{}, invalid(ReasonInvalidQuantity, "data.qty %d is negative", d.Qty)
		}
		ev.Received = &d
	case event.InventoryAdjusted:
		var d event.InventoryAdjustedData
		if err := strictData(ev.Data, &d); err != nil {
			return Event{}, err
		}
		if d.SKU == "" || d.LotID == "" || d.Reason == "" {
			return Event{}, invalid(ReasonMissingField, "data.sku, data.lot_id and data.reason are required")
		}
		if err := checkSKUAndLot(d.SKU, d.LotID); err != nil {
			return Event{}, err
		}
		if d.Delta == 0 {
			return Event{}, invalid(ReasonInvalidQuantity, "data.delta is zero")
		}
		ev.Adjusted = &d
	case event.Drain:
		if ev.LCID == "" {
			return Event{}, invalid(ReasonMissingField, "lcid (the entity to drain) is missing")
		}
		ev.DrainOf = ev.LCID
	case "":
		return Event{}, invalid(ReasonMissingField, "type is missing")
	default:
		return Event{}, invalid(ReasonUnknownType, "unknown event type %q", ev.Type)
	}
	return ev, nil
}

type decodedKey struct{}

type decoded struct {
	body []byte
	ev   Event
}

// WithDecoded carries body's decoded event to the handlers of the turn that Submit may
// run with ctx, so that the caller's own envelope is not decoded a second time.
func WithDecoded(ctx context.Context, body []byte, ev Event) context.Context {
	return context.WithValue(ctx, decodedKey{}, &decoded{body: body, ev: ev})
}

// decodeIn decodes envelope, or takes its event from ctx when the caller of the turn
// decoded the same bytes already. The turn runs the oldest backlog envelope first,
// which may be another one: only equal bytes are taken.
func decodeIn(ctx context.Context, envelope []byte, maxBytes int) (Event, error) {
	if d, ok := ctx.Value(decodedKey{}).(*decoded); ok && len(envelope) <= maxBytes && bytes.Equal(d.body, envelope) {
		return d.ev, nil
	}
	return Decode(envelope, maxBytes)
}

// checkID refuses an id longer than limit bytes (PostgreSQL indexes every id of a result,
// and one of a few KB would make it refuse the result's rows) and one event.CheckID
// refuses (a brace, a control character, NUL).
func checkID(field, id string, limit int) error {
	if len(id) > limit {
		return invalid(ReasonIDTooLong, "%s is %d bytes, longer than %d", field, len(id), limit)
	}
	if err := event.CheckID(id); err != nil {
		return invalid(ReasonInvalidID, "%s: %v", field, err)
	}
	return nil
}

// checkSKUAndLot bounds SKU and lot ids as the ledger does. A SKU names its inventory
// events' entity ("sku:" and the SKU) and the ledger's keys, both by hash tag.
func checkSKUAndLot(sku, lotID string) error {
	return cmp.Or(checkID("data.sku", sku, ledger.MaxIDLen), checkID("data.lot_id", lotID, ledger.MaxIDLen))
}

func strictData(raw json.RawMessage, v any) error {
	if len(raw) == 0 || string(raw) == "null" {
		return invalid(ReasonMissingField, "data is missing")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return invalid(ReasonMalformedJSON, "data: %v", err)
	}
	return nil
}

func validDate(s string) bool {
	_, err := time.Parse(time.DateOnly, s)
	return err == nil
}

func validateLines(t event.Type, d *event.OrderData, maxLines int) error {
	if len(d.Lines) > maxLines {
		return invalid(ReasonTooManyLines, "data.lines has %d lines, the limit is %d", len(d.Lines), maxLines)
	}
	if t == event.OrderPlaced {
		if d.Mode != ledger.ModeShip && d.Mode != ledger.ModeReserve {
			return invalid(ReasonInvalidMode, "data.mode %q is neither %q nor %q", d.Mode, ledger.ModeShip, ledger.ModeReserve)
		}
		if !validDate(d.TargetDate) {
			return invalid(ReasonInvalidDate, "data.target_date %q is not a date (YYYY-MM-DD)", d.TargetDate)
		}
		if len(d.Lines) == 0 {
			return invalid(ReasonMissingField, "data.lines is empty")
		}
	}
	seen := make(map[string]bool, len(d.Lines))
	for i, l := range d.Lines {
		if l.LineID == "" || l.SKU == "" {
			return invalid(ReasonMissingField, "data.lines[%d]: line_id and sku are required", i)
		}
		if len(l.LineID) > event.MaxIDLength || len(l.SKU) > ledger.MaxIDLen {
			return invalid(ReasonIDTooLong, "data.lines[%d]: line_id (at most %d bytes) or sku (at most %d) too long", i, event.MaxIDLength, ledger.MaxIDLen)
		}
		if err := cmp.Or(event.CheckID(l.LineID), event.CheckID(l.SKU)); err != nil {
			return invalid(ReasonInvalidID, "data.lines[%d]: %v", i, err)
		}
		if l.Qty <= 0 {
			return invalid(ReasonInvalidQuantity, "data.lines[%d]: qty %d is not positive", i, l.Qty)
		}
		if seen[l.LineID] {
			return invalid(ReasonDuplicateLine, "data.lines[%d]: line_id %q appears twice", i, l.LineID)
		}
		seen[l.LineID] = true
	}
	return nil
}
