package apibench

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/junban/junban/internal/testenv"
)

// A short run yields every figure, the allocators ran meanwhile, and the baseline's value
// is as large as the availability answer.
func TestRunSmoke(t *testing.T) {
	rc, prefix := testenv.Redis(t)
	db := testenv.Postgres(t)
	rep, err := Run(context.Background(), rc, db, Options{SKUs: 5, Lots: 3, Duration: 200 * time.Millisecond, Clients: 2, Allocators: 1, Rounds: 1, Prefix: prefix}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Availability.OpsPerSec <= 0 || rep.BareGet.OpsPerSec <= 0 || rep.Cart.OpsPerSec <= 0 || rep.Singles.OpsPerSec <= 0 || rep.Ratio <= 0 {
		t.Fatalf("figures %+v", rep)
	}
	if rep.Writes == 0 || rep.VersionsAdvanced < rep.Writes || rep.ResponseBytes < 500 {
		t.Fatalf("allocations %d, answer %d bytes", rep.Writes, rep.ResponseBytes)
	}
	if n, _ := rc.Exists(context.Background(), prefix+":bench:value").Result(); n != 0 {
		t.Fatal("the run left its keys")
	}
}
