package fleet

import (
	"slices"
	"testing"
)

// DropInherited takes the inherited OTEL_* variables out, and only those; without a
// prefix to drop the environment passes as it is.
func TestInheritedDropsPrefixes(t *testing.T) {
	environ := []string{"PATH=/bin", "OTEL_EXPORTER_OTLP_ENDPOINT=http://collector:4318", "JUNBAN_OTEL=x", "OTEL_TRACES_SAMPLER=always_on", "HOME=/root"}
	if got, want := inherited(environ, []string{"OTEL_"}), []string{"PATH=/bin", "JUNBAN_OTEL=x", "HOME=/root"}; !slices.Equal(got, want) {
		t.Fatalf("inherited with OTEL_ dropped: %q, want %q", got, want)
	}
	if got := inherited(environ, nil); !slices.Equal(got, environ) {
		t.Fatalf("inherited with nothing dropped: %q", got)
	}
}
