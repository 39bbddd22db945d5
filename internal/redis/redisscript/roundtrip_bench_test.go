package redisscript_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/junban/junban/internal/testenv"
)

// BenchmarkScriptRoundTripCPU runs scripts by EVALSHA through go-redis and reports the
// CPU each call costs this process and the Redis server: what a script's round trip costs
// either side on this machine, and what a command in a script adds (docs/lab/benchmarks.md,
// "The floor under issue 34's targets"). "empty" names one key and one argument and
// returns 1; "8 GETs" reads its key eight times. "serial" makes one call at a time, as a
// lightly loaded worker does: the server sleeps and wakes for each. "pipelined" sends 8
// calls in one pipeline, one round trip. "parallel" keeps 16 calls in flight on as many
// connections, so the server reads several clients' calls each time it wakes. The
// server's figure is its whole CPU over the loop (INFO cpu): anything else using the same
// Redis counts.
//
//	GOGC=400 GOMAXPROCS=1 go test -run '^$' -bench ScriptRoundTripCPU -benchtime 20000x -count 3 ./internal/redis/redisscript/
func BenchmarkScriptRoundTripCPU(b *testing.B) {
	rc, prefix := testenv.Redis(b)
	ctx := context.Background()
	keys := []string{prefix + ":k"}
	const pipelined = 8
	for _, sc := range []struct{ name, body string }{
		{"empty", "return 1"},
		{"8 GETs", "for i = 1, 8 do redis.call('GET', KEYS[1]) end return 1"},
	} {
		s := redis.NewScript(sc.body)
		if err := s.Load(ctx, rc).Err(); err != nil {
			b.Fatal(err)
		}
		call := func() error { return s.EvalSha(ctx, rc, keys, "a").Err() }
		b.Run(sc.name+"/serial", func(b *testing.B) {
			testenv.ReportCPU(b, rc, "call", 1, func() {
				for b.Loop() {
					if err := call(); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
		b.Run(sc.name+"/pipelined", func(b *testing.B) {
			testenv.ReportCPU(b, rc, "call", pipelined, func() {
				for b.Loop() {
					p := rc.Pipeline()
					for range pipelined {
						s.EvalSha(ctx, p, keys, "a")
					}
					if _, err := p.Exec(ctx); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
		b.Run(sc.name+"/parallel", func(b *testing.B) {
			b.SetParallelism(16)
			testenv.ReportCPU(b, rc, "call", 1, func() {
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if err := call(); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		})
	}
}
