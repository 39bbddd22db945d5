package migrations_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/pressly/goose/v3"
	"gorm.io/gorm"

	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/platform/config"
	"github.com/junban/junban/internal/postgres/persist"
	"github.com/junban/junban/internal/testenv"
	"github.com/junban/junban/migrations"
)

// provider is a goose provider of this directory's migrations on db, to move a schema to
// a given version.
func provider(t *testing.T, db *sql.DB) *goose.Provider {
	t.Helper()
	names, err := filepath.Glob("*.sql")
	if err != nil {
		t.Fatal(err)
	}
	files := fstest.MapFS{}
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		files[n] = &fstest.MapFile{Data: b}
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, files)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// atVersion returns a handle on a schema of the test's own that holds junban's tables as
// migration version v left them.
func atVersion(t *testing.T, v int64) *gorm.DB {
	t.Helper()
	db, err := config.Postgres{URL: testenv.PostgresURL(t)}.Open()
	if err != nil {
		t.Fatal(err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sqlDB.Close() })
	// testenv migrates the schema to the newest version: start it again from nothing.
	var tables []string
	if err := db.Raw(`SELECT quote_ident(tablename) FROM pg_tables WHERE schemaname = current_schema()`).Scan(&tables).Error; err != nil {
		t.Fatal(err)
	}
	if err := db.Exec(`DROP TABLE ` + strings.Join(tables, ", ")).Error; err != nil {
		t.Fatal(err)
	}
	if _, err := provider(t, sqlDB).UpTo(context.Background(), v); err != nil {
		t.Fatal(err)
	}
	return db
}

func rows(t *testing.T, db *gorm.DB, sql string) string {
	t.Helper()
	var out []string
	if err := db.Raw(sql).Scan(&out).Error; err != nil {
		t.Fatal(err)
	}
	return strings.Join(out, "\n")
}

// 00004 keys the inbox by (entity, event_id) and moves by (sku, op_id, idx), and gives
// every move the entity of the result that recorded it. On a schema at 00003 holding an
// order's and a SKU's results, their moves and a move whose result is not in the inbox,
// it keeps every row, takes each move's entity from its result's inbox row (” where
// none is), and afterwards two orders' results that share an event id and an op id are
// both persisted, and a redelivery is still a duplicate. Against the schema at 00003
// the second order's result was a duplicate and its move was dropped.
func TestEntityKeysMigrationKeepsRows(t *testing.T) {
	db := atVersion(t, 3)
	for _, q := range []string{
		`INSERT INTO skus (sku, version) VALUES ('P', 3)`,
		`INSERT INTO lots (sku, lot_id, kind, reg_seq, valid_from, valid_to, sellable, allocated, version)
			VALUES ('P', 'P-L1', 'onhand', 1, '2026-01-01', '2027-12-31', 8, 2, 3)`,
		`INSERT INTO orders (lcid, status, seq, last_event_id) VALUES ('LC-OLD', 'placed', 1, 'evt-old')`,
		`INSERT INTO inbox (event_id, entity, seq, type, outcome, processed_at) VALUES
			('evt-old', 'LC-OLD', 1, 'order.placed', 'applied', now()),
			('evt-reg', 'sku:P', 1, 'inventory.lot_registered', 'applied', now())`,
		`INSERT INTO moves (op_id, idx, event_id, sku, lot_id, from_bucket, to_bucket, qty, sku_version) VALUES
			('evt-reg:P-L1:register', 0, 'evt-reg', 'P', 'P-L1', 'external', 'sellable', 10, 1),
			('evt-old:1:alloc', 0, 'evt-old', 'P', 'P-L1', 'sellable', 'allocated', 1, 2),
			('evt-gone:1:alloc', 0, 'evt-gone', 'P', 'P-L1', 'sellable', 'allocated', 1, 3)`,
	} {
		if err := db.Exec(q).Error; err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	sqlDB, _ := db.DB()
	if n, err := migrations.Up(context.Background(), sqlDB); err != nil || n < 1 {
		t.Fatalf("migrations.Up: %d, %v", n, err)
	}

	if got, want := rows(t, db, `SELECT entity || ' ' || event_id || ' ' || seq FROM inbox ORDER BY entity, event_id`),
		"LC-OLD evt-old 1\nsku:P evt-reg 1"; got != want {
		t.Errorf("inbox:\n%s\nwant\n%s", got, want)
	}
	if got, want := rows(t, db, `SELECT '[' || entity || '] ' || event_id || ' ' || sku || ' ' || op_id || ' ' || idx FROM moves ORDER BY op_id COLLATE "C"`),
		"[] evt-gone P evt-gone:1:alloc 0\n[LC-OLD] evt-old P evt-old:1:alloc 0\n[sku:P] evt-reg P evt-reg:P-L1:register 0"; got != want {
		t.Errorf("moves:\n%s\nwant\n%s", got, want)
	}
	keys := rows(t, db, `SELECT c.conrelid::regclass || ' ' || pg_get_constraintdef(c.oid) FROM pg_constraint c
		WHERE c.contype = 'p' AND c.conrelid IN ('inbox'::regclass, 'moves'::regclass) ORDER BY 1`)
	if want := "inbox PRIMARY KEY (entity, event_id)\nmoves PRIMARY KEY (sku, op_id, idx)"; keys != want {
		t.Errorf("primary keys:\n%s\nwant\n%s", keys, want)
	}

	// The migrated schema takes the two orders that share an event id and an op id.
	results := make([]event.Result, 0, 2)
	for _, lcid := range []string{"LC-P1", "LC-P2"} {
		sku := map[string]string{"LC-P1": "P", "LC-P2": "Q"}[lcid]
		results = append(results, event.Result{
			EventID: "dup-1", Entity: lcid, LCID: lcid, Seq: 1, Type: event.OrderPlaced, Outcome: event.Applied,
			ProcessedAt: time.Now(), Order: &event.OrderSnapshot{LCID: lcid, Status: event.StatusPlaced},
			SKUs: []stock.SKU{{SKU: sku, Version: 4, Lots: []stock.Lot{{LotID: sku + "-L1", Kind: stock.KindOnHand, Good: true,
				ValidFrom: "2026-01-01", ValidTo: "2027-12-31", Sellable: 7, Allocated: 3}}}},
			Moves: []stock.Move{{OpID: "dup-1:1:alloc", SKU: sku, LotID: sku + "-L1", From: "sellable", To: "allocated", Qty: 1, Version: 4}},
		})
	}
	for round, want := range []persist.Status{persist.Applied, persist.Duplicate} {
		rep, err := persist.Apply(context.Background(), db, results)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Count(want) != 2 {
			t.Errorf("round %d: %+v, want both %v", round, rep.Results, want)
		}
	}
	if got, want := rows(t, db, `SELECT entity || ' ' || sku FROM moves WHERE event_id = 'dup-1' ORDER BY entity`),
		"LC-P1 P\nLC-P2 Q"; got != want {
		t.Errorf("the two orders' moves:\n%s\nwant\n%s", got, want)
	}
	if got := rows(t, db, `SELECT lcid FROM orders WHERE last_event_id = 'dup-1' ORDER BY lcid`); got != "LC-P1\nLC-P2" {
		t.Errorf("orders of dup-1: %q", got)
	}
}

// The migration undone restores the event-id keys where no two results share an event
// id, and the migration runs again after it.
func TestEntityKeysMigrationDown(t *testing.T) {
	db := atVersion(t, 4)
	if err := db.Exec(`INSERT INTO inbox (event_id, entity, seq, type, outcome, processed_at)
		VALUES ('evt-1', 'LC-1', 1, 'order.placed', 'applied', now())`).Error; err != nil {
		t.Fatal(err)
	}
	sqlDB, _ := db.DB()
	if _, err := provider(t, sqlDB).DownTo(context.Background(), 3); err != nil {
		t.Fatal(err)
	}
	if got := rows(t, db, `SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE contype = 'p' AND conrelid = 'inbox'::regclass`); got != "PRIMARY KEY (event_id)" {
		t.Errorf("inbox key after down: %q", got)
	}
	if _, err := migrations.Up(context.Background(), sqlDB); err != nil {
		t.Fatal(err)
	}
}

// 00007 gives orders a hold_until (NULL on the rows already there) and admits the status
// expired, which the schema at 00006 refused; undone, it keeps an expired order's row and
// the migration runs again after it.
func TestReservationHoldMigration(t *testing.T) {
	db := atVersion(t, 6)
	if err := db.Exec(`INSERT INTO orders (lcid, status, seq, last_event_id) VALUES ('LC-OLD', 'placed', 1, 'e-1')`).Error; err != nil {
		t.Fatal(err)
	}
	expire := `INSERT INTO orders (lcid, status, seq, last_event_id) VALUES ('LC-EXP', 'expired', 2, 'e-2')`
	if err := db.Exec(expire).Error; err == nil {
		t.Fatal("the schema at 00006 took the status expired")
	}
	sqlDB, _ := db.DB()
	if _, err := migrations.Up(context.Background(), sqlDB); err != nil {
		t.Fatal(err)
	}
	if err := db.Exec(expire).Error; err != nil {
		t.Fatalf("expired after 00007: %v", err)
	}
	if got := rows(t, db, `SELECT lcid || ' ' || coalesce(hold_until::text, '-') FROM orders ORDER BY lcid`); got != "LC-EXP -\nLC-OLD -" {
		t.Errorf("orders after 00007:\n%s", got)
	}
	if _, err := provider(t, sqlDB).DownTo(context.Background(), 6); err != nil {
		t.Fatal(err)
	}
	if got := rows(t, db, `SELECT lcid || ' ' || status FROM orders ORDER BY lcid`); got != "LC-EXP expired\nLC-OLD placed" {
		t.Errorf("orders after down:\n%s", got)
	}
	if _, err := migrations.Up(context.Background(), sqlDB); err != nil {
		t.Fatal(err)
	}
}
