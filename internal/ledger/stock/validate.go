package stock

import (
	"fmt"
	"strings"
	"time"
)

// MaxQty bounds every quantity in a request. The scripts compute in Lua numbers
// (doubles), exact up to 2^53; this bound keeps sums over many lots far below that.
const MaxQty = 1_000_000_000_000

// MaxIDLen bounds SKU, lot and op ids (bytes).
const MaxIDLen = 200

const dateLayout = "2006-01-02"

// Dates that stand for "no bound" in a lot's validity period.
const (
	MinDate = "0001-01-01"
	MaxDate = "9999-12-31"
)

func Invalidf(format string, a ...any) error {
	return fmt.Errorf("ledger: %w: %s", ErrInvalidRequest, fmt.Sprintf(format, a...))
}

func checkID(field, v string) error {
	if v == "" {
		return Invalidf("%s is empty", field)
	}
	if len(v) > MaxIDLen {
		return Invalidf("%s is longer than %d bytes", field, MaxIDLen)
	}
	for i := 0; i < len(v); i++ {
		// Control characters would break the scripts' text records; braces in a SKU
		// would break its hash tag.
		if c := v[i]; c < 0x20 || c == 0x7f || (field == "sku" && (c == '{' || c == '}')) {
			return Invalidf("%s %q contains a forbidden character", field, v)
		}
	}
	return nil
}

// checkOpIDs checks an operation's op id and its legacy op id ("" for none).
func checkOpIDs(opID, legacy string) error {
	if err := checkID("op_id", opID); err != nil {
		return err
	}
	if legacy == "" {
		return nil
	}
	return checkID("legacy_op_id", legacy)
}

// CheckSKU reports whether sku is a valid SKU id.
func CheckSKU(sku string) error { return checkID("sku", sku) }

// CheckLotID reports whether id is a valid lot id.
func CheckLotID(id string) error { return checkID("lot_id", id) }

func CheckQty(field string, q int64) error {
	if q <= 0 || q > MaxQty {
		return fmt.Errorf("ledger: %w: %s=%d (want 1..%d)", ErrInvalidQuantity, field, q, MaxQty)
	}
	return nil
}

// CheckDate reports whether s is a valid date in YYYY-MM-DD form.
func CheckDate(field, s string) error {
	t, err := time.Parse(dateLayout, s)
	if err != nil || t.Format(dateLayout) != s {
		return Invalidf("%s %q is not a date (YYYY-MM-DD)", field, s)
	}
	return nil
}

func checkHead(opID, sku string) error { return checkHeadAs(opID, "", sku) }

// checkHeadAs is checkHead for the requests that carry a legacy op id.
func checkHeadAs(opID, legacy, sku string) error {
	if err := checkOpIDs(opID, legacy); err != nil {
		return err
	}
	return CheckSKU(sku)
}

func (r AllocateRequest) Validate() error {
	if err := checkHeadAs(r.OpID, r.LegacyOpID, r.SKU); err != nil {
		return err
	}
	if err := CheckQty("qty", r.Qty); err != nil {
		return err
	}
	if err := CheckDate("target_date", r.TargetDate); err != nil {
		return err
	}
	if r.Mode != ModeShip && r.Mode != ModeReserve {
		return Invalidf("mode %q is neither %q nor %q", r.Mode, ModeShip, ModeReserve)
	}
	return r.Route.Validate()
}

func checkLots(lots []LotQty) error {
	if len(lots) == 0 {
		return Invalidf("no lots")
	}
	if len(lots) > 1000 {
		return Invalidf("more than 1000 lots")
	}
	for _, l := range lots {
		if err := CheckLotID(l.LotID); err != nil {
			return err
		}
		if err := CheckQty("qty of lot "+l.LotID, l.Qty); err != nil {
			return err
		}
	}
	return nil
}

func (r ReleaseRequest) Validate() error {
	if err := checkHeadAs(r.OpID, r.LegacyOpID, r.SKU); err != nil {
		return err
	}
	if r.From != Reserved && r.From != Allocated {
		return Invalidf("from %q is neither %q nor %q", r.From, Reserved, Allocated)
	}
	return checkLots(r.Lots)
}

// undoable are the operations an order's event makes, as from -> to: the ones Undo reverses.
var undoable = map[[2]string]bool{
	{Sellable, Reserved}: true, {Sellable, Allocated}: true, // allocations
	{Reserved, Sellable}: true, {Allocated, Sellable}: true, // releases
	{Reserved, Allocated}: true,                             // confirms
	{Allocated, Shipped}:  true,                             // shipments
	{Shipped, Sellable}:   true, {Shipped, Defective}: true, // returns
}

func (r UndoRequest) Validate() error {
	if err := checkHeadAs(r.OpID, r.LegacyOpID, r.SKU); err != nil {
		return err
	}
	if !undoable[[2]string{r.From, r.To}] {
		return Invalidf("%s -> %s is no operation an order makes", r.From, r.To)
	}
	if len(r.Back) > 0 {
		if !undoable[[2]string{r.To, r.From}] {
			return Invalidf("back: %s -> %s is no operation an order makes", r.To, r.From)
		}
		if err := checkLots(r.Back); err != nil {
			return err
		}
	}
	return checkLots(r.Lots)
}

// MaxChangeAllocations bounds the allocations of one ChangeRequest, as checkLots bounds
// its releases.
const MaxChangeAllocations = 1000

func (r ChangeRequest) Validate() error {
	if err := checkHeadAs(r.OpID, r.LegacyOpID, r.SKU); err != nil {
		return err
	}
	if err := CheckDate("target_date", r.TargetDate); err != nil {
		return err
	}
	if r.Mode != ModeShip && r.Mode != ModeReserve {
		return Invalidf("mode %q is neither %q nor %q", r.Mode, ModeShip, ModeReserve)
	}
	if len(r.Release) == 0 && len(r.Allocate) == 0 {
		return Invalidf("a change that releases and allocates nothing")
	}
	if len(r.Allocate) > MaxChangeAllocations {
		return Invalidf("more than %d allocations", MaxChangeAllocations)
	}
	if len(r.Release) > 0 {
		if err := checkLots(r.Release); err != nil {
			return err
		}
	}
	for _, q := range r.Allocate {
		if err := CheckQty("qty", q); err != nil {
			return err
		}
	}
	return r.Route.Validate()
}

func (r MoveAllocationRequest) Validate() error {
	if err := checkHeadAs(r.OpID, "", r.SKU); err != nil {
		return err
	}
	if err := CheckDate("target_date", r.TargetDate); err != nil {
		return err
	}
	if r.Mode != ModeShip && r.Mode != ModeReserve {
		return Invalidf("mode %q is neither %q nor %q", r.Mode, ModeShip, ModeReserve)
	}
	if len(r.Release) == 0 {
		return Invalidf("a move that releases nothing")
	}
	if err := checkLots(r.Release); err != nil {
		return err
	}
	var sum int64
	for _, q := range r.Release {
		sum += q.Qty
	}
	if err := CheckQty("qty", sum); err != nil {
		return err
	}
	return CheckLocation(r.To)
}

func (r LotsRequest) Validate() error {
	if err := checkHeadAs(r.OpID, r.LegacyOpID, r.SKU); err != nil {
		return err
	}
	return checkLots(r.Lots)
}

func (r ReceiveRequest) Validate() error {
	if err := checkHead(r.OpID, r.SKU); err != nil {
		return err
	}
	if err := CheckLotID(r.LotID); err != nil {
		return err
	}
	if r.BestBefore != "" {
		if err := CheckDate("best_before", r.BestBefore); err != nil {
			return err
		}
	}
	if r.Qty != 0 {
		if err := CheckQty("qty", r.Qty); err != nil {
			return err
		}
	}
	return checkOptLocation(r.Location)
}

func (r AdjustRequest) Validate() error {
	if err := checkHead(r.OpID, r.SKU); err != nil {
		return err
	}
	if err := CheckLotID(r.LotID); err != nil {
		return err
	}
	d := r.Delta
	if d < 0 {
		d = -d
	}
	if err := CheckQty("delta", d); err != nil {
		return err
	}
	if r.Reason == "" {
		return Invalidf("adjustment without a reason")
	}
	if err := checkID("reason", r.Reason); err != nil {
		return err
	}
	return checkOptLocation(r.Location)
}

// MaxLocationLen bounds a location id.
const MaxLocationLen = 64

// CheckLocation reports whether id is a valid location id: 1..MaxLocationLen bytes of
// ASCII letters, digits, '.', '_' and '-' (so it is safe in a script's arguments, a key, a
// metric label and a URL path, and no sender can make one of junban's "~" names).
func CheckLocation(id string) error {
	if id == "" {
		return Invalidf("location is empty")
	}
	if len(id) > MaxLocationLen {
		return Invalidf("location is longer than %d bytes", MaxLocationLen)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return Invalidf("location %q: only letters, digits, '.', '_' and '-'", id)
		}
	}
	return nil
}

// checkOptLocation checks a location a request may name (empty: none).
func checkOptLocation(id string) error {
	if id == "" {
		return nil
	}
	return CheckLocation(id)
}

func checkReason(reason string) error {
	if reason == "" {
		return Invalidf("no reason")
	}
	return checkID("reason", reason)
}

func (r HoldRequest) Validate() error {
	if err := checkHead(r.OpID, r.SKU); err != nil {
		return err
	}
	if err := CheckLotID(r.LotID); err != nil {
		return err
	}
	if err := CheckQty("qty", r.Qty); err != nil {
		return err
	}
	if err := checkReason(r.Reason); err != nil {
		return err
	}
	return checkOptLocation(r.Location)
}

func (r RecallRequest) Validate() error {
	if err := checkHead(r.OpID, r.SKU); err != nil {
		return err
	}
	if err := CheckLotID(r.LotID); err != nil {
		return err
	}
	if err := checkReason(r.Reason); err != nil {
		return err
	}
	return checkOptLocation(r.Location)
}

func (r ReturnRequest) Validate() error {
	if err := checkHeadAs(r.OpID, r.LegacyOpID, r.SKU); err != nil {
		return err
	}
	return checkLots(r.Lots)
}

func checkSafetyStock(ss int64) error {
	if ss < 0 || ss > MaxQty {
		return fmt.Errorf("ledger: %w: safety_stock=%d (want 0..%d)", ErrInvalidQuantity, ss, MaxQty)
	}
	return nil
}

func (r RegisterSKURequest) Validate() error {
	if err := checkHead(r.OpID, r.SKU); err != nil {
		return err
	}
	return checkSafetyStock(r.SafetyStock)
}

func (r SafetyStockRequest) Validate() error {
	if err := checkHead(r.OpID, r.SKU); err != nil {
		return err
	}
	if err := checkSafetyStock(r.SafetyStock); err != nil {
		return err
	}
	return checkOptLocation(r.Location)
}

// WithDefaults fills an empty validity period with MinDate and MaxDate, and writes the
// default location as empty.
func (n NewLot) WithDefaults() NewLot {
	if n.Location == DefaultLocation {
		n.Location = ""
	}
	if n.ValidFrom == "" {
		n.ValidFrom = MinDate
	}
	if n.ValidTo == "" {
		n.ValidTo = MaxDate
	}
	return n
}

func (r RegisterLotRequest) Validate() error {
	if err := checkHead(r.OpID, r.SKU); err != nil {
		return err
	}
	n := r.Lot.WithDefaults()
	if err := CheckLotID(n.LotID); err != nil {
		return err
	}
	switch n.Kind {
	case KindOnHand:
	case KindPlanned:
		if n.BestBefore != "" {
			return Invalidf("a planned lot has no best_before until it is received")
		}
	default:
		return Invalidf("kind %q is neither %q nor %q", n.Kind, KindOnHand, KindPlanned)
	}
	for _, d := range []struct{ f, v string }{{"best_before", n.BestBefore}, {"arrives_at", n.ArrivesAt}} {
		if d.v != "" {
			if err := CheckDate(d.f, d.v); err != nil {
				return err
			}
		}
	}
	if err := CheckDate("valid_from", n.ValidFrom); err != nil {
		return err
	}
	if err := CheckDate("valid_to", n.ValidTo); err != nil {
		return err
	}
	if n.ValidFrom > n.ValidTo {
		return Invalidf("valid_from %s is after valid_to %s", n.ValidFrom, n.ValidTo)
	}
	if err := checkOptLocation(n.Location); err != nil {
		return err
	}
	return CheckQty("sellable", n.Sellable)
}

// CheckTransferID reports whether id may name a transfer: an id without junban's "~"
// (TransitLotID joins it to a lot id with one).
func CheckTransferID(id string) error {
	if err := checkID("transfer_id", id); err != nil {
		return err
	}
	if strings.Contains(id, "~") {
		return Invalidf("transfer_id %q contains \"~\", junban's own mark", id)
	}
	return nil
}

func (r TransferRequest) Validate() error {
	if err := checkHead(r.OpID, r.SKU); err != nil {
		return err
	}
	if err := CheckTransferID(r.TransferID); err != nil {
		return err
	}
	if err := CheckLocation(r.From); err != nil {
		return Invalidf("from: %v", err)
	}
	if err := CheckLocation(r.To); err != nil {
		return Invalidf("to: %v", err)
	}
	if r.From == r.To {
		return Invalidf("transfer from %s to itself", r.From)
	}
	if err := CheckQty("qty", r.Qty); err != nil {
		return err
	}
	return CheckDate("arrives_at", r.ArrivesAt)
}

func (r TransferReceiveRequest) Validate() error {
	if err := checkHead(r.OpID, r.SKU); err != nil {
		return err
	}
	if err := CheckTransferID(r.TransferID); err != nil {
		return err
	}
	return CheckQty("qty", r.Qty)
}

func (r TransferCancelRequest) Validate() error {
	if err := checkHead(r.OpID, r.SKU); err != nil {
		return err
	}
	return CheckTransferID(r.TransferID)
}
