// Package apibench measures junban-api's availability reads (junbanlab bench api):
// through the API, against a bare Redis GET of a value of the same size served by the
// same HTTP server, in the same run, while allocators take and give back stock on the
// same SKUs; and one cart call of many SKUs against as many single calls.
package apibench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/junban/junban/internal/http/api"
	"github.com/junban/junban/internal/ledger"
	"github.com/junban/junban/internal/ledger/stock"
)

// Defaults of Options.
const (
	SKUsDefault       = 20
	LotsDefault       = 20
	DurationDefault   = 5 * time.Second
	ClientsDefault    = 16
	AllocatorsDefault = 4
	RoundsDefault     = 3
)

// Options shape a run.
type Options struct {
	// SKUs is the number of SKUs read (and the cart's size); Lots the lots of each.
	SKUs, Lots int
	// Duration is each variant's measured time per round.
	Duration time.Duration
	// Clients are the concurrent HTTP clients of every variant.
	Clients int
	// Allocators allocate and release on the same SKUs throughout (0: none).
	Allocators int
	// Rounds: variants alternate, figures are medians over the rounds.
	Rounds int
	// Prefix is the Redis key prefix of the run (removed afterwards).
	Prefix string
	// Ledger and SKUNames, when set, are the SKUs to read (already in PostgreSQL for
	// Ledger's loader), instead of SKUs of its own; Date is the date the reads ask for.
	Ledger   *ledger.Ledger
	SKUNames []string
	Date     string
	// Writers, when set, replaces the in-process allocators: it runs from before the
	// first round until the last one ends (junbanlab's fleet mode sends order events to
	// an order-worker) and returns how many writes it made.
	Writers func(ctx context.Context) (int64, error)
}

// Figure is one variant's rate and latency.
type Figure struct {
	OpsPerSec float64 `json:"ops_per_sec"`
	P50Ms     float64 `json:"p50_ms"`
	P99Ms     float64 `json:"p99_ms"`
}

// Report is a run's figures (medians over the rounds).
type Report struct {
	SKUs, Lots, Clients, Allocators int
	// ResponseBytes is the size of one availability answer, and of the baseline's value.
	ResponseBytes int `json:"response_bytes"`
	// Availability is GET /v1/skus/{sku}/availability; BareGet the same HTTP server
	// answering a Redis GET of a value of ResponseBytes; Ratio their rates.
	Availability Figure  `json:"availability"`
	BareGet      Figure  `json:"bare_get"`
	Ratio        float64 `json:"ratio"`
	// Cart is one POST /v1/availability of every SKU; Singles as many single calls one
	// after the other, per operation.
	Cart    Figure `json:"cart"`
	Singles Figure `json:"singles"`
	// Writes counts the allocations (each with its release) or, with Options.Writers,
	// the order events sent, meanwhile.
	Writes int64 `json:"writes"`
	// Fleet is true when an order-worker made the writes.
	Fleet bool `json:"fleet"`
	// VersionsAdvanced is how far the SKUs' versions moved during the run, summed: the
	// ledger operations on the SKUs read, whoever made them.
	VersionsAdvanced int64 `json:"versions_advanced"`
}

type memLoader map[string]stock.SKU

func (m memLoader) LoadSKU(_ context.Context, sku string) (stock.SKU, error) {
	s, ok := m[sku]
	if !ok {
		return stock.SKU{}, stock.ErrUnknownSKU
	}
	return s, nil
}

const token = "bench-api-token-0123456789"

// Run measures on rc (db only satisfies the API; availability never reads it).
func Run(ctx context.Context, rc redis.UniversalClient, db *gorm.DB, opt Options, log io.Writer) (Report, error) {
	rep := Report{SKUs: opt.SKUs, Lots: opt.Lots, Clients: opt.Clients, Allocators: opt.Allocators}
	defer cleanup(context.WithoutCancel(ctx), rc, opt.Prefix)
	l, names, date := opt.Ledger, opt.SKUNames, opt.Date
	if l == nil {
		skus := memLoader{}
		names = make([]string, opt.SKUs)
		for i := range opt.SKUs {
			s := stock.SKU{SKU: fmt.Sprintf("BA-%03d", i), SafetyStock: 5}
			for j := range opt.Lots {
				s.Lots = append(s.Lots, stock.Lot{LotID: fmt.Sprintf("L%02d", j), Kind: stock.KindOnHand, Good: true,
					BestBefore: time.Date(2027, 1, 1+j, 0, 0, 0, 0, time.UTC).Format(time.DateOnly), RegSeq: int64(j),
					ValidFrom: stock.MinDate, ValidTo: stock.MaxDate, Sellable: 1_000_000})
			}
			skus[s.SKU], names[i] = s, s.SKU
		}
		var err error
		if l, err = ledger.New(ledger.Config{Redis: rc, Prefix: opt.Prefix, Loader: skus}); err != nil {
			return rep, err
		}
		date = "2026-12-01"
	}
	rep.SKUs = len(names)
	for _, n := range names {
		if err := l.Load(ctx, n); err != nil {
			return rep, err
		}
	}
	versions := func() (int64, error) {
		var rs []ledger.AvailabilityRequest
		for _, n := range names {
			rs = append(rs, ledger.AvailabilityRequest{SKU: n, TargetDate: date, Mode: stock.ModeShip})
		}
		as, err := l.AvailabilityMany(ctx, rs)
		var sum int64
		for _, a := range as {
			if err == nil && a.Err != nil {
				err = a.Err
			}
			sum += a.Availability.Version
		}
		return sum, err
	}
	v0, err := versions()
	if err != nil {
		return rep, err
	}
	srv, err := api.New(api.ServerConfig{
		Deps:    api.Deps{Redis: rc, Prefix: opt.Prefix, Ledger: l, DB: db},
		Options: api.Options{ReadTokens: []string{token}, MaxCartSKUs: max(opt.SKUs, 1)},
	})
	if err != nil {
		return rep, err
	}
	baseKey := opt.Prefix + ":bench:value"
	mux := http.NewServeMux()
	mux.Handle("/", srv)
	// The baseline: the same server, one Redis GET of a value as large as the answer.
	mux.HandleFunc("GET /bench/get", func(w http.ResponseWriter, r *http.Request) {
		v, err := rc.Get(r.Context(), baseKey).Bytes()
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(v)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return rep, err
	}
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go hs.Serve(ln)
	defer hs.Close()
	base := "http://" + ln.Addr().String()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: opt.Clients * 2, MaxConnsPerHost: opt.Clients * 2}, Timeout: 30 * time.Second}

	availURL := func(rng *rand.Rand) string {
		return base + "/v1/skus/" + names[rng.IntN(len(names))] + "/availability?date=" + date + "&qty=3"
	}
	sample, err := fetch(client, "GET", availURL(rand.New(rand.NewPCG(1, 1))), nil)
	if err != nil {
		return rep, err
	}
	rep.ResponseBytes = len(sample)
	if err := rc.Set(ctx, baseKey, sample, 0).Err(); err != nil {
		return rep, err
	}
	cart := api.CartRequest{Date: date, Mode: "ship"}
	for _, n := range names {
		cart.Items = append(cart.Items, api.CartItem{SKU: n, Qty: 3})
	}
	cartBody, _ := json.Marshal(cart)

	variants := []struct {
		name string
		op   func(rng *rand.Rand) error
		out  *[]Figure
	}{
		{"availability", func(rng *rand.Rand) error { _, err := fetch(client, "GET", availURL(rng), nil); return err }, new([]Figure)},
		{"bare_get", func(rng *rand.Rand) error { _, err := fetch(client, "GET", base+"/bench/get", nil); return err }, new([]Figure)},
		{"cart", func(rng *rand.Rand) error {
			_, err := fetch(client, "POST", base+"/v1/availability", cartBody)
			return err
		}, new([]Figure)},
		{"singles", func(rng *rand.Rand) error {
			for _, n := range names {
				if _, err := fetch(client, "GET", base+"/v1/skus/"+n+"/availability?date="+date+"&qty=3", nil); err != nil {
					return err
				}
			}
			return nil
		}, new([]Figure)},
	}

	// Allocators: the order-worker's ledger calls on the same SKUs, all run long.
	actx, stopAlloc := context.WithCancel(ctx)
	var awg sync.WaitGroup
	var allocs atomic.Int64
	allocErr := make(chan error, opt.Allocators+1)
	var writes atomic.Int64
	if opt.Writers != nil {
		rep.Fleet = true
		awg.Add(1)
		go func() {
			defer awg.Done()
			n, err := opt.Writers(actx)
			writes.Store(n)
			if err != nil && actx.Err() == nil {
				allocErr <- err
			}
		}()
	}
	for a := range opt.Allocators * btoi(opt.Writers == nil) {
		awg.Add(1)
		go func() {
			defer awg.Done()
			rng := rand.New(rand.NewPCG(uint64(a), 99))
			for i := 0; actx.Err() == nil; i++ {
				sku := names[rng.IntN(len(names))]
				op := fmt.Sprintf("a%d-%d", a, i)
				r, err := l.Apply(actx, stock.AllocateRequest{OpID: op, SKU: sku, Qty: 2, TargetDate: date, Mode: stock.ModeShip})
				if err == nil {
					var lots []stock.LotQty
					for _, m := range r.Moves {
						lots = append(lots, stock.LotQty{LotID: m.LotID, Qty: m.Qty})
					}
					_, err = l.Apply(actx, stock.ReleaseRequest{OpID: op + "-r", SKU: sku, From: stock.Allocated, Lots: lots})
				}
				if err != nil {
					if actx.Err() == nil {
						allocErr <- err
					}
					return
				}
				allocs.Add(1)
			}
		}()
	}
	defer func() { stopAlloc(); awg.Wait() }()

	for round := 1; round <= opt.Rounds; round++ {
		for _, v := range variants {
			f, err := drive(ctx, opt.Clients, opt.Duration, v.op)
			if err != nil {
				return rep, fmt.Errorf("%s: %w", v.name, err)
			}
			select {
			case err := <-allocErr:
				return rep, fmt.Errorf("allocator: %w", err)
			default:
			}
			*v.out = append(*v.out, f)
			fmt.Fprintf(log, "bench api: round %d/%d %-14s %9.0f ops/s  p50 %.2f ms  p99 %.2f ms\n", round, opt.Rounds, v.name, f.OpsPerSec, f.P50Ms, f.P99Ms)
		}
	}
	stopAlloc()
	awg.Wait()
	rep.Writes = allocs.Load() + writes.Load()
	v1, err := versions()
	if err != nil {
		return rep, err
	}
	rep.VersionsAdvanced = v1 - v0
	rep.Availability, rep.BareGet = median(*variants[0].out), median(*variants[1].out)
	rep.Cart, rep.Singles = median(*variants[2].out), median(*variants[3].out)
	if rep.BareGet.OpsPerSec > 0 {
		rep.Ratio = rep.Availability.OpsPerSec / rep.BareGet.OpsPerSec
	}
	return rep, nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func fetch(c *http.Client, method, url string, body []byte) ([]byte, error) {
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s %s: %d %s", method, url, resp.StatusCode, b)
	}
	return b, nil
}

// drive runs op from clients goroutines for d; the rate counts completed operations.
func drive(ctx context.Context, clients int, d time.Duration, op func(*rand.Rand) error) (Figure, error) {
	var wg sync.WaitGroup
	lat := make([][]time.Duration, clients)
	errs := make(chan error, clients)
	start := time.Now()
	deadline := start.Add(d)
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(c), uint64(start.UnixNano())))
			for ctx.Err() == nil {
				t := time.Now()
				if !t.Before(deadline) {
					return
				}
				if err := op(rng); err != nil {
					errs <- err
					return
				}
				lat[c] = append(lat[c], time.Since(t))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	select {
	case err := <-errs:
		return Figure{}, err
	default:
	}
	all := slices.Concat(lat...)
	if len(all) == 0 {
		return Figure{}, fmt.Errorf("no operation finished in %v", d)
	}
	slices.Sort(all)
	q := func(p float64) float64 { return float64(all[int(p*float64(len(all)-1))].Microseconds()) / 1000 }
	return Figure{OpsPerSec: float64(len(all)) / elapsed.Seconds(), P50Ms: q(0.5), P99Ms: q(0.99)}, nil
}

func median(fs []Figure) Figure {
	pick := func(get func(Figure) float64) float64 {
		v := make([]float64, len(fs))
		for i, f := range fs {
			v[i] = get(f)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	return Figure{OpsPerSec: pick(func(f Figure) float64 { return f.OpsPerSec }),
		P50Ms: pick(func(f Figure) float64 { return f.P50Ms }), P99Ms: pick(func(f Figure) float64 { return f.P99Ms })}
}

func cleanup(ctx context.Context, rc redis.UniversalClient, prefix string) {
	var keys []string
	iter := rc.Scan(ctx, 0, prefix+":*", 1000).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	for i := 0; i < len(keys); i += 500 {
		rc.Del(ctx, keys[i:min(i+500, len(keys))]...)
	}
}
