package testenv

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/junban/junban/internal/platform/tracing"
)

// Tracing installs service's tracing as its binary does (tracing.Setup), exporting to a
// new OTLP receiver, for the test (not with t.Parallel: it sets the environment and the
// global tracer provider). shutdown exports every span ended so far; the test's end calls
// it too and puts the previous tracer provider back.
func Tracing(t testing.TB, service string) (rcv *OTLPReceiver, shutdown func(context.Context) error) {
	t.Helper()
	rcv = StartOTLPReceiver(t)
	rcv.Setenv(t)
	prev := otel.GetTracerProvider()
	shutdown, err := tracing.Setup(context.Background(), service, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = shutdown(context.Background()); otel.SetTracerProvider(prev) })
	return rcv, shutdown
}

// Logger is a logger that keeps its lines at level and above in logs, for the test to
// look at.
func Logger(level zapcore.Level) (*zap.Logger, *observer.ObservedLogs) {
	core, logs := observer.New(level)
	return zap.New(core), logs
}
