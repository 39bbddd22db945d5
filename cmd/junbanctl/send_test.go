package main

import (
	"strings"
	"testing"

	"github.com/junban/junban/internal/domain"
)

// A line longer than an event may be is named by its number, and nothing is sent.
// (Before: a bare "bufio.Scanner: token too long".)
func TestReadEventsNamesTheOverlongLine(t *testing.T) {
	ok := `{"event_id":"e1","type":"order.cancelled","lcid":"LC-1","occurred_at":"2026-11-30T00:00:00Z"}`
	file := ok + "\n" + ok + "\n" + strings.Repeat("x", domain.MaxEventBytes+10) + "\n"
	_, err := readEvents(strings.NewReader(file))
	if err == nil || !strings.Contains(err.Error(), "line 3 is longer than an event may be") {
		t.Fatalf("overlong line: %v", err)
	}
}
