package docs_test

import (
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
)

// Every runbook in docs/runbooks is linked from docs/operations.md, the operators' front
// door, so that a runbook added there is found from the index. (Fails with a runbook the
// index does not link to, docs/runbooks/unlisted.md; tried.)
func TestRunbooksIndexed(t *testing.T) {
	root := repoRoot(t)
	entries, err := os.ReadDir(filepath.Join(root, "docs", "runbooks"))
	if err != nil {
		t.Fatal(err)
	}
	linked := map[string]bool{}
	for _, l := range parseMarkdown(t, filepath.Join(root, "docs", "operations.md")).links {
		p, _, _ := strings.Cut(l.target, "#")
		linked[path.Clean(p)] = true
	}
	var runbooks int
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".md") {
			continue
		}
		runbooks++
		if rel := "runbooks/" + e.Name(); !linked[rel] {
			t.Errorf("docs/operations.md does not link to %s", rel)
		}
	}
	if runbooks == 0 {
		t.Fatal("no runbook found in docs/runbooks")
	}
}
