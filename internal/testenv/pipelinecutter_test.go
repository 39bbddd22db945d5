package testenv_test

import (
	"context"
	"testing"

	"github.com/junban/junban/internal/testenv"
)

// A pipeline of three INCRs cut after its first: the server ran the first, go-redis sent
// the whole pipeline again, so the first key counts 2 and the two others 1: the cut part
// ran twice, the rest once.
//
// Broken variant tried: the cutter forwarding the whole pipeline before it cut: every key
// counted 2.
func TestPipelineCutterCutsMidPipeline(t *testing.T) {
	t.Parallel()
	direct, prefix := testenv.Redis(t)
	a, b, c := prefix+":a", prefix+":b", prefix+":c"
	p := testenv.StartPipelineCutter(t, testenv.RedisAddr(t), 1, testenv.CommandOn("INCR", a))
	rc := testenv.RedisVia(t, p.Addr())
	ctx := context.Background()
	pipe := rc.Pipeline()
	pipe.Incr(ctx, a)
	pipe.Incr(ctx, b)
	pipe.Incr(ctx, c)
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	if p.Cuts() != 1 || p.Ran() != 1 || p.Lost() != 2 {
		t.Fatalf("the proxy cut %d pipelines after %d commands, %d lost, want 1 after 1, 2 lost", p.Cuts(), p.Ran(), p.Lost())
	}
	for key, want := range map[string]int64{a: 2, b: 1, c: 1} {
		if n, err := direct.Get(ctx, key).Int64(); err != nil || n != want {
			t.Errorf("%s = %d (%v), want %d", key, n, err, want)
		}
	}
}
