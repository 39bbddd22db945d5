package ledger

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/testenv"
)

// TestProfileScript measures where ledger.lua's alloc spends its time on the server:
// it runs the script cut short at successive points (and two reference scripts), in
// turns, and prints Redis's time inside EVALSHA per call for each (INFO commandstats,
// diffed around each batch; other clients' EVALSHAs on the same server blur it, so use a
// server of its own: REDIS_URL=...). Run with LEDGER_PROFILE=1 (docs/performance.md).
func TestProfileScript(t *testing.T) {
	if os.Getenv("LEDGER_PROFILE") == "" {
		t.Skip("set LEDGER_PROFILE=1 to profile the script")
	}
	rc, prefix := testenv.Redis(t)
	lots, _ := strconv.Atoi(os.Getenv("LEDGER_PROFILE_LOTS"))
	if lots == 0 {
		lots = 20
	}
	s := stock.SKU{SKU: "HOT", SafetyStock: 10, Lots: []stock.Lot{}}
	for i := range lots {
		s.Lots = append(s.Lots, lot(fmt.Sprintf("LOT-%04d", i), stock.KindOnHand, int64(i), fmt.Sprintf("2027-01-%02d", 1+i%28), 1_000_000_000))
	}
	l, err := New(Config{Redis: rc, Prefix: prefix, Loader: newMemLoader(s), OpRetention: 600e9})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Load(ctx, "HOT"); err != nil {
		t.Fatal(err)
	}
	cut := func(anchor string) string {
		i := strings.Index(ledgerLua, anchor)
		if i < 0 {
			t.Fatalf("anchor %q not in ledger.lua", anchor)
		}
		return ledgerLua[:i] + "do return {0, ''} end\n" + ledgerLua[i:]
	}
	variants := []struct{ name, body string }{
		{"return 1", "return 1"},
		{"5 x GET of a missing key", "for i = 1, 5 do redis.call('GET', KEYS[2]) end return 1"},
		{"op-record GET only", cut("local head = redis.call")},
		{"+ HMGET v ss on o:0", cut("local function fmt")},
		{"+ define helper functions", cut("if op == 'alloc' then")},
		{"+ walk index to first candidate", cut("    if #f == 0 then break end")},
		{"+ read first lot", cut("  if sum < qty then")},
		{"+ moves, result text (no writes)", cut("  redis.call('HSET', key, unpack(w))")},
		{"+ HSET lot and version", cut("  remember(text)\n  return {0, text}\nend\n\nif op == 'alloc'")},
		{"full alloc (+ SET op record EX)", ledgerLua},
	}
	// The lowest per-round average of each variant: interference from other processes
	// only ever adds time.
	const rounds, per = 9, 300
	usec := make([]float64, len(variants))
	for i := range usec {
		usec[i] = 1e9
	}
	n := 0
	fp := stock.AllocateRequest{SKU: "HOT", Qty: 1, TargetDate: "2026-12-01", Mode: stock.ModeShip}.Fingerprint()
	for r := range rounds {
		for vi, v := range variants {
			sc := redis.NewScript(v.body)
			before := evalshaStats(t, rc)
			for i := range per {
				n++
				op := fmt.Sprintf("p%d-%d-%d", r, vi, i)
				err := sc.Run(ctx, rc, []string{Key(prefix, "HOT"), opKey(prefix, "HOT", op)}, "alloc", "600", fp, 1, "2026-12-01", "ship").Err()
				if err != nil {
					t.Fatal(err)
				}
			}
			after := evalshaStats(t, rc)
			usec[vi] = min(usec[vi], (after[1]-before[1])/(after[0]-before[0]))
		}
	}
	for i, v := range variants {
		t.Logf("%-36s %6.1f usec/call", v.name, usec[i])
	}
}

func evalshaStats(t *testing.T, rc redis.UniversalClient) [2]float64 {
	info, err := rc.Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	var out [2]float64
	out[0], out[1] = scriptUsec(nil, info)
	return out
}
