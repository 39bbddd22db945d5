package api

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/junban/junban/internal/domain"
)

// The OpenAPI document's EventType lists exactly the registered kinds (a kind registered
// without its line in openapi.json fails here), and every field that carries an event's
// type refers to it.
func TestOpenAPIEventTypesAreTheKinds(t *testing.T) {
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Enum       []string                   `json:"enum"`
				Properties map[string]json.RawMessage `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(OpenAPI, &doc); err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, k := range domain.Kinds() {
		kinds = append(kinds, string(k.Type))
	}
	got := slices.Sorted(slices.Values(doc.Components.Schemas["EventType"].Enum))
	if !slices.Equal(got, kinds) {
		t.Errorf("openapi.json EventType: %q\nthe registry's kinds: %q", got, kinds)
	}
	for _, name := range []string{"TimelineEvent", "ProcReport", "ParkedReport", "SkipAnswer"} {
		var ref struct {
			Ref string `json:"$ref"`
		}
		if err := json.Unmarshal(doc.Components.Schemas[name].Properties["type"], &ref); err != nil || ref.Ref != "#/components/schemas/EventType" {
			t.Errorf("%s.type is %s, want the EventType reference", name, doc.Components.Schemas[name].Properties["type"])
		}
	}
}
