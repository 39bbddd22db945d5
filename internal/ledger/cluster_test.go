package ledger

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/testenv"
)

// TestCluster runs operations and ScanSKUs on a Redis Cluster: every script touches
// keys of one hash tag, and ScanSKUs visits every master. It runs on
// JUNBAN_TEST_REDIS_CLUSTER_URL (redis://HOST:PORT of a seed node) when set, else on a
// local 3-master cluster of its own (testenv.RedisCluster).
func TestCluster(t *testing.T) {
	url := os.Getenv("JUNBAN_TEST_REDIS_CLUSTER_URL")
	if url == "" {
		url = "redis://" + testenv.RedisCluster(t)
	}
	opt, err := redis.ParseClusterURL(url)
	if err != nil {
		t.Fatal(err)
	}
	cc := redis.NewClusterClient(opt)
	prefix := testenv.Name(t)
	t.Cleanup(func() {
		defer cc.Close()
		cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
			for iter.Next(ctx) {
				c.Del(ctx, iter.Val())
			}
			return iter.Err()
		})
	})
	var skus []stock.SKU
	for i := range 30 {
		skus = append(skus, stock.SKU{SKU: fmt.Sprint("SKU-", i), Lots: []stock.Lot{lot("L", stock.KindOnHand, 1, "", 10)}})
	}
	l, err := New(Config{Redis: cc, Prefix: prefix, Loader: newMemLoader(skus...)})
	if err != nil {
		t.Fatal(err)
	}
	masters := map[string]bool{}
	for _, s := range skus {
		r, err := l.Apply(ctx, alloc("op", s.SKU, 3, "2026-12-01", stock.ModeShip))
		wantMoves(t, r, err, mv{"L", stock.Sellable, stock.Allocated, 3})
		if r, err := l.Apply(ctx, alloc("op", s.SKU, 3, "2026-12-01", stock.ModeShip)); err != nil || !r.Replayed {
			t.Fatalf("replay on the cluster: %+v %v", r, err)
		}
		slot := cc.ClusterKeySlot(ctx, Key(prefix, s.SKU)).Val()
		masters[fmt.Sprint(slot*3/16384)] = true
	}
	got := map[string]bool{}
	var mu sync.Mutex
	err = l.ScanSKUs(ctx, func(sku string) error {
		mu.Lock()
		defer mu.Unlock()
		got[sku] = true
		return nil
	})
	if err != nil || len(got) != len(skus) {
		t.Fatalf("ScanSKUs found %d of %d SKUs (%v)", len(got), len(skus), err)
	}
	// A cart spans the masters: the pipeline reaches each, the script loaded on each.
	var cart []AvailabilityRequest
	for _, s := range skus {
		cart = append(cart, AvailabilityRequest{SKU: s.SKU, TargetDate: "2026-12-01", Mode: stock.ModeShip, Qty: 7})
	}
	answers, err := l.AvailabilityMany(ctx, cart)
	if err != nil {
		t.Fatal(err)
	}
	for i, a := range answers {
		if a.Err != nil || a.Availability.Available != 7 || !a.Availability.OK {
			t.Fatalf("cart on the cluster, %s: %+v %v", cart[i].SKU, a.Availability, a.Err)
		}
	}
	if len(masters) < 2 {
		t.Fatalf("the SKUs did not spread over the masters: %v", masters)
	}
}
