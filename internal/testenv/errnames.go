package testenv

import (
	"strings"
	"testing"
)

// ErrorNames fails t unless err is an error whose text names every one of want: what a
// constructor or a Validate must say about a Config that lacks those fields.
func ErrorNames(t testing.TB, err error, want ...string) {
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
