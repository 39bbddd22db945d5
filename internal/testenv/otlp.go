package testenv

import (
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
)

// OTLPReceiver is a real OTLP/HTTP trace endpoint on loopback: it decodes every export
// request with the OpenTelemetry Collector's pdata packages (protobuf or JSON, gzip or
// not), as a collector's OTLP receiver does, and keeps the spans.
type OTLPReceiver struct {
	srv *httptest.Server

	mu       sync.Mutex
	spans    []Span
	requests int
}

// Span is one received span, flattened for assertions.
type Span struct {
	// Service is the resource's service.name.
	Service string
	Name    string
	// Kind is "server", "client", "producer", "consumer" or "internal".
	Kind                          string
	TraceID, SpanID, ParentSpanID string
	Start, End                    time.Time
	// Attrs holds every attribute as its string form.
	Attrs map[string]string
	// Links are the linked spans, as "<trace id>/<span id>".
	Links []string
	// Status is "", "ok" or "error".
	Status string
}

// StartOTLPReceiver starts a receiver that the test's end stops.
func StartOTLPReceiver(t testing.TB) *OTLPReceiver {
	t.Helper()
	r := &OTLPReceiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

// Endpoint is the receiver's base URL, for OTEL_EXPORTER_OTLP_ENDPOINT.
func (r *OTLPReceiver) Endpoint() string { return r.srv.URL }

// Env is the environment that points an exporter at the receiver and makes it send
// spans without the batcher's default 5 s delay.
func (r *OTLPReceiver) Env() []string {
	return []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + r.srv.URL, "OTEL_BSP_SCHEDULE_DELAY=100"}
}

// Setenv sets Env for the test (not with t.Parallel).
func (r *OTLPReceiver) Setenv(t testing.TB) {
	for _, kv := range r.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
}

// Spans returns a copy of the spans received so far.
func (r *OTLPReceiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.spans)
}

// Requests counts the export requests received.
func (r *OTLPReceiver) Requests() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests
}

func (r *OTLPReceiver) serve(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
		http.Error(w, "not an OTLP traces endpoint", http.StatusNotFound)
		return
	}
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	raw, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	exp := ptraceotlp.NewExportRequest()
	if strings.HasPrefix(req.Header.Get("Content-Type"), "application/json") {
		err = exp.UnmarshalJSON(raw)
	} else {
		err = exp.UnmarshalProto(raw)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	spans := flatten(exp.Traces())
	r.mu.Lock()
	r.spans = append(r.spans, spans...)
	r.requests++
	r.mu.Unlock()
	out, _ := ptraceotlp.NewExportResponse().MarshalProto()
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func flatten(td ptrace.Traces) []Span {
	var out []Span
	for i := 0; i < td.ResourceSpans().Len(); i++ {
		rs := td.ResourceSpans().At(i)
		service := ""
		if v, ok := rs.Resource().Attributes().Get("service.name"); ok {
			service = v.AsString()
		}
		for j := 0; j < rs.ScopeSpans().Len(); j++ {
			ss := rs.ScopeSpans().At(j).Spans()
			for k := 0; k < ss.Len(); k++ {
				s := ss.At(k)
				sp := Span{
					Service: service, Name: s.Name(), Kind: kindName(s.Kind()),
					TraceID: s.TraceID().String(), SpanID: s.SpanID().String(),
					Start: s.StartTimestamp().AsTime(), End: s.EndTimestamp().AsTime(),
					Attrs: map[string]string{},
				}
				if !s.ParentSpanID().IsEmpty() {
					sp.ParentSpanID = s.ParentSpanID().String()
				}
				s.Attributes().Range(func(k string, v pcommon.Value) bool {
					sp.Attrs[k] = v.AsString()
					return true
				})
				for l := 0; l < s.Links().Len(); l++ {
					ln := s.Links().At(l)
					sp.Links = append(sp.Links, ln.TraceID().String()+"/"+ln.SpanID().String())
				}
				switch s.Status().Code() {
				case ptrace.StatusCodeOk:
					sp.Status = "ok"
				case ptrace.StatusCodeError:
					sp.Status = "error"
				}
				out = append(out, sp)
			}
		}
	}
	return out
}

func kindName(k ptrace.SpanKind) string {
	switch k {
	case ptrace.SpanKindServer:
		return "server"
	case ptrace.SpanKindClient:
		return "client"
	case ptrace.SpanKindProducer:
		return "producer"
	case ptrace.SpanKindConsumer:
		return "consumer"
	}
	return "internal"
}
