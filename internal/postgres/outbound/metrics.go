package outbound

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// The results of a relay round, the label of junban_outbox_relay_rounds_total.
const (
	// roundPublished: the round published every row it read.
	roundPublished = "published"
	// roundPartial: SNS took some rows and refused or missed others (they go again).
	roundPartial = "partial"
	// roundEmpty: nothing to publish.
	roundEmpty = "empty"
	// roundLocked: another relay (replica) holds the outbox's lock; this one waits for its next poll.
	roundLocked = "not_leader"
	// roundFailed: nothing was marked published (PostgreSQL or SNS failed).
	roundFailed = "failed"
)

var roundResults = []string{roundPublished, roundPartial, roundEmpty, roundLocked, roundFailed}

// RelayMetrics are the relay's Prometheus metrics, namespace junban, subsystem outbox.
type RelayMetrics struct {
	// Published counts the messages SNS took, by kind (a copy counts again).
	Published *prometheus.CounterVec
	// PublishFailures counts the messages SNS refused or did not answer for (they go again).
	PublishFailures prometheus.Counter
	// Parked counts the rows parked because SNS can never take them, by reason: too_large,
	// invalid_characters, refused.
	Parked *prometheus.CounterVec
	// Rounds counts the relay's rounds by result: published, partial, empty, not_leader, failed.
	Rounds *prometheus.CounterVec
	// Lag is the time from a row's created_at to SNS taking it.
	Lag prometheus.Histogram
	// Depth is the number of rows neither published nor parked (ReadStats).
	Depth prometheus.Gauge
	// ParkedRows is the number of parked rows in the outbox (ReadStats).
	ParkedRows prometheus.Gauge
	// OldestUnpublished is the age of the oldest unpublished row (ReadStats).
	OldestUnpublished prometheus.Gauge
	// StockLevels counts the SKUs low or out as last told, by location (a described
	// location's id, ~network, ~other) and level (ReadStockLevels).
	StockLevels *prometheus.GaugeVec
}

func newRelayMetrics(reg prometheus.Registerer) (*RelayMetrics, error) {
	const ns, sub = "junban", "outbox"
	m := &RelayMetrics{
		Published: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "published_total",
			Help: "Outbound messages SNS took, by kind (a copy published again counts again).",
		}, []string{"kind"}),
		PublishFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "publish_failures_total",
			Help: "Outbound messages SNS refused or did not answer for; they are published again.",
		}),
		Parked: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "parked_total",
			Help: "Outbox rows parked because SNS can never take them, by reason (too_large, invalid_characters, refused).",
		}, []string{"reason"}),
		Rounds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "relay_rounds_total",
			Help: "Relay rounds by result (published, partial, empty, not_leader: another replica relays, failed).",
		}, []string{"result"}),
		Lag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: ns, Subsystem: sub, Name: "relay_lag_seconds",
			Help:    "Time from an outbox row's commit (created_at) to SNS taking it.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 16),
		}),
		Depth: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: ns, Subsystem: sub, Name: "depth",
			Help: "Outbox rows neither published nor parked.",
		}),
		ParkedRows: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: ns, Subsystem: sub, Name: "parked",
			Help: "Outbox rows parked (SNS can never take them); they wait for an operator.",
		}),
		OldestUnpublished: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: ns, Subsystem: sub, Name: "oldest_unpublished_seconds",
			Help: "Age of the oldest outbox row not yet published; 0 when none.",
		}),
		StockLevels: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: ns, Subsystem: sub, Name: "stock_levels",
			Help: "SKUs low or out as the outbound events last told, by location (a described location's id, ~network for the network, ~other for undescribed ones) and level.",
		}, []string{"location", "level"}),
	}
	for _, k := range Kinds {
		m.Published.WithLabelValues(string(k))
	}
	for _, r := range roundResults {
		m.Rounds.WithLabelValues(r)
	}
	for _, r := range parkReasons {
		m.Parked.WithLabelValues(r)
	}
	setStockLevels(m.StockLevels, nil)
	if reg != nil {
		for _, c := range []prometheus.Collector{m.Published, m.PublishFailures, m.Parked, m.Rounds, m.Lag, m.Depth, m.ParkedRows, m.OldestUnpublished, m.StockLevels} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("outbound: metrics: %w", err)
			}
		}
	}
	return m, nil
}

// newDeletedCounter is junban_outbox_deleted_total, registered with reg (when not nil).
func newDeletedCounter(reg prometheus.Registerer) (prometheus.Counter, error) {
	c := prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "junban", Subsystem: "outbox", Name: "deleted_total",
		Help: "Outbox rows deleted by the retention cleanup.",
	})
	if reg != nil {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("outbound: metrics: %w", err)
		}
	}
	return c, nil
}

// setStockLevels makes g say levels: a location no longer low or out loses its series,
// and the network's are always there.
func setStockLevels(g *prometheus.GaugeVec, levels []StockLevel) {
	g.Reset()
	for _, l := range []string{LevelLow, LevelOut} {
		g.WithLabelValues(NetworkLabel, l)
	}
	for _, l := range levels {
		g.WithLabelValues(l.Location, l.Level).Set(float64(l.SKUs))
	}
}
