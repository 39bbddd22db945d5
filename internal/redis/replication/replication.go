// Package replication makes a Redis write count as done only once replicas have it.
//
// Redis replicates asynchronously: a primary that dies before it sent a write to its
// replicas takes the write with it, and the replica promoted in its place never saw it.
// A Waiter appends WAIT numreplicas timeout (or WAITAOF) to the pipeline that made the
// write: WAIT answers how many replicas acknowledged every write made so far on its own
// connection, so it must follow the write on the same connection, in the same pipeline.
// A short answer leaves the write where it is (it may still replicate) but says it is not
// yet durable: the caller keeps what it would otherwise let go of (an SQS message, a
// result not yet published) and tries again.
package replication

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
)

// Defaults of Config.
const (
	TimeoutDefault    = 500 * time.Millisecond
	ReadyAfterDefault = 30 * time.Second
)

// Config says how many replicas a write needs before it counts as done.
type Config struct {
	// Replicas is how many replicas must acknowledge a write; 0 (without AOF) turns the
	// Waiter off: no WAIT is sent.
	Replicas int
	// Timeout bounds one WAIT; past it the write counts as not yet durable.
	Timeout time.Duration
	// AOF asks for the primary's own AOF fsync as well (WAITAOF 1 Replicas Timeout; Redis
	// 7.2 or later with appendonly on: see Check).
	AOF bool
	// ReadyAfter is how long writes may stay short continuously before Ready fails.
	ReadyAfter time.Duration
	// Registerer registers junban_redis_replication_short_total; nil registers it nowhere.
	Registerer prometheus.Registerer
	// Now is the clock of ReadyAfter; nil is time.Now.
	Now func() time.Time
}

// ErrShort is a WAIT's answer with fewer replicas than Config.Replicas: the write is in
// Redis but may be lost with its primary.
var ErrShort = errors.New("replication: write not acknowledged by enough replicas")

// Waiter sends WAIT after writes; a nil or zero Waiter sends nothing.
type Waiter struct {
	cfg   Config
	short *prometheus.CounterVec
	// shortSince is when the current run of short answers began (unix ns), 0 after an
	// answer with enough replicas.
	shortSince atomic.Int64
}

// New checks cfg and returns a Waiter.
func New(cfg Config) (*Waiter, error) {
	if cfg.Timeout == 0 {
		cfg.Timeout = TimeoutDefault
	}
	if cfg.ReadyAfter == 0 {
		cfg.ReadyAfter = ReadyAfterDefault
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	switch {
	case cfg.Replicas < 0:
		return nil, fmt.Errorf("replication: Replicas %d is negative", cfg.Replicas)
	case cfg.Timeout < time.Millisecond:
		// WAIT 0 blocks for ever.
		return nil, fmt.Errorf("replication: Timeout %v is below 1ms", cfg.Timeout)
	}
	w := &Waiter{cfg: cfg, short: prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "junban", Subsystem: "redis", Name: "replication_short_total",
		Help: "Writes that fewer replicas than JUNBAN_REDIS_MIN_REPLICAS acknowledged in time (WAIT), by write: the write counted as not yet durable and is retried.",
	}, []string{"write"})}
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(w.short); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// On tells whether writes wait for replicas (or, with Config.AOF, for the local fsync).
func (w *Waiter) On() bool { return w != nil && (w.cfg.Replicas > 0 || w.cfg.AOF) }

// Ack is the answer of one WAIT (or WAITAOF) appended to a pipeline.
type Ack struct {
	w     *Waiter
	write string
	n     *redis.IntCmd
	aof   *redis.IntSliceCmd
}

// Append adds WAIT (WAITAOF with Config.AOF) to p, after the writes it must cover; write
// names them in the metric. It returns nil when w is off: Ack's Err is then nil.
func (w *Waiter) Append(ctx context.Context, p redis.Pipeliner, write string) *Ack {
	if !w.On() {
		return nil
	}
	a := &Ack{w: w, write: write}
	ms := w.cfg.Timeout.Milliseconds()
	if w.cfg.AOF {
		a.aof = redis.NewIntSliceCmd(ctx, "waitaof", 1, w.cfg.Replicas, ms)
		p.Process(ctx, a.aof)
	} else {
		a.n = redis.NewIntCmd(ctx, "wait", w.cfg.Replicas, ms)
		p.Process(ctx, a.n)
	}
	return a
}

// Err, once the pipeline ran, is nil when enough replicas acknowledged, ErrShort when
// too few did in time, or the command's own error. Call it once per Ack: a short answer
// counts in the metric and in Ready.
func (a *Ack) Err() error {
	if a == nil {
		return nil
	}
	var err error
	switch {
	case a.aof != nil:
		v, e := a.aof.Result()
		switch {
		case e != nil:
			err = fmt.Errorf("replication: WAITAOF: %w", e)
		case len(v) != 2:
			err = fmt.Errorf("replication: WAITAOF answered %v", v)
		case v[0] < 1 || v[1] < int64(a.w.cfg.Replicas):
			err = fmt.Errorf("%w: local AOF fsync %d, %d of %d replicas in %v", ErrShort, v[0], v[1], a.w.cfg.Replicas, a.w.cfg.Timeout)
		}
	default:
		n, e := a.n.Result()
		switch {
		case e != nil:
			err = fmt.Errorf("replication: WAIT: %w", e)
		case n < int64(a.w.cfg.Replicas):
			err = fmt.Errorf("%w: %d of %d replicas in %v", ErrShort, n, a.w.cfg.Replicas, a.w.cfg.Timeout)
		}
	}
	a.w.observe(a.write, err)
	return err
}

// Fail records that the write could not be confirmed at all (no WAIT was answered: the
// node of its key was unknown, the round trip failed).
func (w *Waiter) Fail(write string, err error) error {
	if !w.On() {
		return err
	}
	w.observe(write, err)
	return err
}

func (w *Waiter) observe(write string, err error) {
	if err == nil {
		w.shortSince.Store(0)
		return
	}
	if errors.Is(err, ErrShort) {
		w.short.WithLabelValues(write).Inc()
	}
	w.shortSince.CompareAndSwap(0, w.cfg.Now().UnixNano())
}

// Ready fails once every write has stayed unconfirmed for longer than Config.ReadyAfter:
// the replicas are away, and what this process acknowledges waits in SQS or in Redis.
// The next confirmed write makes it pass again.
func (w *Waiter) Ready(context.Context) error {
	if !w.On() {
		return nil
	}
	since := w.shortSince.Load()
	if since == 0 {
		return nil
	}
	if d := w.cfg.Now().Sub(time.Unix(0, since)); d > w.cfg.ReadyAfter {
		return fmt.Errorf("replication: no write acknowledged by %d replicas for %v", w.cfg.Replicas, d.Round(time.Second))
	}
	return nil
}

// Pipelined runs fn's commands in one pipeline on the connection to the primary that holds
// key (on a cluster client, that node's client: a keyless WAIT in a cluster pipeline goes
// to any node), followed by WAIT when w is on. The commands' own replies and errors are in
// the commands fn created; the error is the pipeline's or the WAIT's (ErrShort).
func (w *Waiter) Pipelined(ctx context.Context, rc redis.UniversalClient, key, write string, fn func(p redis.Pipeliner)) error {
	if !w.On() {
		pipe := rc.Pipeline()
		fn(pipe)
		_, err := pipe.Exec(ctx)
		return err
	}
	var c redis.Cmdable = rc
	if cc, ok := rc.(*redis.ClusterClient); ok {
		node, err := cc.MasterForKey(ctx, key)
		if err != nil {
			// fn's commands still run (through the cluster client); only the WAIT is lost.
			pipe := rc.Pipeline()
			fn(pipe)
			pipe.Exec(ctx)
			return w.Fail(write, fmt.Errorf("replication: primary of %s: %w", key, err))
		}
		c = node
	}
	pipe := c.Pipeline()
	fn(pipe)
	ack := w.Append(ctx, pipe, write)
	_, err := pipe.Exec(ctx)
	if isMoved(err) {
		if cc, ok := rc.(*redis.ClusterClient); ok {
			cc.ReloadState(ctx)
		}
	}
	if err := ack.Err(); err != nil {
		return err
	}
	return err
}

func isMoved(err error) bool {
	if err == nil {
		return false
	}
	s := err.Error()
	return strings.HasPrefix(s, "MOVED ") || strings.HasPrefix(s, "ASK ") || strings.HasPrefix(s, "CLUSTERDOWN")
}

// Check refuses, at start-up, a Waiter the servers cannot serve: with Config.AOF, every
// primary must run Redis 7.2 or later (WAITAOF) with appendonly on.
func (w *Waiter) Check(ctx context.Context, rc redis.UniversalClient) error {
	if !w.On() || !w.cfg.AOF {
		return nil
	}
	check := func(ctx context.Context, c *redis.Client) error {
		info, err := c.Info(ctx, "server", "persistence").Result()
		if err != nil {
			return fmt.Errorf("replication: INFO on %s: %w", c.Options().Addr, err)
		}
		version, aof := infoField(info, "redis_version"), infoField(info, "aof_enabled")
		if !atLeast(version, 7, 2) {
			return fmt.Errorf("replication: JUNBAN_REDIS_WAIT_AOF needs WAITAOF, Redis 7.2 or later; %s runs %s", c.Options().Addr, version)
		}
		if aof != "1" {
			return fmt.Errorf("replication: JUNBAN_REDIS_WAIT_AOF needs appendonly yes on %s", c.Options().Addr)
		}
		return nil
	}
	switch c := rc.(type) {
	case *redis.ClusterClient:
		return c.ForEachMaster(ctx, check)
	case *redis.Client:
		return check(ctx, c)
	}
	return fmt.Errorf("replication: JUNBAN_REDIS_WAIT_AOF: cannot check a %T", rc)
}

func infoField(info, name string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return ""
}

// atLeast reports whether version ("7.0.15") is major.minor or later.
func atLeast(version string, major, minor int) bool {
	parts := strings.SplitN(version, ".", 3)
	if len(parts) < 2 {
		return false
	}
	ma, err1 := strconv.Atoi(parts[0])
	mi, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		return false
	}
	return ma > major || ma == major && mi >= minor
}
