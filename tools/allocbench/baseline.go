package allocbench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
)

// BaselineDefault is the revision whose allocation script junban_before runs: the last
// before the warehouse operations (reglot, regsku, ss, recall, holders, the defective
// bucket, the n field). Its script expects b:<lot> with four numbers "r a h x" and takes
// alloc qty target_date mode, with no holder; setupJunbanBefore writes that layout.
const BaselineDefault = "5f6d35e"

// baselineFiles are the files of the allocation script at the baseline, in the order
// ledger.go then ran them as one script: the candidate rules first.
var baselineFiles = []string{"internal/ledger/candidates.lua", "internal/ledger/ledger.lua"}

// ErrBaseline is the error of a baseline that could not be read from git.
var ErrBaseline = errors.New("allocbench: baseline script")

// ReadBaseline reads the allocation script of revision rev from git (`git show
// rev:internal/ledger/...`) in dir, any directory of a clone of junban ("": the working
// directory). It fails, with ErrBaseline, when git is not installed or rev is not in the
// clone's history (a shallow clone may lack it).
func ReadBaseline(ctx context.Context, dir, rev string) (string, error) {
	if rev == "" || strings.HasPrefix(rev, "-") {
		return "", fmt.Errorf("%w: %q is not a revision", ErrBaseline, rev)
	}
	var script strings.Builder
	for _, f := range baselineFiles {
		obj := rev + ":" + f
		cmd := exec.CommandContext(ctx, "git", "show", obj)
		cmd.Dir = dir
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		switch {
		case errors.Is(err, exec.ErrNotFound):
			return "", fmt.Errorf("%w: %s is read from git, which is not installed (PATH): %w", ErrBaseline, obj, err)
		case err != nil:
			return "", fmt.Errorf("%w: git show %s: %w: %s (run inside a clone of junban whose history holds %s; a shallow clone may not)",
				ErrBaseline, obj, err, strings.TrimSpace(stderr.String()), rev)
		}
		script.Write(out)
	}
	return script.String(), nil
}
