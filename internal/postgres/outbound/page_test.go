package outbound

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"

	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/testenv"
)

// insertMessage writes one outbox row of kind k for entity with the given seq, its body
// a valid message, through db (a transaction or the pool), and returns the message's id.
func insertMessage(t *testing.T, db *gorm.DB, k Kind, entity string, seq int64) string {
	t.Helper()
	m := Message{ID: uuid.NewString(), Kind: k, Entity: entity, Seq: seq, OccurredAt: time.Now().UTC().Truncate(time.Millisecond),
		CausedBy: Cause{EventID: "evt-" + entity + "-" + fmt.Sprint(seq), Type: event.OrderPlaced}}
	var data any
	if sku, ok := strings.CutPrefix(entity, event.SKUEntityPrefix); ok {
		m.SKU = sku
		data = StockData{Version: seq, Sellable: 5, AvailableToShip: 5, AsOf: "2026-12-02", Level: LevelLow, Threshold: 10}
	} else {
		m.LCID = entity
		data = OrderStatusData{To: "placed", Lines: []event.SnapshotLine{}, Changed: []string{"status"}}
		if k == OrderRefused {
			data = OrderRefusedData{Reason: "ERR_SHORTAGE"}
		}
	}
	var err error
	if m.Data, err = json.Marshal(data); err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := Validate(body); err != nil {
		t.Fatalf("test message: %v", err)
	}
	if err := db.Exec(`INSERT INTO outbox (message_id, kind, entity, seq, body) VALUES (?, ?, ?, ?, ?)`,
		m.ID, string(k), entity, seq, string(body)).Error; err != nil {
		t.Fatal(err)
	}
	return m.ID
}

// idsOf returns the message ids of bodies.
func idsOf(t *testing.T, bodies []json.RawMessage) []string {
	t.Helper()
	ids := make([]string, len(bodies))
	for i, b := range bodies {
		var m Message
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("%v: %s", err, b)
		}
		ids[i] = m.ID
	}
	return ids
}

// reader pages through the outbox as a consumer does, keeping its cursor.
type reader struct {
	t      *testing.T
	db     *gorm.DB
	after  Cursor
	seen   []string
	kinds  []Kind
	entity string
	limit  int
}

// read pages until a page comes back empty, and returns what it read.
func (r *reader) read() []string {
	r.t.Helper()
	var got []string
	for {
		msgs, next, err := Page(context.Background(), r.db, Query{After: r.after, Limit: r.limit, Kinds: r.kinds, Entity: r.entity})
		if err != nil {
			r.t.Fatal(err)
		}
		if len(msgs) == 0 {
			if next != r.after && len(r.kinds) == 0 && r.entity == "" {
				r.t.Fatalf("an empty unfiltered page moved the cursor from %s to %s", r.after, next)
			}
			r.after = next
			return got
		}
		got = append(got, idsOf(r.t, msgs)...)
		r.seen = append(r.seen, idsOf(r.t, msgs)...)
		r.after = next
	}
}

// readAll waits until every transaction that wrote a row has ended on the server (a
// transaction anywhere on it holds pages back until it ends), then reads to the end.
func (r *reader) readAll() {
	r.t.Helper()
	testenv.WaitFor(r.t, time.Minute, "the snapshot's xmin to pass every row", func() bool {
		var past bool
		err := r.db.Raw(`SELECT coalesce(pg_snapshot_xmin(pg_current_snapshot()) > max(txid), true) FROM outbox`).Scan(&past).Error
		if err != nil {
			r.t.Fatal(err)
		}
		return past
	})
	r.read()
}

// A consumer paging while transactions commit out of their order never skips a row:
//
//   - A takes the smaller id and commits after B: a reader that read B's row before A
//     committed, paging by id, would never come back for A's.
//   - D takes its transaction id after C but writes its row (the smaller id) before C:
//     once C committed and D is open, a reader paging by id behind the xmin check would
//     read C's row and skip D's.
//
// (Failed against `id > after ORDER BY id` without the xmin check, which skipped A's row,
// and against `txid < xmin AND id > after ORDER BY id`, which skipped D's.)
func TestPageNeverSkipsARowCommittedLate(t *testing.T) {
	db := testenv.Postgres(t)
	r := &reader{t: t, db: db}

	a := db.Begin()
	defer a.Rollback()
	idA := insertMessage(t, a, OrderStatusChanged, "LC-A", 1)
	b := db.Begin()
	defer b.Rollback()
	idB := insertMessage(t, b, OrderStatusChanged, "LC-B", 1)
	if err := b.Commit().Error; err != nil {
		t.Fatal(err)
	}
	early := r.read()
	if err := a.Commit().Error; err != nil {
		t.Fatal(err)
	}
	r.readAll()
	if want := []string{idA, idB}; !slices.Equal(r.seen, want) {
		t.Fatalf("read %q, want A's then B's %q", r.seen, want)
	}
	if len(early) != 0 {
		// B's transaction id is above A's, which was open: nothing could be served.
		t.Fatalf("served %q while A was open", early)
	}

	c := db.Begin()
	defer c.Rollback()
	if err := c.Exec(`SELECT pg_current_xact_id()`).Error; err != nil {
		t.Fatal(err)
	}
	d := db.Begin()
	defer d.Rollback()
	idD := insertMessage(t, d, OrderStatusChanged, "LC-D", 1)
	idC := insertMessage(t, c, OrderStatusChanged, "LC-C", 1)
	if err := c.Commit().Error; err != nil {
		t.Fatal(err)
	}
	r.read() // C's row, when nothing older than D is open on the server
	if err := d.Commit().Error; err != nil {
		t.Fatal(err)
	}
	r.readAll()
	if want := []string{idA, idB, idC, idD}; !slices.Equal(r.seen, want) {
		t.Fatalf("read %q, want %q", r.seen, want)
	}
}

// Pages of limit 2 read every row once, in order; the filters keep what they name; a
// cursor from the last page returns an empty page and itself.
func TestPageFiltersAndLimit(t *testing.T) {
	db := testenv.Postgres(t)
	var all, lc1, stock []string
	for i := range 3 {
		id := insertMessage(t, db, OrderStatusChanged, "LC-1", int64(2*i+1))
		all, lc1 = append(all, id), append(lc1, id)
		id = insertMessage(t, db, OrderRefused, "LC-1", int64(2*i+2))
		all, lc1 = append(all, id), append(lc1, id)
		id = insertMessage(t, db, StockChanged, "sku:TEA-1", int64(i+1))
		all, stock = append(all, id), append(stock, id)
	}
	every := &reader{t: t, db: db, limit: 2}
	every.readAll()
	if !slices.Equal(every.seen, all) {
		t.Fatalf("read %q, want %q", every.seen, all)
	}
	if got := every.read(); len(got) != 0 {
		t.Fatalf("after the last page: %q", got)
	}
	byEntity := &reader{t: t, db: db, limit: 2, entity: "LC-1"}
	byEntity.readAll()
	if !slices.Equal(byEntity.seen, lc1) {
		t.Fatalf("entity LC-1: %q, want %q", byEntity.seen, lc1)
	}
	byKind := &reader{t: t, db: db, kinds: []Kind{StockChanged, StockLow}}
	byKind.readAll()
	if !slices.Equal(byKind.seen, stock) {
		t.Fatalf("kinds stock.*: %q, want %q", byKind.seen, stock)
	}
	// A filter that matches nothing moves the cursor past the rows it passed over, and a
	// matching row committed later is still served.
	none := &reader{t: t, db: db, kinds: []Kind{OrderRefused}, entity: "LC-2"}
	if got := none.read(); len(got) != 0 || none.after != every.after {
		t.Fatalf("order.refused of LC-2: %q, cursor %s, want none and the cursor past every row %s", got, none.after, every.after)
	}
	later := insertMessage(t, db, OrderRefused, "LC-2", 1)
	// Another package's transaction holding an xid holds the page back until it ends
	// (pageSQL): read until it is served.
	var got []string
	for deadline := time.Now().Add(30 * time.Second); len(got) == 0 && time.Now().Before(deadline); {
		if got = none.read(); len(got) == 0 {
			time.Sleep(50 * time.Millisecond)
		}
	}
	if len(got) != 1 {
		t.Fatalf("order.refused of LC-2 after one was written: %q, want %s", got, later)
	}
	// A full filtered page ends at its last message, not past rows it did not serve.
	var after Cursor
	var one []string
	for {
		msgs, next, err := Page(context.Background(), db, Query{After: after, Limit: 1, Entity: "LC-1"})
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) == 0 {
			break
		}
		one, after = append(one, idsOf(t, msgs)...), next
	}
	if !slices.Equal(one, lc1) {
		t.Fatalf("entity LC-1 one by one: %q, want %q", one, lc1)
	}
	for _, q := range []Query{{Limit: -1}, {Limit: PageLimitMax + 1}, {Kinds: []Kind{"order.nope"}},
		{Entity: "LC\x00"}, {Entity: strings.Repeat("x", MaxEntityLength+1)}} {
		if _, _, err := Page(context.Background(), db, q); !errors.Is(err, ErrInvalidQuery) {
			t.Errorf("%+v: %v, want ErrInvalidQuery", q, err)
		}
	}
}

// setTxid moves the row of message id to transaction id txid, as if that transaction had
// written it: the writer's own transactions cannot be made to take chosen ids.
func setTxid(t *testing.T, db *gorm.DB, id string, txid uint64) {
	t.Helper()
	if err := db.Exec(`UPDATE outbox SET txid = CAST(CAST(? AS text) AS xid8) WHERE message_id = ?`,
		fmt.Sprint(txid), id).Error; err != nil {
		t.Fatal(err)
	}
}

// pastBoundary makes the server's snapshot xmin pass xid: a young server has not yet
// handed out that many transaction ids, and each subtransaction that writes takes one.
func pastBoundary(t *testing.T, db *gorm.DB, xid uint64) {
	t.Helper()
	err := db.Transaction(func(tx *gorm.DB) error {
		var xmin uint64
		if err := tx.Raw(`SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint`).Scan(&xmin).Error; err != nil || xmin > xid {
			return err
		}
		if err := tx.Exec(`CREATE TEMP TABLE burn (i int) ON COMMIT DROP`).Error; err != nil {
			return err
		}
		return tx.Exec(fmt.Sprintf(`DO $$ BEGIN FOR i IN 1..%d LOOP
			BEGIN INSERT INTO burn VALUES (i); EXCEPTION WHEN OTHERS THEN RAISE; END;
		END LOOP; END $$`, xid-xmin+1)).Error
	})
	if err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, time.Minute, fmt.Sprintf("the snapshot's xmin to pass %d", xid), func() bool {
		var xmin uint64
		if err := db.Raw(`SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint`).Scan(&xmin).Error; err != nil {
			t.Fatal(err)
		}
		return xmin > xid
	})
}

// Pages follow the transaction ids' order, not their decimal spelling's: rows at txids
// 9998, 9999, 10000, 10001 (their ids in another order) and one written by a transaction
// of now are served once each, in that order, at limit 2, and a filter that matches none
// of them moves the cursor past the last. The first four txids are set on the rows, the
// server's own being past them (so every one is below the snapshot's xmin).
// (Failed against `SELECT txid::text AS txid ... ORDER BY txid, id`, which sorted the
// text: the first page served 10000 and 10001, and the next none; and against the same
// alias in the last-visible query alone, whose cursor stopped at 9999.)
func TestPageCrossesADigitBoundaryOfTransactionIDs(t *testing.T) {
	db := testenv.Postgres(t)
	const boundary = 10_000
	pastBoundary(t, db, boundary+2)
	want := make([]string, 4)
	// Written in the order 3, 1, 4, 2 of their txids, so that ids do not give the order.
	for _, i := range []int{2, 0, 3, 1} {
		tx := boundary - 2 + uint64(i)
		want[i] = insertMessage(t, db, OrderStatusChanged, fmt.Sprintf("LC-TX-%d", tx), 1)
		setTxid(t, db, want[i], tx)
	}
	want = append(want, insertMessage(t, db, OrderStatusChanged, "LC-NOW", 1))

	every := &reader{t: t, db: db, limit: 2}
	every.readAll()
	if !slices.Equal(every.seen, want) {
		t.Fatalf("pages of 2 around txid %d read %q, want %q", boundary, every.seen, want)
	}
	none := &reader{t: t, db: db, kinds: []Kind{StockOut}}
	if got := none.read(); len(got) != 0 || none.after != every.after {
		t.Fatalf("stock.out: %q, cursor %s, want none and the cursor past every row %s", got, none.after, every.after)
	}
	one := &reader{t: t, db: db, limit: 1}
	one.read()
	if !slices.Equal(one.seen, want) {
		t.Fatalf("pages of 1 read %q, want %q", one.seen, want)
	}
}

// A cursor String gives comes back from ParseCursor as it was.
func TestCursorRoundTrip(t *testing.T) {
	for _, c := range []Cursor{{}, {txid: 1, id: 1}, {txid: 1<<64 - 1, id: 1<<63 - 1}, {txid: 4_294_967_296 + 751, id: 42}} {
		got, err := ParseCursor(c.String())
		if err != nil || got != c {
			t.Errorf("%+v: %s read back as %+v, %v", c, c, got, err)
		}
	}
}

// Any string is either a cursor String gives back exactly, or an ErrInvalidCursor.
func FuzzParseCursor(f *testing.F) {
	enc := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	for _, s := range []string{"", Cursor{txid: 7, id: 3}.String(), enc("v1.01.3"), enc("v1.-1.3"), enc("v1.1.-3"), enc("v2.1.1"),
		enc("v1.1"), enc("v1.1.1.1"), enc("v1.18446744073709551616.1"), enc("v1.1.1") + "=", "!!", "djEuMS4x", "djEuMS4xCg"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseCursor(s)
		switch {
		case err != nil:
			if !errors.Is(err, ErrInvalidCursor) || !c.IsZero() {
				t.Fatalf("%q: %+v, %v", s, c, err)
			}
		case s == "":
			if !c.IsZero() {
				t.Fatalf("empty: %+v", c)
			}
		case c.String() != s || c.id < 0:
			t.Fatalf("%q read as %+v, which is %s", s, c, c)
		}
	})
}
