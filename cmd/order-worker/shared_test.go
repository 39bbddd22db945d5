package main_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/junban/junban/internal/testenv"
	"github.com/junban/junban/internal/testenv/loadgen"
)

// The single commands of the steps, the ledger, the turns, the sweeper and the expiry
// scanner go to Redis in the shared round trips the worker names (deps.shared), never
// alone on its plain client: with JUNBAN_PPROF the worker counts its Redis round trips by
// their first command, a pipeline as "pipeline:<command>", and after a workload none of
// those commands went out alone. Broken variants tried: the processor without Shared sent
// 356 EVALSHA, 408 MGET, 56 LLEN and 5 LRANGE alone; the turns without it, 192 ZSCAN.
func TestSingleCommandsGoThroughTheSharedRoundTrips(t *testing.T) {
	f := newFleet(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	f.env = append(f.env, "JUNBAN_PPROF=true", "JUNBAN_HTTP_ADDR="+addr, "JUNBAN_RESERVATION_SCAN_INTERVAL=200ms")
	w := loadgen.Generate(ampleSpec("S"+testenv.ID(), 20))
	f.seed(w)
	f.start(1)
	f.sendWorkload(w)
	f.collect(distinctIDs(w.Events), 3*time.Minute, nil)

	trips := roundTrips(t, "http://"+addr+"/metrics")
	t.Logf("round trips by first command: %v", trips)
	if trips["pipeline:evalsha"] == 0 {
		t.Fatalf("no pipeline of scripts counted: %v", trips)
	}
	for _, cmd := range []string{"eval", "evalsha", "eval_ro", "evalsha_ro", "get", "mget", "hget", "hgetall", "llen", "lrange", "zadd", "zscan"} {
		if n := trips[cmd]; n > 0 {
			t.Errorf("%v round trips of %s alone on the plain client, want none: %v", n, cmd, trips)
		}
	}
}

// roundTrips reads junban_debug_redis_roundtrips_total by command from url.
func roundTrips(t *testing.T, url string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	const name = `junban_debug_redis_roundtrips_total{cmd="`
	trips := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), name)
		if !ok {
			continue
		}
		cmd, value, ok := strings.Cut(rest, `"} `)
		if !ok {
			t.Fatalf("metrics line %q", sc.Text())
		}
		n, err := strconv.ParseFloat(value, 64)
		if err != nil {
			t.Fatal(fmt.Errorf("metrics line %q: %w", sc.Text(), err))
		}
		trips[cmd] = n
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return trips
}
