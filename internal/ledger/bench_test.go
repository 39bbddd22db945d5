package ledger

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/testenv"
)

// scriptUsec reads the total time Redis spent in EVALSHA (INFO commandstats).
func scriptUsec(b *testing.B, info string) (calls, usec float64) {
	for _, line := range strings.Split(info, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_evalsha:"); ok {
			for _, kv := range strings.Split(rest, ",") {
				k, v, _ := strings.Cut(kv, "=")
				f, _ := strconv.ParseFloat(v, 64)
				switch k {
				case "calls":
					calls = f
				case "usec":
					usec = f
				}
			}
		}
	}
	return
}

// BenchmarkAllocate allocates from one SKU with N lots, one caller; it reports Redis's
// time inside the script per call (server-usec/op) besides the round trip (ns/op).
func BenchmarkAllocate(b *testing.B) {
	for _, n := range []int{1, 20, 1000} {
		for _, worst := range []bool{false, true} {
			b.Run(fmt.Sprintf("lots=%d/worst=%v", n, worst), func(b *testing.B) {
				rc, prefix := testenv.Redis(b)
				s := stock.SKU{SKU: "HOT", SafetyStock: 10, Lots: []stock.Lot{}}
				for i := range n {
					l := lot(fmt.Sprintf("LOT-%04d", i), stock.KindOnHand, int64(i), fmt.Sprintf("2027-01-%02d", 1+i%28), 1_000_000_000)
					if worst && i < n-1 {
						l.Sellable = 0
					}
					s.Lots = append(s.Lots, l)
				}
				l, err := New(Config{Redis: rc, Prefix: prefix, Loader: newMemLoader(s), OpRetention: 600e9})
				if err != nil {
					b.Fatal(err)
				}
				if err := l.Load(ctx, "HOT"); err != nil {
					b.Fatal(err)
				}
				before, _ := rc.Info(ctx, "commandstats").Result()
				b.ResetTimer()
				for i := range b.N {
					if _, err := l.Apply(ctx, alloc("op"+strconv.Itoa(i), "HOT", 1, "2026-12-01", stock.ModeShip)); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				after, _ := rc.Info(ctx, "commandstats").Result()
				c0, u0 := scriptUsec(b, before)
				c1, u1 := scriptUsec(b, after)
				if c1 > c0 {
					b.ReportMetric((u1-u0)/(c1-c0), "server-usec/op")
				}
			})
		}
	}
}

func BenchmarkDecodeResult(b *testing.B) {
	text := "1\nm\tLOT-0000\tsellable\tallocated\t3\nl\tLOT-0000\tonhand\t1\t2027-01-01\t0\t\t0001-01-01\t9999-12-31\t999997\t0 3 0 0"
	b.ReportAllocs()
	for range b.N {
		if _, err := decodeResult("op", "SKU", text); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkValidateAllocate(b *testing.B) {
	r := stock.AllocateRequest{OpID: "evt_01JDW6Y2Q5:1:alloc", SKU: "SKU-1", Qty: 3, TargetDate: "2026-12-01", Mode: stock.ModeShip}
	b.ReportAllocs()
	for range b.N {
		if err := r.Validate(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAllocateRouted allocates 1 unit (a typical line) from one SKU with 20 lots at
// each of N locations, routed ranked over all of them (a routed allocation reads every
// candidate), beside the same lots unrouted; server-usec/op is Redis's time in the script.
func BenchmarkAllocateRouted(b *testing.B) {
	for _, n := range []int{1, 5, 20, 50} {
		for _, routed := range []bool{false, true} {
			b.Run(fmt.Sprintf("locations=%d/routed=%v", n, routed), func(b *testing.B) {
				rc, prefix := testenv.Redis(b)
				s := stock.SKU{SKU: "HOT", SafetyStock: 10, Lots: []stock.Lot{}}
				var locs []stock.Location
				for j := range n {
					loc := fmt.Sprintf("loc-%02d", j)
					if j == 0 {
						loc = ""
					}
					l := stock.Location{ID: cmp.Or(loc, stock.DefaultLocation), Kind: stock.LocationWarehouse, Rank: j, Ships: true, Enabled: true}
					locs = append(locs, l)
					for i := range 20 {
						lt := lot(fmt.Sprintf("LOT-%02d-%02d", j, i), stock.KindOnHand, int64(j*20+i), fmt.Sprintf("2027-01-%02d", 1+(i+j)%28), 1_000_000_000)
						lt.Location = loc
						s.Lots = append(s.Lots, lt)
					}
				}
				l, err := New(Config{Redis: rc, Prefix: prefix, Loader: newMemLoader(s), OpRetention: 600e9})
				if err != nil {
					b.Fatal(err)
				}
				if err := l.Load(ctx, "HOT"); err != nil {
					b.Fatal(err)
				}
				route := &stock.Route{Strategies: []stock.Strategy{stock.StrategyRanked}, Locations: locs}
				before, _ := rc.Info(ctx, "commandstats").Result()
				b.ResetTimer()
				for i := range b.N {
					a := alloc("op"+strconv.Itoa(i), "HOT", 1, "2026-12-01", stock.ModeShip)
					if routed {
						a.Route = route
					}
					if _, err := l.Apply(ctx, a); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				after, _ := rc.Info(ctx, "commandstats").Result()
				c0, u0 := scriptUsec(b, before)
				c1, u1 := scriptUsec(b, after)
				if c1 > c0 {
					b.ReportMetric((u1-u0)/(c1-c0), "server-usec/op")
				}
			})
		}
	}
}
