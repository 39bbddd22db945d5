package pgtx_test

import (
	"errors"
	"testing"

	"gorm.io/gorm"

	"github.com/junban/junban/internal/postgres/pgtx"
	"github.com/junban/junban/internal/testenv"
)

// The statements run on the transaction's connection: a rollback takes back what they
// wrote, and a query inside the transaction sees it. Arrays go to PostgreSQL whole.
func TestStatementsRunInTheTransaction(t *testing.T) {
	db := testenv.Postgres(t)
	if err := db.Exec("CREATE TABLE pgtx_rows (id bigint PRIMARY KEY, name text NOT NULL)").Error; err != nil {
		t.Fatal(err)
	}
	const insert = "INSERT INTO pgtx_rows SELECT * FROM unnest($1::bigint[], $2::text[]) ON CONFLICT DO NOTHING"
	rollback := errors.New("roll back")
	err := db.Transaction(func(tx *gorm.DB) error {
		n, err := pgtx.Exec(tx, insert, []int64{1, 2, 3}, []string{"a", "b", "c"})
		if err != nil || n != 3 {
			t.Fatalf("insert: %d rows, %v", n, err)
		}
		var names []string
		err = pgtx.Query(tx, func(scan func(...any) error) error {
			var s string
			if err := scan(&s); err != nil {
				return err
			}
			names = append(names, s)
			return nil
		}, "SELECT name FROM pgtx_rows WHERE id = ANY($1) ORDER BY id", []int64{1, 3})
		if err != nil || len(names) != 2 || names[0] != "a" || names[1] != "c" {
			t.Fatalf("query inside the transaction: %v, %v", names, err)
		}
		return rollback
	})
	if !errors.Is(err, rollback) {
		t.Fatalf("transaction: %v", err)
	}
	var left int64
	if err := db.Raw("SELECT count(*) FROM pgtx_rows").Scan(&left).Error; err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Fatalf("%d rows outlived the rollback: the statements ran outside the transaction", left)
	}

	// Outside a transaction they run on the pool; a row's error reaches the caller.
	if n, err := pgtx.Exec(db, insert, []int64{1, 1}, []string{"x", "y"}); err != nil || n != 1 {
		t.Fatalf("insert of a repeated id: %d rows, %v", n, err)
	}
	stop := errors.New("stop")
	err = pgtx.Query(db, func(func(...any) error) error { return stop }, "SELECT id FROM pgtx_rows")
	if !errors.Is(err, stop) {
		t.Fatalf("the row callback's error: %v", err)
	}
}
