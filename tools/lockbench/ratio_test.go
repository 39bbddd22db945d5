package lockbench

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/junban/junban/internal/testenv"
)

// TestSpreadRatio alternates the spread measurements (LOCKHANDOFF_BENCH_RATIO=1 only).
func TestSpreadRatio(t *testing.T) {
	if os.Getenv("LOCKHANDOFF_BENCH_RATIO") == "" {
		t.Skip("manual")
	}
	rc, prefix := testenv.Redis(t)
	ctx := context.Background()
	o := Options{Duration: 3 * time.Second, Prefix: prefix, Producers: 16, Keys: 1000, Detached: 128}
	for range 3 {
		h, i, u, err := spreadRun(ctx, rc, o)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("handoff %.0f (inline %.0f) unlocked %.0f ratio %.3f (inline %.3f)", h.EPS, i.EPS, u.EPS, h.EPS/u.EPS, i.EPS/u.EPS)
	}
}
