package progress

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// Off a terminal, a report is plain lines, one per LineEvery and one at the end, with no
// carriage return.
func TestPlainLinesOffATerminal(t *testing.T) {
	var buf bytes.Buffer
	b := New(&buf, 100, "sending")
	l, ok := b.(*lines)
	if !ok {
		t.Fatalf("a buffer got %T, want plain lines", b)
	}
	now := time.Unix(0, 0)
	l.now = func() time.Time { return now }
	l.Set(10)                    // starts the clock
	now = now.Add(LineEvery / 2) // too soon
	l.Add(10)
	now = now.Add(LineEvery)
	l.Add(30)
	l.Finish()
	l.Finish()
	got := buf.String()
	if got != "sending: 50/100\nsending: 50/100 done\n" || strings.Contains(got, "\r") {
		t.Fatalf("report %q", got)
	}
}

func TestNilWriterReportsNothing(t *testing.T) {
	b := New(nil, 3, "x")
	b.Add(3)
	if err := b.Finish(); err != nil {
		t.Fatal(err)
	}
}
