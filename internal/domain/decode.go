package domain

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/ledger/stock"
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
	ReasonInvalidKind     = "ERR_INVALID_KIND"
	ReasonInvalidReason   = "ERR_INVALID_REASON"
	// ReasonInvalidLocation: data.location is not a location id (stock.CheckLocation:
	// 1..64 ASCII letters, digits, '.', '_' and '-').
	ReasonInvalidLocation = "ERR_INVALID_LOCATION"
	// ReasonInvalidRoute: an order.placed's routing fields do not make a route (an unknown
	// or repeated strategy, "closest" without ship_to, "pinned" without pickup_location,
	// coordinates out of range), or an order.lines_changed carries them.
	ReasonInvalidRoute = "ERR_INVALID_ROUTE"
	// ReasonUncarriable refuses an event with a string that holds a character SQS and
	// SNS cannot carry (U+FFFE or U+FFFF, which JSON does not escape): its result could
	// never be published, and would hold up every later result of its entity.
	ReasonUncarriable = "ERR_UNCARRIABLE"
	// ReasonJunbanEvent refuses, on the orders queue, an event only junban submits
	// (order.reservation_expired: the order-worker's scanner puts it into the turn
	// itself), so that no sender can expire a reservation.
	ReasonJunbanEvent = "ERR_JUNBAN_EVENT"
	// ReasonUnsupportedVersion refuses an event whose version is not one of
	// event.Versions: its fields may mean what this decoder does not know.
	ReasonUnsupportedVersion = "ERR_UNSUPPORTED_VERSION"
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

// Event is a decoded, validated order event: the envelope, its kind and its data.
type Event struct {
	event.Order
	kind *Kind
	// data is the kind's decoded data (a pointer to its data type).
	data      any
	rawLength int
}

// ContractVersion is the version the event follows: its own, or event.Version when it
// names none.
func (e Event) ContractVersion() string { return cmp.Or(e.Version, event.Version) }

// Kind returns the event's kind.
func (e Event) Kind() *Kind { return e.kind }

// Payload returns the event's decoded data: a pointer to its kind's data type (an
// *event.OrderData for order.placed, say).
func (e Event) Payload() any { return e.data }

// DrainOf is the entity a nudge (junban.drain) names, or "" for every other event.
func (e Event) DrainOf() string {
	if e.kind != nil && e.kind.Origin == Nudge {
		return e.LCID
	}
	return ""
}

// Entity is the key of the turn the event runs in: the lcid, or "sku:<sku>" for
// inventory events.
func (e Event) Entity() string {
	if sku, ok := e.InventorySKU(); ok {
		return SKUEntity(sku)
	}
	return e.LCID
}

// AboutExistingOrder reports whether the event concerns an order that should already
// exist, so that a turn with no state in Redis looks for it in PostgreSQL. Not one that
// opens its order (Kind.Opens: a placement, the common case of a new order; its ledger
// operations are idempotent by op id anyway), and not an event of a SKU, which has no
// order row.
func (e Event) AboutExistingOrder() bool {
	return e.kind != nil && e.kind.Entity != OnSKU && !e.kind.Opens
}

// InventorySKU returns the SKU of a SKU's event, with ok; ok is false for the events of
// an order.
func (e Event) InventorySKU() (string, bool) {
	if e.kind == nil || e.kind.sku == nil {
		return "", false
	}
	return e.kind.sku(e.data), true
}

// SKUEntity is the entity of a SKU's inventory events. No lcid begins with its prefix
// (event.CheckLCID), so no order's events run in a SKU's turn.
func SKUEntity(sku string) string { return event.SKUEntityPrefix + sku }

// Decode parses and validates an order event with the default Limits but maxBytes; an
// error is an *InvalidError: such a message can never be applied.
func Decode(body []byte, maxBytes int) (Event, error) {
	return DecodeLimits(body, Limits{MaxBytes: maxBytes})
}

// DecodeLimits parses and validates an order event within lim; an error is an
// *InvalidError: such a message can never be applied.
func DecodeLimits(body []byte, lim Limits) (Event, error) {
	maxBytes := cmp.Or(max(lim.MaxBytes, 0), MaxEventBytes)
	maxLines := lim.maxLines()
	if len(body) > maxBytes {
		return Event{}, invalid(ReasonTooLarge, "body is %d bytes, the limit is %d", len(body), maxBytes)
	}
	var ev Event
	if err := unmarshal(body, &ev.Order); err != nil {
		return Event{}, invalid(ReasonMalformedJSON, "%v", err)
	}
	ev.rawLength = len(body)
	if ev.Version != "" && !slices.Contains(event.Versions, ev.Version) {
		return Event{}, invalid(ReasonUnsupportedVersion, "version %.40q is not one of %q (absent means %q)", ev.Version, event.Versions, event.Version)
	}
	if ev.EventID == "" {
		return Event{}, invalid(ReasonMissingField, "event_id is missing")
	}
	k := KindOf(ev.Type)
	if err := cmp.Or(checkEventID(k, ev.EventID), checkLCID(k, ev.LCID)); err != nil {
		return Event{}, err
	}
	if ev.Type == "" {
		return Event{}, invalid(ReasonMissingField, "type is missing")
	}
	if k == nil {
		return Event{}, invalid(ReasonUnknownType, "unknown event type %q", ev.Type)
	}
	if k.Entity != OnSKU && ev.LCID == "" {
		if k.Entity == OnNamed {
			return Event{}, invalid(ReasonMissingField, "lcid (the entity to drain) is missing")
		}
		return Event{}, invalid(ReasonMissingField, "lcid is missing")
	}
	data, err := k.decode(ev.Data, Limits{MaxBytes: maxBytes, MaxLines: maxLines})
	if err != nil {
		return Event{}, err
	}
	ev.kind, ev.data = k, data
	if !carriable(body) {
		return Event{}, invalid(ReasonUncarriable, "a string holds U+FFFE or U+FFFF, which SQS and SNS cannot carry")
	}
	return ev, nil
}

// checkEventID checks an event's id like any other id, but for the events junban names
// itself: an Own kind's id may be in junban's namespace (event.ExpiryEventID). The orders
// queue refuses Own kinds (intake.Worker), so no sender's event holds event.OwnMark. k is
// nil for an unknown type.
func checkEventID(k *Kind, id string) error {
	if k != nil && k.Origin == Own && strings.HasPrefix(id, event.OwnMark) {
		if len(id) > event.MaxIDLength {
			return invalid(ReasonIDTooLong, "event_id is %d bytes, longer than %d", len(id), event.MaxIDLength)
		}
		return checkID("event_id", strings.TrimPrefix(id, event.OwnMark), event.MaxIDLength)
	}
	return checkID("event_id", id, event.MaxIDLength)
}

// carriable reports whether every string of a JSON body is one SQS and SNS can carry
// once junban has decoded and encoded it again: the body's own bytes (event.Carriable),
// and no escape of U+FFFE or U+FFFF, which encoding/json writes back as raw characters.
func carriable(body []byte) bool {
	if !event.Carriable(string(body)) {
		return false
	}
	for i := 0; ; {
		j := bytes.Index(body[i:], []byte(`\u`))
		if j < 0 {
			return true
		}
		j += i
		// An escape's backslash is preceded by an even number of backslashes.
		k := j
		for k > 0 && body[k-1] == '\\' {
			k--
		}
		if (j-k)%2 == 0 && j+6 <= len(body) {
			if h := strings.ToLower(string(body[j+2 : j+6])); h == "fffe" || h == "ffff" {
				return false
			}
		}
		i = j + 2
	}
}

func (l Limits) maxLines() int { return cmp.Or(max(l.MaxLines, 0), MaxLinesLimit) }

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

// checkLCID checks an event's lcid: an OnNamed kind's (a drain's) names an entity to
// drain, an lcid or a SKU's entity, held to CheckID and a bound that fits either; every
// other event's (k nil: an unknown type) is an order's, held to event.CheckLCID. An
// order's keys carry its lcid as their hash tag (lockhandoff.CheckEntity), and its turn
// is the lcid's: an lcid with a brace would be refused there at every attempt, one in a
// SKU's namespace would run in the SKU's turn.
func checkLCID(k *Kind, lcid string) error {
	if k != nil && k.Entity == OnNamed {
		return checkID("lcid", lcid, event.MaxIDLength+len(event.SKUEntityPrefix))
	}
	err := event.CheckLCID(lcid)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, event.ErrIDTooLong):
		return invalid(ReasonIDTooLong, "lcid: %v", err)
	}
	return invalid(ReasonInvalidID, "lcid: %v", err)
}

// checkSKUAndLot bounds SKU and lot ids as the ledger does. A SKU names its inventory
// events' entity ("sku:" and the SKU) and the ledger's keys, both by hash tag.
func checkSKUAndLot(sku, lotID string) error {
	return cmp.Or(checkID("data.sku", sku, stock.MaxIDLen), checkID("data.lot_id", lotID, stock.MaxIDLen))
}

// checkTransitOf checks the transfer_id an event naming a lot may give (absent: none): an
// id as a transfer event's, so that the lot is the transit lot the ledger made for
// (transfer_id, lot_id), which no sender names with its "~" (namedLot).
func checkTransitOf(transferID string) error {
	if transferID == "" {
		return nil
	}
	return checkID("data.transfer_id", transferID, stock.MaxIDLen)
}

// checkLocation checks the location an inventory event may name (absent: none).
func checkLocation(location string) error {
	if location == "" {
		return nil
	}
	if err := stock.CheckLocation(location); err != nil {
		return invalid(ReasonInvalidLocation, "data.location %q is not a location id (1..%d letters, digits, '.', '_' and '-')",
			location, stock.MaxLocationLen)
	}
	return nil
}

func strictData(raw json.RawMessage, v any) error {
	if len(raw) == 0 || string(raw) == "null" {
		return invalid(ReasonMissingField, "data is missing")
	}
	if err := unmarshalStrict(raw, v); err != nil {
		return invalid(ReasonMalformedJSON, "data: %v", err)
	}
	return nil
}

func validDate(s string) bool {
	_, err := time.Parse(time.DateOnly, s)
	return err == nil
}

// checkRoute checks an order event's routing fields: order.placed's make a valid route,
// order.lines_changed has none.
func checkRoute(t event.Type, d *event.OrderData) error {
	if !d.Routed() {
		return nil
	}
	if t != event.OrderPlaced {
		return invalid(ReasonInvalidRoute, "data.allocation, ship_to, pickup_location and no_split belong to order.placed")
	}
	if err := checkLocation(d.PickupLocation); err != nil {
		return invalid(ReasonInvalidLocation, "data.pickup_location %q is not a location id (1..%d letters, digits, '.', '_' and '-')",
			d.PickupLocation, stock.MaxLocationLen)
	}
	if err := routeOf(d.Routing(), nil).Validate(); err != nil {
		return invalid(ReasonInvalidRoute, "data: %v", strings.TrimPrefix(err.Error(), "ledger: ERR_INVALID_REQUEST: invalid request: "))
	}
	return nil
}

// routeOf is the route of an order's routing fields (nil: none): its strategies, or
// defaults when it names none.
func routeOf(d *event.Routing, defaults []stock.Strategy) *stock.Route {
	if d == nil {
		d = &event.Routing{}
	}
	r := &stock.Route{Pinned: d.PickupLocation, NoSplit: d.NoSplit}
	for _, s := range d.Allocation {
		r.Strategies = append(r.Strategies, stock.Strategy(s))
	}
	if len(r.Strategies) == 0 {
		r.Strategies = slices.Clone(defaults)
	}
	if d.ShipTo != nil {
		r.ShipTo = &stock.Coordinates{Lat: d.ShipTo.Lat, Lon: d.ShipTo.Lon}
	}
	return r
}

func validateLines(t event.Type, d *event.OrderData, maxLines int) error {
	if err := checkRoute(t, d); err != nil {
		return err
	}
	if len(d.Lines) > maxLines {
		return invalid(ReasonTooManyLines, "data.lines has %d lines, the limit is %d", len(d.Lines), maxLines)
	}
	if t == event.OrderPlaced {
		if d.Mode != stock.ModeShip && d.Mode != stock.ModeReserve {
			return invalid(ReasonInvalidMode, "data.mode %q is neither %q nor %q", d.Mode, stock.ModeShip, stock.ModeReserve)
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
		if len(l.LineID) > event.MaxIDLength || len(l.SKU) > stock.MaxIDLen {
			return invalid(ReasonIDTooLong, "data.lines[%d]: line_id (at most %d bytes) or sku (at most %d) too long", i, event.MaxIDLength, stock.MaxIDLen)
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

// checkReason bounds a warehouse event's reason as the ledger does: free text of 1..
// stock.MaxIDLen bytes without control characters (the ledger's records are lines of
// tab-separated fields).
func checkReason(reason string) error {
	if len(reason) > stock.MaxIDLen {
		return invalid(ReasonInvalidReason, "data.reason is %d bytes, longer than %d", len(reason), stock.MaxIDLen)
	}
	if !utf8.ValidString(reason) || strings.IndexFunc(reason, unicode.IsControl) >= 0 {
		return invalid(ReasonInvalidReason, "data.reason %.40q contains a control character or invalid UTF-8", reason)
	}
	return nil
}

// validateLot checks an inventory.lot_registered's lot as ledger.RegisterLot will, so a
// lot that can never be registered is refused here with its reason.
func validateLot(d *event.LotRegisteredData) error {
	if d.SKU == "" || d.LotID == "" || d.Kind == "" {
		return invalid(ReasonMissingField, "data.sku, data.lot_id and data.kind are required")
	}
	if err := checkSKUAndLot(d.SKU, d.LotID); err != nil {
		return err
	}
	if d.Kind != stock.KindOnHand && d.Kind != stock.KindPlanned {
		return invalid(ReasonInvalidKind, "data.kind %q is neither %q nor %q", d.Kind, stock.KindOnHand, stock.KindPlanned)
	}
	if d.Kind == stock.KindPlanned && d.BestBefore != "" {
		return invalid(ReasonInvalidDate, "data.best_before is set on a planned lot (it comes with inventory.received)")
	}
	for _, f := range []struct{ name, v string }{
		{"best_before", d.BestBefore}, {"arrives_at", d.ArrivesAt}, {"valid_from", d.ValidFrom}, {"valid_to", d.ValidTo},
	} {
		if f.v != "" && !validDate(f.v) {
			return invalid(ReasonInvalidDate, "data.%s %q is not a date (YYYY-MM-DD)", f.name, f.v)
		}
	}
	if d.ValidFrom != "" && d.ValidTo != "" && d.ValidFrom > d.ValidTo {
		return invalid(ReasonInvalidDate, "data.valid_from %s is after data.valid_to %s", d.ValidFrom, d.ValidTo)
	}
	if d.Sellable <= 0 || d.Sellable > stock.MaxQty {
		return invalid(ReasonInvalidQuantity, "data.sellable %d is not in 1..%d", d.Sellable, int64(stock.MaxQty))
	}
	if err := checkLocation(d.Location); err != nil {
		return err
	}
	return nil
}

// validateReturn checks an order.returned's lines: at least one, at most maxLines, each
// with a line id once and a positive quantity.
func validateReturn(d *event.ReturnedData, maxLines int) error {
	if len(d.Lines) == 0 {
		return invalid(ReasonMissingField, "data.lines is empty")
	}
	if len(d.Lines) > maxLines {
		return invalid(ReasonTooManyLines, "data.lines has %d lines, the limit is %d", len(d.Lines), maxLines)
	}
	seen := make(map[string]bool, len(d.Lines))
	for i, l := range d.Lines {
		if l.LineID == "" {
			return invalid(ReasonMissingField, "data.lines[%d]: line_id is required", i)
		}
		if err := checkID(fmt.Sprintf("data.lines[%d].line_id", i), l.LineID, event.MaxIDLength); err != nil {
			return err
		}
		if l.Qty <= 0 || l.Qty > stock.MaxQty {
			return invalid(ReasonInvalidQuantity, "data.lines[%d]: qty %d is not in 1..%d", i, l.Qty, int64(stock.MaxQty))
		}
		if seen[l.LineID] {
			return invalid(ReasonDuplicateLine, "data.lines[%d]: line_id %q appears twice", i, l.LineID)
		}
		seen[l.LineID] = true
	}
	return nil
}

func checkAllocationMoved(d *event.AllocationMovedData, _ Limits) error {
	if d.LineID == "" || d.ToLocation == "" {
		return invalid(ReasonMissingField, "data.line_id and data.to_location are required")
	}
	if err := checkID("data.line_id", d.LineID, event.MaxIDLength); err != nil {
		return err
	}
	if err := stock.CheckLocation(d.ToLocation); err != nil {
		return invalid(ReasonInvalidLocation, "data.to_location %q is not a location id (1..%d letters, digits, '.', '_' and '-')",
			d.ToLocation, stock.MaxLocationLen)
	}
	return nil
}

// The checks of the warehouse's events, beyond strict JSON (kinds.go names them).

func checkReceived(d *event.InventoryReceivedData, _ Limits) error {
	if d.SKU == "" || d.LotID == "" {
		return invalid(ReasonMissingField, "data.sku and data.lot_id are required")
	}
	if err := checkSKUAndLot(d.SKU, d.LotID); err != nil {
		return err
	}
	if !validDate(d.BestBefore) {
		return invalid(ReasonInvalidDate, "data.best_before %q is not a date (YYYY-MM-DD)", d.BestBefore)
	}
	if d.Qty < 0 {
		return invalid(ReasonInvalidQuantity, "data.qty %d is negative", d.Qty)
	}
	return checkLocation(d.Location)
}

func checkAdjusted(d *event.InventoryAdjustedData, _ Limits) error {
	if d.SKU == "" || d.LotID == "" || d.Reason == "" {
		return invalid(ReasonMissingField, "data.sku, data.lot_id and data.reason are required")
	}
	if err := checkSKUAndLot(d.SKU, d.LotID); err != nil {
		return err
	}
	if d.Delta == 0 {
		return invalid(ReasonInvalidQuantity, "data.delta is zero")
	}
	return cmp.Or(checkTransitOf(d.TransferID), checkLocation(d.Location))
}

// checkSafetyStock checks inventory.sku_registered's and inventory.safety_stock_changed's data.
func checkSafetyStock(sku string, ss int64) error {
	if sku == "" {
		return invalid(ReasonMissingField, "data.sku is required")
	}
	if err := checkID("data.sku", sku, stock.MaxIDLen); err != nil {
		return err
	}
	if ss < 0 || ss > stock.MaxQty {
		return invalid(ReasonInvalidQuantity, "data.safety_stock %d is not in 0..%d", ss, int64(stock.MaxQty))
	}
	return nil
}

// checkLotQty checks inventory.held's, inventory.released_hold's and inventory.damaged's data.
func checkLotQty(d *event.LotQtyData, _ Limits) error {
	if d.SKU == "" || d.LotID == "" || d.Reason == "" {
		return invalid(ReasonMissingField, "data.sku, data.lot_id and data.reason are required")
	}
	if err := cmp.Or(checkSKUAndLot(d.SKU, d.LotID), checkReason(d.Reason)); err != nil {
		return err
	}
	if d.Qty <= 0 || d.Qty > stock.MaxQty {
		return invalid(ReasonInvalidQuantity, "data.qty %d is not in 1..%d", d.Qty, int64(stock.MaxQty))
	}
	return cmp.Or(checkTransitOf(d.TransferID), checkLocation(d.Location))
}

func checkRecalled(d *event.LotRecalledData, _ Limits) error {
	if d.SKU == "" || d.LotID == "" || d.Reason == "" {
		return invalid(ReasonMissingField, "data.sku, data.lot_id and data.reason are required")
	}
	return cmp.Or(checkSKUAndLot(d.SKU, d.LotID), checkReason(d.Reason), checkTransitOf(d.TransferID), checkLocation(d.Location))
}

// checkTransferID checks a transfer event's sku and transfer_id.
func checkTransferID(sku, id string) error {
	if sku == "" || id == "" {
		return invalid(ReasonMissingField, "data.sku and data.transfer_id are required")
	}
	return cmp.Or(checkID("data.sku", sku, stock.MaxIDLen), checkID("data.transfer_id", id, stock.MaxIDLen))
}

func checkTransferRequested(d *event.TransferRequestedData, _ Limits) error {
	if err := checkTransferID(d.SKU, d.TransferID); err != nil {
		return err
	}
	for _, l := range []struct{ field, id string }{{"from_location", d.FromLocation}, {"to_location", d.ToLocation}} {
		if err := stock.CheckLocation(l.id); err != nil {
			return invalid(ReasonInvalidLocation, "data.%s %q is not a location id (1..%d letters, digits, '.', '_' and '-')",
				l.field, l.id, stock.MaxLocationLen)
		}
	}
	if d.FromLocation == d.ToLocation {
		return invalid(ReasonInvalidLocation, "data.from_location and data.to_location are both %q", d.FromLocation)
	}
	if d.Qty <= 0 || d.Qty > stock.MaxQty {
		return invalid(ReasonInvalidQuantity, "data.qty %d is not in 1..%d", d.Qty, int64(stock.MaxQty))
	}
	if !validDate(d.ArrivesAt) {
		return invalid(ReasonInvalidDate, "data.arrives_at %q is not a date (YYYY-MM-DD)", d.ArrivesAt)
	}
	return nil
}

func checkTransferReceived(d *event.TransferReceivedData, _ Limits) error {
	if err := checkTransferID(d.SKU, d.TransferID); err != nil {
		return err
	}
	if d.Qty <= 0 || d.Qty > stock.MaxQty {
		return invalid(ReasonInvalidQuantity, "data.qty %d is not in 1..%d", d.Qty, int64(stock.MaxQty))
	}
	return nil
}

func checkTransferCancelled(d *event.TransferCancelledData, _ Limits) error {
	return checkTransferID(d.SKU, d.TransferID)
}
