// Package tracing sets up OpenTelemetry traces for junban's binaries, configured by the
// standard OTEL_* variables, and carries an event's trace context through message
// attributes: W3C `traceparent` and `tracestate`, or the `AWSTraceHeader` system attribute
// that X-Ray users' publishers set.
//
// Without an OTLP endpoint (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT)
// Setup installs nothing: the global tracer provider stays OpenTelemetry's no-op one, whose
// spans record nothing and allocate nothing, so tracing costs nothing when it is off.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.uber.org/zap"

	"github.com/junban/junban/internal/platform/logging"
)

// Propagator is how junban writes and reads a trace context: W3C trace context only,
// whose tracestate is dropped when it is longer than MaxTraceStateBytes.
var Propagator propagation.TextMapPropagator = boundedTraceContext{}

// boundedTraceContext is otel's W3C propagator, reading no tracestate longer than
// MaxTraceStateBytes (otel's parser takes up to 32 members of 512 bytes each, 16 KB,
// which a sender could otherwise have junban store and pass on). The traceparent is
// otel's to parse: a span context is written back as 55 characters.
type boundedTraceContext struct{ propagation.TraceContext }

func (p boundedTraceContext) Extract(ctx context.Context, carrier propagation.TextMapCarrier) context.Context {
	return p.TraceContext.Extract(ctx, boundedCarrier{carrier})
}

type boundedCarrier struct{ propagation.TextMapCarrier }

func (c boundedCarrier) Get(key string) string {
	v := c.TextMapCarrier.Get(key)
	if key == AttrTraceState && len(v) > MaxTraceStateBytes {
		return ""
	}
	return v
}

// Enabled tells whether the environment asks for traces: an OTLP endpoint is set, the SDK
// is not disabled (OTEL_SDK_DISABLED) and the traces exporter is not "none"
// (OTEL_TRACES_EXPORTER).
func Enabled() bool {
	if strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") {
		return false
	}
	if strings.EqualFold(os.Getenv("OTEL_TRACES_EXPORTER"), "none") {
		return false
	}
	return os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != ""
}

// ErrProtocol: OTEL_EXPORTER_OTLP_PROTOCOL (or its _TRACES_ form) names a protocol junban
// does not export with; it speaks OTLP over HTTP with protobuf.
var ErrProtocol = errors.New("tracing: only OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf is supported")

// Setup installs the global tracer provider of service (the default service.name, which
// OTEL_SERVICE_NAME overrides; OTEL_RESOURCE_ATTRIBUTES adds to the resource) with a
// batching OTLP/HTTP exporter, and the W3C propagator. The exporter takes its endpoint,
// headers, timeout and compression from the OTEL_EXPORTER_OTLP_* variables and the
// sampler from OTEL_TRACES_SAMPLER / OTEL_TRACES_SAMPLER_ARG (default parentbased_always_on).
// Without an endpoint (Enabled) it installs nothing, not even the propagator: a
// request's trace context is then ignored, as a message's is (the queue consumer reads
// none while the process does not trace). shutdown flushes the spans still buffered;
// call it before the process exits.
func Setup(ctx context.Context, service string, log *zap.Logger) (shutdown func(context.Context) error, err error) {
	if !Enabled() {
		return func(context.Context) error { return nil }, nil
	}
	otel.SetTextMapPropagator(Propagator)
	for _, v := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if p := os.Getenv(v); p != "" && p != "http/protobuf" {
			return nil, fmt.Errorf("%w: %s=%s", ErrProtocol, v, p)
		}
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP exporter: %w", err)
	}
	res, err := resource.Merge(resource.Default(),
		resource.NewWithAttributes(semconv.SchemaURL, semconv.ServiceName(service)))
	if err == nil {
		var env *resource.Resource
		if env, err = resource.New(ctx, resource.WithFromEnv()); err == nil {
			res, err = resource.Merge(res, env)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	active.Store(true)
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("tracing: export failed", zap.Error(err))
	}))
	log.Info("tracing on", zap.String("service_name", serviceName(res, service)))
	return func(ctx context.Context) error {
		active.Store(false)
		return tp.Shutdown(ctx)
	}, nil
}

var active atomic.Bool

// Active tells whether Setup installed a tracer provider that is not shut down: the
// process records spans. What costs something only when spans are recorded (a trace
// context written into a stored envelope) asks it first.
func Active() bool { return active.Load() }

func serviceName(res *resource.Resource, def string) string {
	if v, ok := res.Set().Value(semconv.ServiceNameKey); ok {
		return v.AsString()
	}
	return def
}

// FlushTimeout bounds the flush of a binary's buffered spans at exit.
const FlushTimeout = 5 * time.Second

// Start is Setup for a binary's main: stop flushes the spans still buffered, within
// FlushTimeout, and logs what it could not send.
func Start(service string, log *zap.Logger) (stop func(), err error) {
	shutdown, err := Setup(context.Background(), service, log)
	if err != nil {
		return nil, err
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), FlushTimeout)
		defer cancel()
		if err := shutdown(ctx); err != nil {
			log.Warn("tracing: flush at exit", zap.Error(err))
		}
	}, nil
}

// Observe is a binary's logger (logging.New) and its traces (Start) together; done flushes
// the spans, then the log.
func Observe(service, logFormat, logLevel string) (log *zap.Logger, done func(), err error) {
	if log, err = logging.New(service, logFormat, logLevel); err != nil {
		return nil, nil, err
	}
	stop, err := Start(service, log)
	if err != nil {
		return nil, nil, err
	}
	return log, func() {
		stop()
		_ = log.Sync()
	}, nil
}
