// Package otlpsink is an OTLP/HTTP trace receiver for the lab: it decodes every export
// request with the OpenTelemetry Collector's pdata packages (protobuf or JSON, gzip or
// not), as a collector's OTLP receiver does, counts the spans and the requests and drops
// them. bench e2e --tracing points the fleet at one, so that tracing on costs what it
// costs against a real receiver.
package otlpsink

import (
	"compress/gzip"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
)

// TracesPath is where OTLP/HTTP exporters post spans.
const TracesPath = "/v1/traces"

// Sink is a running receiver on a loopback port.
type Sink struct {
	srv      *http.Server
	url      string
	done     chan struct{}
	spans    atomic.Int64
	requests atomic.Int64
	rejected atomic.Int64
}

// Start listens on a free loopback port and serves until Close.
func Start() (*Sink, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &Sink{url: "http://" + l.Addr().String(), done: make(chan struct{})}
	s.srv = &http.Server{Handler: http.HandlerFunc(s.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(l)
	}()
	return s, nil
}

// Endpoint is the sink's base URL, for OTEL_EXPORTER_OTLP_ENDPOINT.
func (s *Sink) Endpoint() string { return s.url }

// Spans counts the spans received.
func (s *Sink) Spans() int64 { return s.spans.Load() }

// Requests counts the export requests decoded.
func (s *Sink) Requests() int64 { return s.requests.Load() }

// Rejected counts the requests that were not a decodable OTLP trace export.
func (s *Sink) Rejected() int64 { return s.rejected.Load() }

// Close stops the server, waiting up to 5 s for the requests in flight.
func (s *Sink) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	<-s.done
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

func (s *Sink) serve(w http.ResponseWriter, req *http.Request) {
	n, err := decode(req)
	if err != nil {
		s.rejected.Add(1)
		status := http.StatusBadRequest
		if req.Method != http.MethodPost || req.URL.Path != TracesPath {
			status = http.StatusNotFound
		}
		http.Error(w, err.Error(), status)
		return
	}
	s.spans.Add(int64(n))
	s.requests.Add(1)
	out, _ := ptraceotlp.NewExportResponse().MarshalProto()
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// errNotTraces: the request is not a post to TracesPath.
var errNotTraces = errors.New("otlpsink: not an OTLP traces endpoint")

// decode returns how many spans an export request holds.
func decode(req *http.Request) (int, error) {
	if req.Method != http.MethodPost || req.URL.Path != TracesPath {
		return 0, errNotTraces
	}
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			return 0, err
		}
		body = zr
	}
	raw, err := io.ReadAll(body)
	if err != nil {
		return 0, err
	}
	exp := ptraceotlp.NewExportRequest()
	if strings.HasPrefix(req.Header.Get("Content-Type"), "application/json") {
		err = exp.UnmarshalJSON(raw)
	} else {
		err = exp.UnmarshalProto(raw)
	}
	if err != nil {
		return 0, err
	}
	return exp.Traces().SpanCount(), nil
}
