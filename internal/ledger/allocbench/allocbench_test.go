package allocbench

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/junban/junban/internal/testenv"
)

// TestRunSmoke runs every variant briefly: each must make progress and the run must
// leave no keys behind. It asserts no rate.
func TestRunSmoke(t *testing.T) {
	rc, prefix := testenv.Redis(t)
	db := testenv.Postgres(t)
	ctx := context.Background()
	rep, err := Run(ctx, rc, db, Options{Lots: 3, Duration: 300 * time.Millisecond, Clients: 4, Rounds: 1, Prefix: prefix}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Junban <= 0 || rep.JSONDoc <= 0 || rep.PGRowLock <= 0 || rep.EvalshaCeiling <= 0 {
		t.Fatalf("a variant made no progress: %+v", rep)
	}
	if keys, _ := rc.Keys(ctx, prefix+":*").Result(); len(keys) != 0 {
		t.Fatalf("left %d keys behind, e.g. %s", len(keys), keys[0])
	}
}
