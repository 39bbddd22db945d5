package main

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/junban/junban/internal/postgres/persist"
	"github.com/junban/junban/internal/testenv"
)

// reindex passes every placed hold in PostgreSQL to the index, soonest first, counts
// those already due, and stops at the index's first error with the count of those written
// before it.
func TestReindexHolds(t *testing.T) {
	db := testenv.Postgres(t)
	now := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	if err := db.Exec(`INSERT INTO orders (lcid, status, hold_until, seq, last_event_id) VALUES
('LC-LATE', 'placed', ?, 1, 'e'), ('LC-DUE', 'placed', ?, 1, 'e'), ('LC-NOW', 'placed', ?, 1, 'e'),
('LC-NONE', 'placed', NULL, 1, 'e'), ('LC-EXP', 'expired', NULL, 1, 'e')`,
		now.Add(time.Hour), now.Add(-time.Minute), now).Error; err != nil {
		t.Fatal(err)
	}
	scan := func(yield func(persist.Hold) error) (int, error) {
		return persist.ScanHolds(context.Background(), db, yield)
	}
	var indexed []string
	rep, err := reindexHolds(now, scan, func(h persist.Hold) error {
		indexed = append(indexed, h.LCID)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"LC-DUE", "LC-NOW", "LC-LATE"}; !slices.Equal(indexed, want) {
		t.Errorf("indexed %q, want %q", indexed, want)
	}
	if rep.Indexed != 3 || rep.Due != 2 || !rep.Soonest.Equal(now.Add(-time.Minute)) || !rep.Latest.Equal(now.Add(time.Hour)) {
		t.Errorf("report %+v", rep)
	}

	down := errors.New("redis away")
	rep, err = reindexHolds(now, scan, func(h persist.Hold) error {
		if h.LCID == "LC-NOW" {
			return down
		}
		return nil
	})
	if !errors.Is(err, down) || rep.Indexed != 1 {
		t.Errorf("with the index failing at the second hold: %+v, %v", rep, err)
	}
}
