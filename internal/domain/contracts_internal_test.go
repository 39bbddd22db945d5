package domain

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/junban/junban/internal/event"
)

// contractsDir holds the schemas go generate writes from the registry (kindsgen).
const contractsDir = "../../docs/contracts"

// inboundSchemas compiles the published JSON Schema of every kind, formats asserted.
func inboundSchemas(t *testing.T) map[event.Type]*jsonschema.Schema {
	t.Helper()
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	out := map[event.Type]*jsonschema.Schema{}
	for _, k := range Kinds() {
		file := filepath.Join(contractsDir, "inbound", string(k.Type)+".schema.json")
		f, err := os.Open(file)
		if err != nil {
			t.Fatalf("%s has no schema: %v (go generate ./internal/domain)", k.Type, err)
		}
		doc, err := jsonschema.UnmarshalJSON(f)
		_ = f.Close()
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if err := c.AddResource(file, doc); err != nil {
			t.Fatal(err)
		}
		if out[k.Type], err = c.Compile(file); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
	}
	return out
}

// schemaVerdict validates body against the schema of the type it names: nil when it
// passes. A body of no known type, or no JSON object, fails every schema.
func schemaVerdict(schemas map[event.Type]*jsonschema.Schema, body []byte) error {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return err
	}
	// A trailing value after the object: what a JSON parser reading one value refuses.
	dec := json.NewDecoder(bytes.NewReader(body))
	var first json.RawMessage
	if err := dec.Decode(&first); err != nil || dec.More() {
		return errTrailingData
	}
	m, ok := doc.(map[string]any)
	if !ok {
		return errNotObject
	}
	typ, _ := m["type"].(string)
	s, ok := schemas[event.Type(typ)]
	if !ok {
		return &InvalidError{Reason: ReasonUnknownType, Detail: "no schema of type " + typ}
	}
	return s.Validate(doc)
}

// What the decoder accepts, its kind's schema accepts: every kind's sample bodies (the
// decoder's own tests' valid events, several each) and the registry's examples.
func TestSchemasAcceptWhatTheDecoderAccepts(t *testing.T) {
	schemas := inboundSchemas(t)
	for _, lcid := range []string{"LC-1", "注文-1"} {
		for typ, body := range sampleBodies(lcid) {
			if _, err := Decode([]byte(body), 0); err != nil {
				t.Fatalf("%s: the decoder refuses its sample: %v", typ, err)
			}
			if err := schemaVerdict(schemas, []byte(body)); err != nil {
				t.Errorf("%s: the schema refuses a body the decoder accepts: %v\n%s", typ, err, body)
			}
		}
	}
	for _, k := range Kinds() {
		if k.Entity == OnNamed {
			continue // the drain's samples name an lcid
		}
		ev := map[string]any{"event_id": "e1", "type": k.Type, "version": event.Version}
		if k.Entity == OnOrder {
			ev["lcid"] = "LC-1"
		}
		if k.Example != nil {
			ev["data"] = k.Example
		}
		body, _ := json.Marshal(ev)
		if err := schemaVerdict(schemas, body); err != nil {
			t.Errorf("%s: the schema refuses the registry's example: %v\n%s", k.Type, err, body)
		}
	}
	drain := `{"event_id":"n1","type":"junban.drain","lcid":"sku:TEA-1"}`
	if err := schemaVerdict(schemas, []byte(drain)); err != nil {
		t.Errorf("a drain of a SKU's turn: %v", err)
	}
}

// The decoder-only markers of docs/events.md: the lines between them list, for each of
// the decoder's refusal cases that no schema catches, its name and reason.
const (
	decoderOnlyBegin = "<!-- decoder-only refusals: checked by TestSchemasAndTheDecodersRefusals -->"
	decoderOnlyEnd   = "<!-- end of the decoder-only refusals -->"
)

// TestSchemasAndTheDecodersRefusals feeds every refusal case of the decoder (refusals)
// to the published schemas and records which the schema catches and which only the
// decoder does; docs/events.md lists the latter, and the list must be what this finds.
// A rule of the schemas' generator removed (kindsgen's fieldRules) moves its cases to
// the decoder's side and fails here.
func TestSchemasAndTheDecodersRefusals(t *testing.T) {
	schemas := inboundSchemas(t)
	var only []string
	for _, c := range refusals() {
		if _, err := Decode([]byte(c.body), 0); InvalidReason(err) != c.reason {
			t.Fatalf("%s: the decoder says %v, the case %s", c.name, err, c.reason)
		}
		if err := schemaVerdict(schemas, []byte(c.body)); err == nil {
			only = append(only, "- "+c.name+" (`"+c.reason+"`)")
			t.Logf("decoder only: %s (%s)", c.name, c.reason)
		} else {
			t.Logf("the schema catches: %s (%s)", c.name, c.reason)
		}
	}
	for name, id := range badIDs {
		body, _ := json.Marshal(map[string]any{"event_id": "e1", "type": event.PaymentConfirmed, "lcid": "LC-" + id})
		if schemaVerdict(schemas, body) == nil {
			t.Errorf("bad id %s in an lcid: the schema accepts it", name)
		}
	}
	slices.Sort(only)
	md, err := os.ReadFile("../../docs/events.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(md), decoderOnlyBegin+"\n")
	listed, _, ok2 := strings.Cut(rest, decoderOnlyEnd)
	if !ok || !ok2 {
		t.Fatalf("docs/events.md has no list between %q and %q", decoderOnlyBegin, decoderOnlyEnd)
	}
	want := strings.Join(only, "\n") + "\n"
	if listed != want {
		t.Errorf("docs/events.md lists as decoder-only refusals:\n%s\nthe schemas let these through (write them there):\n%s", listed, want)
	}
}

// lowerNames reports whether every member name in v is lower case: junban's names are, so
// such a body names each field exactly, as a schema matches it.
func lowerNames(v any) bool {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if k != strings.ToLower(k) || !lowerNames(x) {
				return false
			}
		}
	case []any:
		for _, x := range v {
			if !lowerNames(x) {
				return false
			}
		}
	}
	return true
}

// FuzzSchemasAcceptWhatTheDecoderAccepts: a body the decoder accepts, whose member names
// are written exactly (lower case) and whose times are RFC 3339 (Go's parser also takes
// "T9:00:00Z", a schema's date-time does not), passes its kind's published schema. What
// only the decoder refuses is the other way round, and listed in docs/events.md.
func FuzzSchemasAcceptWhatTheDecoderAccepts(f *testing.F) {
	for _, lcid := range []string{"LC-1", "注文-1"} {
		for _, body := range sampleBodies(lcid) {
			f.Add([]byte(body))
		}
	}
	for _, c := range refusals() {
		f.Add([]byte(c.body))
	}
	f.Add([]byte(`{"event_id":"e1","type":"inventory.lot_registered","data":{"sku":"S","lot_id":"L","kind":"planned","best_before":"","arrives_at":"","sellable":1}}`))
	f.Add([]byte(`{"event_id":"e1","type":"order.placed","lcid":"L","data":{"mode":"ship","target_date":"2026-12-01","lines":[{"line_id":"1","sku":"S","qty":1}],"allocation":["fefo_network","closest"],"ship_to":{"lat":-90,"lon":180},"pickup_location":"w","no_split":false}}`))
	schemas := map[event.Type]*jsonschema.Schema{}
	f.Fuzz(func(t *testing.T, body []byte) {
		if len(schemas) == 0 {
			for k, s := range inboundSchemas(t) {
				schemas[k] = s
			}
		}
		if _, err := Decode(body, 0); err != nil {
			return
		}
		var v any
		if json.Unmarshal(body, &v) != nil || !lowerNames(v) {
			return
		}
		err := schemaVerdict(schemas, body)
		if err != nil && !strings.Contains(err.Error(), "is not valid date-time") {
			t.Fatalf("the decoder accepts %s, its schema refuses it: %v", body, err)
		}
	})
}
