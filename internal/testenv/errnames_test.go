package testenv_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/junban/junban/internal/testenv"
)

// failRecorder is a testing.TB that records Errorf and Fatalf (which ends the goroutine,
// as the real one does) without failing the test that runs it.
type failRecorder struct {
	fatalRecorder
	errs []string
}

func (f *failRecorder) Errorf(format string, args ...any) {
	f.errs = append(f.errs, fmt.Sprintf(format, args...))
}

func TestErrorNames(t *testing.T) {
	testenv.ErrorNames(t, errors.New("Redis is nil\nPrefix is empty"), "Redis", "Prefix")
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"no error", nil},
		{"a field not named", errors.New("Redis is nil")},
	} {
		f := &failRecorder{fatalRecorder: fatalRecorder{TB: t}}
		done := make(chan struct{})
		go func() {
			defer close(done)
			testenv.ErrorNames(f, tc.err, "Redis", "Prefix")
		}()
		<-done
		if f.msg == "" && len(f.errs) == 0 {
			t.Errorf("%s: ErrorNames passed", tc.name)
		}
	}
}
