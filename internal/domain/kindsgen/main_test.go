package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/junban/junban/internal/domain"
	"github.com/junban/junban/internal/event"
)

const (
	openapiFile  = "../../http/api/openapi.json"
	eventsFile   = "../../../docs/events.md"
	contractsDir = "../../../docs/contracts"
)

// The committed OpenAPI document and docs/events.md are what go generate writes from the
// registry: regenerated in memory, each is unchanged. Fails for a kind registered (or its
// Doc changed) without go generate ./internal/domain, and for either file edited by hand
// between what the generator owns.
func TestGeneratedIsCurrent(t *testing.T) {
	for file, gen := range map[string]func([]byte) ([]byte, error){openapiFile: openAPI, eventsFile: eventsIndex} {
		old, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		out, err := gen(old)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if !bytes.Equal(old, out) {
			t.Errorf("%s is stale: run go generate ./internal/domain and commit the result", file)
		}
	}
	files, err := contracts()
	if err != nil {
		t.Fatal(err)
	}
	if err := sameContracts(contractsDir, files); err != nil {
		t.Errorf("%v: run go generate ./internal/domain and commit the result", err)
	}
}

// sameContracts reports the first difference between dir and files: a file that differs,
// is missing, or is in dir's inbound folder without being generated.
func sameContracts(dir string, files map[string][]byte) error {
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		if !bytes.Equal(got, want) {
			return fmt.Errorf("%s is stale", name)
		}
	}
	extra, err := filepath.Glob(filepath.Join(dir, inboundDir, "*"))
	if err != nil {
		return err
	}
	for _, f := range extra {
		if _, ok := files[inboundDir+"/"+filepath.Base(f)]; !ok {
			return fmt.Errorf("%s is no kind's schema", f)
		}
	}
	return nil
}

// writeContracts writes what contracts returns, and what it writes is what the staleness
// check compares with: a schema edited by hand, or one of a kind no longer registered, is
// found, and writing again puts the folder back.
func TestContractsAreWrittenAndChecked(t *testing.T) {
	dir := t.TempDir()
	if err := writeContracts(dir); err != nil {
		t.Fatal(err)
	}
	files, err := contracts()
	if err != nil {
		t.Fatal(err)
	}
	if err := sameContracts(dir, files); err != nil {
		t.Fatalf("just written: %v", err)
	}
	placed := filepath.Join(dir, inboundFile(event.OrderPlaced))
	b, err := os.ReadFile(placed)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(placed, bytes.Replace(b, []byte(`"minimum": 1`), []byte(`"minimum": 0`), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	gone := filepath.Join(dir, inboundDir, "order.exploded.schema.json")
	if err := os.WriteFile(gone, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := sameContracts(dir, files); err == nil {
		t.Fatal("a schema edited by hand: no difference found")
	}
	if err := os.WriteFile(placed, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := sameContracts(dir, files); err == nil || !strings.Contains(err.Error(), "order.exploded") {
		t.Fatalf("a schema of no kind: %v", err)
	}
	if err := writeContracts(dir); err != nil {
		t.Fatal(err)
	}
	if err := sameContracts(dir, files); err != nil {
		t.Fatalf("written again: %v", err)
	}
	if len(files) != len(domain.Kinds())+2 {
		t.Errorf("%d files for %d kinds: a schema each, the result's and the AsyncAPI document", len(files), len(domain.Kinds()))
	}
}

// What the generator writes is the registry: the OpenAPI EventType lists every kind, the
// index has a row per kind with its Doc and links it to its section, and the rest of
// each file is kept. From a stale copy (a kind and a line of prose missing), generation
// puts the kind back and keeps the rest.
func TestGeneratorWritesTheRegistry(t *testing.T) {
	doc, err := os.ReadFile(openapiFile)
	if err != nil {
		t.Fatal(err)
	}
	stale := bytes.Replace(doc, []byte(`"order.shipped",`), nil, 1)
	if bytes.Equal(stale, doc) {
		t.Fatal("order.shipped not in the document")
	}
	out, err := openAPI(stale)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, doc) {
		t.Errorf("regenerated from a copy without order.shipped, the document differs from the committed one")
	}
	var parsed struct {
		Components struct {
			Schemas map[string]struct {
				Enum []string `json:"enum"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(out, &parsed); err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, k := range domain.Kinds() {
		kinds = append(kinds, string(k.Type))
	}
	if got := parsed.Components.Schemas["EventType"].Enum; !slices.Equal(got, kinds) {
		t.Errorf("EventType %q, the registry %q", got, kinds)
	}

	md, err := os.ReadFile(eventsFile)
	if err != nil {
		t.Fatal(err)
	}
	head, rest, _ := strings.Cut(string(md), beginMarker+"\n")
	_, tail, _ := strings.Cut(rest, "\n"+endMarker)
	got, err := eventsIndex([]byte(head + beginMarker + "\n" + endMarker + tail))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, md) {
		t.Error("regenerated from a page with an empty index, docs/events.md differs from the committed one")
	}
	for _, k := range domain.Kinds() {
		if !strings.Contains(string(got), "| [`"+string(k.Type)+"`](#") || !strings.Contains(string(got), "| "+k.Doc+" |") {
			t.Errorf("the index has no linked row with %s's Doc", k.Type)
		}
	}
	if _, err := eventsIndex([]byte(head + tail)); err == nil {
		t.Error("a page without the index's markers: no error")
	}
	if _, err := openAPI([]byte(`{"components":{"schemas":{}}}`)); err == nil {
		t.Error("a document without EventType: no error")
	}
}
