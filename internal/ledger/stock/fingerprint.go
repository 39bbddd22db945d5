package stock

import (
	"crypto/sha256"
	"strconv"
)

// FingerprintBytes is how much of an operation's SHA-256 its fingerprint keeps: 128 bits,
// so that no sender can find a second request with a remembered request's fingerprint.
// ledger.lua stores the bytes as they are in the op record (hex would make a record of
// one lot 280 bytes instead of 248 by MEMORY USAGE).
const FingerprintBytes = 16

// fingerprint builds an operation's fingerprint: the SHA-256 of its kind, its SKU and
// every argument that decides its effect or its answer, each written as its length, ':'
// and its bytes, so that no two lists of arguments write alike. It is computed in Go, not
// in the script, because the script's arguments are not the request: some are derived
// (a lot's key from a registration number that is a guess, a registration's create flag),
// and Redis's one thread should not spend the hash. The encoding is part of the records:
// changing it makes every remembered operation refuse its own replay (the replay of a
// step after an upgrade), so TestFingerprintIsStable pins it.
type fingerprint struct{ b []byte }

func newFingerprint(kind, sku string) *fingerprint {
	f := &fingerprint{b: make([]byte, 0, 128)}
	return f.str(kind).str(sku)
}

func (f *fingerprint) str(s string) *fingerprint {
	f.b = strconv.AppendInt(f.b, int64(len(s)), 10)
	f.b = append(f.b, ':')
	f.b = append(f.b, s...)
	return f
}

func (f *fingerprint) num(n int64) *fingerprint { return f.str(strconv.FormatInt(n, 10)) }

func (f *fingerprint) flag(b bool) *fingerprint { return f.str(boolCode(b)) }

// lots writes the count, then each lot and quantity: an empty list and an absent one
// write alike (the script sees neither).
func (f *fingerprint) lots(qs []LotQty) *fingerprint {
	f.num(int64(len(qs)))
	for _, q := range qs {
		f.str(q.LotID).num(q.Qty)
	}
	return f
}

// loc writes a location a request names, when it names one: a request without one
// writes what it wrote before locations, so its records still answer its replay.
func (f *fingerprint) loc(l string) *fingerprint {
	if l == "" {
		return f
	}
	return f.str("@").str(l)
}

func (f *fingerprint) nums(ns []int64) *fingerprint {
	f.num(int64(len(ns)))
	for _, n := range ns {
		f.num(n)
	}
	return f
}

// sum returns the fingerprint as ledger.lua stores it: FingerprintBytes raw bytes.
func (f *fingerprint) sum() string {
	h := sha256.Sum256(f.b)
	return string(h[:FingerprintBytes])
}

// The fingerprint of each operation: its kind and its arguments. The op id and the legacy
// op id are not part of it: they name the record, they do not decide the effect.

func (r AllocateRequest) Fingerprint() string {
	return newFingerprint("alloc", r.SKU).num(r.Qty).str(r.TargetDate).str(string(r.Mode)).str(r.Holder).route(r.Route).sum()
}

func (r ReleaseRequest) Fingerprint() string {
	return newFingerprint("release", r.SKU).str(r.From).lots(r.Lots).str(r.Holder).sum()
}

func (r ConfirmRequest) Fingerprint() string {
	return newFingerprint("confirm", r.SKU).lots(r.Lots).str(r.Holder).sum()
}

func (r ShipRequest) Fingerprint() string {
	return newFingerprint("ship", r.SKU).lots(r.Lots).str(r.Holder).sum()
}

func (r UndoRequest) Fingerprint() string {
	return newFingerprint("undo", r.SKU).str(r.From).str(r.To).lots(r.Lots).lots(r.Back).str(r.Holder).sum()
}

func (r ChangeRequest) Fingerprint() string {
	return newFingerprint("change", r.SKU).str(r.TargetDate).str(string(r.Mode)).lots(r.Release).nums(r.Allocate).str(r.Holder).route(r.Route).sum()
}

func (r MoveAllocationRequest) Fingerprint() string {
	return newFingerprint("move_alloc", r.SKU).str(r.TargetDate).str(string(r.Mode)).lots(r.Release).str(r.To).str(r.Holder).sum()
}

func (r ReceiveRequest) Fingerprint() string {
	return newFingerprint("receive", r.SKU).str(r.LotID).str(r.BestBefore).num(r.Qty).loc(r.Location).sum()
}

func (r AdjustRequest) Fingerprint() string {
	return newFingerprint("adjust", r.SKU).str(r.LotID).num(r.Delta).str(r.Reason).loc(r.Location).sum()
}

func (r HoldRequest) Fingerprint() string {
	return newFingerprint("hold", r.SKU).str(r.LotID).num(r.Qty).str(r.Reason).loc(r.Location).sum()
}

func (r ReleaseHoldRequest) Fingerprint() string {
	return newFingerprint("release_hold", r.SKU).str(r.LotID).num(r.Qty).str(r.Reason).loc(r.Location).sum()
}

func (r DamageRequest) Fingerprint() string {
	return newFingerprint("damage", r.SKU).str(r.LotID).num(r.Qty).str(r.Reason).loc(r.Location).sum()
}

func (r RecallRequest) Fingerprint() string {
	return newFingerprint("recall", r.SKU).str(r.LotID).str(r.Reason).loc(r.Location).sum()
}

func (r ReturnRequest) Fingerprint() string {
	return newFingerprint("return", r.SKU).lots(r.Lots).flag(r.Defective).sum()
}

func (r RegisterSKURequest) Fingerprint() string {
	return newFingerprint("regsku", r.SKU).num(r.SafetyStock).sum()
}

// The lot with its defaults, as the script receives it: a lot registered with an empty
// period and one with the default period are the same request.
func (r RegisterLotRequest) Fingerprint() string {
	n := r.Lot.WithDefaults()
	return newFingerprint("reglot", r.SKU).str(n.LotID).str(n.Kind).flag(n.Good).str(n.BestBefore).
		str(n.ArrivesAt).str(n.ValidFrom).str(n.ValidTo).num(n.Sellable).loc(n.Location).sum()
}

func (r SafetyStockRequest) Fingerprint() string {
	return newFingerprint("ss", r.SKU).num(r.SafetyStock).loc(r.Location).sum()
}

func boolCode(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

func (r TransferRequest) Fingerprint() string {
	return newFingerprint("transfer", r.SKU).str(r.TransferID).str(r.From).str(r.To).num(r.Qty).str(r.ArrivesAt).sum()
}

func (r TransferReceiveRequest) Fingerprint() string {
	return newFingerprint("transfer_receive", r.SKU).str(r.TransferID).num(r.Qty).sum()
}

func (r TransferCancelRequest) Fingerprint() string {
	return newFingerprint("transfer_cancel", r.SKU).str(r.TransferID).sum()
}
