// Package migrations holds junban's numbered SQL migrations, embedded in every binary
// and applied with goose by `junbanctl migrate` (and by the tests, per schema).
package migrations

import (
	"context"
	"database/sql"
	"embed"
	"fmt"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

//go:embed *.sql
var files embed.FS

// Up applies every migration that db has not seen yet and returns how many ran.
func Up(ctx context.Context, db *sql.DB) (int, error) {
	// A session lock, so replicas starting together never race on the schema.
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return 0, fmt.Errorf("migrations: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, files, goose.WithSessionLocker(locker))
	if err != nil {
		return 0, fmt.Errorf("migrations: %w", err)
	}
	res, err := p.Up(ctx)
	if err != nil {
		return len(res), fmt.Errorf("migrations: up: %w", err)
	}
	return len(res), nil
}
