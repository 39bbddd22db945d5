package order

import (
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// sqsAllowed is SQS's and SNS's set of characters in a message.
func sqsAllowed(r rune) bool {
	return r == 0x9 || r == 0xA || r == 0xD || r >= 0x20 && r <= 0xD7FF || r >= 0xE000 && r <= 0xFFFD || r >= 0x10000 && r <= 0x10FFFF
}

// A refused result's body, whatever a sender put in it, goes to the results DLQ as ASCII
// that SQS carries, within refusedResultBodyMax, and unquotes to the body when whole.
func FuzzRefusedResultBody(f *testing.F) {
	f.Add([]byte(`{"event_id":"e1","detail":"\uffff"}`))
	f.Add([]byte("\xff\xfe invalid UTF-8 \x00 NUL"))
	f.Add([]byte(strings.Repeat("\U0010FFFF", 70_000)))
	f.Fuzz(func(t *testing.T, body []byte) {
		q := refusedResultBody(body)
		if len(q) > refusedResultBodyMax {
			t.Fatalf("%d bytes, over %d", len(q), refusedResultBodyMax)
		}
		for _, c := range q {
			if c < 0x20 || c > 0x7e {
				t.Fatalf("byte %#x is not printable ASCII", c)
			}
		}
		if len(q) < refusedResultBodyMax {
			if got, err := strconv.Unquote(string(q)); err != nil || got != string(body) {
				t.Fatalf("does not unquote to the body: %v", err)
			}
		}
	})
}

// A reason sent to a DLQ holds only what SQS carries, whatever an error text held.
func FuzzSQSText(f *testing.F) {
	f.Add("ERR_RESULT_REFUSED: InvalidMessageContents: \uffff\x00\x1b")
	f.Add("\xed\xa0\x80 a surrogate's bytes")
	f.Fuzz(func(t *testing.T, s string) {
		out := sqsText(s)
		if !utf8.ValidString(out) {
			t.Fatalf("%q is not UTF-8", out)
		}
		for _, r := range out {
			if !sqsAllowed(r) {
				t.Fatalf("%q holds %U", out, r)
			}
		}
		if utf8.ValidString(s) && !strings.ContainsFunc(s, func(r rune) bool { return !sqsAllowed(r) }) && out != s {
			t.Fatalf("%q changed to %q though SQS carries it", s, out)
		}
	})
}
