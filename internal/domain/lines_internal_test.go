package domain

import (
	"fmt"
	"testing"

	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/ledger/stock"
)

// linesFrom draws an order's old lines (each with its lots) and an order.lines_changed's
// lines from data: up to 6 each, line ids 0-5 (unique within each list, as decoding
// demands), 3 SKUs, quantities 1-8 spread over up to 3 lots.
func linesFrom(data []byte) (old []event.SnapshotLine, next []event.Line) {
	at := 0
	b := func() int {
		if at >= len(data) {
			return 0
		}
		at++
		return int(data[at-1])
	}
	seenOld, seenNext := map[string]bool{}, map[string]bool{}
	for range b() % 7 {
		id, sku, qty := fmt.Sprint(b()%6), fmt.Sprint("S", b()%3), int64(1+b()%8)
		if seenOld[id] {
			continue
		}
		seenOld[id] = true
		ln := event.SnapshotLine{LineID: id, SKU: sku, Qty: qty}
		for left, i := qty, 0; left > 0; i++ {
			q := left
			if i < 2 {
				q = min(left, int64(1+b()%4))
			}
			ln.Lots = append(ln.Lots, stock.LotQty{LotID: fmt.Sprint("L", i), Qty: q})
			left -= q
		}
		old = append(old, ln)
	}
	for range b() % 7 {
		id, sku, qty := fmt.Sprint(b()%6), fmt.Sprint("S", b()%3), int64(1+b()%8)
		if seenNext[id] {
			continue
		}
		seenNext[id] = true
		next = append(next, event.Line{LineID: id, SKU: sku, Qty: qty})
	}
	return old, next
}

// A line change's plan, whatever lines an order holds and an event asks for: per SKU, one
// change at most, growing SKUs first; the releases are exactly what the old lines give up
// (from their lots), and each new line's kept lots plus its raise are its quantity. And
// allocations splits a change's moves back into each raise's lots.
func FuzzPlanChanges(f *testing.F) {
	for _, seed := range [][]byte{
		{2, 1, 0, 3, 2, 2, 0, 3, 1, 2, 1, 0, 1, 2, 0, 5}, // two lines of one SKU: 3,3 -> 1,5
		{1, 1, 0, 3, 1, 1, 1, 3},                         // a line moves to another SKU
		{3, 0, 0, 2, 1, 1, 4, 2, 2, 7, 1, 0, 2, 1},       // lines removed
		{0, 3, 0, 0, 1, 1, 1, 2, 2, 2, 3},                // a new order's lines all grow
		{},
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		old, next := linesFrom(data)
		changes, kept := planChanges(old, next)
		want := map[string]event.Line{}
		for _, ln := range next {
			want[ln.LineID] = ln
		}
		released := map[string]int64{} // per SKU, what the old lines give up
		for _, ol := range old {
			keep := int64(0)
			if ln, ok := want[ol.LineID]; ok && ln.SKU == ol.SKU {
				keep = min(ln.Qty, ol.Qty)
			}
			if got := sumLots(kept[ol.LineID]); got != keep {
				t.Fatalf("line %s keeps %d units, want %d (old %+v, next %+v)", ol.LineID, got, keep, old, next)
			}
			released[ol.SKU] += ol.Qty - keep
		}
		seen, releasing := map[string]bool{}, false
		grow := map[string]int64{}
		for _, c := range changes {
			if seen[c.sku] || (len(c.release) == 0 && len(c.grow) == 0) {
				t.Fatalf("changes %+v: a SKU twice or a change of nothing", changes)
			}
			seen[c.sku] = true
			if len(c.grow) == 0 {
				releasing = true
			} else if releasing {
				t.Fatalf("changes %+v: a growing SKU after one that only releases", changes)
			}
			if got := sumLots(c.release); got != released[c.sku] {
				t.Fatalf("SKU %s releases %d, its old lines give up %d", c.sku, got, released[c.sku])
			}
			for _, ln := range c.grow {
				if ln.SKU != c.sku || ln.Qty <= 0 {
					t.Fatalf("SKU %s grows %+v", c.sku, ln)
				}
				grow[ln.LineID] += ln.Qty
			}
		}
		for sku, n := range released {
			if n > 0 && !seen[sku] {
				t.Fatalf("SKU %s gives up %d units in no change", sku, n)
			}
		}
		for _, ln := range next {
			var k int64
			if o := lineOf(old, ln.LineID); o != nil && o.SKU == ln.SKU {
				k = sumLots(kept[ln.LineID])
			}
			if k+grow[ln.LineID] != ln.Qty {
				t.Fatalf("line %s: keeps %d and grows %d, want %d", ln.LineID, k, grow[ln.LineID], ln.Qty)
			}
		}

		// A change's result as the ledger makes it: the releases' moves, then each raise's,
		// spread over lots as data says.
		for _, c := range changes {
			r := stock.Result{OpID: "op"}
			for _, lq := range c.release {
				r.Moves = append(r.Moves, stock.Move{LotID: lq.LotID, Qty: lq.Qty})
			}
			var qty []int64
			var want [][]stock.LotQty
			for i, ln := range c.grow {
				qty = append(qty, ln.Qty)
				var took []stock.LotQty
				for left, j := ln.Qty, 0; left > 0; j++ {
					q := min(left, int64(1+(len(data)+i+j)%3))
					took = append(took, stock.LotQty{LotID: fmt.Sprint("N", j), Qty: q})
					r.Moves = append(r.Moves, stock.Move{LotID: fmt.Sprint("N", j), Qty: q})
					left -= q
				}
				want = append(want, took)
			}
			held, err := allocations(r, len(c.release), qty)
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(held) != fmt.Sprint(want) {
				t.Fatalf("allocations %v, want %v", held, want)
			}
			if len(qty) > 0 {
				r.Moves = r.Moves[:len(r.Moves)-1]
				if _, err := allocations(r, len(c.release), qty); err == nil {
					t.Fatalf("allocations of moves short of the quantities: no error")
				}
			}
		}
	})
}

func lineOf(lines []event.SnapshotLine, id string) *event.SnapshotLine {
	for i := range lines {
		if lines[i].LineID == id {
			return &lines[i]
		}
	}
	return nil
}
