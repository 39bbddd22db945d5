package stock

import (
	"context"
	"errors"
	"slices"
	"testing"
)

// A loaded SKU's queue is checked as a backorder makes its lines: each change below makes
// a good queue one the ledger must refuse to load. A good one loads into the Model in
// serving order, and its next line takes the number after QueueSeq.
func TestLoadedQueue(t *testing.T) {
	entry := func(holder string, class int, seq int64) QueueEntry {
		return QueueEntry{Holder: holder, Line: "1", Want: 2, Mode: ModeShip, TargetDate: "2026-12-01", Class: class, Seq: seq}
	}
	good := func() SKU {
		return SKU{SKU: "Q", Version: 3, Lots: []Lot{}, QueueSeq: 5, Queue: []QueueEntry{entry("LC-1", 0, 1), entry("LC-2", 4, 3)}}
	}
	if err := CheckSKUState(good()); err != nil {
		t.Fatalf("a good queue: %v", err)
	}
	for name, change := range map[string]func(s *SKU){
		"a line twice":      func(s *SKU) { s.Queue[1].Holder = "LC-1" },
		"want 0":            func(s *SKU) { s.Queue[0].Want = 0 },
		"a mode":            func(s *SKU) { s.Queue[0].Mode = "hold" },
		"class 10":          func(s *SKU) { s.Queue[0].Class = MaxClass + 1 },
		"a date":            func(s *SKU) { s.Queue[0].TargetDate = "2026-13-01" },
		"no holder":         func(s *SKU) { s.Queue[0].Holder = "" },
		"seq 0":             func(s *SKU) { s.Queue[0].Seq = 0 },
		"seq past the last": func(s *SKU) { s.Queue[0].Seq = 6 },
	} {
		s := good()
		change(&s)
		if err := CheckSKUState(s); !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("%s: %v, want ErrInvalidRequest", name, err)
		}
	}

	m := NewModel(nil)
	if _, err := m.Put(good()); err != nil {
		t.Fatal(err)
	}
	if got := m.Queue("Q"); len(got) != 2 || got[0].Holder != "LC-2" || got[1].Holder != "LC-1" {
		t.Fatalf("the model's queue %+v, want LC-2 (class 4) first", got)
	}
	r, err := m.Apply(context.Background(), BackorderRequest{OpID: "b", SKU: "Q", Holder: "LC-3", Line: "1", Qty: 1,
		TargetDate: "2026-12-01", Mode: ModeShip})
	if err != nil || !slices.EqualFunc(r.Queue, []QueueEntry{{Holder: "LC-3", Seq: 6}}, func(a, b QueueEntry) bool {
		return a.Holder == b.Holder && a.Seq == b.Seq
	}) {
		t.Fatalf("a backorder after the load %+v %v, want seq 6", r, err)
	}
}
