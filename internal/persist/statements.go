package persist

import (
	"context"
	"time"

	"gorm.io/gorm"
)

// The statements below send a table's rows as one array per column and unnest them in
// PostgreSQL, so their text is the same for every batch size: pgx prepares each once
// per connection and reuses it (its default QueryExecModeCacheStatement), where a
// multi-row VALUES list would be parsed and planned again for nearly every batch. The
// arrays also have no bind parameter limit, so a batch of any size is one statement per
// table. unnest yields the rows in array order and INSERT ... SELECT writes them in that
// order: the callers' sorting still decides the order in which rows are locked.

const insertInboxSQL = `INSERT INTO inbox (event_id, entity, seq, type, outcome, reason, processed_at)
SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[], $5::text[], $6::text[], $7::timestamptz[])
ON CONFLICT (event_id) DO NOTHING
RETURNING event_id`

// An order row is only ever replaced by a newer seq of its entity.
const upsertOrdersSQL = `INSERT INTO orders (lcid, status, allocation, paid, mode, target_date, lines, seq, last_event_id, updated_at)
SELECT u.lcid, u.status, u.allocation, u.paid, u.mode, u.target_date, u.lines::jsonb, u.seq, u.last_event_id, now()
FROM unnest($1::text[], $2::text[], $3::text[], $4::boolean[], $5::text[], $6::date[], $7::text[], $8::bigint[], $9::text[])
	AS u (lcid, status, allocation, paid, mode, target_date, lines, seq, last_event_id)
ON CONFLICT (lcid) DO UPDATE SET status = excluded.status, allocation = excluded.allocation,
	paid = excluded.paid, mode = excluded.mode, target_date = excluded.target_date, lines = excluded.lines,
	seq = excluded.seq, last_event_id = excluded.last_event_id, updated_at = excluded.updated_at
WHERE orders.seq < excluded.seq`

// A SKU row's version only moves forward, and so, on its own, does its safety stock: a
// row carries settings with a settings_version above 0 (a result that set them, or a
// whole SKU), and they replace the stored ones only where those were written at an older
// version. Every other row leaves the safety stock as it is. The two guards are apart so
// that either arrival order of a settings result and a later operation's result writes
// both (an allocation at v6 persisted first must not hide the safety stock set at v5).
const upsertSKUsSQL = `INSERT INTO skus (sku, safety_stock, settings_version, version, updated_at)
SELECT u.sku, u.safety_stock, u.settings_version, u.version, now()
FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[]) AS u (sku, safety_stock, settings_version, version)
ON CONFLICT (sku) DO UPDATE SET version = greatest(skus.version, excluded.version),
	safety_stock = CASE WHEN skus.settings_version < excluded.settings_version
		THEN excluded.safety_stock ELSE skus.safety_stock END,
	settings_version = greatest(skus.settings_version, excluded.settings_version),
	updated_at = excluded.updated_at
WHERE skus.version < excluded.version OR skus.settings_version < excluded.settings_version`

// A lot row is only ever replaced by one written at a newer SKU version.
const upsertLotsSQL = `INSERT INTO lots (sku, lot_id, kind, good, best_before, reg_seq, arrives_at, valid_from, valid_to,
	sellable, reserved, allocated, hidden, shipped, defective, version, updated_at)
SELECT u.*, now()
FROM unnest($1::text[], $2::text[], $3::text[], $4::boolean[], $5::date[], $6::bigint[], $7::date[], $8::date[], $9::date[],
	$10::bigint[], $11::bigint[], $12::bigint[], $13::bigint[], $14::bigint[], $15::bigint[], $16::bigint[])
	AS u (sku, lot_id, kind, good, best_before, reg_seq, arrives_at, valid_from, valid_to,
		sellable, reserved, allocated, hidden, shipped, defective, version)
ON CONFLICT (sku, lot_id) DO UPDATE SET kind = excluded.kind, good = excluded.good,
	best_before = excluded.best_before, reg_seq = excluded.reg_seq, arrives_at = excluded.arrives_at,
	valid_from = excluded.valid_from, valid_to = excluded.valid_to, sellable = excluded.sellable,
	reserved = excluded.reserved, allocated = excluded.allocated, hidden = excluded.hidden,
	shipped = excluded.shipped, defective = excluded.defective, version = excluded.version,
	updated_at = excluded.updated_at
WHERE lots.version < excluded.version`

// Moves are an append-only ledger: a move recorded once is never written again.
const insertMovesSQL = `INSERT INTO moves (op_id, idx, event_id, sku, lot_id, from_bucket, to_bucket, qty, sku_version)
SELECT * FROM unnest($1::text[], $2::integer[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::bigint[], $9::bigint[])
ON CONFLICT DO NOTHING`

// insertInbox inserts the inbox rows not there yet and returns their event ids.
func insertInbox(tx *gorm.DB, rows []InboxRow) ([]string, error) {
	if len(rows) == 0 {
		return nil, nil
	}
	var (
		ids, entities, types, outcomes, reasons = col[string](rows), col[string](rows), col[string](rows), col[string](rows), col[string](rows)
		seqs                                    = col[int64](rows)
		processed                               = col[time.Time](rows)
	)
	for i, r := range rows {
		ids[i], entities[i], seqs[i], types[i], outcomes[i], reasons[i], processed[i] = r.EventID, r.Entity, r.Seq, r.Type, r.Outcome, r.Reason, r.ProcessedAt
	}
	ctx, pool := conn(tx)
	res, err := pool.QueryContext(ctx, insertInboxSQL, ids, entities, seqs, types, outcomes, reasons, processed)
	if err != nil {
		return nil, err
	}
	defer res.Close()
	fresh := make([]string, 0, len(rows))
	for res.Next() {
		var id string
		if err := res.Scan(&id); err != nil {
			return nil, err
		}
		fresh = append(fresh, id)
	}
	return fresh, res.Err()
}

// upsertOrders writes order rows where their seq is newer and returns how many it wrote.
func upsertOrders(tx *gorm.DB, rows []OrderRow) (int, error) {
	if len(rows) == 0 {
		return 0, nil
	}
	var (
		lcids, statuses, lines, lastIDs = col[string](rows), col[string](rows), col[string](rows), col[string](rows)
		allocations, modes              = col[*string](rows), col[*string](rows)
		paid                            = col[bool](rows)
		targets                         = col[*time.Time](rows)
		seqs                            = col[int64](rows)
	)
	for i, r := range rows {
		lcids[i], statuses[i], allocations[i], paid[i], modes[i] = r.LCID, r.Status, r.Allocation, r.Paid, r.Mode
		targets[i], lines[i], seqs[i], lastIDs[i] = r.TargetDate, string(r.Lines), r.Seq, r.LastEventID
		if r.Lines == nil {
			lines[i] = "[]"
		}
	}
	return exec(tx, upsertOrdersSQL, lcids, statuses, allocations, paid, modes, targets, lines, seqs, lastIDs)
}

// upsertSKUs writes SKU rows where their version or their settings version is newer and
// returns how many it wrote.
func upsertSKUs(tx *gorm.DB, rows []SKURow) (int, error) {
	if len(rows) == 0 {
		return 0, nil
	}
	skus, safety, settings, versions := col[string](rows), col[int64](rows), col[int64](rows), col[int64](rows)
	for i, r := range rows {
		skus[i], safety[i], settings[i], versions[i] = r.SKU, r.SafetyStock, r.SettingsVersion, r.Version
	}
	return exec(tx, upsertSKUsSQL, skus, safety, settings, versions)
}

// upsertLots writes lot rows where their version is newer and returns how many it wrote.
func upsertLots(tx *gorm.DB, rows []LotRow) (int, error) {
	if len(rows) == 0 {
		return 0, nil
	}
	var (
		skus, lotIDs, kinds                                       = col[string](rows), col[string](rows), col[string](rows)
		good                                                      = col[bool](rows)
		bestBefore, arrives                                       = col[*time.Time](rows), col[*time.Time](rows)
		from, to                                                  = col[time.Time](rows), col[time.Time](rows)
		regSeqs, ver                                              = col[int64](rows), col[int64](rows)
		sellable, reserved, allocated, hidden, shipped, defective = col[int64](rows), col[int64](rows), col[int64](rows), col[int64](rows), col[int64](rows), col[int64](rows)
	)
	for i, r := range rows {
		skus[i], lotIDs[i], kinds[i], good[i], bestBefore[i], regSeqs[i] = r.SKU, r.LotID, r.Kind, r.Good, r.BestBefore, r.RegSeq
		arrives[i], from[i], to[i] = r.ArrivesAt, r.ValidFrom, r.ValidTo
		sellable[i], reserved[i], allocated[i], hidden[i], shipped[i], defective[i], ver[i] =
			r.Sellable, r.Reserved, r.Allocated, r.Hidden, r.Shipped, r.Defective, r.Version
	}
	return exec(tx, upsertLotsSQL, skus, lotIDs, kinds, good, bestBefore, regSeqs, arrives, from, to,
		sellable, reserved, allocated, hidden, shipped, defective, ver)
}

// insertMoves records the moves not recorded yet and returns how many it recorded.
func insertMoves(tx *gorm.DB, rows []MoveRow) (int, error) {
	if len(rows) == 0 {
		return 0, nil
	}
	var (
		opIDs, events, skus, lotIDs, froms, tos = col[string](rows), col[string](rows), col[string](rows), col[string](rows), col[string](rows), col[string](rows)
		idxs, qtys, versions                    = col[int64](rows), col[int64](rows), col[int64](rows)
	)
	for i, r := range rows {
		opIDs[i], idxs[i], events[i], skus[i], lotIDs[i] = r.OpID, int64(r.Idx), r.EventID, r.SKU, r.LotID
		froms[i], tos[i], qtys[i], versions[i] = r.FromBucket, r.ToBucket, r.Qty, r.SKUVersion
	}
	return exec(tx, insertMovesSQL, opIDs, idxs, events, skus, lotIDs, froms, tos, qtys, versions)
}

// col makes one column's array for rows.
func col[T, R any](rows []R) []T { return make([]T, len(rows)) }

// conn returns tx's context and connection (the transaction's): the statements here go
// to database/sql, and so to pgx, without gorm's statement building.
func conn(tx *gorm.DB) (context.Context, gorm.ConnPool) {
	ctx := tx.Statement.Context
	if ctx == nil {
		ctx = context.Background()
	}
	return ctx, tx.Statement.ConnPool
}

func exec(tx *gorm.DB, q string, args ...any) (int, error) {
	ctx, pool := conn(tx)
	res, err := pool.ExecContext(ctx, q, args...)
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	return int(n), err
}
