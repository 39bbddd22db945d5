package main

import (
	"bytes"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/junban/junban/internal/domain"
)

const (
	openapiFile = "../../http/api/openapi.json"
	eventsFile  = "../../../docs/events.md"
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
