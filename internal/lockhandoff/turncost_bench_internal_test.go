package lockhandoff

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/junban/junban/internal/testenv"
)

// BenchmarkTurnScriptsCPU runs the two scripts of an uncontended turn, take.lua and
// handoff.lua, on a new entity each time, one call at a time, and reports the CPU a turn
// costs the Redis server and this process; beside it, in the same run, two calls of a
// script that does nothing, the same way: the part of a turn's cost that is the round
// trips rather than the scripts' work (docs/lab/benchmarks.md, "The floor under issue 34's
// targets"). The server's figure is its whole CPU over the loop (INFO cpu).
//
//	GOGC=400 GOMAXPROCS=1 go test -run '^$' -bench TurnScriptsCPU -benchtime 10000x -count 3 ./internal/lockhandoff/
func BenchmarkTurnScriptsCPU(b *testing.B) {
	rc, prefix := testenv.Redis(b)
	ctx := context.Background()
	empty := redis.NewScript("return 1")
	for _, s := range []*redis.Script{takeScript, handoffScript, empty} {
		if err := s.Load(ctx, rc).Err(); err != nil {
			b.Fatal(err)
		}
	}
	envelope := []byte(strings.Repeat("e", 500))
	h := &Handoff{cfg: Config{Prefix: prefix}}
	n := 0
	b.Run("take+handoff", func(b *testing.B) {
		testenv.ReportCPU(b, rc, "turn", 1, func() {
			for b.Loop() {
				n++
				k := h.keys(strconv.Itoa(n))
				ks := []string{k.lock, k.wait, k.proc, k.seq, k.waitBytes(), k.pushed("token")}
				v, err := takeScript.EvalSha(ctx, rc, ks, "token", 30000, 100, envelope, 1<<20, pushMemory.Milliseconds()).Slice()
				if err != nil {
					b.Fatal(err)
				}
				if st, _ := replyStatus(v); st != statusTurn {
					b.Fatalf("take: %v", v)
				}
				v, err = handoffScript.EvalSha(ctx, rc, ks, "token", 30000, v[1], 0).Slice()
				if err != nil {
					b.Fatal(err)
				}
				if st, _ := replyStatus(v); st != statusDone {
					b.Fatalf("handoff: %v", v)
				}
			}
		})
	})
	b.Run("two empty scripts", func(b *testing.B) {
		k := []string{Key(prefix, "empty", "lock")}
		testenv.ReportCPU(b, rc, "turn", 1, func() {
			for b.Loop() {
				for range 2 {
					if err := empty.EvalSha(ctx, rc, k, "token").Err(); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	})
}
