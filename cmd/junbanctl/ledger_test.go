package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/junban/junban/internal/ledger"
	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/platform/cli"
	"github.com/junban/junban/internal/testenv"
)

// ledger reindex finds the SKUs whose index, stored keys or stamp are not the current
// layout's, counts them on a dry run without writing, rewrites them, and then finds
// nothing more to do.
func TestLedgerReindex(t *testing.T) {
	ctx := context.Background()
	rc, prefix := testenv.Redis(t)
	t.Setenv("REDIS_URL", testenv.RedisURL(t))
	t.Setenv("JUNBAN_KEY_PREFIX", prefix)
	led, err := ledger.New(ledger.Config{Redis: rc, Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	for _, sku := range []string{"A", "B", "C"} {
		if _, err := led.Apply(ctx, stock.RegisterSKURequest{OpID: "sku-" + sku, SKU: sku}); err != nil {
			t.Fatal(err)
		}
		for i, bb := range []string{"2027-03-01", "2027-01-01"} {
			if _, err := led.Apply(ctx, stock.RegisterLotRequest{OpID: "lot-" + sku + bb, SKU: sku,
				Lot: stock.NewLot{LotID: "L" + string(rune('1'+i)), Kind: stock.KindOnHand, Good: true, BestBefore: bb, Sellable: 2}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// A: written before the layout stamp. B: its records in registration order (another
	// layout) and a lot without its stored key. C: current.
	rc.HDel(ctx, ledger.Key(prefix, "A"), "kl")
	b := ledger.Key(prefix, "B")
	index, _ := rc.HGet(ctx, b, "o:0").Result()
	records := strings.SplitAfter(index, "\n")
	rc.HSet(ctx, b, "o:0", records[1]+records[0])
	rc.HDel(ctx, b, "k:L2")

	reindex := func(args ...string) ledger.ReindexReport {
		t.Helper()
		var out bytes.Buffer
		if err := ctl(ctx, &out, "ledger reindex", append(args, "--json")); err != nil {
			t.Fatal(err)
		}
		var rep ledger.ReindexReport
		if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
			t.Fatalf("%v: %s", err, out.String())
		}
		rep.KeyLayout = ""
		return rep
	}
	dump := func() map[string]map[string]string {
		d := map[string]map[string]string{}
		for _, sku := range []string{"A", "B", "C"} {
			d[sku], _ = rc.HGetAll(ctx, ledger.Key(prefix, sku)).Result()
		}
		return d
	}

	before := dump()
	if rep, want := reindex("--dry-run"), (ledger.ReindexReport{DryRun: true, SKUs: 3, Stale: 2, Layout: 1, Index: 1, Keys: 1}); rep != want {
		t.Fatalf("dry run: %+v, want %+v", rep, want)
	}
	if !reflect.DeepEqual(before, dump()) {
		t.Fatal("the dry run wrote")
	}
	if rep, want := reindex(), (ledger.ReindexReport{SKUs: 3, Stale: 2, Rewritten: 2, Layout: 1, Index: 1, Keys: 1}); rep != want {
		t.Fatalf("reindex: %+v, want %+v", rep, want)
	}
	if rep, want := reindex(), (ledger.ReindexReport{SKUs: 3}); rep != want {
		t.Fatalf("second reindex: %+v, want %+v", rep, want)
	}
	if rep, want := reindex("--sku", "B", "--sku", "NOPE"), (ledger.ReindexReport{SKUs: 2, Absent: 1}); rep != want {
		t.Fatalf("reindex --sku: %+v, want %+v", rep, want)
	}

	// B allocates by best-before again.
	r, err := led.Apply(ctx, stock.AllocateRequest{OpID: "o1", SKU: "B", Qty: 1, TargetDate: "2026-12-01", Mode: stock.ModeShip})
	if err != nil || len(r.Moves) != 1 || r.Moves[0].LotID != "L2" {
		t.Fatalf("allocation after the reindex: %+v %v", r, err)
	}

	var out bytes.Buffer
	if err := ctl(ctx, &out, "ledger reindex", []string{"--dry-run"}); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); !strings.Contains(s, "3 SKUs") || !strings.Contains(s, "0 in another layout") {
		t.Fatalf("text report:\n%s", s)
	}
	if err := ctl(ctx, nil, "ledger reindex", []string{"extra"}); !errors.Is(err, cli.ErrUsage) {
		t.Fatalf("an argument: %v, want a usage error", err)
	}
}
