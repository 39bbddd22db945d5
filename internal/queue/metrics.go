package queue

import (
	"errors"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// Metric names share namespace "junban" and subsystem "queue"; every series carries the
// queue's name as the label "queue".
const (
	metricsNamespace = "junban"
	metricsSubsystem = "queue"
)

type consumerMetrics struct {
	received, deleted, retried, deadLettered prometheus.Counter
	receiveErrors, receives                  prometheus.Counter
	handlerDuration                          prometheus.Observer
	inFlight                                 prometheus.Gauge
	// receiveAge is a first delivery's time in the queue (SentTimestamp to its receive);
	// batchWait a batch consumer's message's time from its receive to its BatchHandler call.
	receiveAge, batchWait prometheus.Observer
}

type publisherMetrics struct {
	published, publishErrors prometheus.Counter
	// linger is a message's time in its batch before the batch's SendMessageBatch went
	// out; publish its time from Publish to SQS's answer.
	linger, publish prometheus.Observer
}

// pathBuckets are the buckets of the event path's histograms: 1 ms to 11 s in steps of
// 1.5x, fine enough for a p99 of tens of milliseconds.
var pathBuckets = prometheus.ExponentialBuckets(0.001, 1.5, 24)

// registerHistogram registers (or finds) the histogram vector name, labelled by queue,
// and returns its series for queueName.
func registerHistogram(reg prometheus.Registerer, name, help, queueName string, buckets []float64) (prometheus.Observer, error) {
	v, err := register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: name, Help: help, Buckets: buckets,
	}, []string{"queue"}))
	if err != nil {
		return nil, err
	}
	return v.WithLabelValues(queueName), nil
}

func newConsumerMetrics(reg prometheus.Registerer, queueName string) (*consumerMetrics, error) {
	counter := func(name, help string) (prometheus.Counter, error) {
		v, err := registerCounterVec(reg, name, help)
		if err != nil {
			return nil, err
		}
		return v.WithLabelValues(queueName), nil
	}
	var m consumerMetrics
	var err error
	if m.received, err = counter("received_total", "Messages received from SQS (redeliveries included)."); err != nil {
		return nil, err
	}
	if m.deleted, err = counter("deleted_total", "Messages deleted from SQS after their handler answered Done (or after a Poison reached the DLQ)."); err != nil {
		return nil, err
	}
	if m.retried, err = counter("retried_total", "Messages made visible again later because their handler answered Retry."); err != nil {
		return nil, err
	}
	if m.deadLettered, err = counter("dead_lettered_total", "Poison messages sent to the dead-letter queue by the consumer."); err != nil {
		return nil, err
	}
	if m.receives, err = counter("receives_total", "ReceiveMessage calls answered; received_total / receives_total is the messages per call."); err != nil {
		return nil, err
	}
	if m.receiveErrors, err = counter("receive_errors_total", "ReceiveMessage calls that failed."); err != nil {
		return nil, err
	}
	hist := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: metricsNamespace, Subsystem: metricsSubsystem,
		Name:    "handler_duration_seconds",
		Help:    "Time a handler (or batch handler) took.",
		Buckets: []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
	}, []string{"queue"})
	hv, err := register(reg, hist)
	if err != nil {
		return nil, err
	}
	m.handlerDuration = hv.WithLabelValues(queueName)
	gauge := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: metricsNamespace, Subsystem: metricsSubsystem,
		Name: "in_flight",
		Help: "Messages received and not yet deleted, retried, dead-lettered or handed back.",
	}, []string{"queue"})
	gv, err := register(reg, gauge)
	if err != nil {
		return nil, err
	}
	m.inFlight = gv.WithLabelValues(queueName)
	if m.receiveAge, err = registerHistogram(reg, "receive_age_seconds", "Time a message spent in the queue before its first receive (SentTimestamp to the receive's answer).", queueName, pathBuckets); err != nil {
		return nil, err
	}
	if m.batchWait, err = registerHistogram(reg, "batch_wait_seconds", "Time a batch consumer's message waited from its receive to its batch handler call.", queueName, pathBuckets); err != nil {
		return nil, err
	}
	return &m, nil
}

func newPublisherMetrics(reg prometheus.Registerer, queueName string) (*publisherMetrics, error) {
	pub, err := registerCounterVec(reg, "published_total", "Messages accepted by SQS.")
	if err != nil {
		return nil, err
	}
	perr, err := registerCounterVec(reg, "publish_errors_total", "Messages SQS did not accept (or that were refused before sending).")
	if err != nil {
		return nil, err
	}
	m := &publisherMetrics{published: pub.WithLabelValues(queueName), publishErrors: perr.WithLabelValues(queueName)}
	if m.linger, err = registerHistogram(reg, "publish_linger_seconds", "Time a message waited in its batch before the batch's SendMessageBatch went out.", queueName, pathBuckets); err != nil {
		return nil, err
	}
	if m.publish, err = registerHistogram(reg, "publish_seconds", "Time from a message's Publish to SQS's answer (linger and request).", queueName, pathBuckets); err != nil {
		return nil, err
	}
	return m, nil
}

func registerCounterVec(reg prometheus.Registerer, name, help string) (*prometheus.CounterVec, error) {
	return register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: name, Help: help,
	}, []string{"queue"}))
}

// register lets several consumers and publishers share one registry: the second one to
// register a vector uses the first one's (the queue label tells them apart).
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	if reg == nil {
		return c, nil
	}
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing, nil
			}
		}
		return c, err
	}
	return c, nil
}

// queueName is the last path segment of a queue URL, used as the metrics label.
func queueName(url string) string {
	if i := strings.LastIndexByte(url, '/'); i >= 0 {
		return url[i+1:]
	}
	return url
}
