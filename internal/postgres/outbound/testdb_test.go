package outbound

import (
	"net/url"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	snstypes "github.com/aws/aws-sdk-go-v2/service/sns/types"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"gorm.io/gorm"

	"github.com/junban/junban/internal/platform/config"
)

func openDB(t testing.TB, dsn string) *gorm.DB {
	t.Helper()
	db, err := config.Postgres{URL: dsn}.Open()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if s, err := db.DB(); err == nil {
			s.Close()
		}
	})
	return db
}

func hostOf(t testing.TB, dsn string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

func snstypesFailed(id string) snstypes.BatchResultErrorEntry {
	return snstypes.BatchResultErrorEntry{Id: aws.String(id), Code: aws.String("InternalError"), Message: aws.String("refused by the test"), SenderFault: false}
}

// metricValue is a counter's or gauge's value.
func metricValue(t testing.TB, c prometheus.Metric) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	if m.Counter != nil {
		return m.Counter.GetValue()
	}
	return m.Gauge.GetValue()
}
