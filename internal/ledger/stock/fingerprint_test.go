package stock

import (
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func TestReasonCodes(t *testing.T) {
	if Reason(nil) != "" || Reason(errors.New("x")) != "ERR_INTERNAL" {
		t.Fatal("Reason of nil or foreign error")
	}
	for code, e := range reasons {
		if got := Reason(fmt.Errorf("wrapped: %w", e)); got != code {
			t.Errorf("Reason(%v) = %q, want %q", e, got, code)
		}
	}
}

// The fingerprint's encoding is part of every op record: a change would make each
// remembered operation refuse its own replay after an upgrade. These values pin it (the
// first is the SHA-256 of "5:alloc3:TEA1:310:2026-12-014:ship4:LC-1", cut to 16 bytes).
func TestFingerprintIsStable(t *testing.T) {
	for _, c := range []struct {
		op   Op
		want string
	}{
		{AllocateRequest{OpID: "a", SKU: "TEA", Qty: 3, TargetDate: "2026-12-01", Mode: ModeShip, Holder: "LC-1"}, "f5df937bf80f609fdee4731eb4b46a61"},
		{ChangeRequest{OpID: "c", SKU: "TEA", TargetDate: "2026-12-01", Mode: ModeReserve, Release: lotQty("L1", 2), Allocate: []int64{1, 3}, Holder: "LC-1"}, "dfaeb1e7b9552086746467af953a2cbf"},
		{UndoRequest{OpID: "u", SKU: "TEA", From: Sellable, To: Reserved, Lots: lotQty("L1", 4), Back: lotQty("L2", 2), Holder: "LC-1"}, "9b879cd9aeb29bfb439f0c9674b80c84"},
		{RegisterLotRequest{OpID: "r", SKU: "TEA", Lot: NewLot{LotID: "L3", Kind: KindOnHand, Good: true, BestBefore: "2027-01-01", Sellable: 10}}, "333c8e56004e2c65175afef531b69a98"},
		{TransferRequest{OpID: "t", SKU: "TEA", TransferID: "TR-1", From: DefaultLocation, To: "store-1", Qty: 12, ArrivesAt: "2026-12-05"}, "a9c4150d9255c33d85eb2be29ab5b71c"},
		{TransferReceiveRequest{OpID: "v", SKU: "TEA", TransferID: "TR-1", Qty: 11}, "8b1d329cd922cdc39c97001320330b2f"},
		{TransferCancelRequest{OpID: "c", SKU: "TEA", TransferID: "TR-1"}, "ad3db38229a4f738dee14b5a5beeb7e3"},
		// SHA-256 of "10:move_alloc3:TEA10:2026-12-014:ship1:12:L11:27:store-14:LC-1".
		{MoveAllocationRequest{OpID: "m", SKU: "TEA", TargetDate: "2026-12-01", Mode: ModeShip, Release: lotQty("L1", 2), To: "store-1", Holder: "LC-1"}, "b94480f08cb479a19cb3c418d0e66b12"},
	} {
		if got := hex.EncodeToString([]byte(c.op.Fingerprint())); got != c.want {
			t.Errorf("%T: fingerprint %s, want %s", c.op, got, c.want)
		}
	}
}

// Requests that differ only in their kind, or in the defaults a lot registration fills
// in, are told apart, or not, as the script would see them.
func TestFingerprintNamesTheKind(t *testing.T) {
	lots := LotsRequest{OpID: "x", SKU: "A", Lots: lotQty("L", 1)}
	hold := HoldRequest{OpID: "x", SKU: "A", LotID: "L", Qty: 1}
	fps := map[string]string{}
	for _, op := range []Op{ConfirmRequest(lots), ShipRequest(lots), hold, ReleaseHoldRequest(hold), DamageRequest(hold),
		ReleaseRequest{OpID: "x", SKU: "A", From: Reserved, Lots: lotQty("L", 1)},
		RegisterSKURequest{OpID: "x", SKU: "A"}, SafetyStockRequest{OpID: "x", SKU: "A"},
		TransferReceiveRequest{OpID: "x", SKU: "A", TransferID: "L", Qty: 1}, TransferCancelRequest{OpID: "x", SKU: "A", TransferID: "L"}} {
		fp := op.Fingerprint()
		if len(fp) != FingerprintBytes {
			t.Fatalf("%T: fingerprint %q", op, fp)
		}
		if prev, ok := fps[fp]; ok {
			t.Errorf("%T and %s share a fingerprint", op, prev)
		}
		fps[fp] = reflect.TypeOf(op).Name()
	}
	a := RegisterLotRequest{SKU: "A", Lot: NewLot{LotID: "L", Kind: KindOnHand, Good: true, Sellable: 1}}
	b := a
	b.Lot.ValidFrom, b.Lot.ValidTo = MinDate, MaxDate
	if a.Fingerprint() != b.Fingerprint() {
		t.Error("a lot with the default period and one without differ")
	}
	b.OpID, b.Lot.Sellable = "other", 2
	if a.Fingerprint() == b.Fingerprint() {
		t.Error("lots of other quantities share a fingerprint")
	}
}

// FuzzFingerprintTellsRequestsApart: the encoding under the hash is injective (two
// lists of strings encode alike only when they are equal, however a sender splits the
// bytes among fields: lot ids, holders and reasons come from events), so requests share a
// fingerprint only when every argument is equal.
func FuzzFingerprintTellsRequestsApart(f *testing.F) {
	f.Add("L1\x00L2", "L1L2", "o1", int64(3), int64(1))
	f.Add("a:1", "a\x001", "", int64(0), int64(-1))
	f.Add("1:a", "1:a", "1:", int64(10), int64(1))
	f.Add("", "\x00", "x", int64(1), int64(1))
	f.Fuzz(func(t *testing.T, a, b, holder string, q1, q2 int64) {
		la, lb := strings.Split(a, "\x00"), strings.Split(b, "\x00")
		enc := func(xs []string) string {
			fp := &fingerprint{}
			for _, x := range xs {
				fp.str(x)
			}
			return string(fp.b)
		}
		if eq := reflect.DeepEqual(la, lb); eq != (enc(la) == enc(lb)) {
			t.Fatalf("%q and %q: equal %v, encodings %q %q", la, lb, eq, enc(la), enc(lb))
		}
		lotsOf := func(ids []string, q int64) []LotQty {
			out := []LotQty{}
			for _, id := range ids {
				out = append(out, LotQty{LotID: id, Qty: q})
			}
			return out
		}
		reqs := []ChangeRequest{
			{SKU: "S", Release: lotsOf(la, q1), Allocate: []int64{q2}, Holder: holder},
			{SKU: "S", Release: lotsOf(lb, q1), Allocate: []int64{q2}, Holder: holder},
			{SKU: "S", Release: lotsOf(la, q2), Allocate: []int64{q1}, Holder: holder},
			{SKU: "S", Release: lotsOf(la, q1), Holder: holder + a},
			{SKU: a, TargetDate: b, Holder: holder},
			{SKU: a + b, Holder: holder},
		}
		for i := range reqs {
			for j := range reqs {
				same := reflect.DeepEqual(reqs[i], reqs[j])
				if same != (reqs[i].Fingerprint() == reqs[j].Fingerprint()) {
					t.Fatalf("%+v and %+v: equal %v, fingerprints %x %x", reqs[i], reqs[j], same, reqs[i].Fingerprint(), reqs[j].Fingerprint())
				}
			}
		}
		u := UndoRequest{SKU: "S", From: a, To: b, Holder: holder}
		v := UndoRequest{SKU: "S", From: a + b, Holder: holder}
		if (b == "") != (u.Fingerprint() == v.Fingerprint()) {
			t.Fatalf("%+v and %+v: fingerprints %x %x", u, v, u.Fingerprint(), v.Fingerprint())
		}
		tr := TransferRequest{SKU: "S", TransferID: a, From: b, To: holder, Qty: q1}
		ts := TransferRequest{SKU: "S", TransferID: a + b, To: holder, Qty: q1}
		if (b == "") != (tr.Fingerprint() == ts.Fingerprint()) {
			t.Fatalf("%+v and %+v: fingerprints %x %x", tr, ts, tr.Fingerprint(), ts.Fingerprint())
		}
	})
}

func lotQty(id string, q int64) []LotQty { return []LotQty{{LotID: id, Qty: q}} }

// A safety stock set at a location is another request than the network-wide one of the
// same value, and than the one at another location; without a location the fingerprint
// is the one it was before locations (its records still answer their replay).
func TestSafetyStockFingerprintNamesTheLocation(t *testing.T) {
	net := SafetyStockRequest{OpID: "s", SKU: "TEA", SafetyStock: 2}
	store, wh := net, net
	store.Location, wh.Location = "store-1", "wh-2"
	if net.Fingerprint() == store.Fingerprint() || store.Fingerprint() == wh.Fingerprint() {
		t.Error("safety stocks at other locations share a fingerprint")
	}
	// SHA-256 of "2:ss3:TEA1:2", cut to 16 bytes.
	if got := hex.EncodeToString([]byte(net.Fingerprint())); got != "4877d9ac29240799f4a32044df40fec3" {
		t.Errorf("network-wide fingerprint %s, want the one before locations", got)
	}
}
