package outbound

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"

	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/postgres/pgtx"
)

// Writer derives a batch's outbound events from its freshly applied results and inserts
// them into the outbox, in the transaction that applied the batch.
type Writer struct {
	// LowStockThreshold is the low-stock threshold of a SKU without its own
	// (skus.low_stock_threshold).
	LowStockThreshold int64
	// Now is the clock: AvailableToShip counts the lots valid on Now().UTC()'s day. nil:
	// time.Now.
	Now func() time.Time
}

// The statements send one array per column, as the persist package's do, so their text is
// the same for every batch size.
const (
	insertEntitiesSQL = `INSERT INTO outbox_entities (entity) SELECT unnest($1::text[]) ON CONFLICT DO NOTHING`
	// Locking in entity order: two batches of overlapping entities wait for each other
	// rather than deadlock, and the second numbers its messages after the first's.
	lockEntitiesSQL = `SELECT entity, seq, state::text FROM outbox_entities WHERE entity = ANY($1) ORDER BY entity FOR UPDATE`
	readOrdersSQL   = `SELECT lcid, status, coalesce(allocation, ''), paid, coalesce(mode, ''),
	coalesce(to_char(target_date, 'YYYY-MM-DD'), ''), lines::text, last_event_id, hold_until
FROM orders WHERE lcid = ANY($1)`
	// readSKUsSQL sums a SKU's good lots per location as the ledger's availability counts
	// them: the candidates of an order to ship on $3 are the good lots valid on that day.
	// network tells whether the location counts toward the storefront's figures: an
	// enabled location that ships, or the default location while the shop has not
	// described it (ledger.ReadLocations' rule). A SKU without lots has one row, location ''.
	// The location's own safety stock (sku_location_safety, 0 for none) caps what a ship
	// allocation takes there.
	readSKUsSQL = `SELECT s.sku, s.version, s.safety_stock, coalesce(s.low_stock_threshold, $2),
	coalesce(l.location, ''), coalesce(bool_and(loc.enabled AND loc.ships), l.location = 'default', false),
	coalesce(max(ls.safety_stock), 0),
	coalesce(sum(l.sellable) FILTER (WHERE l.good), 0),
	coalesce(sum(l.reserved) FILTER (WHERE l.good), 0),
	coalesce(sum(l.allocated) FILTER (WHERE l.good), 0),
	coalesce(sum(l.sellable) FILTER (WHERE l.good AND l.valid_from <= $3::date AND $3::date <= l.valid_to), 0)
FROM skus s LEFT JOIN lots l ON l.sku = s.sku LEFT JOIN locations loc ON loc.location = l.location
	LEFT JOIN sku_location_safety ls ON ls.sku = s.sku AND ls.location = l.location
WHERE s.sku = ANY($1)
GROUP BY s.sku, l.location`
	// readWaitingSQL is what the SKUs' waiting lines wait for (backorders), held back from
	// every allocation as the ledger's qw is.
	readWaitingSQL  = `SELECT sku, sum(want) FROM backorders WHERE sku = ANY($1) AND want > 0 GROUP BY sku`
	insertOutboxSQL = `INSERT INTO outbox (message_id, kind, entity, seq, body)
SELECT u.id, u.kind, u.entity, u.seq, u.body::json
FROM unnest($1::uuid[], $2::text[], $3::text[], $4::bigint[], $5::text[]) AS u (id, kind, entity, seq, body)`
	updateEntitiesSQL = `UPDATE outbox_entities e SET seq = u.seq, state = u.state::jsonb
FROM unnest($1::text[], $2::bigint[], $3::text[]) AS u (entity, seq, state)
WHERE e.entity = u.entity`
)

// orderState is what an order's last order.status_changed told (outbox_entities.state).
type orderState struct {
	Status     *string `json:"status,omitempty"`
	Allocation string  `json:"allocation,omitempty"`
	Paid       bool    `json:"paid,omitempty"`
	// Lines is the sha256 of the lines' canonical JSON.
	Lines string `json:"lines,omitempty"`
	// HoldUntil is the hold's end (RFC 3339, UTC, to the microsecond); "" for none.
	HoldUntil string `json:"hold_until,omitempty"`
}

// skuFigures are the figures stock.changed tells; a change of any sends one.
type skuFigures struct {
	Sellable        int64 `json:"sellable"`
	Reserved        int64 `json:"reserved"`
	Allocated       int64 `json:"allocated"`
	AvailableToShip int64 `json:"available_to_ship"`
	SafetyStock     int64 `json:"safety_stock"`
	Threshold       int64 `json:"threshold"`
	Waiting         int64 `json:"waiting,omitempty"`
}

// skuState is what a SKU's last messages told (outbox_entities.state).
type skuState struct {
	Figures *skuFigures `json:"figures,omitempty"`
	// Level is the last level message's; "" before any (ok).
	Level string `json:"level,omitempty"`
	// Locations are the per-location figures the last stock.changed told.
	Locations []LocationStock `json:"locations,omitempty"`
	// LocationLevels are the last stock.location_* message's level per location; a
	// location absent: ok.
	LocationLevels map[string]string `json:"location_levels,omitempty"`
}

// entity is a locked outbox_entities row and the messages the batch adds to it.
type entity struct {
	seq   int64
	state string
	msgs  []Message
}

// Write inserts the outbound events of a batch's fresh results (those newly inserted into
// the inbox) with tx, the batch's transaction, after the batch's rows were written, and
// returns how many it inserted. It locks the outbox_entities rows of the results' orders
// and SKUs in entity order, so that concurrent batches number an entity's messages one
// after the other with no gap.
func (w *Writer) Write(tx *gorm.DB, fresh []event.Result) (int, error) {
	orders := map[string][]event.Result{}
	skus := map[string]event.Result{} // the newest fresh result listing the SKU
	for _, r := range fresh {
		if !strings.HasPrefix(r.Entity, event.SKUEntityPrefix) && (r.Order != nil || r.Outcome == event.Rejected) {
			orders[r.Entity] = append(orders[r.Entity], r)
		}
		for _, s := range r.SKUs {
			if cur, ok := skus[s.SKU]; !ok || r.ProcessedAt.After(cur.ProcessedAt) {
				skus[s.SKU] = r
			}
		}
	}
	names := make([]string, 0, len(orders)+len(skus))
	for lcid := range orders {
		names = append(names, lcid)
	}
	for sku := range skus {
		names = append(names, event.SKUEntityPrefix+sku)
	}
	if len(names) == 0 {
		return 0, nil
	}
	slices.Sort(names)

	if _, err := pgtx.Exec(tx, insertEntitiesSQL, names); err != nil {
		return 0, fmt.Errorf("outbound: outbox_entities: %w", err)
	}
	locked := make(map[string]*entity, len(names))
	err := pgtx.Query(tx, func(scan func(...any) error) error {
		var (
			name string
			e    entity
		)
		if err := scan(&name, &e.seq, &e.state); err != nil {
			return err
		}
		locked[name] = &e
		return nil
	}, lockEntitiesSQL, names)
	if err != nil {
		return 0, fmt.Errorf("outbound: lock outbox_entities: %w", err)
	}

	if err := w.orderMessages(tx, orders, locked); err != nil {
		return 0, err
	}
	if err := w.stockMessages(tx, skus, locked); err != nil {
		return 0, err
	}
	return insert(tx, names, locked)
}

// orderRow is what Write reads of an orders row.
type orderRow struct {
	status, allocation, mode, targetDate, lastEventID string
	paid                                              bool
	lines                                             []event.SnapshotLine
	holdUntil                                         *time.Time
}

func (w *Writer) orderMessages(tx *gorm.DB, orders map[string][]event.Result, locked map[string]*entity) error {
	if len(orders) == 0 {
		return nil
	}
	lcids := make([]string, 0, len(orders))
	for lcid := range orders {
		lcids = append(lcids, lcid)
	}
	rows := make(map[string]orderRow, len(lcids))
	err := pgtx.Query(tx, func(scan func(...any) error) error {
		var (
			lcid, lines string
			o           orderRow
		)
		if err := scan(&lcid, &o.status, &o.allocation, &o.paid, &o.mode, &o.targetDate, &lines, &o.lastEventID, &o.holdUntil); err != nil {
			return err
		}
		if err := json.Unmarshal([]byte(lines), &o.lines); err != nil {
			return fmt.Errorf("order %s: lines: %w", lcid, err)
		}
		rows[lcid] = o
		return nil
	}, readOrdersSQL, lcids)
	if err != nil {
		return fmt.Errorf("outbound: read orders: %w", err)
	}
	for lcid, rs := range orders {
		e := locked[lcid]
		row, hasRow := rows[lcid]
		slices.SortFunc(rs, func(a, b event.Result) int { return cmp.Compare(a.Seq, b.Seq) })
		status, changedBy := statusChange(e, row, hasRow, rs)
		for i, r := range rs {
			if r.Outcome == event.Rejected {
				d := OrderRefusedData{Reason: r.Reason, Detail: r.Detail}
				if hasRow {
					d.Status = row.status
				}
				if err := e.add(OrderRefused, lcid, "", r, d); err != nil {
					return err
				}
			}
			if i == changedBy {
				if err := e.add(OrderStatusChanged, lcid, "", r, status); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// statusChange compares the orders row with the state the entity's last
// order.status_changed told. When they differ it returns the message's data, stores the
// new state in e, and returns the index in rs of the result that caused it (the row's
// newest result when the batch holds it, else the batch's newest applied one); else -1.
func statusChange(e *entity, row orderRow, hasRow bool, rs []event.Result) (OrderStatusData, int) {
	if !hasRow {
		return OrderStatusData{}, -1
	}
	lines := row.lines
	if lines == nil {
		lines = []event.SnapshotLine{}
	}
	canonical, _ := json.Marshal(lines) // a slice of plain structs always marshals
	sum := sha256.Sum256(canonical)
	now := orderState{Status: &row.status, Allocation: row.allocation, Paid: row.paid, Lines: hex.EncodeToString(sum[:])}
	var hold *time.Time
	if row.holdUntil != nil {
		h := row.holdUntil.UTC()
		hold, now.HoldUntil = &h, h.Format(time.RFC3339Nano)
	}
	var was orderState
	_ = json.Unmarshal([]byte(e.state), &was) // state is jsonb written by Write: '{}' or an orderState

	var changed []string
	if was.Status == nil || *was.Status != *now.Status {
		changed = append(changed, "status")
	}
	if was.Status == nil || was.Allocation != now.Allocation {
		changed = append(changed, "allocation")
	}
	if was.Status == nil || was.Paid != now.Paid {
		changed = append(changed, "paid")
	}
	if was.Status == nil || was.Lines != now.Lines {
		changed = append(changed, "lines")
	}
	// A hold is told when the order has one, and when it moves or ends (an extension, a
	// payment, an expiry).
	if was.HoldUntil != now.HoldUntil {
		changed = append(changed, "hold_until")
	}
	if len(changed) == 0 {
		return OrderStatusData{}, -1
	}
	by := -1
	for i, r := range rs {
		if r.EventID == row.lastEventID {
			by = i
		}
	}
	if by < 0 {
		for i, r := range rs {
			if r.Outcome == event.Applied {
				by = i
			}
		}
	}
	if by < 0 {
		// Only refusals in the batch, and the row changed by a result of another batch
		// that wrote no message: the newest refusal caused the telling.
		by = len(rs) - 1
	}
	st, _ := json.Marshal(now)
	e.state = string(st)
	d := OrderStatusData{From: was.Status, To: row.status, Paid: row.paid, Mode: event.Mode(row.mode),
		TargetDate: row.targetDate, Lines: lines, Locations: ByLocation(lines), HoldUntil: hold, Changed: changed}
	if row.allocation != "" {
		d.Allocation = &row.allocation
	}
	return d, by
}

// skuRow is what Write reads of a SKU: its row, the network's sums and each location's.
type skuRow struct {
	version   int64
	figures   skuFigures
	locations []LocationStock
	// elsewhere: some lot is at a location other than the default one, or at one that does
	// not count toward the network.
	elsewhere bool
}

func (w *Writer) stockMessages(tx *gorm.DB, skus map[string]event.Result, locked map[string]*entity) error {
	if len(skus) == 0 {
		return nil
	}
	now := time.Now
	if w.Now != nil {
		now = w.Now
	}
	asOf := now().UTC().Format(time.DateOnly)
	names := make([]string, 0, len(skus))
	for sku := range skus {
		names = append(names, sku)
	}
	rows := make(map[string]*skuRow, len(names))
	valid := map[string]int64{}  // the network's sellable valid on asOf, per SKU
	capped := map[string]int64{} // what the network's locations give a ship allocation, per SKU
	err := pgtx.Query(tx, func(scan func(...any) error) error {
		var (
			sku, loc                         string
			version, safety, thresh, locSafe int64
			network                          bool
			sell, res, alloc, validS         int64
		)
		if err := scan(&sku, &version, &safety, &thresh, &loc, &network, &locSafe, &sell, &res, &alloc, &validS); err != nil {
			return err
		}
		s := rows[sku]
		if s == nil {
			s = &skuRow{version: version, figures: skuFigures{SafetyStock: safety, Threshold: thresh}}
			rows[sku] = s
		}
		if loc == "" {
			return nil // no lot
		}
		if network {
			f := &s.figures
			f.Sellable, f.Reserved, f.Allocated = f.Sellable+sell, f.Reserved+res, f.Allocated+alloc
			valid[sku] += validS
			capped[sku] += max(0, validS-locSafe)
		}
		ats := max(0, validS-max(safety, locSafe))
		s.locations = append(s.locations, LocationStock{Location: loc, Network: network, Sellable: sell, Reserved: res,
			Allocated: alloc, AvailableToShip: ats, Level: Level(ats, thresh)})
		s.elsewhere = s.elsewhere || loc != event.DefaultLocation || !network
		return nil
	}, readSKUsSQL, names, w.LowStockThreshold, asOf)
	if err != nil {
		return fmt.Errorf("outbound: read skus: %w", err)
	}
	waiting, err := readWaiting(tx, names)
	if err != nil {
		return err
	}
	for _, sku := range names {
		row, ok := rows[sku]
		if !ok {
			continue // the batch wrote no row of it: nothing to tell
		}
		q := waiting[sku]
		row.figures.Waiting = q
		row.figures.AvailableToShip = max(0, min(valid[sku]-row.figures.SafetyStock, capped[sku])-q)
		for i := range row.locations {
			l := &row.locations[i]
			l.AvailableToShip = max(0, l.AvailableToShip-q)
			l.Level = Level(l.AvailableToShip, row.figures.Threshold)
		}
		if !row.elsewhere {
			row.locations = nil // every lot at the default location, which counts: the SKU's figures are its
		}
		slices.SortFunc(row.locations, func(a, b LocationStock) int { return strings.Compare(a.Location, b.Location) })
		if err := stockMessagesOf(sku, row, asOf, locked[event.SKUEntityPrefix+sku], skus[sku]); err != nil {
			return err
		}
	}
	return nil
}

// stockMessagesOf adds to e the messages of a SKU whose figures are now row's: a
// stock.changed when they differ from what the last one told, then the network's level
// message, then each location's.
func stockMessagesOf(sku string, row *skuRow, asOf string, e *entity, cause event.Result) error {
	name := event.SKUEntityPrefix + sku
	var was skuState
	_ = json.Unmarshal([]byte(e.state), &was) // state is jsonb written by Write: '{}' or a skuState
	f := row.figures
	level := Level(f.AvailableToShip, f.Threshold)
	if was.Figures == nil || *was.Figures != f || !slices.Equal(was.Locations, row.locations) {
		if err := e.add(StockChanged, name, "", cause, StockData{Version: row.version, SafetyStock: f.SafetyStock,
			Sellable: f.Sellable, Reserved: f.Reserved, Allocated: f.Allocated, AvailableToShip: f.AvailableToShip, Waiting: f.Waiting,
			AsOf: asOf, Level: level, Threshold: f.Threshold, Locations: row.locations}); err != nil {
			return err
		}
	}
	previous := cmp.Or(was.Level, LevelOK)
	if kind, ok := levelKind(previous, level); ok {
		if err := e.add(kind, name, "", cause, StockLevelData{AvailableToShip: f.AvailableToShip, Threshold: f.Threshold,
			Level: level, Previous: previous, AsOf: asOf}); err != nil {
			return err
		}
	}
	levels := map[string]string{}
	for _, l := range row.locations {
		previous := cmp.Or(was.LocationLevels[l.Location], LevelOK)
		if kind, ok := levelKind(previous, l.Level); ok {
			if err := e.add(locationKinds[kind], name, l.Location, cause, StockLevelData{AvailableToShip: l.AvailableToShip,
				Threshold: f.Threshold, Level: l.Level, Previous: previous, AsOf: asOf}); err != nil {
				return err
			}
		}
		if l.Level != LevelOK {
			levels[l.Location] = l.Level
		}
	}
	st, _ := json.Marshal(skuState{Figures: &f, Level: level, Locations: row.locations, LocationLevels: levels})
	e.state = string(st)
	return nil
}

// locationKinds are the per-location kinds of the network's level kinds.
var locationKinds = map[Kind]Kind{StockLow: StockLocationLow, StockOut: StockLocationOut, StockBack: StockLocationBack}

// Level is a SKU's stock level: out at 0 available to ship, low at threshold or below,
// else ok.
func Level(available, threshold int64) string {
	switch {
	case available <= 0:
		return LevelOut
	case available <= threshold:
		return LevelLow
	}
	return LevelOK
}

// levelKind is the message a move from level was to level now sends, if any.
func levelKind(was, now string) (Kind, bool) {
	rank := map[string]int{LevelOK: 0, LevelLow: 1, LevelOut: 2}
	switch {
	case rank[now] > rank[was] && now == LevelLow:
		return StockLow, true
	case rank[now] > rank[was]:
		return StockOut, true
	case rank[now] < rank[was]:
		return StockBack, true
	}
	return "", false
}

// add appends a message of kind, caused by r, numbered after e's last; location names the
// location a stock.location_* message tells about ("" on every other kind).
func (e *entity) add(kind Kind, name, location string, r event.Result, data any) error {
	id, err := uuid.NewV7()
	if err != nil {
		return fmt.Errorf("outbound: message id: %w", err)
	}
	m := Message{ID: id.String(), Kind: kind, Entity: name, OccurredAt: r.ProcessedAt,
		CausedBy: Cause{EventID: r.EventID, Type: r.Type}, Location: location}
	if sku, ok := strings.CutPrefix(name, event.SKUEntityPrefix); ok {
		m.SKU = sku
	} else {
		m.LCID = name
	}
	if m.Data, err = json.Marshal(data); err != nil {
		return fmt.Errorf("outbound: %s of %s: %w", kind, name, err)
	}
	e.seq++
	m.Seq = e.seq
	e.msgs = append(e.msgs, m)
	return nil
}

// insert writes the messages of the entities, in entity and seq order, with one statement,
// and the entities' new seq and state with another.
func insert(tx *gorm.DB, names []string, locked map[string]*entity) (int, error) {
	var (
		ids, kinds, entities, bodies []string
		seqs                         []int64
		eNames, eStates              []string
		eSeqs                        []int64
	)
	for _, name := range names {
		e := locked[name]
		if e == nil || len(e.msgs) == 0 {
			continue
		}
		for _, m := range e.msgs {
			b, err := json.Marshal(m)
			if err != nil {
				return 0, fmt.Errorf("outbound: %s of %s: %w", m.Kind, name, err)
			}
			ids, kinds, entities, seqs, bodies = append(ids, m.ID), append(kinds, string(m.Kind)), append(entities, name),
				append(seqs, m.Seq), append(bodies, string(b))
		}
		eNames, eSeqs, eStates = append(eNames, name), append(eSeqs, e.seq), append(eStates, e.state)
	}
	if len(ids) == 0 {
		return 0, nil
	}
	if _, err := pgtx.Exec(tx, insertOutboxSQL, ids, kinds, entities, seqs, bodies); err != nil {
		return 0, fmt.Errorf("outbound: insert %d into outbox: %w", len(ids), err)
	}
	if _, err := pgtx.Exec(tx, updateEntitiesSQL, eNames, eSeqs, eStates); err != nil {
		return 0, fmt.Errorf("outbound: update outbox_entities: %w", err)
	}
	return len(ids), nil
}

// readWaiting is what each SKU's waiting lines wait for (only SKUs with some).
func readWaiting(tx *gorm.DB, skus []string) (map[string]int64, error) {
	out := map[string]int64{}
	err := pgtx.Query(tx, func(scan func(...any) error) error {
		var sku string
		var n int64
		if err := scan(&sku, &n); err != nil {
			return err
		}
		out[sku] = n
		return nil
	}, readWaitingSQL, skus)
	if err != nil {
		return nil, fmt.Errorf("outbound: read waiting lines: %w", err)
	}
	return out, nil
}
