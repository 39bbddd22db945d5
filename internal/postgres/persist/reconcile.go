package persist

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"gorm.io/gorm"

	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/postgres/inventorydb"
)

// SKUSource is the inventory in Redis; *ledger.Ledger is one.
type SKUSource interface {
	// Snapshot returns a SKU's state; an error wrapping stock.ErrNotLoaded when it is
	// not in Redis.
	Snapshot(ctx context.Context, sku string) (stock.SKU, error)
	// Queue returns a SKU's waiting lines in serving order (none when it has none).
	Queue(ctx context.Context, sku string) ([]stock.QueueEntry, error)
	// ScanSKUs calls fn with every SKU in Redis, possibly concurrently.
	ScanSKUs(ctx context.Context, fn func(sku string) error) error
}

// OrderSource is the orders in Redis.
type OrderSource interface {
	// Order returns an order's state and its entity seq (the seq of the newest result);
	// a nil snapshot when the entity holds no order.
	Order(ctx context.Context, lcid string) (*event.OrderSnapshot, int64, error)
	// ScanOrders calls fn with every lcid in Redis, possibly concurrently.
	ScanOrders(ctx context.Context, fn func(lcid string) error) error
}

// DriftKind says how PostgreSQL's copy of an entity differs from Redis.
type DriftKind string

// Drift kinds. A SKU's kind is the gravest of its rows' (ahead, then diverged, then
// behind): the skus row and each lot row carry the version they were written at, and a
// result writes only the lots it touched, so each row is judged by its own version.
const (
	// Missing: PostgreSQL has no row for the entity.
	Missing DriftKind = "missing"
	// Behind: PostgreSQL holds an older version (seq) than Redis: the skus row, a safety
	// stock that differs from Redis and was set at an older version than Redis's SKU
	// version, a lot row that differs from Redis and was written at an older version, or
	// a lot PostgreSQL has no row for (a registered lot whose result is not persisted).
	// Results still in the results queue (or its DLQ) cause it; a repair rewrites
	// PostgreSQL from Redis.
	Behind DriftKind = "behind"
	// Ahead: PostgreSQL holds a newer version (seq) than Redis, as after a Redis data
	// loss; never repaired from Redis.
	Ahead DriftKind = "ahead"
	// Diverged: a row (or a safety stock) written at Redis's version (seq) with different
	// content, or a lot row that Redis does not hold (the ledger never removes a lot); no
	// queued result explains it, and it is never repaired automatically.
	Diverged DriftKind = "diverged"
)

// gravity orders the kinds of a SKU's rows: the entity takes the gravest.
func gravity(k DriftKind) int { return slices.Index([]DriftKind{Behind, Diverged, Ahead}, k) }

// Drift is one entity whose PostgreSQL copy differs from Redis.
type Drift struct {
	// Entity is "sku" or "order".
	Entity string
	// Key is the SKU or the lcid.
	Key  string
	Kind DriftKind
	// Redis and Postgres are the SKU versions (order seqs) on each side; Postgres is 0
	// when Missing. A SKU's Postgres is its skus row's version; each lot row's own
	// version is in Details.
	Redis, Postgres int64
	// Details are the differing fields, "field: redis=... postgres=...", and for a SKU
	// the differing lots, "lot L00 behind (postgres row v4): sellable redis=3 postgres=5".
	Details []string
	// Locations are, for a SKU, the locations of the lots that differ (Redis's, else
	// PostgreSQL's) and those whose own safety stocks differ, by id; none when only the
	// SKU's row differs.
	Locations []string
	// Repaired is true when the repair rewrote PostgreSQL and it then matched Redis.
	Repaired bool
	// Left is, when a repair was tried and did not fix the drift, what comparing the
	// entity again right after the repair found (PostgreSQL read first, then Redis):
	// Left.Redis above Redis means Redis moved on meanwhile; otherwise the repair left
	// rows it could not or would not write.
	Left *Drift
}

// String renders the drift on one line.
func (d Drift) String() string {
	s := fmt.Sprintf("%-5s %-20s %-8s redis=%d postgres=%d", d.Entity, d.Key, d.Kind, d.Redis, d.Postgres)
	if len(d.Details) > 0 {
		s += ": " + strings.Join(d.Details, "; ")
	}
	if d.Repaired {
		s += " [repaired]"
	}
	if l := d.Left; l != nil {
		s += fmt.Sprintf(" [after the repair: %s redis=%d postgres=%d", l.Kind, l.Redis, l.Postgres)
		if len(l.Details) > 0 {
			s += ": " + strings.Join(l.Details, "; ")
		}
		s += "]"
	}
	return s
}

// MovedOn is true when a repair did not fix the drift because Redis moved on to a newer
// version (seq) while it ran: running again repairs it.
func (d Drift) MovedOn() bool {
	return d.Left != nil && d.Left.Redis > d.Redis && (d.Left.Kind == Behind || d.Left.Kind == Missing)
}

// ReconcileConfig says what Reconcile compares and whether it repairs.
type ReconcileConfig struct {
	// DB is PostgreSQL (required).
	DB *gorm.DB
	// SKUs is the inventory in Redis (required).
	SKUs SKUSource
	// Orders is the orders in Redis; nil compares no orders.
	Orders OrderSource
	// Repair rewrites PostgreSQL from Redis for every SKU and order that PostgreSQL holds
	// an older version of, or none at all (Missing, Behind), through the same version
	// guard as the persist-worker: a SKU's skus row and every lot row older than Redis's
	// version take Redis's state at that version.
	Repair bool
	// Progress, if set, is called after each entity compared, with the count so far and
	// the total (known once the scans of Redis ended).
	Progress func(done, total int)
}

// ReconcileReport is what Reconcile found and did.
type ReconcileReport struct {
	// SKUs and Orders count the entities compared.
	SKUs, Orders int
	// Drifts are the entities whose copies differ, SKUs first, each group sorted by key.
	Drifts []Drift
	// OrdersCompared is false when no OrderSource was given.
	OrdersCompared bool
}

// Remaining counts the drifts a repair did not fix (all of them without a repair).
func (r ReconcileReport) Remaining() int {
	n := 0
	for _, d := range r.Drifts {
		if !d.Repaired {
			n++
		}
	}
	return n
}

// RepairedOrder is the last_event_id that a repaired order row carries: no result event
// wrote it.
const RepairedOrder = "junbanctl-reconcile"

// Reconcile compares every SKU (safety stock and the version it was set at, version,
// every lot's fields, buckets and row version, every transfer, every location's own
// safety stock and its row version, every waiting line) and every order (state, lines and seq) in
// Redis with PostgreSQL and, with Repair, rewrites PostgreSQL from Redis where Redis is
// newer. Entities only in PostgreSQL are not drift: Redis loads SKUs lazily.
func Reconcile(ctx context.Context, cfg ReconcileConfig) (ReconcileReport, error) {
	rep := ReconcileReport{OrdersCompared: cfg.Orders != nil}
	if cfg.DB == nil || cfg.SKUs == nil {
		return rep, errors.New("persist: reconcile: DB and SKUs are required")
	}
	skus, err := collect(ctx, cfg.SKUs.ScanSKUs)
	if err != nil {
		return rep, fmt.Errorf("persist: reconcile: scan skus: %w", err)
	}
	var lcids []string
	if cfg.Orders != nil {
		if lcids, err = collect(ctx, cfg.Orders.ScanOrders); err != nil {
			return rep, fmt.Errorf("persist: reconcile: scan orders: %w", err)
		}
	}
	var (
		mu    sync.Mutex
		done  int
		total = len(skus) + len(lcids)
	)
	record := func(d *Drift, compared bool, order bool) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case compared && order:
			rep.Orders++
		case compared:
			rep.SKUs++
		}
		if d != nil {
			rep.Drifts = append(rep.Drifts, *d)
		}
		done++
		if cfg.Progress != nil {
			cfg.Progress(done, total)
		}
	}
	err = parallel(ctx, skus, func(ctx context.Context, sku string) error {
		d, ok, err := compareSKU(ctx, cfg, sku)
		if err == nil {
			record(d, ok, false)
		}
		return err
	})
	if err != nil {
		return rep, err
	}
	err = parallel(ctx, lcids, func(ctx context.Context, lcid string) error {
		d, ok, err := compareOrder(ctx, cfg, lcid)
		if err == nil {
			record(d, ok, true)
		}
		return err
	})
	if err != nil {
		return rep, err
	}
	slices.SortFunc(rep.Drifts, func(a, b Drift) int {
		// SKUs before orders, each by key.
		return cmp.Or(-cmp.Compare(a.Entity, b.Entity), cmp.Compare(a.Key, b.Key))
	})
	return rep, nil
}

// reconcileParallel is how many entities Reconcile compares at once: each comparison
// waits on a Redis and a PostgreSQL round trip.
const reconcileParallel = 8

// parallel calls fn for every key, reconcileParallel at once, and returns the first error.
func parallel(ctx context.Context, keys []string, fn func(context.Context, string) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := make(chan string)
	var wg sync.WaitGroup
	for range reconcileParallel {
		wg.Go(func() {
			for k := range next {
				if err := fn(ctx, k); err != nil {
					cancel(err)
				}
			}
		})
	}
feed:
	for _, k := range keys {
		select {
		case next <- k:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	return context.Cause(ctx)
}

func collect(ctx context.Context, scan func(context.Context, func(string) error) error) ([]string, error) {
	var mu sync.Mutex
	var keys []string
	err := scan(ctx, func(k string) error {
		mu.Lock()
		keys = append(keys, k)
		mu.Unlock()
		return nil
	})
	slices.Sort(keys)
	return slices.Compact(keys), err
}

// Each comparison reads PostgreSQL first and Redis second. On a healthy system
// PostgreSQL only ever holds versions Redis produced, so a copy read before Redis can
// only be behind or equal. Read the other way round, an entity that moves on in Redis and
// is persisted between the two reads would look ahead of the stale Redis snapshot
// ("Redis lost data?") on a healthy live system.

// compareSKU returns the SKU's drift (nil when none) and whether it was compared at all.
func compareSKU(ctx context.Context, cfg ReconcileConfig, sku string) (*Drift, bool, error) {
	p, r, ok, err := readSKU(ctx, cfg, sku)
	if err != nil || !ok {
		return nil, false, err
	}
	d := skuDrift(r, p)
	if d == nil {
		return nil, true, nil
	}
	if cfg.Repair && (d.Kind == Missing || d.Kind == Behind) {
		// The version guard writes only rows PostgreSQL holds at an older version than
		// Redis's (in-step lots too, which change only in version), never one at Redis's
		// version or a newer one the persist-worker wrote meanwhile.
		if _, err := WriteSKUs(ctx, cfg.DB, []stock.SKU{clearingQueue(clearingSafety(r, p), p)}); err != nil {
			return nil, true, fmt.Errorf("persist: reconcile: repair sku %s: %w", sku, err)
		}
		p, now, ok, err := readSKU(ctx, cfg, sku)
		if err != nil {
			return nil, true, err
		}
		if !ok {
			now = r // gone from Redis since: judge the repair by what it wrote
		}
		d.Left = skuDrift(now, p)
		d.Repaired = d.Left == nil
	}
	return d, true, nil
}

// clearingSafety is r with a 0 safety stock at each location PostgreSQL holds one for and
// Redis does not, so that a repair writing it sets those rows to none.
func clearingSafety(r stock.SKU, p *pgSKU) stock.SKU {
	if p == nil {
		return r
	}
	ls := maps.Clone(r.LocationSafety)
	for _, row := range p.LocationSafety {
		if _, ok := ls[row.Location]; !ok && row.SafetyStock != 0 {
			if ls == nil {
				ls = map[string]int64{}
			}
			ls[row.Location] = 0
		}
	}
	r.LocationSafety = ls
	return r
}

// clearingQueue is r with a Want 0 entry for each line PostgreSQL holds waiting and Redis
// does not, so that a repair writing it says those lines left the queue.
func clearingQueue(r stock.SKU, p *pgSKU) stock.SKU {
	if p == nil {
		return r
	}
	q := slices.Clone(r.Queue)
	for _, row := range p.Queue {
		waits := slices.ContainsFunc(r.Queue, func(e stock.QueueEntry) bool { return e.Holder == row.Holder && e.Line == row.Line })
		if row.Want > 0 && !waits {
			e := row.QueueEntry
			e.Want = 0
			q = append(q, e)
		}
	}
	r.Queue = q
	return r
}

// readSKU reads PostgreSQL's copy of a SKU (nil when it has none), then Redis's; ok is
// false when Redis does not hold the SKU (any more).
func readSKU(ctx context.Context, cfg ReconcileConfig, sku string) (*pgSKU, stock.SKU, bool, error) {
	p, err := loadPGSKU(ctx, cfg.DB, sku)
	if err != nil {
		return nil, stock.SKU{}, false, fmt.Errorf("persist: reconcile: sku %s in postgres: %w", sku, err)
	}
	r, err := cfg.SKUs.Snapshot(ctx, sku)
	if errors.Is(err, stock.ErrNotLoaded) {
		return p, stock.SKU{}, false, nil // gone since the scan
	}
	if err != nil {
		return nil, stock.SKU{}, false, fmt.Errorf("persist: reconcile: sku %s in redis: %w", sku, err)
	}
	if r.Queue, err = cfg.SKUs.Queue(ctx, sku); err != nil {
		return nil, stock.SKU{}, false, fmt.Errorf("persist: reconcile: sku %s queue in redis: %w", sku, err)
	}
	return p, r, true, nil
}

// pgSKU is PostgreSQL's copy of a SKU: its skus row and its lot rows, each lot with the
// version it was written at.
type pgSKU struct {
	SafetyStock, Version int64
	// SettingsVersion is the SKU version the safety stock was written at.
	SettingsVersion int64
	Lots            []pgLot
	Transfers       []pgTransfer
	// LocationSafety are the SKU's rows of sku_location_safety, 0 ones too.
	LocationSafety []pgLocationSafety
	// Queue are the SKU's rows of backorders, want 0 ones too.
	Queue []pgBackorder
}

// pgBackorder is a waiting line's row (Want 0: it left the queue), with the SKU version
// it was written at.
type pgBackorder struct {
	stock.QueueEntry
	Version int64
}

// pgLocationSafety is a location's own safety stock of a SKU (0: none), with the SKU
// version it was written at.
type pgLocationSafety struct {
	Location             string
	SafetyStock, Version int64
}

type pgTransfer struct {
	stock.Transfer
	// Version is the SKU version the transfer row was written at.
	Version int64
}

type pgLot struct {
	stock.Lot
	// Version is the SKU version the lot row was written at.
	Version int64
}

// reconcileQuerySKU is inventorydb.LoadQuerySKU with the settings version;
// reconcileQueryLots is inventorydb.LoadQueryLots with each row's version.
const (
	reconcileQuerySKU  = `SELECT safety_stock, settings_version, version FROM skus WHERE sku = ?`
	reconcileQueryLots = `SELECT ` + inventorydb.LotColumns + `, version
  FROM lots WHERE sku = ? ORDER BY reg_seq, lot_id`
	reconcileQueryTransfers = `SELECT transfer_id, state, from_location, to_location, lots::text AS lots, version
  FROM transfers WHERE sku = ? ORDER BY transfer_id COLLATE "C"`
	// reconcileQueryLocationSafety is inventorydb.LoadQueryLocationSafety with the 0 rows
	// and each row's version.
	reconcileQueryLocationSafety = `SELECT location, safety_stock, version
  FROM sku_location_safety WHERE sku = ? ORDER BY location`
	// reconcileQueryBackorders reads every row of the SKU's queue, want 0 ones too.
	reconcileQueryBackorders = `SELECT holder, line, want, mode, to_char(target_date, 'YYYY-MM-DD') AS target_date,
       class, seq, queued_at, version FROM backorders WHERE sku = ? ORDER BY holder, line`
)

// loadPGSKU reads a SKU's rows in one repeatable-read transaction, so the skus row and
// its lots come from one snapshot; nil when there is no skus row.
func loadPGSKU(ctx context.Context, db *gorm.DB, sku string) (*pgSKU, error) {
	var p *pgSKU
	err := db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var head []struct{ SafetyStock, SettingsVersion, Version int64 }
		if err := tx.Raw(reconcileQuerySKU, sku).Scan(&head).Error; err != nil {
			return err
		}
		if len(head) == 0 {
			return nil
		}
		p = &pgSKU{SafetyStock: head[0].SafetyStock, SettingsVersion: head[0].SettingsVersion, Version: head[0].Version}
		if err := tx.Raw(reconcileQueryLots, sku).Scan(&p.Lots).Error; err != nil {
			return err
		}
		if err := tx.Raw(reconcileQueryLocationSafety, sku).Scan(&p.LocationSafety).Error; err != nil {
			return err
		}
		if err := tx.Raw(reconcileQueryBackorders, sku).Scan(&p.Queue).Error; err != nil {
			return err
		}
		var err error
		p.Transfers, err = loadPGTransfers(tx, sku)
		return err
	}, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	return p, err
}

// loadPGTransfers reads a SKU's transfer rows, each with its version.
func loadPGTransfers(tx *gorm.DB, sku string) ([]pgTransfer, error) {
	var rows []struct {
		TransferID, State, FromLocation, ToLocation, Lots string
		Version                                           int64
	}
	if err := tx.Raw(reconcileQueryTransfers, sku).Scan(&rows).Error; err != nil {
		return nil, err
	}
	out := make([]pgTransfer, len(rows))
	for i, r := range rows {
		out[i] = pgTransfer{Transfer: stock.Transfer{TransferID: r.TransferID, State: r.State, From: r.FromLocation, To: r.ToLocation}, Version: r.Version}
		if err := json.Unmarshal([]byte(r.Lots), &out[i].Lots); err != nil {
			return nil, fmt.Errorf("transfer %s: lots: %w", r.TransferID, err)
		}
	}
	return out, nil
}

// transferDrifts compares Redis's transfers of a SKU at version v with PostgreSQL's rows,
// each row judged by its own version as a lot row is, and calls worse with each
// difference's kind; it returns the differences, "transfer X behind (postgres row v4):
// state redis=received postgres=in_transit".
func transferDrifts(v int64, rs []stock.Transfer, ps []pgTransfer, worse func(DriftKind)) []string {
	pt := make(map[string]pgTransfer, len(ps))
	for _, t := range ps {
		pt[t.TransferID] = t
	}
	var out []string
	for _, rt := range rs {
		t, ok := pt[rt.TransferID]
		delete(pt, rt.TransferID)
		var k DriftKind
		switch {
		case !ok:
			worse(Behind)
			out = append(out, fmt.Sprintf("transfer %s behind: not in postgres", rt.TransferID))
			continue
		case t.Version > v:
			k = Ahead
		case reflect.DeepEqual(rt, t.Transfer):
			continue
		case t.Version < v:
			k = Behind
		default:
			k = Diverged
		}
		worse(k)
		out = append(out, fmt.Sprintf("transfer %s %s (postgres row v%d): redis=%s postgres=%s", rt.TransferID, k, t.Version,
			transferText(rt), transferText(t.Transfer)))
	}
	for _, id := range slices.Sorted(maps.Keys(pt)) {
		// The ledger never removes a transfer: no queued result explains a row Redis lacks.
		k := Diverged
		if pt[id].Version > v {
			k = Ahead
		}
		worse(k)
		out = append(out, fmt.Sprintf("transfer %s %s (postgres row v%d): not in redis", id, k, pt[id].Version))
	}
	return out
}

// queueDrifts compares Redis's waiting lines of a SKU at version v with PostgreSQL's rows
// (a row of want 0, or none, is a line that does not wait), each row judged by its own
// version as a lot row is, and calls worse with each difference's kind; it returns the
// differences, "queue LC-1/2 behind (postgres row v4): redis=3 ship 2026-12-01 c0 #7
// postgres=5 ...".
func queueDrifts(v int64, rs []stock.QueueEntry, ps []pgBackorder, worse func(DriftKind)) []string {
	type key struct{ holder, line string }
	pq := make(map[key]pgBackorder, len(ps))
	for _, r := range ps {
		pq[key{r.Holder, r.Line}] = r
	}
	var out []string
	note := func(k DriftKind, e stock.QueueEntry, row pgBackorder, redis string) {
		worse(k)
		out = append(out, fmt.Sprintf("queue %s/%s %s (postgres row v%d): redis=%s postgres=%s", e.Holder, e.Line, k, row.Version,
			redis, queueText(row.QueueEntry)))
	}
	for _, e := range rs {
		k := key{e.Holder, e.Line}
		row, ok := pq[k]
		delete(pq, k)
		switch {
		case !ok:
			worse(Behind)
			out = append(out, fmt.Sprintf("queue %s/%s behind: not in postgres", e.Holder, e.Line))
		case row.Version > v:
			note(Ahead, e, row, queueText(e))
		case row.QueueEntry == e:
		case row.Version < v:
			note(Behind, e, row, queueText(e))
		default:
			note(Diverged, e, row, queueText(e))
		}
	}
	for _, k := range slices.SortedFunc(maps.Keys(pq), func(a, b key) int {
		return cmp.Or(cmp.Compare(a.holder, b.holder), cmp.Compare(a.line, b.line))
	}) {
		row := pq[k]
		switch {
		case row.Want == 0:
		case row.Version > v:
			note(Ahead, row.QueueEntry, row, "none")
		case row.Version < v:
			// The result that filled or dequeued the line is not persisted yet.
			note(Behind, row.QueueEntry, row, "none")
		default:
			note(Diverged, row.QueueEntry, row, "none")
		}
	}
	return out
}

// queueText is a waiting line on one line: "want mode date c<class> #<seq> @<queued_at>".
func queueText(e stock.QueueEntry) string {
	return fmt.Sprintf("%d %s %s c%d #%d @%d", e.Want, e.Mode, e.TargetDate, e.Class, e.Seq, e.QueuedAt)
}

// locationSafetyDrifts compares Redis's locations' safety stocks of a SKU at version v
// with PostgreSQL's rows (a missing row or a 0 one is none), each row judged by its own
// version as a lot row is, and calls worse with each difference's kind; it returns the
// differing locations and the differences, "location_safety store-1 behind (postgres row
// v4): redis=2 postgres=0".
func locationSafetyDrifts(v int64, rs map[string]int64, ps []pgLocationSafety, worse func(DriftKind)) ([]string, []string) {
	pl := make(map[string]pgLocationSafety, len(ps))
	all := slices.Collect(maps.Keys(rs))
	for _, r := range ps {
		pl[r.Location] = r
		all = append(all, r.Location)
	}
	slices.Sort(all)
	var locs, out []string
	// A location Redis does not hold has none (rs[loc] is 0): the ledger keeps no 0.
	for _, loc := range slices.Compact(all) {
		r, ok := pl[loc]
		var k DriftKind
		switch {
		case !ok:
			worse(Behind)
			locs = append(locs, loc)
			out = append(out, fmt.Sprintf("location_safety %s behind: not in postgres", loc))
			continue
		case r.Version > v:
			k = Ahead
		case rs[loc] == r.SafetyStock:
			continue
		case r.Version < v:
			k = Behind
		default:
			k = Diverged
		}
		worse(k)
		locs = append(locs, loc)
		out = append(out, fmt.Sprintf("location_safety %s %s (postgres row v%d): redis=%d postgres=%d", loc, k, r.Version,
			rs[loc], r.SafetyStock))
	}
	return locs, out
}

// transferText is a transfer on one line: "state from->to source:transit:qty ...".
func transferText(t stock.Transfer) string {
	s := t.State + " " + t.From + "->" + t.To
	for _, l := range t.Lots {
		s += fmt.Sprintf(" %s:%s:%d", l.Source, l.Transit, l.Qty)
	}
	return s
}

// skuDrift compares Redis's SKU r with PostgreSQL's copy p (nil when it has none); nil
// when they agree.
func skuDrift(r stock.SKU, p *pgSKU) *Drift {
	d := &Drift{Entity: "sku", Key: r.SKU, Redis: r.Version}
	if p == nil {
		d.Kind = Missing
		return d
	}
	d.Postgres = p.Version
	var kind DriftKind
	worse := func(k DriftKind) {
		if gravity(k) > gravity(kind) {
			kind = k
		}
	}
	// The skus row is written at the newest version of every result, whichever lots it
	// touched: an older one is behind even where its safety stock agrees.
	switch {
	case p.Version < r.Version:
		worse(Behind)
	case p.Version > r.Version:
		worse(Ahead)
	}
	// The safety stock is judged by the version it was written at, which only the results
	// that set it raise: with such a result queued and a later operation's persisted, the
	// skus row is at Redis's version and its safety stock older (lag, so behind). 0: no
	// setting was persisted (an import, or a row from before settings versions).
	if r.SafetyStock != p.SafetyStock {
		var k DriftKind
		switch {
		case p.SettingsVersion < r.Version:
			k = Behind
		case p.SettingsVersion > r.Version:
			k = Ahead
		default:
			k = Diverged
		}
		worse(k)
		d.Details = append(d.Details, fmt.Sprintf("safety_stock %s (postgres set at v%d): redis=%d postgres=%d",
			k, p.SettingsVersion, r.SafetyStock, p.SafetyStock))
	}
	pl := make(map[string]pgLot, len(p.Lots))
	for _, l := range p.Lots {
		pl[l.LotID] = l
	}
	for _, rl := range r.Lots {
		l, ok := pl[rl.LotID]
		if !ok {
			// No lot row is older than any version: the result that brought the lot
			// into the ledger is not persisted.
			worse(Behind)
			d.Details = append(d.Details, fmt.Sprintf("lot %s behind: not in postgres", rl.LotID))
			d.at(rl)
			continue
		}
		delete(pl, rl.LotID)
		diffs := lotDiffs(rl, l.Lot)
		// A lot row older than Redis's SKU version yet equal to Redis is in step: the
		// operations since did not touch the lot, and their results did not write it.
		var k DriftKind
		switch {
		case l.Version > r.Version:
			k = Ahead
		case len(diffs) == 0:
			continue
		case l.Version < r.Version:
			k = Behind
		default:
			k = Diverged
		}
		worse(k)
		d.at(rl)
		s := fmt.Sprintf("lot %s %s (postgres row v%d)", rl.LotID, k, l.Version)
		if len(diffs) > 0 {
			s += ": " + strings.Join(diffs, ", ")
		}
		d.Details = append(d.Details, s)
	}
	for _, id := range slices.Sorted(maps.Keys(pl)) {
		// The ledger never removes a lot, so no queued result explains a lot row that Redis
		// does not hold, and a repair from Redis cannot remove it.
		k := Diverged
		if pl[id].Version > r.Version {
			k = Ahead
		}
		worse(k)
		d.Details = append(d.Details, fmt.Sprintf("lot %s %s (postgres row v%d): not in redis", id, k, pl[id].Version))
		d.at(pl[id].Lot)
	}
	d.Details = append(d.Details, transferDrifts(r.Version, r.Transfers, p.Transfers, worse)...)
	d.Details = append(d.Details, queueDrifts(r.Version, r.Queue, p.Queue, worse)...)
	locs, details := locationSafetyDrifts(r.Version, r.LocationSafety, p.LocationSafety, worse)
	for _, loc := range locs {
		d.atLocation(loc)
	}
	d.Details = append(d.Details, details...)
	if kind == "" {
		return nil
	}
	d.Kind = kind
	return d
}

// at adds the location of lot l, which differs, to d's.
func (d *Drift) at(l stock.Lot) { d.atLocation(stock.LocationOf(l)) }

// atLocation adds location loc to d's.
func (d *Drift) atLocation(loc string) {
	if i, found := slices.BinarySearch(d.Locations, loc); !found {
		d.Locations = slices.Insert(d.Locations, i, loc)
	}
}

// ByLocation counts the SKUs whose drift (a repair did not fix) involves a lot at each
// location, or the location's own safety stock.
func (r ReconcileReport) ByLocation() map[string]int {
	out := map[string]int{}
	for _, d := range r.Drifts {
		if d.Repaired {
			continue
		}
		for _, l := range d.Locations {
			out[l]++
		}
	}
	return out
}

// lotDiffs lists the fields of a lot that differ, "sellable redis=3 postgres=5".
func lotDiffs(r, p stock.Lot) []string {
	var out []string
	rv, pv := reflect.ValueOf(r), reflect.ValueOf(p)
	for i := range rv.NumField() {
		a, b := rv.Field(i).Interface(), pv.Field(i).Interface()
		if a != b {
			name := strings.Split(rv.Type().Field(i).Tag.Get("json"), ",")[0]
			out = append(out, fmt.Sprintf("%s redis=%v postgres=%v", name, a, b))
		}
	}
	return out
}

// compareOrder returns the order's drift (nil when none) and whether it was compared.
func compareOrder(ctx context.Context, cfg ReconcileConfig, lcid string) (*Drift, bool, error) {
	row, snap, seq, err := readOrder(ctx, cfg, lcid)
	if err != nil || snap == nil {
		return nil, false, err // a nil snapshot: an entity without an order (yet)
	}
	d := orderDrift(lcid, snap, seq, row)
	if d == nil {
		return nil, true, nil
	}
	if cfg.Repair && (d.Kind == Missing || d.Kind == Behind) {
		if err := repairOrder(ctx, cfg.DB, lcid, snap, seq); err != nil {
			return nil, true, err
		}
		row, now, nowSeq, err := readOrder(ctx, cfg, lcid)
		if err != nil {
			return nil, true, err
		}
		if now == nil {
			now, nowSeq = snap, seq
		}
		d.Left = orderDrift(lcid, now, nowSeq, row)
		d.Repaired = d.Left == nil
	}
	return d, true, nil
}

// readOrder reads PostgreSQL's row of an order (nil when it has none), then Redis's
// state of it.
func readOrder(ctx context.Context, cfg ReconcileConfig, lcid string) (*OrderRow, *event.OrderSnapshot, int64, error) {
	var rows []OrderRow
	if err := cfg.DB.WithContext(ctx).Where("lcid = ?", lcid).Limit(1).Find(&rows).Error; err != nil {
		return nil, nil, 0, fmt.Errorf("persist: reconcile: order %s in postgres: %w", lcid, err)
	}
	snap, seq, err := cfg.Orders.Order(ctx, lcid)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("persist: reconcile: order %s in redis: %w", lcid, err)
	}
	if len(rows) == 0 {
		return nil, snap, seq, nil
	}
	return &rows[0], snap, seq, nil
}

// routeText is an order's route as comparable text: its JSON, re-encoded from
// PostgreSQL's jsonb (which orders keys its own way); "" for none.
func routeText(v any) string {
	switch r := v.(type) {
	case *event.Routing:
		if r == nil {
			return ""
		}
		b, _ := json.Marshal(r)
		return string(b)
	case json.RawMessage:
		if len(r) == 0 || string(r) == "null" {
			return ""
		}
		var rt event.Routing
		if err := json.Unmarshal(r, &rt); err != nil {
			return "invalid: " + string(r)
		}
		return routeText(&rt)
	}
	return ""
}

// orderDrift compares Redis's order r at seq with PostgreSQL's row p (nil when it has
// none); nil when they agree.
func orderDrift(lcid string, r *event.OrderSnapshot, seq int64, p *OrderRow) *Drift {
	d := &Drift{Entity: "order", Key: lcid, Redis: seq}
	if p == nil {
		d.Kind = Missing
		return d
	}
	d.Postgres = p.Seq
	field := func(name string, a, b any) {
		if a != b {
			d.Details = append(d.Details, fmt.Sprintf("%s: redis=%v postgres=%v", name, a, b))
		}
	}
	field("status", r.Status, p.Status)
	field("allocation", r.Allocation, deref(p.Allocation))
	field("paid", r.Paid, p.Paid)
	field("mode", string(r.Mode), deref(p.Mode))
	td := ""
	if p.TargetDate != nil {
		td = p.TargetDate.Format(time.DateOnly)
	}
	field("target_date", r.TargetDate, td)
	field("hold_until", holdText(r.HoldUntil), holdText(p.HoldUntil))
	field("route", routeText(r.Route), routeText(p.Route))
	var lines []event.SnapshotLine
	if err := json.Unmarshal(p.Lines, &lines); err != nil {
		d.Details = append(d.Details, fmt.Sprintf("lines: postgres holds no lines: %v", err))
	} else if !sameLines(r.Lines, lines) {
		rj, _ := json.Marshal(r.Lines)
		d.Details = append(d.Details, fmt.Sprintf("lines: redis=%s postgres=%s", rj, p.Lines))
	}
	switch {
	case seq > p.Seq:
		d.Kind = Behind
	case seq < p.Seq:
		d.Kind = Ahead
	case len(d.Details) > 0:
		d.Kind = Diverged
	default:
		return nil
	}
	return d
}

func sameLines(a, b []event.SnapshotLine) bool {
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	norm := func(ls []event.SnapshotLine) []event.SnapshotLine {
		out := slices.Clone(ls)
		for i := range out {
			if len(out[i].Lots) == 0 {
				out[i].Lots = nil
			}
			if len(out[i].Returned) == 0 {
				out[i].Returned = nil
			}
		}
		slices.SortFunc(out, func(x, y event.SnapshotLine) int { return cmp.Compare(x.LineID, y.LineID) })
		return out
	}
	return reflect.DeepEqual(norm(a), norm(b))
}

// holdText is a hold_until to compare: to the microsecond (PostgreSQL's precision), in
// UTC; "" for none.
func holdText(t *time.Time) string {
	if t == nil {
		return ""
	}
	return t.UTC().Truncate(time.Microsecond).Format(time.RFC3339Nano)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// repairOrder writes the Redis snapshot of an order where PostgreSQL's seq is older.
func repairOrder(ctx context.Context, db *gorm.DB, lcid string, snap *event.OrderSnapshot, seq int64) error {
	s := *snap
	s.LCID = lcid
	p, err := prepare(0, event.Result{
		EventID: RepairedOrder, Entity: lcid, LCID: lcid, Seq: seq, Type: "reconcile",
		Outcome: event.Applied, Order: &s,
	})
	if err != nil {
		return fmt.Errorf("persist: reconcile: repair order %s: %w", lcid, err)
	}
	err = db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		_, err := upsertOrders(tx, []OrderRow{*p.order})
		return err
	})
	if err != nil {
		return fmt.Errorf("persist: reconcile: repair order %s: %w", lcid, err)
	}
	return nil
}
