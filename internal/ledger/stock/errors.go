package stock

import (
	"context"
	"errors"
	"fmt"
)

// Errors of the ledger. Each has a reason code ("ERR_SHORTAGE", ...) that the scripts
// reply with and that results carry; Reason maps an error back to its code.
var (
	// ErrShortage: the candidate lots' sellable quantity is below the requested quantity.
	ErrShortage = errors.New("ERR_SHORTAGE: not enough sellable stock in the candidate lots")
	// ErrSafetyStock: the stock is there, but a ship-mode allocation would dip into safety stock.
	ErrSafetyStock = errors.New("ERR_SAFETY_STOCK: allocation would dip into safety stock")
	// ErrNotLoaded: the SKU is not in Redis yet (operations load it and retry once).
	ErrNotLoaded = errors.New("ERR_NOT_LOADED: SKU not loaded")
	// ErrUnknownSKU: PostgreSQL has no such SKU.
	ErrUnknownSKU = errors.New("ERR_UNKNOWN_SKU: no such SKU")
	// ErrUnknownLot: the SKU has no such lot.
	ErrUnknownLot = errors.New("ERR_UNKNOWN_LOT: no such lot")
	// ErrInvalidQuantity: a quantity is not a positive integer within MaxQty.
	ErrInvalidQuantity = errors.New("ERR_INVALID_QUANTITY: quantity must be a positive integer")
	// ErrInvalidRequest: a malformed request (empty id, bad date, unknown mode or bucket, ...).
	ErrInvalidRequest = errors.New("ERR_INVALID_REQUEST: invalid request")
	// ErrInsufficient: a lot lacks the quantity in the bucket the operation takes from.
	ErrInsufficient = errors.New("ERR_INSUFFICIENT: lot lacks the quantity in the source bucket")
	// ErrLotState: the lot is not in the state the operation needs (receiving a lot that
	// is not planned).
	ErrLotState = errors.New("ERR_LOT_STATE: lot is not in the required state")
	// ErrLocation: the operation names a location the lot is not stored at.
	ErrLocation = errors.New("ERR_LOCATION: the lot is not stored at the location named")
	// ErrStalePlan: a fewest_splits allocation's planned locations (Route.Plan) no longer
	// cover its quantity: the stock moved since the plan's read.
	ErrStalePlan = errors.New("ERR_STALE_PLAN: the planned locations no longer cover the quantity")
	// ErrSKUExists: RegisterSKU of a SKU that Redis or the Loader knows.
	ErrSKUExists = errors.New("ERR_SKU_EXISTS: the SKU exists")
	// ErrLotExists: RegisterLot of a lot id the SKU has.
	ErrLotExists = errors.New("ERR_LOT_EXISTS: the lot exists")
	// ErrTransferExists: a transfer request under a transfer id the SKU has taken.
	ErrTransferExists = errors.New("ERR_TRANSFER_EXISTS: the SKU has a transfer with this id")
	// ErrUnknownTransfer: a receipt or cancel of a transfer the SKU does not have.
	ErrUnknownTransfer = errors.New("ERR_UNKNOWN_TRANSFER: no such transfer")
	// ErrTransferState: a receipt or cancel of a transfer received or cancelled already,
	// or a receipt counting more than was sent.
	ErrTransferState = errors.New("ERR_TRANSFER_STATE: the transfer is not in transit as the operation needs")
	// ErrTransferPromised: a cancel of a transfer whose transit units the destination
	// has promised (reserved, allocated or shipped).
	ErrTransferPromised = errors.New("ERR_TRANSFER_PROMISED: the destination promised units in transit")
	// ErrTransferLots: a transfer would take from more than MaxTransferLots lots.
	ErrTransferLots = errors.New("ERR_TRANSFER_LOTS: the transfer would take from too many lots")
	// ErrQueued: a backorder of a line the SKU's queue holds already.
	ErrQueued = errors.New("ERR_QUEUED: the line waits in the queue already")
	// ErrOpConflict: the op id is remembered for another request (other arguments, or
	// another kind of operation); nothing moved and the record stays (docs/ledger.md,
	// "Idempotency").
	ErrOpConflict = errors.New("ERR_OP_CONFLICT: the op id is remembered for another request")
	// ErrOpFenced: the op id is remembered for the same request made at another step of
	// its entity (Fenced); nothing moved and the record stays (docs/ledger.md,
	// "Fences").
	ErrOpFenced = errors.New("ERR_OP_FENCED: the op id is remembered for another step of its entity")
)

// reasons maps reason codes to errors: the one place where script error replies become
// Go values.
var reasons = map[string]error{
	"ERR_SHORTAGE":          ErrShortage,
	"ERR_SAFETY_STOCK":      ErrSafetyStock,
	"ERR_NOT_LOADED":        ErrNotLoaded,
	"ERR_UNKNOWN_SKU":       ErrUnknownSKU,
	"ERR_UNKNOWN_LOT":       ErrUnknownLot,
	"ERR_INVALID_QUANTITY":  ErrInvalidQuantity,
	"ERR_INVALID_REQUEST":   ErrInvalidRequest,
	"ERR_INSUFFICIENT":      ErrInsufficient,
	"ERR_LOT_STATE":         ErrLotState,
	"ERR_LOCATION":          ErrLocation,
	"ERR_STALE_PLAN":        ErrStalePlan,
	"ERR_SKU_EXISTS":        ErrSKUExists,
	"ERR_LOT_EXISTS":        ErrLotExists,
	"ERR_TRANSFER_EXISTS":   ErrTransferExists,
	"ERR_UNKNOWN_TRANSFER":  ErrUnknownTransfer,
	"ERR_TRANSFER_STATE":    ErrTransferState,
	"ERR_TRANSFER_PROMISED": ErrTransferPromised,
	"ERR_TRANSFER_LOTS":     ErrTransferLots,
	"ERR_QUEUED":            ErrQueued,
	"ERR_OP_CONFLICT":       ErrOpConflict,
	"ERR_OP_FENCED":         ErrOpFenced,
}

// ErrorOfReason returns the error of a reason code ("ERR_SHORTAGE", ...), with ok false
// for a code that is not the ledger's.
func ErrorOfReason(code string) (err error, ok bool) {
	err, ok = reasons[code]
	return err, ok
}

// Reason returns the reason code of err ("ERR_SHORTAGE", ...), "ERR_INTERNAL" for an
// error that is not the ledger's (Redis down, ...), and "" for nil.
func Reason(err error) string {
	if err == nil {
		return ""
	}
	for code, e := range reasons {
		if errors.Is(err, e) {
			return code
		}
	}
	return "ERR_INTERNAL"
}

// Rejection returns the reason code of an error that rejects the operation for good (a
// shortage, an unknown SKU, a bad request, ...), with ok. An error that may pass on a
// retry is no rejection: Redis or the loader failing or timing out ("ERR_INTERNAL" in
// Reason), a SKU still not loaded after its load, a cancelled context. Rejecting on those
// would turn a valid order into a rejected one because Redis was slow for a moment.
func Rejection(err error) (reason string, ok bool) {
	reason = Reason(err)
	switch reason {
	case "", "ERR_INTERNAL", "ERR_NOT_LOADED":
		return "", false
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return "", false
	}
	return reason, true
}

// OpError builds the error of a failed operation: the sentinel with the op, SKU and detail.
func OpError(op, sku string, sentinel error, detail string) error {
	if detail == "" {
		return fmt.Errorf("ledger: %s sku=%s: %w", op, sku, sentinel)
	}
	return fmt.Errorf("ledger: %s sku=%s: %w (%s)", op, sku, sentinel, detail)
}

// opConflict is the model's ErrOpConflict, worded as ledger.lua's.
func opConflict(op, sku, opID string) error {
	return OpError(op, sku, ErrOpConflict, "op_id="+opID+" answered another request")
}
