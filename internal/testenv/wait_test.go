package testenv_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/junban/junban/internal/testenv"
)

func TestWaitForReturnsOnceTheConditionHolds(t *testing.T) {
	n := 0
	testenv.WaitFor(t, time.Minute, "the third look", func() bool { n++; return n == 3 })
	if n != 3 {
		t.Fatalf("cond ran %d times, want 3: WaitFor went on after it held", n)
	}
}

// fatalRecorder is a testing.TB whose Fatalf records the message and ends the goroutine,
// as the real one does, without failing the test that runs it.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func TestWaitForFailsNamingWhatItWaitedFor(t *testing.T) {
	f := &fatalRecorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		testenv.WaitFor(f, 50*time.Millisecond, "a condition that never holds", func() bool { return false })
		f.msg = "WaitFor returned"
	}()
	<-done
	if !strings.Contains(f.msg, "a condition that never holds") {
		t.Fatalf("failure %q does not name what it waited for", f.msg)
	}
}
