package allocbench

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
)

// The baseline is the allocation script of BaselineDefault as ledger.go ran it, read from
// git: the candidate rules, then the operations, and none of the warehouse operations
// that came after it.
func TestReadBaseline(t *testing.T) {
	today, err := os.ReadFile("../../internal/ledger/ledger.lua")
	if err != nil {
		t.Fatal(err)
	}
	s, err := ReadBaseline(context.Background(), "", BaselineDefault)
	if err != nil {
		t.Fatal(err)
	}
	walk, keys := strings.Index(s, "local function walkCandidates"), strings.Index(s, "KEYS[1]")
	if walk < 0 || keys < walk {
		t.Fatalf("the baseline is not candidates.lua then ledger.lua:\n%.400s", s)
	}
	if strings.Contains(s, "reglot") || !strings.Contains(string(today), "reglot") {
		t.Fatal("the baseline has the warehouse operations (reglot), or today's script lacks them: not the script before them")
	}
}

// A revision git does not have, and a missing git, are errors that say what to do.
func TestReadBaselineErrors(t *testing.T) {
	ctx := context.Background()
	_, err := ReadBaseline(ctx, "", "no-such-revision")
	if !errors.Is(err, ErrBaseline) || !strings.Contains(err.Error(), "no-such-revision") || !strings.Contains(err.Error(), "clone") {
		t.Fatalf("unknown revision: %v", err)
	}
	if _, err := ReadBaseline(ctx, "", "--output=/tmp/x"); !errors.Is(err, ErrBaseline) {
		t.Fatalf("an option for a revision: %v", err)
	}
	t.Setenv("PATH", t.TempDir())
	_, err = ReadBaseline(ctx, "", BaselineDefault)
	if !errors.Is(err, ErrBaseline) || !strings.Contains(err.Error(), "git, which is not installed") {
		t.Fatalf("no git: %v", err)
	}
}
