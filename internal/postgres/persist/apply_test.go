package persist_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"gorm.io/driver/postgres"
	"gorm.io/gorm"

	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/postgres/persist"
	"github.com/junban/junban/internal/testenv"
	"github.com/junban/junban/internal/testenv/resultgen"
)

// dump renders every row junban persists, without the timestamps PostgreSQL sets, so
// two schemas can be compared as text.
func dump(t *testing.T, db *gorm.DB) string {
	t.Helper()
	queries := []string{
		`SELECT sku, safety_stock, settings_version, version FROM skus ORDER BY sku`,
		`SELECT sku, lot_id, kind, good, best_before, reg_seq, arrives_at, valid_from, valid_to,
			sellable, reserved, allocated, hidden, shipped, defective, version FROM lots ORDER BY sku, lot_id`,
		`SELECT lcid, status, allocation, paid, mode, target_date, lines, seq, last_event_id FROM orders ORDER BY lcid`,
		`SELECT event_id, entity, seq, type, outcome, reason, processed_at FROM inbox ORDER BY entity, event_id`,
		`SELECT sku, op_id, idx, entity, event_id, lot_id, from_bucket, to_bucket, qty, sku_version FROM moves ORDER BY sku, op_id, idx`,
	}
	var b strings.Builder
	for _, q := range queries {
		var s *string
		if err := db.Raw(`SELECT string_agg(t::text, E'\n') FROM (` + q + `) t`).Scan(&s).Error; err != nil {
			t.Fatal(err)
		}
		b.WriteString(q[:strings.Index(q, "FROM")])
		b.WriteString("\n")
		if s != nil {
			b.WriteString(*s)
		}
		b.WriteString("\n")
	}
	return b.String()
}

func seeded(t testing.TB, cfg resultgen.Config) *gorm.DB {
	t.Helper()
	db := testenv.Postgres(t)
	if _, err := persist.WriteSKUs(context.Background(), db, resultgen.Catalog(cfg)); err != nil {
		t.Fatal(err)
	}
	return db
}

func apply(t *testing.T, db *gorm.DB, rs []event.Result) persist.Report {
	t.Helper()
	rep, err := persist.Apply(context.Background(), db, rs)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range rep.Results {
		if r.Status == persist.Poison {
			t.Fatalf("result %d (%s) poison: %v", i, rs[i].EventID, r.Err)
		}
	}
	return rep
}

func diff(t *testing.T, name, want, got string) {
	t.Helper()
	if want == got {
		return
	}
	wl, gl := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := range max(len(wl), len(gl)) {
		var w, g string
		if i < len(wl) {
			w = wl[i]
		}
		if i < len(gl) {
			g = gl[i]
		}
		if w != g {
			t.Fatalf("%s: rows differ from the in-order application at line %d:\nwant %s\ngot  %s", name, i+1, w, g)
		}
	}
}

// The same results applied three times, in batches, and a shuffled stream with
// duplicates in random batches leave exactly the rows of one in-order application.
func TestApplyIdempotentAndOrderInsensitive(t *testing.T) {
	cfg := resultgen.Config{Seed: 7, SKUs: 6, LotsPerSKU: 3, Active: 15}
	stream := resultgen.New(cfg).Results(400)

	ref := seeded(t, cfg)
	for _, r := range stream {
		rep := apply(t, ref, []event.Result{r})
		if rep.Count(persist.Applied) != 1 {
			t.Fatalf("%s: not applied: %+v", r.EventID, rep)
		}
	}
	want := dump(t, ref)

	t.Run("three times in batches", func(t *testing.T) {
		db := seeded(t, cfg)
		dups := 0
		for range 3 {
			for i := 0; i < len(stream); i += 25 {
				rep := apply(t, db, stream[i:min(i+25, len(stream))])
				dups += rep.Count(persist.Duplicate)
			}
		}
		if dups != 2*len(stream) {
			t.Errorf("duplicates = %d, want %d", dups, 2*len(stream))
		}
		diff(t, "three times", want, dump(t, db))
	})

	t.Run("one batch, twice", func(t *testing.T) {
		db := seeded(t, cfg)
		if rep := apply(t, db, stream); rep.Count(persist.Applied) != len(stream) {
			t.Fatalf("applied %d of %d", rep.Count(persist.Applied), len(stream))
		}
		if rep := apply(t, db, stream); rep.Count(persist.Duplicate) != len(stream) {
			t.Fatalf("second time: %d duplicates of %d", rep.Count(persist.Duplicate), len(stream))
		}
		diff(t, "one batch", want, dump(t, db))
	})

	t.Run("shuffled with duplicates", func(t *testing.T) {
		db := seeded(t, cfg)
		rng := rand.New(rand.NewPCG(1, 2))
		shuffled := append([]event.Result(nil), stream...)
		for range 100 {
			shuffled = append(shuffled, stream[rng.IntN(len(stream))])
		}
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		var skips persist.Skips
		for len(shuffled) > 0 {
			n := min(1+rng.IntN(40), len(shuffled))
			rep := apply(t, db, shuffled[:n])
			skips.Duplicates += rep.Skips.Duplicates
			skips.OlderOrders += rep.Skips.OlderOrders
			skips.OlderLots += rep.Skips.OlderLots
			shuffled = shuffled[n:]
		}
		if skips.Duplicates != 100 || skips.OlderOrders == 0 || skips.OlderLots == 0 {
			t.Errorf("skips = %+v: want 100 duplicates and some older orders and lots", skips)
		}
		diff(t, "shuffled", want, dump(t, db))
	})
}

// Batches of every size reuse one prepared statement per table: the statements' text
// does not depend on the number of rows, so pgx prepares each once per connection.
func TestApplyPreparesEachStatementOnce(t *testing.T) {
	cfg := resultgen.Config{Seed: 11, SKUs: 8, LotsPerSKU: 3, Active: 20}
	gen := resultgen.New(cfg)
	db := seeded(t, cfg)
	sqlDB, err := db.DB()
	if err != nil {
		t.Fatal(err)
	}
	sqlDB.SetMaxOpenConns(1) // every batch and the count below on one session
	for n := 1; n <= 30; n++ {
		apply(t, db, gen.Results(n))
	}
	var prepared int
	if err := db.Raw(`SELECT count(*) FROM pg_prepared_statements`).Scan(&prepared).Error; err != nil {
		t.Fatal(err)
	}
	// inbox, skus, lots, orders, moves, and this count itself (and a few of gorm's).
	if prepared > 10 {
		t.Errorf("%d prepared statements after 30 batches of different sizes; want one per statement", prepared)
	}
}

// One order's results, shuffled and each applied on its own, end as the in-order ones.
func TestApplyOneOrderShuffled(t *testing.T) {
	cfg := resultgen.Config{Seed: 3, SKUs: 2, LotsPerSKU: 2}
	g := resultgen.New(cfg)
	var life []event.Result
	for len(life) < 4 {
		life = g.Order()
	}
	ref := seeded(t, cfg)
	for _, r := range life {
		apply(t, ref, []event.Result{r})
	}
	want := dump(t, ref)

	rng := rand.New(rand.NewPCG(5, 6))
	for round := range 3 {
		db := seeded(t, cfg)
		shuffled := append([]event.Result(nil), life...)
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		for _, r := range shuffled {
			apply(t, db, []event.Result{r})
		}
		diff(t, "round "+string(rune('1'+round)), want, dump(t, db))
	}
}

// A result that breaks the schema is reported as Poison; the rest of its batch commits.
func TestApplyPoisonKeepsTheRest(t *testing.T) {
	cfg := resultgen.Config{Seed: 11, SKUs: 4, Active: 5}
	db := seeded(t, cfg)
	batch := resultgen.New(cfg).Results(12)

	negative := batch[3]
	negative.EventID = "evt-negative"
	negative.SKUs = []stock.SKU{{SKU: negative.SKUs[0].SKU, Version: 1 << 40, Lots: []stock.Lot{
		{LotID: "L00", Kind: stock.KindOnHand, Good: true, ValidFrom: "2026-01-01", ValidTo: "2027-01-01", Sellable: -5},
	}}}
	zeroMove := batch[5]
	zeroMove.EventID = "evt-zero-move"
	zeroMove.Moves = []stock.Move{{OpID: "op-zero", SKU: "S", LotID: "L", From: "sellable", To: "allocated", Qty: 0}}
	badStatus := event.Result{EventID: "evt-bad-status", Entity: "LC-X", LCID: "LC-X", Seq: 1, Type: event.OrderPlaced,
		Outcome: event.Applied, Order: &event.OrderSnapshot{LCID: "LC-X", Status: "lost"}}
	noID := batch[7]
	noID.EventID = ""
	badDate := event.Result{EventID: "evt-bad-date", Entity: "LC-Y", LCID: "LC-Y", Seq: 1, Type: event.OrderPlaced,
		Outcome: event.Applied, Order: &event.OrderSnapshot{LCID: "LC-Y", Status: "placed", TargetDate: "2026-02-30"}}

	noReason := event.Result{EventID: "evt-no-reason", Entity: "LC-Z", LCID: "LC-Z", Seq: 1, Type: event.OrderPlaced,
		Outcome: event.Rejected}
	proseReason := event.Result{EventID: "evt-prose-reason", Entity: "LC-Z", LCID: "LC-Z", Seq: 2, Type: event.OrderPlaced,
		Outcome: event.Rejected, Reason: "out of stock"}

	badTrace := event.Result{EventID: "evt-bad-trace", Entity: "LC-Z", LCID: "LC-Z", Seq: 3, Type: event.OrderPlaced,
		Outcome: event.Rejected, Reason: "ERR_SHORTAGE", TraceID: "not-a-trace"}

	all := append(append([]event.Result(nil), batch...), negative, zeroMove, badStatus, noID, badDate, noReason, proseReason, badTrace)
	rep, err := persist.Apply(context.Background(), db, all)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Isolated {
		t.Error("a database-side poison did not make Apply isolate the results")
	}
	for i, r := range rep.Results {
		wantPoison := i >= len(batch)
		if got := r.Status == persist.Poison; got != wantPoison {
			t.Errorf("result %d (%s): status %v (%v), want poison %v", i, all[i].EventID, r.Status, r.Err, wantPoison)
		}
		if wantPoison && !errors.Is(r.Err, persist.ErrInvalid) {
			t.Errorf("result %d: error %v does not wrap ErrInvalid", i, r.Err)
		}
	}
	var inbox int64
	db.Table("inbox").Count(&inbox)
	if inbox != int64(len(batch)) {
		t.Errorf("inbox holds %d results, want the %d good ones", inbox, len(batch))
	}
	var zero int64
	db.Table("moves").Where("op_id = ?", "op-zero").Count(&zero)
	if zero != 0 {
		t.Error("the poison result's move was written")
	}
}

// PostgreSQL out of reach: Apply returns an error that is not a poison, and reports no
// result as applied.
func TestApplyUnavailable(t *testing.T) {
	db, err := gorm.Open(postgres.Open("postgres://postgres@127.0.0.1:1/none?sslmode=disable&connect_timeout=2"),
		&gorm.Config{DisableAutomaticPing: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rs := resultgen.New(resultgen.Config{Seed: 1}).Results(3)
	rep, err := persist.Apply(ctx, db, rs)
	if err == nil {
		t.Fatal("Apply succeeded without PostgreSQL")
	}
	if errors.Is(err, persist.ErrInvalid) || rep.Count(persist.Poison) != 0 {
		t.Errorf("an unreachable database was taken for a poison: %v", err)
	}
}

// Two workers applying batches that touch the same SKUs at once never deadlock: every
// statement locks its rows in key order.
func TestApplyConcurrentBatchesDoNotDeadlock(t *testing.T) {
	db := testenv.Postgres(t)
	if sqlDB, err := db.DB(); err == nil {
		sqlDB.SetMaxOpenConns(4)
	}
	const skus = 12
	batch := func(worker, round int) []event.Result {
		var rs []event.Result
		for i := range 5 {
			r := event.Result{
				EventID: fmt.Sprintf("evt-%d-%d-%d", worker, round, i), Entity: "sku:x", Seq: int64(round),
				Type: event.InventoryAdjusted, Outcome: event.Applied, ProcessedAt: time.Now(),
			}
			for k := range skus {
				s := k
				if worker == 1 {
					s = skus - 1 - k // the other worker names the SKUs in reverse
				}
				r.SKUs = append(r.SKUs, stock.SKU{SKU: fmt.Sprintf("S%02d", s), Version: int64(round*10 + i), Lots: []stock.Lot{
					{LotID: "L", Kind: stock.KindOnHand, Good: true, ValidFrom: "2026-01-01", ValidTo: "2027-01-01", Sellable: int64(round)},
				}})
			}
			rs = append(rs, r)
		}
		return rs
	}
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for w := range 2 {
		wg.Go(func() {
			for round := range 40 {
				if _, err := persist.Apply(context.Background(), db, batch(w, round)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("concurrent apply failed: %v", err)
	}
}

// incompressible returns n bytes of letters and digits that PostgreSQL cannot compress:
// a repeated character would shrink into an index row far below its size limit.
func incompressible(seed uint64, n int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	rng := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[rng.IntN(len(alphabet))]
	}
	return string(b)
}

// idResult is a result that carries every id the schema indexes: event_id, entity, lcid,
// sku, lot_id and op_id.
func idResult(eventID string) event.Result {
	return event.Result{
		EventID: eventID, Entity: "LC-ID", LCID: "LC-ID", Seq: 1, Type: event.OrderPlaced,
		Outcome: event.Applied, ProcessedAt: time.Now(),
		Order: &event.OrderSnapshot{LCID: "LC-ID", Status: event.StatusPlaced},
		SKUs: []stock.SKU{{SKU: "S-ID", Version: 1, Lots: []stock.Lot{
			{LotID: "L-ID", Kind: stock.KindOnHand, Good: true, ValidFrom: "2026-01-01", ValidTo: "2027-01-01", Sellable: 1, Allocated: 1},
		}}},
		Moves: []stock.Move{{OpID: "op-" + eventID, SKU: "S-ID", LotID: "L-ID", From: "sellable", To: "allocated", Qty: 1, Version: 1}},
	}
}

// An over-long id is Poison before PostgreSQL is asked. Sent, it made PostgreSQL refuse
// its index row (SQLSTATE 54000), which held and retried the whole batch until SQS moved
// its messages to the DLQ without a reason.
func TestApplyOverLongIDIsPoison(t *testing.T) {
	db := testenv.Postgres(t)
	ctx := context.Background()
	good := event.Result{EventID: "evt-good", Entity: "LC-GOOD", LCID: "LC-GOOD", Seq: 1,
		Type: event.PaymentConfirmed, Outcome: event.Applied, ProcessedAt: time.Now()}
	long := good
	long.EventID = incompressible(1, 3000)
	rep, err := persist.Apply(ctx, db, []event.Result{good, long})
	if err != nil {
		t.Fatalf("a batch with an over-long event_id failed as a whole: %v", err)
	}
	if got := rep.Results[0].Status; got != persist.Applied {
		t.Errorf("the good result: status %v, want Applied", got)
	}
	if r := rep.Results[1]; r.Status != persist.Poison || !errors.Is(r.Err, persist.ErrInvalid) {
		t.Errorf("the over-long event_id: %v (%v), want Poison wrapping ErrInvalid", r.Status, r.Err)
	} else if len(r.Err.Error()) > 1024 {
		t.Errorf("the poison reason is %d bytes: it quotes the whole id", len(r.Err.Error()))
	}

	over := incompressible(2, event.MaxIDLength+1)
	cases := map[string]func(r *event.Result){
		"entity":      func(r *event.Result) { r.Entity = "sku:" + over },
		"lcid":        func(r *event.Result) { r.LCID = over },
		"order lcid":  func(r *event.Result) { r.Order.LCID = over },
		"sku":         func(r *event.Result) { r.SKUs[0].SKU = over },
		"lot_id":      func(r *event.Result) { r.SKUs[0].Lots[0].LotID = over },
		"move op_id":  func(r *event.Result) { r.Moves[0].OpID = over },
		"move sku":    func(r *event.Result) { r.Moves[0].SKU = over },
		"move lot_id": func(r *event.Result) { r.Moves[0].LotID = over },
	}
	for name, spoil := range cases {
		r := idResult("evt-long-" + strings.ReplaceAll(name, " ", "-"))
		spoil(&r)
		rep, err := persist.Apply(ctx, db, []event.Result{r})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := rep.Results[0]; got.Status != persist.Poison || !errors.Is(got.Err, persist.ErrInvalid) || rep.Isolated {
			t.Errorf("over-long %s: %v (%v, isolated %v), want Poison refused before PostgreSQL", name, got.Status, got.Err, rep.Isolated)
		}
	}
	// At the bound every id is fine (an entity may hold "sku:" and a SKU of the bound).
	atBound := idResult(incompressible(3, event.MaxIDLength))
	atBound.Entity = "sku:" + incompressible(4, event.MaxIDLength)
	atBound.SKUs[0].SKU = incompressible(5, event.MaxIDLength)
	atBound.Moves[0].SKU = atBound.SKUs[0].SKU
	atBound.Moves[0].OpID = incompressible(6, event.MaxIDLength)
	if rep := apply(t, db, []event.Result{atBound}); rep.Count(persist.Applied) != 1 {
		t.Errorf("ids at the bound: %+v, want Applied", rep.Results)
	}
}

// A rejection reason too long for its index (which PostgreSQL refused with SQLSTATE class
// 54 after the whole batch was sent) is no reason code: Poison before PostgreSQL is
// asked, and the rest of the batch commits.
func TestApplyHugeReasonIsPoison(t *testing.T) {
	db := testenv.Postgres(t)
	good := event.Result{EventID: "evt-good", Entity: "LC-GOOD", Seq: 1,
		Type: event.PaymentConfirmed, Outcome: event.Rejected, Reason: "ERR_INVALID_TRANSITION", ProcessedAt: time.Now()}
	huge := good
	huge.EventID, huge.Reason = "evt-huge-reason", incompressible(7, 3000)
	rep, err := persist.Apply(context.Background(), db, []event.Result{good, huge})
	if err != nil {
		t.Fatalf("an index row over its limit failed the batch: %v", err)
	}
	if rep.Results[0].Status != persist.Applied {
		t.Errorf("the good result: %v, want Applied", rep.Results[0].Status)
	}
	if r := rep.Results[1]; r.Status != persist.Poison || !errors.Is(r.Err, persist.ErrInvalid) {
		t.Errorf("the huge reason: %v (%v), want Poison wrapping ErrInvalid", r.Status, r.Err)
	}
}

// An event that touched one SKU in two operations, with another event's operation on it in
// between, lists the SKU twice, each entry at its own version with the lots as of then.
// Every lot row keeps its own entry's version, the SKU row the newest, and each move the
// version of its own operation, whatever the order of arrival.
func TestApplySKUListedTwiceInOneResult(t *testing.T) {
	lot := func(id string, sellable int64) stock.Lot {
		return stock.Lot{LotID: id, Kind: stock.KindOnHand, Good: true, ValidFrom: "2026-01-01", ValidTo: "2027-01-01", Sellable: sellable}
	}
	e1 := event.Result{EventID: "E1", Entity: "LC-1", Seq: 1, Type: event.OrderLinesChanged, Outcome: event.Applied, ProcessedAt: time.Now(),
		SKUs: []stock.SKU{
			{SKU: "S", Version: 5, Lots: []stock.Lot{lot("L1", 1)}},
			{SKU: "S", Version: 7, Lots: []stock.Lot{lot("L2", 3)}},
		},
		Moves: []stock.Move{
			{OpID: "E1:1:place", Index: 0, SKU: "S", LotID: "L1", From: "sellable", To: "reserved", Qty: 1, Version: 5},
			{OpID: "E1:2:place", Index: 0, SKU: "S", LotID: "L2", From: "sellable", To: "reserved", Qty: 1, Version: 7},
			// Published before moves carried a version: the newest of the result's SKU.
			{OpID: "E1:3:place", Index: 0, SKU: "S", LotID: "L2", From: "sellable", To: "reserved", Qty: 1},
		},
	}
	e2 := event.Result{EventID: "E2", Entity: "LC-2", Seq: 1, Type: event.OrderCancelled, Outcome: event.Applied, ProcessedAt: time.Now(),
		SKUs:  []stock.SKU{{SKU: "S", Version: 6, Lots: []stock.Lot{lot("L1", 2)}}},
		Moves: []stock.Move{{OpID: "E2:1:cancel", Index: 0, SKU: "S", LotID: "L1", From: "reserved", To: "sellable", Qty: 1, Version: 6}},
	}
	const want = `(L1,2,6)|(L2,3,7)|7|E1:1:place=5,E1:2:place=7,E1:3:place=7,E2:1:cancel=6`
	for name, batches := range map[string][][]event.Result{
		"E1 then E2":          {{e1}, {e2}},
		"E2 then E1":          {{e2}, {e1}},
		"one batch":           {{e1, e2}},
		"one batch, reversed": {{e2, e1}},
	} {
		t.Run(name, func(t *testing.T) {
			db := testenv.Postgres(t)
			for _, b := range batches {
				apply(t, db, b)
			}
			var lots, moves string
			var version int64
			if err := db.Raw(`SELECT string_agg(format('(%s,%s,%s)', lot_id, sellable, version), '|' ORDER BY lot_id) FROM lots WHERE sku = 'S'`).Scan(&lots).Error; err != nil {
				t.Fatal(err)
			}
			if err := db.Raw(`SELECT version FROM skus WHERE sku = 'S'`).Scan(&version).Error; err != nil {
				t.Fatal(err)
			}
			if err := db.Raw(`SELECT string_agg(op_id || '=' || sku_version, ',' ORDER BY op_id) FROM moves`).Scan(&moves).Error; err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprintf("%s|%d|%s", lots, version, moves); got != want {
				t.Errorf("rows (lot,sellable,version)|sku version|moves:\ngot  %s\nwant %s", got, want)
			}
		})
	}
}
