package persist

import (
	"cmp"
	"context"
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
	"github.com/junban/junban/internal/ledger"
)

// SKUSource is the inventory in Redis; *ledger.Ledger is one.
type SKUSource interface {
	// Snapshot returns a SKU's state; an error wrapping ledger.ErrNotLoaded when it is
	// not in Redis.
	Snapshot(ctx context.Context, sku string) (ledger.SKU, error)
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

// Drift kinds.
const (
	// Missing: PostgreSQL has no row for the entity.
	Missing DriftKind = "missing"
	// Behind: PostgreSQL holds an older version (seq) than Redis. Results still in the
	// results queue cause it too; a repair rewrites PostgreSQL from Redis.
	Behind DriftKind = "behind"
	// Ahead: PostgreSQL holds a newer version (seq) than Redis, as after a Redis data
	// loss; never repaired from Redis.
	Ahead DriftKind = "ahead"
	// Diverged: same version (seq), different content; never repaired automatically.
	Diverged DriftKind = "diverged"
)

// Drift is one entity whose PostgreSQL copy differs from Redis.
type Drift struct {
	// Entity is "sku" or "order".
	Entity string
	// Key is the SKU or the lcid.
	Key  string
	Kind DriftKind
	// Redis and Postgres are the SKU versions (order seqs) on each side; Postgres is 0
	// when Missing.
	Redis, Postgres int64
	// Details are the differing fields, "field: redis=... postgres=...".
	Details []string
	// Repaired is true when the repair rewrote PostgreSQL and it now matches Redis.
	Repaired bool
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
	return s
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
	// an older version of, or none at all (Missing, Behind).
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

// Reconcile compares every SKU (settings, version, every lot's fields and buckets) and
// every order (state, lines and seq) in Redis with PostgreSQL and, with Repair, rewrites
// PostgreSQL from Redis where Redis is newer. Entities only in PostgreSQL are not drift:
// Redis loads SKUs lazily.
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
	loader := ledger.PGLoader{DB: cfg.DB}
	err = parallel(ctx, skus, func(ctx context.Context, sku string) error {
		d, ok, err := compareSKU(ctx, cfg, loader, sku)
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

// compareSKU returns the SKU's drift (nil when none) and whether it was compared at all.
func compareSKU(ctx context.Context, cfg ReconcileConfig, loader ledger.PGLoader, sku string) (*Drift, bool, error) {
	r, err := cfg.SKUs.Snapshot(ctx, sku)
	if errors.Is(err, ledger.ErrNotLoaded) {
		return nil, false, nil // gone since the scan
	}
	if err != nil {
		return nil, false, fmt.Errorf("persist: reconcile: sku %s in redis: %w", sku, err)
	}
	d, err := skuDrift(ctx, loader, r)
	if err != nil || d == nil {
		return nil, true, err
	}
	if cfg.Repair && (d.Kind == Missing || d.Kind == Behind) {
		if _, err := WriteSKUs(ctx, cfg.DB, []ledger.SKU{r}); err != nil {
			return nil, true, fmt.Errorf("persist: reconcile: repair sku %s: %w", sku, err)
		}
		after, err := skuDrift(ctx, loader, r)
		if err != nil {
			return nil, true, err
		}
		d.Repaired = after == nil
	}
	return d, true, nil
}

func skuDrift(ctx context.Context, loader ledger.PGLoader, r ledger.SKU) (*Drift, error) {
	d := &Drift{Entity: "sku", Key: r.SKU, Redis: r.Version}
	p, err := loader.LoadSKU(ctx, r.SKU)
	if errors.Is(err, ledger.ErrUnknownSKU) {
		d.Kind = Missing
		return d, nil
	}
	if err != nil {
		return nil, fmt.Errorf("persist: reconcile: sku %s in postgres: %w", r.SKU, err)
	}
	d.Postgres = p.Version
	if r.SafetyStock != p.SafetyStock {
		d.Details = append(d.Details, fmt.Sprintf("safety_stock: redis=%d postgres=%d", r.SafetyStock, p.SafetyStock))
	}
	pl := make(map[string]ledger.Lot, len(p.Lots))
	for _, l := range p.Lots {
		pl[l.LotID] = l
	}
	for _, rl := range r.Lots {
		l, ok := pl[rl.LotID]
		if !ok {
			d.Details = append(d.Details, fmt.Sprintf("lot %s: not in postgres", rl.LotID))
			continue
		}
		delete(pl, rl.LotID)
		d.Details = append(d.Details, lotDiffs(rl, l)...)
	}
	for _, id := range slices.Sorted(maps.Keys(pl)) {
		d.Details = append(d.Details, fmt.Sprintf("lot %s: not in redis", id))
	}
	switch {
	case r.Version > p.Version:
		d.Kind = Behind
	case r.Version < p.Version:
		d.Kind = Ahead
	case len(d.Details) > 0:
		d.Kind = Diverged
	default:
		return nil, nil
	}
	return d, nil
}

// lotDiffs lists the fields of a lot that differ, "lot L01 sellable: redis=3 postgres=5".
func lotDiffs(r, p ledger.Lot) []string {
	var out []string
	rv, pv := reflect.ValueOf(r), reflect.ValueOf(p)
	for i := range rv.NumField() {
		a, b := rv.Field(i).Interface(), pv.Field(i).Interface()
		if a != b {
			name := strings.Split(rv.Type().Field(i).Tag.Get("json"), ",")[0]
			out = append(out, fmt.Sprintf("lot %s %s: redis=%v postgres=%v", r.LotID, name, a, b))
		}
	}
	return out
}

// compareOrder returns the order's drift (nil when none) and whether it was compared.
func compareOrder(ctx context.Context, cfg ReconcileConfig, lcid string) (*Drift, bool, error) {
	snap, seq, err := cfg.Orders.Order(ctx, lcid)
	if err != nil {
		return nil, false, fmt.Errorf("persist: reconcile: order %s in redis: %w", lcid, err)
	}
	if snap == nil {
		return nil, false, nil // an entity without an order (yet)
	}
	d, err := orderDrift(ctx, cfg.DB, lcid, snap, seq)
	if err != nil || d == nil {
		return nil, true, err
	}
	if cfg.Repair && (d.Kind == Missing || d.Kind == Behind) {
		if err := repairOrder(ctx, cfg.DB, lcid, snap, seq); err != nil {
			return nil, true, err
		}
		after, err := orderDrift(ctx, cfg.DB, lcid, snap, seq)
		if err != nil {
			return nil, true, err
		}
		d.Repaired = after == nil
	}
	return d, true, nil
}

func orderDrift(ctx context.Context, db *gorm.DB, lcid string, r *event.OrderSnapshot, seq int64) (*Drift, error) {
	d := &Drift{Entity: "order", Key: lcid, Redis: seq}
	var rows []OrderRow
	if err := db.WithContext(ctx).Where("lcid = ?", lcid).Limit(1).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("persist: reconcile: order %s in postgres: %w", lcid, err)
	}
	if len(rows) == 0 {
		d.Kind = Missing
		return d, nil
	}
	p := rows[0]
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
		return nil, nil
	}
	return d, nil
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
		}
		slices.SortFunc(out, func(x, y event.SnapshotLine) int { return cmp.Compare(x.LineID, y.LineID) })
		return out
	}
	return reflect.DeepEqual(norm(a), norm(b))
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
