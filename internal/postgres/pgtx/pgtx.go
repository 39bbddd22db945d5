// Package pgtx runs SQL statements on a gorm transaction's own connection: through
// database/sql straight to pgx, without gorm's statement building. Arrays go to pgx as
// they are (gorm would expand a slice into a list of parameters), and the hot path pays
// no reflection over models. The persist-worker's batch statements and the outbound
// outbox's use it.
package pgtx

import (
	"context"

	"gorm.io/gorm"
)

// Query runs q on tx's connection and calls row for each row it returns, with the scan
// of that row.
func Query(tx *gorm.DB, row func(scan func(...any) error) error, q string, args ...any) error {
	ctx, pool := conn(tx)
	res, err := pool.QueryContext(ctx, q, args...)
	if err != nil {
		return err
	}
	defer res.Close()
	for res.Next() {
		if err := row(res.Scan); err != nil {
			return err
		}
	}
	return res.Err()
}

// Exec runs q on tx's connection and returns how many rows it affected.
func Exec(tx *gorm.DB, q string, args ...any) (int, error) {
	ctx, pool := conn(tx)
	res, err := pool.ExecContext(ctx, q, args...)
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	return int(n), err
}

// conn returns tx's context and its connection: the transaction's, when tx is one.
func conn(tx *gorm.DB) (context.Context, gorm.ConnPool) {
	ctx := tx.Statement.Context
	if ctx == nil {
		ctx = context.Background()
	}
	return ctx, tx.Statement.ConnPool
}
