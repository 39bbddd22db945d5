package testenv

import (
	"testing"
	"time"
)

// WaitFor waits until cond holds, looking every 10 ms, and fails the test with what it
// waited for if cond still does not hold after timeout. The timeout only bounds a hang:
// it is not a timing assertion, so give it room for a loaded machine. cond runs on the
// test's goroutine and may call t.Fatal itself (a process that exited, say).
//
//	testenv.WaitFor(t, 30*time.Second, "the order-worker to start", func() bool {
//		return strings.Contains(p.Output(), "order-worker started")
//	})
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("testenv: waited %v for %s", timeout, what)
		}
		<-tick.C
	}
}
