package allocbench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/junban/junban/internal/ledger"
	"github.com/junban/junban/internal/testenv"
)

// TestRunSmoke runs every contender of a tiny configuration: every figure of the report
// must be above zero (each contender ran and did work, the registration rounds too) and
// the run must leave no keys behind. It asserts no rate.
func TestRunSmoke(t *testing.T) {
	rc, prefix := testenv.Redis(t)
	db := testenv.Postgres(t)
	ctx := context.Background()
	baseline, err := ReadBaseline(ctx, "", BaselineDefault)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Run(ctx, rc, db, Options{Lots: 3, Duration: 200 * time.Millisecond, Clients: 2, Rounds: 1,
		Prefix: prefix, Registration: true, Locations: true, Baseline: baseline}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	figures := map[string]float64{
		"junban": rep.Junban, "junban_before": rep.JunbanBefore, "junban_holder": rep.JunbanHolder,
		"jsondoc": rep.JSONDoc, "pg_rowlock": rep.PGRowLock, "evalsha_ceiling": rep.EvalshaCeiling,
		"before_of_ceiling": rep.Ratios.BeforeOfCeiling, "junban_of_ceiling": rep.Ratios.JunbanOfCeiling,
		"holder_of_ceiling": rep.Ratios.HolderOfCeiling, "junban_of_before": rep.Ratios.JunbanOfBefore,
		"holder_of_before": rep.Ratios.HolderOfBefore,
	}
	if len(rep.Registration) != len(RegistrationLots) {
		t.Fatalf("registration figures for %d sizes, want %d", len(rep.Registration), len(RegistrationLots))
	}
	for _, r := range rep.Registration {
		at := fmt.Sprintf(" at %d lots", r.Lots)
		figures["register_ops"+at] = r.RegisterOps
		figures["register_script_usec_per_call"+at] = r.RegisterUsecPerCall
		figures["alloc_ops"+at] = r.AllocateOps
		figures["alloc_script_usec_per_call"+at] = r.AllocateUsecPerCall
	}
	if len(rep.ByLocations) != len(LocationCounts) {
		t.Fatalf("figures for %d location counts, want %d", len(rep.ByLocations), len(LocationCounts))
	}
	for _, b := range rep.ByLocations {
		at := fmt.Sprintf(" at %d locations", b.Locations)
		figures["routed_ops"+at], figures["unrouted_ops"+at] = b.RoutedOps, b.UnroutedOps
		figures["routed_script_usec_per_call"+at], figures["unrouted_script_usec_per_call"+at] = b.RoutedUsecPerCall, b.UnroutedUsecPerCall
		figures["routed_of_single_location_routed"+at] = b.RoutedOfSingleRouted
	}
	for name, p := range rep.Profile {
		figures["profile "+name] = p.ScriptUsecPerCall
	}
	for name, v := range figures {
		if !(v > 0) {
			b, _ := json.MarshalIndent(rep, "", "  ")
			t.Errorf("%s = %v, want > 0; report:\n%s", name, v, b)
		}
	}
	if keys, _ := rc.Keys(ctx, prefix+":*").Result(); len(keys) != 0 {
		t.Fatalf("left %d keys behind, e.g. %s", len(keys), keys[0])
	}
}

// TestGrowthGateBoundsTheSKU registers lots from concurrent callers through the gate of
// the registration rounds: the SKU never holds more than its lots plus the budget, which
// the callers, all at once, would overrun without the gate. Each restore counts the lots
// while no registration is in flight.
func TestGrowthGateBoundsTheSKU(t *testing.T) {
	rc, prefix := testenv.Redis(t)
	ctx := context.Background()
	const lots, budget, callers, calls = 20, 2, 8, 25
	sku := "REG-GATE"
	l, err := ledger.New(ledger.Config{Redis: rc, Prefix: prefix, Loader: loader{sku: hotSKU(sku, lots, false)}, OpRetention: retention})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Load(ctx, sku); err != nil {
		t.Fatal(err)
	}
	key := ledger.Key(prefix, sku)
	snap := &skuSnapshot{rc: rc, key: key}
	if err := snap.take(ctx); err != nil {
		t.Fatal(err)
	}
	countLots := func() int {
		fields, err := rc.HKeys(ctx, key).Result()
		if err != nil {
			t.Error(err)
		}
		n := 0
		for _, f := range fields {
			if strings.HasPrefix(f, "m:") {
				n++
			}
		}
		return n
	}
	var most, restores int
	g := &growthGate{budget: budget, restore: func(ctx context.Context) error {
		most = max(most, countLots())
		restores++
		return snap.restore(ctx)
	}}
	op := registerOp(l, sku, lots, g)
	var seq atomic.Int64
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			for range calls {
				if err := op(ctx, seq.Add(1)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	most = max(most, countLots())
	if most > lots+budget {
		t.Fatalf("the SKU held %d lots, more than %d + %d", most, lots, budget)
	}
	if want := callers * calls / budget; restores < want-1 {
		t.Fatalf("%d restores for %d registrations of budget %d", restores, callers*calls, budget)
	}
}
