package persist

import (
	"time"

	"gorm.io/gorm"

	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/postgres/pgtx"
)

// The statements below send a table's rows as one array per column and unnest them in
// PostgreSQL, so their text is the same for every batch size: pgx prepares each once
// per connection and reuses it (its default QueryExecModeCacheStatement), where a
// multi-row VALUES list would be parsed and planned again for nearly every batch. The
// arrays also have no bind parameter limit, so a batch of any size is one statement per
// table. unnest yields the rows in array order and INSERT ... SELECT writes them in that
// order: the callers' sorting still decides the order in which rows are locked.

// A result is identified by its entity and event id, as the order-worker identifies it.
const insertInboxSQL = `INSERT INTO inbox (event_id, entity, seq, type, outcome, reason, processed_at, trace_id)
SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[], $5::text[], $6::text[], $7::timestamptz[], $8::text[])
ON CONFLICT (entity, event_id) DO NOTHING
RETURNING entity, event_id`

// storedInboxSQL reads the inbox rows of results that insertInboxSQL did not insert. As
// a statement of its own it sees the rows that a concurrent transaction committed while
// the insert waited for it.
const storedInboxSQL = `SELECT entity, event_id, seq, type, outcome, reason FROM inbox
WHERE (entity, event_id) IN (SELECT * FROM unnest($1::text[], $2::text[]))`

// An order row is only ever replaced by a newer seq of its entity.
const upsertOrdersSQL = `INSERT INTO orders (lcid, status, allocation, paid, mode, target_date, lines, hold_until, seq, last_event_id, route, updated_at)
SELECT u.lcid, u.status, u.allocation, u.paid, u.mode, u.target_date, u.lines::jsonb, u.hold_until, u.seq, u.last_event_id,
	NULLIF(u.route, '')::jsonb, now()
FROM unnest($1::text[], $2::text[], $3::text[], $4::boolean[], $5::text[], $6::date[], $7::text[], $8::timestamptz[], $9::bigint[], $10::text[], $11::text[])
	AS u (lcid, status, allocation, paid, mode, target_date, lines, hold_until, seq, last_event_id, route)
ON CONFLICT (lcid) DO UPDATE SET status = excluded.status, allocation = excluded.allocation,
	paid = excluded.paid, mode = excluded.mode, target_date = excluded.target_date, lines = excluded.lines,
	hold_until = excluded.hold_until, route = excluded.route, seq = excluded.seq, last_event_id = excluded.last_event_id, updated_at = excluded.updated_at
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
//
// A lot's location never changes: a row keeps the one it has unless the newer one names
// a location other than the default (a result of a version from before locations says
// none for every lot, which is the default); setLotLocationsSQL writes a location that
// an older result came before.
const upsertLotsSQL = `INSERT INTO lots (sku, lot_id, kind, good, best_before, reg_seq, arrives_at, valid_from, valid_to,
	sellable, reserved, allocated, hidden, shipped, defective, version, location, updated_at)
SELECT u.*, now()
FROM unnest($1::text[], $2::text[], $3::text[], $4::boolean[], $5::date[], $6::bigint[], $7::date[], $8::date[], $9::date[],
	$10::bigint[], $11::bigint[], $12::bigint[], $13::bigint[], $14::bigint[], $15::bigint[], $16::bigint[], $17::text[])
	AS u (sku, lot_id, kind, good, best_before, reg_seq, arrives_at, valid_from, valid_to,
		sellable, reserved, allocated, hidden, shipped, defective, version, location)
ON CONFLICT (sku, lot_id) DO UPDATE SET kind = excluded.kind, good = excluded.good,
	location = CASE WHEN excluded.location <> 'default' THEN excluded.location ELSE lots.location END,
	best_before = excluded.best_before, reg_seq = excluded.reg_seq, arrives_at = excluded.arrives_at,
	valid_from = excluded.valid_from, valid_to = excluded.valid_to, sellable = excluded.sellable,
	reserved = excluded.reserved, allocated = excluded.allocated, hidden = excluded.hidden,
	shipped = excluded.shipped, defective = excluded.defective, version = excluded.version,
	updated_at = excluded.updated_at
WHERE lots.version < excluded.version`

// A transfer row, as a lot row, is only ever replaced by one written at a newer SKU
// version.
const upsertTransfersSQL = `INSERT INTO transfers (sku, transfer_id, state, from_location, to_location, lots, version, updated_at)
SELECT u.sku, u.transfer_id, u.state, u.from_location, u.to_location, u.lots::jsonb, u.version, now()
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::bigint[])
	AS u (sku, transfer_id, state, from_location, to_location, lots, version)
ON CONFLICT (sku, transfer_id) DO UPDATE SET state = excluded.state, from_location = excluded.from_location,
	to_location = excluded.to_location, lots = excluded.lots, version = excluded.version, updated_at = excluded.updated_at
WHERE transfers.version < excluded.version`

// A waiting line's row is only ever replaced by one written at a newer SKU version; a
// row of want 0 stays, so that an older result cannot queue its line again.
const upsertBackordersSQL = `INSERT INTO backorders (sku, holder, line, want, mode, target_date, class, seq, queued_at, version, updated_at)
SELECT u.sku, u.holder, u.line, u.want, u.mode, u.target_date, u.class, u.seq, u.queued_at, u.version, now()
FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::text[], $6::date[], $7::smallint[], $8::bigint[], $9::bigint[], $10::bigint[])
	AS u (sku, holder, line, want, mode, target_date, class, seq, queued_at, version)
ON CONFLICT (sku, holder, line) DO UPDATE SET want = excluded.want, mode = excluded.mode,
	target_date = excluded.target_date, class = excluded.class, seq = excluded.seq,
	queued_at = excluded.queued_at, version = excluded.version, updated_at = excluded.updated_at
WHERE backorders.version < excluded.version`

// setLotLocationsSQL writes the locations other than the default that lot rows name, over
// a row that a result naming none wrote first (a result of a version from before
// locations, at a newer SKU version: upsertLotsSQL does not touch the row then).
const setLotLocationsSQL = `UPDATE lots SET location = u.location
FROM unnest($1::text[], $2::text[], $3::text[]) AS u (sku, lot_id, location)
WHERE lots.sku = u.sku AND lots.lot_id = u.lot_id AND lots.location <> u.location`

// Moves are an append-only ledger: a move recorded once is never written again. A move is
// keyed as the ledger keys its operation, by SKU and op id, and its index.
const insertMovesSQL = `INSERT INTO moves (sku, op_id, idx, entity, event_id, lot_id, from_bucket, to_bucket, qty, sku_version)
SELECT * FROM unnest($1::text[], $2::text[], $3::integer[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::bigint[], $10::bigint[])
ON CONFLICT (sku, op_id, idx) DO NOTHING
RETURNING sku, op_id, idx`

// storedMovesSQL reads the moves that insertMovesSQL did not insert (see storedInboxSQL).
const storedMovesSQL = `SELECT sku, op_id, idx, entity, event_id, lot_id, from_bucket, to_bucket, qty, sku_version FROM moves
WHERE (sku, op_id, idx) IN (SELECT * FROM unnest($1::text[], $2::text[], $3::integer[]))`

// resultKey identifies a result: its entity and its event id.
type resultKey struct{ entity, eventID string }

// insertInbox inserts the inbox rows not there yet and returns their keys.
func insertInbox(tx *gorm.DB, rows []InboxRow) (map[resultKey]bool, error) {
	if len(rows) == 0 {
		return nil, nil
	}
	var (
		ids, entities, types, outcomes, reasons = col[string](rows), col[string](rows), col[string](rows), col[string](rows), col[string](rows)
		seqs                                    = col[int64](rows)
		processed                               = col[time.Time](rows)
		traces                                  = col[string](rows)
	)
	for i, r := range rows {
		ids[i], entities[i], seqs[i], types[i], outcomes[i], reasons[i], processed[i] = r.EventID, r.Entity, r.Seq, r.Type, r.Outcome, r.Reason, r.ProcessedAt
		traces[i] = r.TraceID
	}
	fresh := make(map[resultKey]bool, len(rows))
	err := pgtx.Query(tx, func(scan func(...any) error) error {
		var k resultKey
		if err := scan(&k.entity, &k.eventID); err != nil {
			return err
		}
		fresh[k] = true
		return nil
	}, insertInboxSQL, ids, entities, seqs, types, outcomes, reasons, processed, traces)
	return fresh, err
}

// storedInbox reads the inbox rows of keys.
func storedInbox(tx *gorm.DB, keys []resultKey) (map[resultKey]InboxRow, error) {
	entities, ids := col[string](keys), col[string](keys)
	for i, k := range keys {
		entities[i], ids[i] = k.entity, k.eventID
	}
	stored := make(map[resultKey]InboxRow, len(keys))
	err := pgtx.Query(tx, func(scan func(...any) error) error {
		var r InboxRow
		if err := scan(&r.Entity, &r.EventID, &r.Seq, &r.Type, &r.Outcome, &r.Reason); err != nil {
			return err
		}
		stored[resultKey{r.Entity, r.EventID}] = r
		return nil
	}, storedInboxSQL, entities, ids)
	return stored, err
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
		targets, holds                  = col[*time.Time](rows), col[*time.Time](rows)
		seqs                            = col[int64](rows)
		routes                          = col[string](rows)
	)
	for i, r := range rows {
		lcids[i], statuses[i], allocations[i], paid[i], modes[i] = r.LCID, r.Status, r.Allocation, r.Paid, r.Mode
		targets[i], lines[i], seqs[i], lastIDs[i] = r.TargetDate, string(r.Lines), r.Seq, r.LastEventID
		holds[i] = r.HoldUntil
		routes[i] = string(r.Route)
		if r.Lines == nil {
			lines[i] = "[]"
		}
	}
	return pgtx.Exec(tx, upsertOrdersSQL, lcids, statuses, allocations, paid, modes, targets, lines, holds, seqs, lastIDs, routes)
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
	return pgtx.Exec(tx, upsertSKUsSQL, skus, safety, settings, versions)
}

// A location's safety stock of a SKU is only ever replaced by one set at a newer SKU
// version.
const upsertLocationSafetySQL = `INSERT INTO sku_location_safety (sku, location, safety_stock, version, updated_at)
SELECT u.sku, u.location, u.safety_stock, u.version, now()
FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[]) AS u (sku, location, safety_stock, version)
ON CONFLICT (sku, location) DO UPDATE SET safety_stock = excluded.safety_stock, version = excluded.version,
	updated_at = excluded.updated_at
WHERE sku_location_safety.version < excluded.version`

// upsertLocationSafety writes locations' safety stocks where their version is newer.
func upsertLocationSafety(tx *gorm.DB, rows []LocationSafetyRow) error {
	if len(rows) == 0 {
		return nil
	}
	skus, locs, safety, versions := col[string](rows), col[string](rows), col[int64](rows), col[int64](rows)
	for i, r := range rows {
		skus[i], locs[i], safety[i], versions[i] = r.SKU, r.Location, r.SafetyStock, r.Version
	}
	_, err := pgtx.Exec(tx, upsertLocationSafetySQL, skus, locs, safety, versions)
	return err
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
		locations                                                 = col[string](rows)
		sellable, reserved, allocated, hidden, shipped, defective = col[int64](rows), col[int64](rows), col[int64](rows), col[int64](rows), col[int64](rows), col[int64](rows)
	)
	for i, r := range rows {
		skus[i], lotIDs[i], kinds[i], good[i], bestBefore[i], regSeqs[i] = r.SKU, r.LotID, r.Kind, r.Good, r.BestBefore, r.RegSeq
		arrives[i], from[i], to[i] = r.ArrivesAt, r.ValidFrom, r.ValidTo
		sellable[i], reserved[i], allocated[i], hidden[i], shipped[i], defective[i], ver[i] =
			r.Sellable, r.Reserved, r.Allocated, r.Hidden, r.Shipped, r.Defective, r.Version
		locations[i] = r.Location
	}
	n, err := pgtx.Exec(tx, upsertLotsSQL, skus, lotIDs, kinds, good, bestBefore, regSeqs, arrives, from, to,
		sellable, reserved, allocated, hidden, shipped, defective, ver, locations)
	if err != nil {
		return n, err
	}
	var lskus, llots, llocs []string
	for _, r := range rows {
		if r.Location != stock.DefaultLocation {
			lskus, llots, llocs = append(lskus, r.SKU), append(llots, r.LotID), append(llocs, r.Location)
		}
	}
	if len(lskus) > 0 {
		if _, err := pgtx.Exec(tx, setLotLocationsSQL, lskus, llots, llocs); err != nil {
			return n, err
		}
	}
	return n, nil
}

// upsertTransfers writes transfer rows where they are newer and returns how many it wrote.
func upsertTransfers(tx *gorm.DB, rows []TransferRow) (int, error) {
	if len(rows) == 0 {
		return 0, nil
	}
	var (
		skus, ids, states, froms, tos, lots = col[string](rows), col[string](rows), col[string](rows), col[string](rows), col[string](rows), col[string](rows)
		ver                                 = col[int64](rows)
	)
	for i, r := range rows {
		skus[i], ids[i], states[i], froms[i], tos[i], lots[i], ver[i] = r.SKU, r.TransferID, r.State, r.FromLocation, r.ToLocation, string(r.Lots), r.Version
	}
	return pgtx.Exec(tx, upsertTransfersSQL, skus, ids, states, froms, tos, lots, ver)
}

// upsertBackorders writes waiting lines' rows where they are newer and returns how many
// it wrote.
func upsertBackorders(tx *gorm.DB, rows []BackorderRow) (int, error) {
	if len(rows) == 0 {
		return 0, nil
	}
	var (
		skus, holders, lines, modes              = col[string](rows), col[string](rows), col[string](rows), col[string](rows)
		dates                                    = col[time.Time](rows)
		wants, classes, seqs, queuedAt, versions = col[int64](rows), col[int64](rows), col[int64](rows), col[int64](rows), col[int64](rows)
	)
	for i, r := range rows {
		skus[i], holders[i], lines[i], wants[i], modes[i] = r.SKU, r.Holder, r.Line, r.Want, r.Mode
		dates[i], classes[i], seqs[i], queuedAt[i], versions[i] = r.TargetDate, int64(r.Class), r.Seq, r.QueuedAt, r.Version
	}
	return pgtx.Exec(tx, upsertBackordersSQL, skus, holders, lines, wants, modes, dates, classes, seqs, queuedAt, versions)
}

// moveKey identifies a move: the ledger operation's SKU and op id, and the index.
type moveKey struct {
	sku, opID string
	idx       int
}

func (m MoveRow) key() moveKey { return moveKey{m.SKU, m.OpID, m.Idx} }

// insertMoves records the moves not recorded yet and returns their keys.
func insertMoves(tx *gorm.DB, rows []MoveRow) (map[moveKey]bool, error) {
	if len(rows) == 0 {
		return nil, nil
	}
	var (
		skus, opIDs, entities, events = col[string](rows), col[string](rows), col[string](rows), col[string](rows)
		lotIDs, froms, tos            = col[string](rows), col[string](rows), col[string](rows)
		idxs, qtys, versions          = col[int64](rows), col[int64](rows), col[int64](rows)
	)
	for i, r := range rows {
		skus[i], opIDs[i], idxs[i], entities[i], events[i] = r.SKU, r.OpID, int64(r.Idx), r.Entity, r.EventID
		lotIDs[i], froms[i], tos[i], qtys[i], versions[i] = r.LotID, r.FromBucket, r.ToBucket, r.Qty, r.SKUVersion
	}
	recorded := make(map[moveKey]bool, len(rows))
	err := pgtx.Query(tx, func(scan func(...any) error) error {
		var k moveKey
		if err := scan(&k.sku, &k.opID, &k.idx); err != nil {
			return err
		}
		recorded[k] = true
		return nil
	}, insertMovesSQL, skus, opIDs, idxs, entities, events, lotIDs, froms, tos, qtys, versions)
	return recorded, err
}

// storedMoves reads the moves of keys.
func storedMoves(tx *gorm.DB, keys []moveKey) (map[moveKey]MoveRow, error) {
	skus, opIDs, idxs := col[string](keys), col[string](keys), col[int64](keys)
	for i, k := range keys {
		skus[i], opIDs[i], idxs[i] = k.sku, k.opID, int64(k.idx)
	}
	stored := make(map[moveKey]MoveRow, len(keys))
	err := pgtx.Query(tx, func(scan func(...any) error) error {
		var m MoveRow
		if err := scan(&m.SKU, &m.OpID, &m.Idx, &m.Entity, &m.EventID, &m.LotID, &m.FromBucket, &m.ToBucket, &m.Qty, &m.SKUVersion); err != nil {
			return err
		}
		stored[m.key()] = m
		return nil
	}, storedMovesSQL, skus, opIDs, idxs)
	return stored, err
}

// col makes one column's array for rows.
func col[T, R any](rows []R) []T { return make([]T, len(rows)) }
