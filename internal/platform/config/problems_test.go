package config

import (
	"errors"
	"fmt"
	"slices"
	"testing"
)

// A binary's Validate joins its embedded structs' Validate errors with its own: Problems
// lists each problem once, nested joins flattened, so that Load prints one per line.
// Broken variant tried: without the recursion, the nested join came out as one entry
// holding two lines.
func TestProblemsFlattensJoins(t *testing.T) {
	a, b, c := errors.New("A: bad"), errors.New("B: bad"), fmt.Errorf("C: %w", errors.New("wrapped"))
	got := Problems(errors.Join(errors.Join(a, b), nil, c))
	if want := []string{"A: bad", "B: bad", "C: wrapped"}; !slices.Equal(got, want) {
		t.Errorf("Problems: %q, want %q", got, want)
	}
	if got := Problems(errors.Join(nil, errors.Join())); got != nil {
		t.Errorf("no problem: %q", got)
	}
}
