package outbound

import (
	"context"
	"testing"
	"time"

	"github.com/junban/junban/internal/testenv"
)

// The cleanup deletes the rows older than the retention, published and parked ones only
// while a relay runs; recent rows stay; another replica holding the outbox's lock makes it
// wait. (Fails with the published_at condition dropped: the old unpublished row goes; and
// with parked rows left out: the old parked row stays for good.)
func TestCleanupDeletesOldRows(t *testing.T) {
	db := testenv.Postgres(t)
	ctx := context.Background()
	rows := insertRows(t, db, []string{"C-old-pub", "C-old-unpub", "C-new-pub", "C-new-unpub", "C-old-parked", "C-new-parked"}, 1, 1)
	for _, q := range []string{
		`UPDATE outbox SET created_at = now() - interval '9 days' WHERE entity LIKE 'C-old-%'`,
		`UPDATE outbox SET published_at = now() WHERE entity LIKE '%-pub'`,
		`UPDATE outbox SET parked_at = now(), parked_reason = 'too_large' WHERE entity LIKE '%-parked'`,
	} {
		if err := db.Exec(q).Error; err != nil {
			t.Fatal(err)
		}
	}
	left := func() map[string]bool {
		var es []string
		if err := db.Raw(`SELECT entity FROM outbox`).Scan(&es).Error; err != nil {
			t.Fatal(err)
		}
		m := map[string]bool{}
		for _, e := range es {
			m[e] = true
		}
		return m
	}
	if len(rows) != 6 {
		t.Fatalf("%d rows", len(rows))
	}

	// Another replica holds the lock: nothing deleted.
	tx := db.Begin()
	var ok bool
	if err := tx.Raw(lockSQL).Scan(&ok).Error; err != nil || !ok {
		t.Fatalf("lock: %v %v", ok, err)
	}
	n, locked, err := Cleanup(ctx, db, 7*24*time.Hour, true)
	tx.Rollback()
	if err != nil || !locked || n != 0 {
		t.Fatalf("Cleanup under another's lock: %d deleted, locked %v, %v", n, locked, err)
	}

	n, locked, err = Cleanup(ctx, db, 7*24*time.Hour, true)
	if err != nil || locked || n != 2 {
		t.Fatalf("Cleanup(published only): %d deleted, locked %v, %v; want 2", n, locked, err)
	}
	if l := left(); l["C-old-pub"] || l["C-old-parked"] || !l["C-old-unpub"] || !l["C-new-pub"] || !l["C-new-unpub"] || !l["C-new-parked"] {
		t.Fatalf("left after Cleanup(published only): %v", l)
	}
	n, _, err = Cleanup(ctx, db, 7*24*time.Hour, false)
	if err != nil || n != 1 {
		t.Fatalf("Cleanup(every row): %d deleted, %v; want 1", n, err)
	}
	if l := left(); len(l) != 3 || !l["C-new-pub"] || !l["C-new-unpub"] || !l["C-new-parked"] {
		t.Fatalf("left after Cleanup(every row): %v", l)
	}
}
