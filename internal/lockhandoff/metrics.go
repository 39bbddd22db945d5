package lockhandoff

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	turns       *prometheus.CounterVec
	handedOff   prometheus.Counter
	depth       prometheus.Histogram
	full        prometheus.Counter
	leasesLost  prometheus.Counter
	abandoned   prometheus.Counter
	failed      prometheus.Counter
	quarantined prometheus.Counter
	recovered   prometheus.Counter
	waited      prometheus.Histogram
	detached    prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	const ns, sub = "junban", "lockhandoff"
	m := &metrics{
		turns: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "turns_taken_total", Help: "Turns taken, by how: submit, resume (nudge) or sweeper."}, []string{"via"}),
		handedOff: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "handoffs_total", Help: "Events handed the turn by the previous event's holder, without a re-acquire."}),
		depth: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub,
			Name: "queue_depth_at_enqueue", Help: "Length of the entity's wait list right after an accepted Submit.",
			Buckets: []float64{0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 1024, 4096}}),
		full: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "full_total", Help: "Submits refused because the wait list was at its bound."}),
		leasesLost: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "leases_lost_total", Help: "Turns whose lease was found lost (renewal or handoff failed its token check, or renewal failed)."}),
		abandoned: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "handlers_abandoned_total", Help: "Handlers that passed their deadline."}),
		failed: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "handler_failures_total", Help: "Turns left with the envelope in proc after the handler failed every retry."}),
		quarantined: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "quarantined_total", Help: "Envelopes taken out of their turn by Handler.Quarantine, after MaxAttempts failed runs or an operator's skip."}),
		recovered: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "backlogs_recovered_total", Help: "Backlogs whose turn the sweeper took after their holder left or died."}),
		waited: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub,
			Name: "wait_seconds", Help: "Time an event spent in the wait list (or proc, for a re-run) before its handler started, by the Redis clock.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10)}),
		detached: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub,
			Name: "turns_detached", Help: "Turns running on a goroutine of their own (Config.Detached slots in use): their Submit or Resume returned, or returns once their first envelope is handled. At Config.Detached, further turns drain inline."}),
	}
	if reg == nil {
		return m, nil
	}
	var err error
	m.turns = register(reg, m.turns, &err)
	m.handedOff = register(reg, m.handedOff, &err)
	m.depth = register(reg, m.depth, &err)
	m.full = register(reg, m.full, &err)
	m.leasesLost = register(reg, m.leasesLost, &err)
	m.abandoned = register(reg, m.abandoned, &err)
	m.failed = register(reg, m.failed, &err)
	m.quarantined = register(reg, m.quarantined, &err)
	m.recovered = register(reg, m.recovered, &err)
	m.waited = register(reg, m.waited, &err)
	m.detached = register(reg, m.detached, &err)
	if err != nil {
		return nil, fmt.Errorf("lockhandoff: metrics: %w", err)
	}
	return m, nil
}

// register registers c, or returns the collector already registered under its name, so
// that several Handoffs of one process share their metrics.
func register[C prometheus.Collector](reg prometheus.Registerer, c C, errp *error) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
		*errp = errors.Join(*errp, err)
	}
	return c
}
