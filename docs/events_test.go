package docs_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/junban/junban/internal/domain"
)

// TestEventsDocExamples: every JSON example of docs/events.md passes the schema
// docs/contracts publishes for it (an order event its kind's, inside an SNS or
// EventBridge envelope too; a result the result's), and the decoder accepts every event.
func TestEventsDocExamples(t *testing.T) {
	root := repoRoot(t)
	doc, err := os.ReadFile(filepath.Join(root, "docs", "events.md"))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	schema := func(file string) *jsonschema.Schema {
		t.Helper()
		s, err := c.Compile(filepath.Join(root, "docs", "contracts", file))
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		return s
	}
	blocks := jsonBlock.FindAllSubmatch(doc, -1)
	if len(blocks) == 0 {
		t.Fatal("docs/events.md has no JSON example")
	}
	events, results := 0, 0
	for _, m := range blocks {
		body := m[1]
		var head struct {
			EventID string `json:"event_id"`
			Type    string `json:"type"`
			Outcome string `json:"outcome"`
		}
		if err := json.Unmarshal(body, &head); err != nil {
			t.Errorf("docs/events.md: an example is no JSON object: %v\n%s", err, body)
			continue
		}
		file := "result.schema.json"
		if head.Outcome == "" {
			inner, _, err := domain.Unwrap(body, 0)
			if err != nil {
				t.Errorf("docs/events.md: %v\n%s", err, body)
				continue
			}
			if _, err := domain.Decode(inner, 0); err != nil {
				t.Errorf("docs/events.md: the decoder refuses an example: %v\n%s", err, body)
			}
			if err := json.Unmarshal(inner, &head); err != nil {
				t.Fatal(err)
			}
			body, file = inner, filepath.Join("inbound", head.Type+".schema.json")
			events++
		} else {
			results++
		}
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if err := schema(file).Validate(v); err != nil {
			t.Errorf("docs/events.md: an example breaks %s: %v\n%s", file, err, body)
		}
	}
	if events == 0 || results == 0 {
		t.Errorf("docs/events.md: %d events and %d results checked: an example of each expected", events, results)
	}
}
