package chaos

import (
	"bufio"
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Evidence is what the workers' own counters say happened: proof that the faults hit
// work in flight. The counters restart at zero with each process and are read once a
// second, so the figures are lower bounds.
type Evidence struct {
	// BacklogsRecovered: turns the sweeper took after their holder died.
	BacklogsRecovered int `json:"backlogs_recovered"`
	// LeasesLost: turns whose holder found its lease gone (Redis restart, expiry).
	LeasesLost int `json:"leases_lost"`
	// Replayed: events found done already, with no second effect: duplicate deliveries
	// (nothing published again) and re-runs (their stored result republished).
	Replayed int `json:"replayed"`
	// Fenced: commits refused because the turn had moved on.
	Fenced int `json:"fenced"`
	// OrdersRetried and ResultsRetried: messages made visible again for a later try.
	OrdersRetried  int `json:"orders_retried"`
	ResultsRetried int `json:"results_retried"`
	// PersistFailures: persist batches that failed (PostgreSQL away) and were retried.
	PersistFailures int `json:"persist_apply_failures"`
}

// counters follows the Prometheus counters of one process across its restarts.
type counters struct {
	mu   sync.Mutex
	gen  int                // the run the last reading came from
	base map[string]float64 // sums of earlier runs
	last map[string]float64 // the current run's last reading
}

// observe records a reading of run gen of the process.
func (c *counters) observe(gen int, m map[string]float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.base == nil {
		c.base, c.last = map[string]float64{}, map[string]float64{}
	}
	if gen != c.gen {
		for k, v := range c.last {
			c.base[k] += v
		}
		c.gen, c.last = gen, map[string]float64{}
	}
	for k, v := range m {
		c.last[k] = v
	}
}

func (c *counters) total(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return int(c.base[name] + c.last[name])
}

// scrape reads a /metrics page and sums every sample per metric name (labels dropped).
func scrape(ctx context.Context, client *http.Client, addr string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		name := line[:i]
		if j := strings.IndexByte(name, '{'); j >= 0 {
			name = name[:j]
		}
		out[name] += v
	}
	return out, sc.Err()
}

// watch reads every worker's counters once a second until ctx ends.
func (e *Env) watch(ctx context.Context) {
	client := &http.Client{Timeout: time.Second}
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		for _, p := range e.all() {
			gen := p.generation()
			if m, err := scrape(ctx, client, p.httpAddr); err == nil && gen == p.generation() {
				p.counters.observe(gen, m)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (e *Env) evidence() Evidence {
	var ev Evidence
	for _, p := range e.workers {
		ev.BacklogsRecovered += p.counters.total("junban_lockhandoff_backlogs_recovered_total")
		ev.LeasesLost += p.counters.total("junban_lockhandoff_leases_lost_total")
		ev.Replayed += p.counters.total("junban_order_replayed_total")
		ev.Fenced += p.counters.total("junban_order_fenced_total")
		ev.OrdersRetried += p.counters.total("junban_queue_retried_total")
	}
	ev.ResultsRetried = e.persist.counters.total("junban_queue_retried_total")
	ev.PersistFailures = e.persist.counters.total("junban_persist_apply_failures_total")
	return ev
}
