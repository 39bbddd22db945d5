package ledger

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/testenv"
)

// The key is the allocation order, and the layout's name follows what it writes.
func TestAllocKeyAndLayout(t *testing.T) {
	for _, tc := range []struct {
		lot  stock.Lot
		want string
	}{
		{stock.Lot{Kind: stock.KindOnHand, BestBefore: "2027-01-31", RegSeq: 7}, "o2027-01-31000000000000007"},
		{stock.Lot{Kind: stock.KindOnHand, RegSeq: 7}, "o9999-99-99000000000000007"},
		{stock.Lot{Kind: stock.KindPlanned, RegSeq: 7}, "p0000-00-00999999999999992"},
	} {
		if got := stock.AllocKey(tc.lot); got != tc.want || len(got) != stock.KeyLen {
			t.Errorf("AllocKey(%+v) = %q, want %q (%d bytes)", tc.lot, got, tc.want, stock.KeyLen)
		}
	}
	if layoutOf(indexRecord) != keyLayout {
		t.Fatal("keyLayout is not the layout of indexRecord")
	}
	other := func(l stock.Lot) string { return fifoKey(l) + l.ValidFrom + l.ValidTo + "s:" + l.LotID + "\n" }
	if layoutOf(other) == keyLayout {
		t.Fatal("another key gives the same layout name")
	}
	// The availability answer reads a candidate back from its record.
	for _, l := range layoutProbe {
		c, ok := decodeRecordHead(indexRecord(l)[:stock.KeyLen+20])
		want := Candidate{Kind: l.Kind, BestBefore: l.BestBefore, RegSeq: l.RegSeq, ValidFrom: l.ValidFrom, ValidTo: l.ValidTo}
		if !ok || c != want {
			t.Errorf("record of %+v reads back as %+v (%v)", l, c, ok)
		}
	}
}

// fifoKey is a key in another layout than AllocKey's, as long: on-hand lots by
// registration order alone (first in, first out), then planned lots likewise.
func fifoKey(l stock.Lot) string {
	kind := "o"
	if l.Kind == stock.KindPlanned {
		kind = "p"
	}
	return fmt.Sprintf("%s%015d%10s", kind, l.RegSeq, "")
}

// writeIndexAs rewrites a loaded SKU's index and stored keys by hand, as a version whose
// key was keyFn would have written them, stamped with stamp ("": no stamp).
func writeIndexAs(t *testing.T, rc redis.UniversalClient, key string, keyFn func(stock.Lot) string, stamp string) {
	t.Helper()
	h, err := rc.HGetAll(ctx, key).Result()
	if err != nil {
		t.Fatal(err)
	}
	s, err := decodeHash("x", h)
	if err != nil {
		t.Fatal(err)
	}
	var records []string
	fields := []any{}
	for _, l := range s.Lots {
		if l.Good && l.Sellable > 0 {
			records = append(records, keyFn(l)+l.ValidFrom+l.ValidTo+"s:"+l.LotID+"\n")
		}
		fields = append(fields, "k:"+l.LotID, keyFn(l)+h["m:"+l.LotID])
	}
	slices.Sort(records)
	var index string
	for _, r := range records {
		index += r
	}
	on, _ := strconv.Atoi(h[fieldChunks])
	for i := 1; i < on; i++ {
		rc.HDel(ctx, key, "o:"+strconv.Itoa(i))
	}
	fields = append(fields, "o:0", index, fieldChunks, "1")
	if stamp == "" {
		rc.HDel(ctx, key, fieldLayout)
	} else {
		fields = append(fields, fieldLayout, stamp)
	}
	if err := rc.HSet(ctx, key, fields...).Err(); err != nil {
		t.Fatal(err)
	}
}

// checkSKUIndex reads a SKU and checks its index and stored keys (checkIndex).
func checkSKUIndex(t *testing.T, rc redis.UniversalClient, key string) {
	t.Helper()
	h, err := rc.HGetAll(ctx, key).Result()
	if err != nil {
		t.Fatal(err)
	}
	s, err := decodeHash("x", h)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkIndex(h, s.Lots); err != nil {
		t.Fatal(err)
	}
}

// layoutSKU has lots whose allocation order (early, late, nobb, planned) is not their
// registration order (nobb, late, early, planned).
func layoutSKU(name string) stock.SKU {
	return stock.SKU{SKU: name, Lots: []stock.Lot{
		lot("nobb", stock.KindOnHand, 0, "", 2),
		lot("late", stock.KindOnHand, 1, "2027-03-01", 2),
		lot("early", stock.KindOnHand, 2, "2027-01-01", 2),
		lot("planned", stock.KindPlanned, 3, "", 2),
	}}
}

// A SKU stamped with another key layout is never walked: the script refuses it, and the
// operation that meets it (an allocation, an availability read) re-indexes it first.
func TestIndexOfAnotherLayoutIsRebuiltBeforeUse(t *testing.T) {
	rc, prefix := testenv.Redis(t)
	skus := []stock.SKU{layoutSKU("A"), layoutSKU("B")}
	l, err := New(Config{Redis: rc, Prefix: prefix, Loader: newMemLoader(skus...)})
	if err != nil {
		t.Fatal(err)
	}
	m := stock.NewModel(newMemLoader(skus...))
	for _, s := range skus {
		if err := l.Load(ctx, s.SKU); err != nil {
			t.Fatal(err)
		}
		writeIndexAs(t, rc, Key(prefix, s.SKU), fifoKey, "fifo-layout")
	}

	err = ledgerScript.Run(ctx, rc, []string{Key(prefix, "A"), opKey(prefix, "A", "raw")}, "alloc", "60", alloc("raw", "A", 1, "2026-12-01", stock.ModeReserve).Fingerprint(), 1, "2026-12-01", "reserve", "").Err()
	if !isReindexReply(err) {
		t.Fatalf("the script walked an index of another layout: %v", err)
	}
	if n, _ := rc.Exists(ctx, opKey(prefix, "A", "raw")).Result(); n != 0 {
		t.Fatal("the refusal was remembered")
	}

	op := alloc("o1", "A", 3, "2026-12-01", stock.ModeReserve)
	rr, rerr := l.Apply(ctx, op)
	mr, merr := m.Apply(ctx, op)
	wantMoves(t, rr, rerr, mv{"early", stock.Sellable, stock.Reserved, 2}, mv{"late", stock.Sellable, stock.Reserved, 1})
	if merr != nil || !reflect.DeepEqual(rr, mr) {
		t.Fatalf("redis %+v, model %+v %v", rr, mr, merr)
	}
	checkSKUIndex(t, rc, Key(prefix, "A"))

	a, err := l.Availability(ctx, AvailabilityRequest{SKU: "B", TargetDate: "2026-12-01", Mode: stock.ModeReserve})
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, c := range a.Candidates {
		order = append(order, c.LotID)
	}
	if want := []string{"early", "late", "nobb", "planned"}; !slices.Equal(order, want) {
		t.Fatalf("availability lists %v, want %v", order, want)
	}
	checkSKUIndex(t, rc, Key(prefix, "B"))
}

// An index whose records are not in the current layout allocates in their order; Reindex
// finds it (dry run: writing nothing), rewrites it, and from then on the script and the
// model agree again. A second run changes nothing.
func TestReindexRestoresTheAllocationOrder(t *testing.T) {
	rc, prefix := testenv.Redis(t)
	s := layoutSKU("A")
	l, err := New(Config{Redis: rc, Prefix: prefix, Loader: newMemLoader(s)})
	if err != nil {
		t.Fatal(err)
	}
	key := Key(prefix, "A")
	if err := l.Load(ctx, "A"); err != nil {
		t.Fatal(err)
	}
	// Stamped as the current layout, so that nothing but Reindex looks at the records.
	writeIndexAs(t, rc, key, fifoKey, keyLayout)

	m := stock.NewModel(newMemLoader(s))
	op := alloc("o1", "A", 3, "2026-12-01", stock.ModeReserve)
	rr, rerr := l.Apply(ctx, op)
	mr, _ := m.Apply(ctx, op)
	wantMoves(t, rr, rerr, mv{"nobb", stock.Sellable, stock.Reserved, 2}, mv{"late", stock.Sellable, stock.Reserved, 1})
	if reflect.DeepEqual(movesOf(rr), movesOf(mr)) {
		t.Fatal("the index in another layout allocated as the model does")
	}

	before, _ := rc.HGetAll(ctx, key).Result()
	dry, err := l.Reindex(ctx, "A", true)
	if err != nil {
		t.Fatal(err)
	}
	if want := (Reindexed{SKU: "A", Found: true, Index: true, Keys: 4}); dry != want {
		t.Fatalf("dry run: %+v, want %+v", dry, want)
	}
	if after, _ := rc.HGetAll(ctx, key).Result(); !reflect.DeepEqual(before, after) {
		t.Fatal("the dry run wrote")
	}
	r, err := l.Reindex(ctx, "A", false)
	if err != nil || !r.Rewritten || !r.Stale() {
		t.Fatalf("reindex: %+v %v", r, err)
	}
	checkSKUIndex(t, rc, key)

	// From the state Redis has now, the script allocates as the model does.
	snap, err := l.Snapshot(ctx, "A")
	if err != nil {
		t.Fatal(err)
	}
	m2 := stock.NewModel(nil)
	if _, err := m2.Put(snap); err != nil {
		t.Fatal(err)
	}
	op = alloc("o2", "A", 4, "2026-12-01", stock.ModeReserve)
	rr, rerr = l.Apply(ctx, op)
	mr, merr := m2.Apply(ctx, op)
	wantMoves(t, rr, rerr, mv{"early", stock.Sellable, stock.Reserved, 2}, mv{"late", stock.Sellable, stock.Reserved, 1}, mv{"planned", stock.Sellable, stock.Reserved, 1})
	if merr != nil || !reflect.DeepEqual(rr, mr) {
		t.Fatalf("after the reindex: redis %+v, model %+v %v", rr, mr, merr)
	}

	again, err := l.Reindex(ctx, "A", false)
	if err != nil || again.Stale() || again.Rewritten {
		t.Fatalf("second reindex: %+v %v", again, err)
	}
	if r, err := l.Reindex(ctx, "NOPE", false); err != nil || r.Found {
		t.Fatalf("reindex of a SKU Redis does not hold: %+v %v", r, err)
	}
}

// What a version that did not store keys leaves behind during an upgrade (a SKU loaded
// before, a lot it registered or received) is healed by the first operation that needs
// the keys, which then answers as the model does.
func TestOlderVersionsWritesAreHealed(t *testing.T) {
	s := stock.SKU{SKU: "A", Lots: []stock.Lot{
		lot("oh", stock.KindOnHand, 0, "2027-02-01", 2),
		lot("p", stock.KindPlanned, 1, "", 2),
	}}
	cases := []struct {
		name string
		// older runs an operation on both and leaves the Redis hash as an older version
		// would have.
		older func(t *testing.T, l *Ledger, m *stock.Model, key string)
	}{
		{"loaded before stored keys", func(t *testing.T, l *Ledger, m *stock.Model, key string) {
			if err := l.Load(ctx, "A"); err != nil {
				t.Fatal(err)
			}
			l.rc.HDel(ctx, key, fieldLayout, "k:oh", "k:p")
		}},
		{"received by an older version", func(t *testing.T, l *Ledger, m *stock.Model, key string) {
			if err := l.Load(ctx, "A"); err != nil {
				t.Fatal(err)
			}
			planned, _ := l.rc.HGet(ctx, key, "k:p").Result()
			op := stock.ReceiveRequest{OpID: "rcv", SKU: "A", LotID: "p", BestBefore: "2027-01-01"}
			applyBoth(t, l, m, op)
			l.rc.HSet(ctx, key, "k:p", planned) // the planned lot's key, for its planned meta
		}},
		{"registered by an older version", func(t *testing.T, l *Ledger, m *stock.Model, key string) {
			op := stock.RegisterLotRequest{OpID: "reg", SKU: "A", Lot: stock.NewLot{LotID: "new", Kind: stock.KindOnHand, Good: true, BestBefore: "2026-12-20", Sellable: 2}}
			applyBoth(t, l, m, op)
			l.rc.HDel(ctx, key, "k:new")
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rc, prefix := testenv.Redis(t)
			l, err := New(Config{Redis: rc, Prefix: prefix, Loader: newMemLoader(s)})
			if err != nil {
				t.Fatal(err)
			}
			m := stock.NewModel(newMemLoader(s))
			key := Key(prefix, "A")
			tc.older(t, l, m, key)
			// The lots the older version wrote cross zero, both ways: each needs its key.
			r := applyBoth(t, l, m, alloc("first", "A", 4, "2026-12-01", stock.ModeReserve))
			var back []stock.LotQty
			for _, mv := range r.Moves {
				back = append(back, stock.LotQty{LotID: mv.LotID, Qty: 1})
			}
			applyBoth(t, l, m, stock.ReleaseRequest{OpID: "back", SKU: "A", From: stock.Reserved, Lots: back})
			checkSKUIndex(t, rc, key)
		})
	}
}

// applyBoth applies op to the ledger and the model and fails unless they answer alike.
func applyBoth(t *testing.T, l *Ledger, m *stock.Model, op stock.Op) stock.Result {
	t.Helper()
	rr, rerr := l.Apply(ctx, op)
	mr, merr := m.Apply(ctx, op)
	if stock.Reason(rerr) != stock.Reason(merr) || !reflect.DeepEqual(normal(rr), normal(mr)) {
		t.Fatalf("%T: redis %+v %v, model %+v %v", op, rr, rerr, mr, merr)
	}
	if rerr != nil {
		t.Fatalf("%T: %v", op, rerr)
	}
	return rr
}

// Registrations on one SKU at the same time each get their own registration number, and
// their key with it.
func TestConcurrentRegistrations(t *testing.T) {
	rc, prefix := testenv.Redis(t)
	s := stock.SKU{SKU: "A", Lots: []stock.Lot{lot("L", stock.KindOnHand, 4, "2027-01-01", 1)}}
	l, err := New(Config{Redis: rc, Prefix: prefix, Loader: newMemLoader(s)})
	if err != nil {
		t.Fatal(err)
	}
	const n = 64
	var wg sync.WaitGroup
	regs := make([]int64, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			kind, bb := stock.KindOnHand, "2026-12-20"
			if i%2 == 0 {
				kind, bb = stock.KindPlanned, ""
			}
			r, err := l.Apply(ctx, stock.RegisterLotRequest{OpID: fmt.Sprint("r", i), SKU: "A",
				Lot: stock.NewLot{LotID: fmt.Sprint("N", i), Kind: kind, Good: true, BestBefore: bb, Sellable: 1}})
			if err != nil {
				t.Error(err)
				return
			}
			regs[i] = r.Lots[0].RegSeq
		}()
	}
	wg.Wait()
	slices.Sort(regs)
	for i, r := range regs {
		if r != int64(5+i) {
			t.Fatalf("registration numbers %v, want 5..%d", regs, 4+n)
		}
	}
	checkSKUIndex(t, rc, Key(prefix, "A"))
}

// Reindex beside live operations on the SKU (allocations, releases that refill drained
// lots, registrations, receipts): every unit stays accounted for, and the index ends as
// a fresh load would write it. Run with -race.
func TestReindexBesideLiveOperations(t *testing.T) {
	rc, prefix := testenv.Redis(t)
	const lots, perLot = 60, 3
	s := stock.SKU{SKU: "HOT", Lots: []stock.Lot{}}
	for i := range lots {
		kind, bb := stock.KindOnHand, fmt.Sprintf("2027-%02d-01", 1+(lots-i)%12)
		if i%5 == 0 {
			kind, bb = stock.KindPlanned, ""
		}
		s.Lots = append(s.Lots, lot(fmt.Sprintf("L%02d", i), kind, int64(i), bb, perLot))
	}
	l, err := New(Config{Redis: rc, Prefix: prefix, Loader: newMemLoader(s)})
	if err != nil {
		t.Fatal(err)
	}
	key := Key(prefix, "HOT")
	if err := l.Load(ctx, "HOT"); err != nil {
		t.Fatal(err)
	}
	writeIndexAs(t, rc, key, fifoKey, keyLayout)

	var stop atomic.Bool
	var added, ops atomic.Int64
	var wg sync.WaitGroup
	// apply runs op as a worker does: an operation that met a stale SKU again right after
	// re-indexing it (the test makes it stale again and again) fails with an error that
	// is no rejection, and the worker runs it again under the same op id.
	apply := func(op stock.Op) (stock.Result, error) {
		for {
			r, err := l.Apply(ctx, op)
			if !isReindexReply(err) {
				return r, err
			}
		}
	}
	// Allocations, each given back, so that lots keep draining and refilling.
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 3))
			for i := 0; !stop.Load(); i++ {
				holder := fmt.Sprintf("w%d-%d", w, i)
				r, err := apply(stock.AllocateRequest{OpID: holder, SKU: "HOT", Qty: 1 + rng.Int64N(4), TargetDate: "2026-12-01", Mode: stock.ModeReserve, Holder: holder})
				if errors.Is(err, stock.ErrShortage) {
					continue
				}
				var back []stock.LotQty
				for _, mv := range r.Moves {
					back = append(back, stock.LotQty{LotID: mv.LotID, Qty: mv.Qty})
				}
				if err == nil {
					_, err = apply(stock.ReleaseRequest{OpID: holder + "-rel", SKU: "HOT", From: stock.Reserved, Lots: back, Holder: holder})
				}
				if err != nil {
					t.Error(err)
					stop.Store(true)
					return
				}
				ops.Add(2)
			}
		}()
	}
	// Registrations and receipts: lots whose meta changes while Reindex computes keys.
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 40 && !stop.Load(); i++ {
			kind, bb := stock.KindOnHand, "2026-12-24"
			if i%2 == 0 {
				kind, bb = stock.KindPlanned, ""
			}
			if _, err := apply(stock.RegisterLotRequest{OpID: fmt.Sprint("reg", i), SKU: "HOT",
				Lot: stock.NewLot{LotID: fmt.Sprint("N", i), Kind: kind, Good: true, BestBefore: bb, Sellable: perLot}}); err != nil {
				t.Error(err)
				stop.Store(true)
				return
			}
			added.Add(perLot)
			if kind == stock.KindPlanned {
				if _, err := apply(stock.ReceiveRequest{OpID: fmt.Sprint("rcv", i), SKU: "HOT", LotID: fmt.Sprint("N", i), BestBefore: "2027-02-01"}); err != nil {
					t.Error(err)
					stop.Store(true)
					return
				}
			}
		}
	}()
	stopped := false
	finish := func() {
		if !stopped {
			stopped = true
			stop.Store(true)
			wg.Wait()
		}
	}
	defer finish()
	testenv.WaitFor(t, 30*time.Second, "operations under way", func() bool { return ops.Load() >= 50 || stop.Load() })
	r, err := l.Reindex(ctx, "HOT", false)
	if err != nil || !r.Rewritten || !r.Index {
		t.Fatalf("reindex under traffic: %+v %v", r, err)
	}
	checkSKUIndex(t, rc, key) // one read: the index is whole at every moment
	// Staleness that operations meet too (ERR_REINDEX): no stamp, a lot without its key.
	for i := range 100 {
		if i%2 == 0 {
			rc.HDel(ctx, key, fieldLayout)
		} else {
			rc.HDel(ctx, key, fmt.Sprintf("k:L%02d", i%lots))
		}
		if _, err := l.Reindex(ctx, "HOT", false); err != nil {
			t.Fatal(err)
		}
		checkSKUIndex(t, rc, key)
	}
	testenv.WaitFor(t, 60*time.Second, "more operations", func() bool { return ops.Load() >= 500 || stop.Load() })
	finish()
	if t.Failed() {
		return
	}

	snap, err := l.Snapshot(ctx, "HOT")
	if err != nil {
		t.Fatal(err)
	}
	var total, reserved, held int64
	for _, lt := range snap.Lots {
		if lt.Sellable < 0 || lt.Reserved < 0 {
			t.Fatalf("negative bucket %+v", lt)
		}
		total += lt.Sellable + lt.Reserved
		reserved += lt.Reserved
		hs, _ := rc.HGetAll(ctx, key+":h:"+lt.LotID).Result()
		for _, q := range hs {
			n, _ := strconv.ParseInt(q, 10, 64)
			held += n
		}
	}
	if want := lots*perLot + added.Load(); total != want || held != reserved {
		t.Fatalf("%d units, want %d; %d reserved, the holders hold %d", total, want, reserved, held)
	}
	checkSKUIndex(t, rc, key)
}
