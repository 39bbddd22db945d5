package outbound

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// schemaFiles holds a JSON Schema (draft 2020-12) per kind, "<kind>.schema.json": the
// contract consumers code against.
//
//go:embed schemas/*.schema.json
var schemaFiles embed.FS

// Schema returns the JSON Schema document of kind k.
func Schema(k Kind) ([]byte, error) {
	return schemaFiles.ReadFile("schemas/" + string(k) + ".schema.json")
}

var (
	compileOnce sync.Once
	compiled    map[Kind]*jsonschema.Schema
	compileErr  error
)

func compileSchemas() {
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	compiled = make(map[Kind]*jsonschema.Schema, len(Kinds))
	for _, k := range Kinds {
		raw, err := Schema(k)
		if err != nil {
			compileErr = err
			return
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		if err != nil {
			compileErr = fmt.Errorf("outbound: schema of %s: %w", k, err)
			return
		}
		url := "schemas/" + string(k) + ".schema.json"
		if err := c.AddResource(url, doc); err != nil {
			compileErr = fmt.Errorf("outbound: schema of %s: %w", k, err)
			return
		}
		if compiled[k], err = c.Compile(url); err != nil {
			compileErr = fmt.Errorf("outbound: schema of %s: %w", k, err)
			return
		}
	}
}

// Validate checks a message body against the JSON Schema of the kind it names: an error
// says what breaks the contract (an unknown kind included).
func Validate(body []byte) error {
	compileOnce.Do(compileSchemas)
	if compileErr != nil {
		return compileErr
	}
	var head struct {
		Kind Kind `json:"kind"`
	}
	if err := json.Unmarshal(body, &head); err != nil {
		return fmt.Errorf("outbound: message is not a JSON object: %w", err)
	}
	s, ok := compiled[head.Kind]
	if !ok {
		return fmt.Errorf("outbound: unknown kind %.64q", head.Kind)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("outbound: %w", err)
	}
	if err := s.Validate(doc); err != nil {
		return fmt.Errorf("outbound: %s breaks its schema: %w", head.Kind, err)
	}
	return nil
}
