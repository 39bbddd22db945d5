// Command kindsgen writes what is listed from internal/domain's registry of event kinds
// into the files that publish it: the EventType schema of the API's OpenAPI document, the
// kinds index of docs/events.md (between its kinds markers), and the machine-readable
// contracts of docs/contracts (a JSON Schema per kind and one of the result event, the
// AsyncAPI document of the queues and the topic). The rest of each spliced file is kept byte for
// byte. Run by go generate in internal/domain; TestGeneratedIsCurrent fails
// when a committed file differs from what this writes.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"unicode"

	"github.com/junban/junban/internal/domain"
	"github.com/junban/junban/internal/event"
)

func main() {
	openapi := flag.String("openapi", "", "the OpenAPI document to update (internal/http/api/openapi.json)")
	events := flag.String("events", "", "the Markdown page whose kinds index to update (docs/events.md)")
	dir := flag.String("contracts", "", "the folder of the machine-readable contracts to write (docs/contracts)")
	flag.Parse()
	if *openapi == "" || *events == "" || *dir == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: kindsgen -openapi FILE -events FILE -contracts DIR")
		os.Exit(2)
	}
	if err := errors.Join(update(*openapi, openAPI), update(*events, eventsIndex), writeContracts(*dir)); err != nil {
		fmt.Fprintln(os.Stderr, "kindsgen:", err)
		os.Exit(1)
	}
}

// update rewrites file with gen's output, leaving it untouched when nothing changed.
func update(file string, gen func([]byte) ([]byte, error)) error {
	old, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	out, err := gen(old)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	if bytes.Equal(old, out) {
		return nil
	}
	return os.WriteFile(file, out, 0o644)
}

// contracts returns the files of the contracts folder, by their path in it: a JSON
// Schema per kind (inbound/<type>.schema.json), the result's, and the AsyncAPI document.
func contracts() (map[string][]byte, error) {
	out := map[string][]byte{}
	var err error
	if out[resultFile], err = indent(resultSchema()); err != nil {
		return nil, err
	}
	for _, k := range domain.Kinds() {
		s, err := inboundSchema(k)
		if err != nil {
			return nil, err
		}
		if out[inboundFile(k.Type)], err = indent(s); err != nil {
			return nil, err
		}
	}
	doc, err := asyncAPI()
	if err != nil {
		return nil, err
	}
	if out[asyncAPIFile], err = indent(doc); err != nil {
		return nil, err
	}
	return out, nil
}

// The contracts folder's files.
const (
	inboundDir   = "inbound"
	asyncAPIFile = "asyncapi.json"
	resultFile   = "result.schema.json"
)

func inboundFile(t event.Type) string { return inboundDir + "/" + string(t) + ".schema.json" }

// writeContracts writes the contracts into dir, each file only when it changed, and
// removes a schema of a kind no longer registered.
func writeContracts(dir string) error {
	files, err := contracts()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(dir, inboundDir), 0o755); err != nil {
		return err
	}
	old, err := filepath.Glob(filepath.Join(dir, inboundDir, "*.schema.json"))
	if err != nil {
		return err
	}
	for _, f := range old {
		if _, ok := files[inboundDir+"/"+filepath.Base(f)]; !ok {
			if err := os.Remove(f); err != nil {
				return err
			}
		}
	}
	for name, b := range files {
		path := filepath.Join(dir, name)
		if cur, err := os.ReadFile(path); err == nil && bytes.Equal(cur, b) {
			continue
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// eventTypeSchema is the OpenAPI schema of an event's type, its keys in this order.
type eventTypeSchema struct {
	Description string   `json:"description"`
	Type        string   `json:"type"`
	Enum        []string `json:"enum"`
}

// openAPI returns doc with components.schemas.EventType written from the registry. The
// document is indented by one space a level, as it is kept.
func openAPI(doc []byte) ([]byte, error) {
	start, end, err := valueSpan(doc, "components", "schemas", "EventType")
	if err != nil {
		return nil, err
	}
	s := eventTypeSchema{
		Description: "An event's type: a kind of internal/domain's registry (docs/events.md, \"The kinds\"). Written by go generate ./internal/domain.",
		Type:        "string",
	}
	for _, k := range domain.Kinds() {
		s.Enum = append(s.Enum, string(k.Type))
	}
	v, err := json.MarshalIndent(s, "   ", " ")
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(doc)+len(v))
	out = append(append(append(out, doc[:start]...), v...), doc[end:]...)
	if !json.Valid(out) {
		return nil, errors.New("EventType written, the document is no longer JSON")
	}
	return out, nil
}

// valueSpan returns where the value at path (object keys from the top) begins and ends in
// doc.
func valueSpan(doc []byte, path ...string) (start, end int, err error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	for depth := range path {
		if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
			return 0, 0, fmt.Errorf("%s is not an object", strings.Join(path[:depth], "."))
		}
		for {
			tok, err := dec.Token()
			if err != nil {
				return 0, 0, err
			}
			key, ok := tok.(string)
			if !ok {
				return 0, 0, fmt.Errorf("no %s", strings.Join(path[:depth+1], "."))
			}
			if key == path[depth] {
				break
			}
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return 0, 0, err
			}
		}
	}
	after := int(dec.InputOffset())
	var v json.RawMessage
	if err := dec.Decode(&v); err != nil {
		return 0, 0, err
	}
	end = int(dec.InputOffset())
	start = after + bytes.Index(doc[after:end], v[:1])
	return start, end, nil
}

// The kinds index's markers in docs/events.md: the lines between them are written here.
const (
	beginMarker = "<!-- kinds index: written by go generate ./internal/domain from internal/domain/kinds.go -->"
	endMarker   = "<!-- end of the kinds index -->"
)

// eventsIndex returns md with the lines between its markers written from the registry: a
// table of every kind, its turn, who makes it, its example data's fields and its Doc, the type
// linked to the heading that names it.
func eventsIndex(md []byte) ([]byte, error) {
	text := string(md)
	i := strings.Index(text, beginMarker+"\n")
	j := strings.Index(text, "\n"+endMarker)
	if i < 0 || j < i {
		return nil, fmt.Errorf("no kinds index: the lines %q and %q, in this order", beginMarker, endMarker)
	}
	anchors := headingAnchors(text)
	var b strings.Builder
	b.WriteString("| type | turn | made by | data (its example's fields) | what it means |\n|---|---|---|---|---|\n")
	for _, k := range domain.Kinds() {
		typ := "`" + string(k.Type) + "`"
		if a, ok := anchors[string(k.Type)]; ok {
			typ = "[" + typ + "](#" + a + ")"
		}
		data, err := fields(k.Example)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k.Type, err)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", typ, turn(k.Entity), origin(k.Origin), data, strings.ReplaceAll(k.Doc, "|", `\|`))
	}
	head := text[:i+len(beginMarker)+1]
	return []byte(head + b.String() + text[j+1:]), nil
}

func turn(e domain.Entity) string {
	switch e {
	case domain.OnOrder:
		return "the order's (`lcid`)"
	case domain.OnSKU:
		return "the SKU's (`data.sku`)"
	case domain.OnNamed:
		return "the one its `lcid` names"
	}
	return "?"
}

func origin(o domain.Origin) string {
	switch o {
	case domain.FromSender:
		return "a sender"
	case domain.Own:
		return "junban (refused from the queue)"
	case domain.Nudge:
		return "junban (a nudge, never stepped)"
	}
	return "?"
}

// fields lists the fields of a kind's example data, in its order; "none" for a kind
// without data.
func fields(example json.RawMessage) (string, error) {
	if example == nil {
		return "none", nil
	}
	dec := json.NewDecoder(bytes.NewReader(example))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return "", fmt.Errorf("example %s is not an object", example)
	}
	var names []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return "", err
		}
		names = append(names, fmt.Sprintf("`%s`", tok))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return "", err
		}
	}
	return strings.Join(names, ", "), nil
}

// headingAnchors maps each event type to the anchor of the first heading that names it
// in backticks: the heading's text, lower case, letters, digits, '-' and '_' kept, spaces
// as '-', as the repository's host makes it (docs/links_test.go checks the links).
func headingAnchors(md string) map[string]string {
	out := map[string]string{}
	seen := map[string]int{}
	fenced := false
	for line := range strings.Lines(md) {
		line = strings.TrimRight(line, "\n")
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
			continue
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		h := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(h) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteRune('-')
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			a = fmt.Sprintf("%s-%d", a, n)
		}
		seen[b.String()]++
		rest := h
		for {
			_, after, ok := strings.Cut(rest, "`")
			if !ok {
				break
			}
			name, after2, ok := strings.Cut(after, "`")
			if !ok {
				break
			}
			if _, dup := out[name]; !dup {
				out[name] = a
			}
			rest = after2
		}
	}
	return out
}
