package outbound

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func seriesOf(c prometheus.Collector) int {
	ch := make(chan prometheus.Metric, 64)
	c.Collect(ch)
	close(ch)
	return len(ch)
}

// The stock levels gauge says the last read alone: a location no longer low or out loses
// its series; the network's are always there.
func TestSetStockLevels(t *testing.T) {
	m, err := newRelayMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := seriesOf(m.StockLevels); n != 2 {
		t.Fatalf("before any read: %d series, want the network's 2", n)
	}
	setStockLevels(m.StockLevels, []StockLevel{{Location: "store-1", Level: LevelOut, SKUs: 3}, {Location: NetworkLabel, Level: LevelLow, SKUs: 1}})
	if v := metricValue(t, m.StockLevels.WithLabelValues("store-1", LevelOut)); v != 3 {
		t.Errorf("store-1 out: %v", v)
	}
	if v := metricValue(t, m.StockLevels.WithLabelValues(NetworkLabel, LevelLow)); v != 1 {
		t.Errorf("network low: %v", v)
	}
	setStockLevels(m.StockLevels, nil)
	if n := seriesOf(m.StockLevels); n != 2 {
		t.Errorf("after store-1 came back: %d series, want 2", n)
	}
}
