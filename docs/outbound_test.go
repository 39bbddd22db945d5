package docs_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/junban/junban/internal/postgres/outbound"
)

// jsonBlock is a fenced json block of a Markdown file.
var jsonBlock = regexp.MustCompile("(?s)```json\n(.*?)```")

// TestOutboundDocExamples: docs/outbound.md shows a message of every outbound kind, and each
// message it shows passes its kind's JSON Schema.
func TestOutboundDocExamples(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(repoRoot(t), "docs", "outbound.md"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[outbound.Kind]bool{}
	for _, m := range jsonBlock.FindAllSubmatch(doc, -1) {
		var head struct {
			Kind outbound.Kind `json:"kind"`
			Seq  int64         `json:"seq"`
		}
		if json.Unmarshal(m[1], &head) != nil || head.Seq == 0 {
			continue // a filter policy, not a message
		}
		seen[head.Kind] = true
		if err := outbound.Validate(m[1]); err != nil {
			t.Errorf("docs/outbound.md: %v\n%s", err, m[1])
		}
	}
	for _, k := range outbound.Kinds {
		if !seen[k] {
			t.Errorf("docs/outbound.md shows no %s message", k)
		}
	}
}
