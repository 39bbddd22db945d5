package costbench

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/procfs"
	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/junban/junban/internal/testenv/fleet"
)

// snapshot is every counter the benchmark reads, at one moment; two make a delta.
type snapshot struct {
	// cpu is each process's process_cpu_seconds_total, by process name.
	cpu map[string]float64
	// switches is each process's context switches (voluntary and not) summed over its
	// threads, by process name; none where /proc cannot tell (not Linux).
	switches map[string]float64
	// requests and messages are the processes' junban_sqs_requests_total and
	// junban_sqs_messages_total summed over the processes, by sqsKey.
	requests, messages map[sqsKey]float64
	// producerRequests and producerMessages are the same counters of the benchmark's own
	// client, the producer that sends the events (not junban's cost).
	producerRequests, producerMessages map[sqsKey]float64
	// redisCPU is Redis's used_cpu_sys + used_cpu_user (seconds).
	redisCPU float64
	// redisCalls is INFO commandstats' calls by command (lower case: "evalsha").
	redisCalls map[string]float64
	// pg is pg_stat_database's counters of the database the fleet writes to.
	pg pgStats
	// pgCPU is the PostgreSQL server's CPU (seconds, pgServerCPU), when pgLocal: the
	// server runs on this host.
	pgCPU   float64
	pgLocal bool
	// batches is the persist-worker's junban_persist_batch_size_count: its transactions.
	// pg_stat_database's xact_commit counts every session's, the benchmark's own reads
	// included, at three to four times as many.
	batches float64
	// hists are the event path's histograms (pathStages), summed over the processes.
	hists map[histKey]*hist
}

// sqsKey is one series of the SQS counters; role is the queue's role ("orders",
// "results", "orders-dlq", ...), the run's prefix taken off the queue's name.
type sqsKey struct {
	Role, Action, Error string
}

type pgStats struct {
	TupInserted, TupUpdated, TupDeleted float64
}

// take reads everything at once (in sequence, as close together as it goes).
func take(ctx context.Context, procs []*fleet.Proc, e *env) (*snapshot, error) {
	run, rc, db := e.run, e.rc, e.db
	s := &snapshot{
		cpu: map[string]float64{}, switches: map[string]float64{}, requests: map[sqsKey]float64{}, messages: map[sqsKey]float64{},
		producerRequests: map[sqsKey]float64{}, producerMessages: map[sqsKey]float64{}, hists: map[histKey]*hist{},
	}
	mfs, err := e.producer.Gather()
	if err != nil {
		return nil, err
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			k := sqsKey{role(labels["queue"], run), labels["action"], labels["error"]}
			switch mf.GetName() {
			case "junban_sqs_requests_total":
				s.producerRequests[k] += m.GetCounter().GetValue()
			case "junban_sqs_messages_total":
				s.producerMessages[k] += m.GetCounter().GetValue()
			}
		}
	}
	for _, p := range procs {
		if n, ok := contextSwitches(p.Pid()); ok {
			s.switches[p.Name] = n
		}
		lines, err := scrape(ctx, p.Addr, append([]string{"process_cpu_seconds_total", "junban_sqs_requests_total", "junban_sqs_messages_total",
			"junban_persist_batch_size_count"}, pathSeries()...)...)
		if err != nil {
			return nil, fmt.Errorf("costbench: %s: %w", p.Name, err)
		}
		for _, l := range lines {
			switch l.name {
			case "process_cpu_seconds_total":
				s.cpu[p.Name] = l.value
			case "junban_sqs_requests_total":
				s.requests[sqsKey{role(l.labels["queue"], run), l.labels["action"], l.labels["error"]}] += l.value
			case "junban_sqs_messages_total":
				s.messages[sqsKey{role(l.labels["queue"], run), l.labels["action"], ""}] += l.value
			case "junban_persist_batch_size_count":
				s.batches += l.value
			}
			if family, suffix, ok := pathFamily(l.name); ok {
				q := l.labels["queue"]
				if q != "" {
					q = role(q, run)
				}
				addSample(s.hists, l, family, suffix, q)
			}
		}
	}
	if s.redisCPU, s.redisCalls, err = redisCounters(ctx, rc); err != nil {
		return nil, err
	}
	if s.pg, err = readPGStats(ctx, db); err != nil {
		return nil, err
	}
	if s.pgCPU, s.pgLocal, err = pgServerCPU(ctx, db); err != nil {
		return nil, err
	}
	return s, nil
}

// contextSwitches is a process's context switches so far, voluntary (it waited: on a
// socket, a futex, a timer) and not (preempted), over all its threads: /proc/<pid>/status
// counts its main thread's only. Each is a wake-up of a thread, which is what a round
// trip or a hand-off between goroutines costs beyond its own work, so unlike CPU time
// the count hardly moves with how busy the machine is. ok is false where /proc cannot
// tell (not Linux); a thread that ended before the count is not in it.
func contextSwitches(pid int) (n float64, ok bool) {
	threads, err := procfs.AllThreads(pid)
	if err != nil {
		return 0, false
	}
	for _, t := range threads {
		st, err := t.NewStatus()
		if err != nil {
			continue // the thread ended meanwhile
		}
		n += float64(st.TotalCtxtSwitches())
	}
	return n, true
}

// role is a queue's name without the run's prefix: "orders", "results-dlq".
func role(queueName, run string) string {
	if r, ok := strings.CutPrefix(queueName, run+"-"); ok {
		return r
	}
	return queueName
}

// redisCounters reads INFO cpu and INFO commandstats.
func redisCounters(ctx context.Context, rc redis.UniversalClient) (cpu float64, calls map[string]float64, err error) {
	info, err := rc.Info(ctx, "cpu", "commandstats").Result()
	if err != nil {
		return 0, nil, fmt.Errorf("costbench: redis INFO: %w", err)
	}
	calls = map[string]float64{}
	for line := range strings.SplitSeq(info, "\n") {
		line = strings.TrimSpace(line)
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch {
		case k == "used_cpu_sys" || k == "used_cpu_user":
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return 0, nil, fmt.Errorf("costbench: INFO %s: %w", k, err)
			}
			cpu += f
		case strings.HasPrefix(k, "cmdstat_"):
			for field := range strings.SplitSeq(v, ",") {
				if n, ok := strings.CutPrefix(field, "calls="); ok {
					f, _ := strconv.ParseFloat(n, 64)
					calls[strings.ToLower(strings.TrimPrefix(k, "cmdstat_"))] = f
				}
			}
		}
	}
	return cpu, calls, nil
}

// line is one sample of a /metrics page.
type line struct {
	name   string
	labels map[string]string
	value  float64
}

var labelRE = regexp.MustCompile(`(\w+)="((?:[^"\\]|\\.)*)"`)

// scrape reads the samples of the named metrics from the /metrics of the listener at addr.
func scrape(ctx context.Context, addr string, names ...string) ([]line, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out []line
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		text := sc.Text()
		if text == "" || text[0] == '#' {
			continue
		}
		series, value, ok := cutLast(text, " ")
		if !ok {
			continue
		}
		name, labels, _ := strings.Cut(series, "{")
		want := false
		for _, n := range names {
			want = want || n == name
		}
		if !want {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", text, err)
		}
		l := line{name: name, labels: map[string]string{}, value: v}
		for _, m := range labelRE.FindAllStringSubmatch(labels, -1) {
			if u, err := strconv.Unquote(`"` + m[2] + `"`); err == nil {
				l.labels[m[1]] = u
			}
		}
		out = append(out, l)
	}
	return out, sc.Err()
}

func cutLast(s, sep string) (before, after string, ok bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+len(sep):], true
}

// readPGStats is pg_stat_database's row counters of the fleet's database.
func readPGStats(ctx context.Context, db *gorm.DB) (s pgStats, err error) {
	if err := db.WithContext(ctx).Raw(`SELECT tup_inserted, tup_updated, tup_deleted
		FROM pg_stat_database WHERE datname = current_database()`).Row().Scan(
		&s.TupInserted, &s.TupUpdated, &s.TupDeleted); err != nil {
		return s, fmt.Errorf("costbench: pg_stat_database: %w", err)
	}
	return s, nil
}

// settledPGStats reads the row counters once they have stopped moving: five readings
// 100 ms apart alike, or the last reading after 15 s. Call it once the writers are gone,
// when their backends have reported what they held back.
func settledPGStats(ctx context.Context, db *gorm.DB) (pgStats, error) {
	last, err := readPGStats(ctx, db)
	if err != nil {
		return last, err
	}
	deadline := time.Now().Add(15 * time.Second)
	for same := 0; same < 5 && time.Now().Before(deadline); {
		select {
		case <-ctx.Done():
			return last, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		s, err := readPGStats(ctx, db)
		if err != nil {
			return last, err
		}
		if s == last {
			same++
		} else {
			same, last = 0, s
		}
	}
	return last, nil
}
