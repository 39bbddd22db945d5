package lockhandoff

import (
	"regexp"
	"strconv"
	"testing"
)

// Every status status.lua names has its Go constant, with the same value, and every
// negative one has its error in statusErrors: the scripts and the Go side cannot drift
// apart, and no failure reaches a caller unnamed.
//
// Broken variant tried: STATUS_FULL renumbered in status.lua alone: the test named it.
func TestStatusesMatch(t *testing.T) {
	goSide := map[string]status{
		"STATUS_DONE": statusDone, "STATUS_EMPTY": statusEmpty, "STATUS_TURN": statusTurn,
		"STATUS_NEXT": statusNext, "STATUS_MARKED": statusMarked, "STATUS_QUEUED": statusQueued,
		"STATUS_LOST": statusLost, "STATUS_TRIM_FAILED": statusTrimFailed, "STATUS_STALE": statusStale,
		"STATUS_BUSY": statusBusy, "STATUS_GONE": statusGone, "STATUS_FULL": statusFull,
		"STATUS_NO_ENVELOPE": statusNoEnvelope,
	}
	luaSide := map[string]status{}
	for _, m := range regexp.MustCompile(`(?m)^local (STATUS_\w+) = (-?\d+)`).FindAllStringSubmatch(statusSrc, -1) {
		n, _ := strconv.ParseInt(m[2], 10, 64)
		luaSide[m[1]] = status(n)
	}
	for name, v := range luaSide {
		g, ok := goSide[name]
		switch {
		case !ok:
			t.Errorf("status.lua's %s = %d has no Go constant", name, v)
		case g != v:
			t.Errorf("status.lua's %s = %d, Go's = %d", name, v, g)
		}
		if _, ok := statusErrors[v]; v < 0 && !ok {
			t.Errorf("%s = %d is negative and has no error in statusErrors", name, v)
		}
	}
	for name := range goSide {
		if _, ok := luaSide[name]; !ok {
			t.Errorf("%s is not in status.lua", name)
		}
	}
	if len(statusErrors) != 7 {
		t.Errorf("statusErrors has %d entries, want one for each of the 7 negative statuses", len(statusErrors))
	}
}
