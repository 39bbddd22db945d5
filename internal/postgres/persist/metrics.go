package persist

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the persist-worker's Prometheus metrics, namespace junban, subsystem persist.
type Metrics struct {
	// BatchSize is the number of results per applied batch (one transaction).
	BatchSize prometheus.Histogram
	// ApplyDuration is the time of one successful Apply.
	ApplyDuration prometheus.Histogram
	// Lag is the time from a result's processed_at to the commit of its batch.
	Lag prometheus.Histogram
	// Skipped counts what PostgreSQL already held or held newer, by kind: duplicate
	// (inbox), order_seq, sku_version, lot_version, move.
	Skipped *prometheus.CounterVec
	// Results counts results by status: applied, duplicate, poison, conflict.
	Results *prometheus.CounterVec
	// IdentityConflicts counts rows refused because their table holds another under the
	// same key, by table: inbox (a result of the same entity and event id with another
	// body; dead-lettered) and moves (a move of another result under the same SKU, op id
	// and index; logged, its result applied).
	IdentityConflicts *prometheus.CounterVec
	// Failures counts Apply attempts that failed for a reason a retry can cure.
	Failures prometheus.Counter
	// OutboxRows counts the outbound events written into the outbox by committed batches.
	OutboxRows prometheus.Counter
}

// newMetrics creates the metrics and registers them with reg (when not nil).
func newMetrics(reg prometheus.Registerer) (*Metrics, error) {
	const ns, sub = "junban", "persist"
	m := &Metrics{
		BatchSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: ns, Subsystem: sub, Name: "batch_size",
			Help:    "Results per applied batch (one PostgreSQL transaction).",
			Buckets: []float64{1, 2, 5, 10, 20, 50, 100, 200, 500},
		}),
		ApplyDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: ns, Subsystem: sub, Name: "apply_duration_seconds",
			Help:    "Duration of one successful batch apply, transaction included.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 14),
		}),
		Lag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: ns, Subsystem: sub, Name: "lag_seconds",
			Help:    "Time from a result's processed_at (order-worker) to the commit of its batch.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 16),
		}),
		Skipped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "conflicts_skipped_total",
			Help: "Rows not written because PostgreSQL held them already or newer, by kind.",
		}, []string{"kind"}),
		Results: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "results_total",
			Help: "Results handled, by status (applied, duplicate, poison, conflict).",
		}, []string{"status"}),
		IdentityConflicts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "identity_conflicts_total",
			Help: "Rows refused because their table holds another under the same key with other content, by table (inbox, moves).",
		}, []string{"table"}),
		Failures: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "apply_failures_total",
			Help: "Batch applies that failed for a reason a retry can cure (PostgreSQL unreachable, deadlock).",
		}),
		OutboxRows: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "outbox_rows_total",
			Help: "Outbound events written into the outbox by committed batches.",
		}),
	}
	for _, k := range []string{"duplicate", "order_seq", "sku_version", "lot_version", "move"} {
		m.Skipped.WithLabelValues(k)
	}
	for _, s := range []string{"applied", "duplicate", "poison", "conflict"} {
		m.Results.WithLabelValues(s)
	}
	for _, t := range []string{"inbox", "moves"} {
		m.IdentityConflicts.WithLabelValues(t)
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.BatchSize, m.ApplyDuration, m.Lag, m.Skipped, m.Results, m.IdentityConflicts, m.Failures, m.OutboxRows} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("persist: metrics: %w", err)
			}
		}
	}
	return m, nil
}

func (m *Metrics) skipped(s Skips) {
	m.Skipped.WithLabelValues("duplicate").Add(float64(s.Duplicates))
	m.Skipped.WithLabelValues("order_seq").Add(float64(s.OlderOrders))
	m.Skipped.WithLabelValues("sku_version").Add(float64(s.OlderSKUs))
	m.Skipped.WithLabelValues("lot_version").Add(float64(s.OlderLots))
	m.Skipped.WithLabelValues("transfer_version").Add(float64(s.OlderTransfers))
	m.Skipped.WithLabelValues("backorder_version").Add(float64(s.OlderBackorders))
	m.Skipped.WithLabelValues("move").Add(float64(s.DuplicateMoves))
}
