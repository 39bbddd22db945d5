package health

import (
	"strings"
	"testing"
)

// New refuses a Config that lacks a dependency, and names every one that is missing.
func TestNewNamesWhatIsMissing(t *testing.T) {
	_, err := New(Config{})
	mustName(t, err, "Addr", "Registry")
}

func mustName(t *testing.T, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("accepted; want an error naming %q", want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not name %s", err, w)
		}
	}
}
