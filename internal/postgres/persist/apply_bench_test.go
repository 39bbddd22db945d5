package persist_test

import (
	"context"
	"testing"

	"github.com/junban/junban/internal/postgres/persist"
	"github.com/junban/junban/internal/testenv/resultgen"
)

// BenchmarkApply applies the stream of junbanlab bench persist straight to PostgreSQL,
// one connection, in batches of the persist-worker's default size and one by one; run
// it with -cpuprofile to see where the Go side of a result goes.
func BenchmarkApply(b *testing.B) {
	for _, bc := range []struct {
		name string
		n    int
	}{{"batch100", 100}, {"single", 1}} {
		b.Run(bc.name, func(b *testing.B) {
			cfg := resultgen.Config{Seed: 1, SKUs: 200, LotsPerSKU: 3, Active: 500}
			db := seeded(b, cfg)
			gen := resultgen.New(cfg)
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				rs := gen.Results(bc.n)
				b.StartTimer()
				if _, err := persist.Apply(ctx, db, rs); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*bc.n)/b.Elapsed().Seconds(), "results/s")
		})
	}
}
