package main

import (
	"context"
	"errors"
	"testing"
)

// Command-line mistakes are usage errors (exit 2), for every command: an unknown flag, a
// positional argument a command does not take (it would be ignored, and the command run
// with the default in its place), and no command at all. (Before, the first two left
// errUsage out, exit 1, and a positional argument was ignored; tried.)
func TestCommandLineMistakesAreUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		nil,
		{"reconcile", "--bogus"},
		{"migrate", "down"},
		{"bench", "persist", "extra"},
		{"send", "-file"},
		{"webhook", "storm", "--n", "x"},
	} {
		if err := dispatch(context.Background(), args); !errors.Is(err, errUsage) {
			t.Errorf("junbanctl %q: %v, want a usage error", args, err)
		}
	}
	if err := dispatch(context.Background(), []string{"help"}); err != nil {
		t.Errorf("junbanctl help: %v", err)
	}
}
