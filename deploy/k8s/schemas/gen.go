//go:build ignore

// gen writes the JSON schemas that deploy/k8s_test.go gives kubeconform, so that the
// manifests are validated without the network (kubeconform would otherwise download them).
//
// The sources are the upstream documents themselves, taken from the Go module proxy:
//
//   - k8s.io/kubernetes@<KubeVersion>: api/openapi-spec/swagger.json, the OpenAPI document of
//     the Kubernetes API server of that release;
//   - github.com/kedacore/keda/v2@<KedaVersion>: config/crd/bases/keda.sh_*.yaml, KEDA's CRDs;
//   - github.com/prometheus-operator/prometheus-operator@<PromOperatorVersion>: the CRDs of
//     PodMonitor and PrometheusRule (example/prometheus-operator-crd/);
//   - sigs.k8s.io/gateway-api@<GatewayAPIVersion>: the CRD of HTTPRoute (standard channel).
//
// The transformation is the one kubeconform's own schema repository applies
// (openapi2jsonschema --expanded --kubernetes --stand-alone --strict, and kubeconform's
// scripts/openapi2jsonschema.py for CRDs): every $ref inlined, IntOrString and Quantity
// widened to their two JSON types, apiVersion and kind pinned by enum, additionalProperties
// false on every object that lists its properties (strict), and optional scalars made nullable.
//
// Layout (what kubeconform's schema locations expect):
//
//	v<KubeVersion>-standalone-strict/<kind>-<group>-<version>.json  (built-in kinds)
//	<group>/<kind>_<version>.json                                  (CRDs)
//
// Run from the repository root:
//
//	go run ./deploy/k8s/schemas/gen.go
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v3"
)

const (
	// KubeVersion is the Kubernetes release the manifests target.
	KubeVersion = "1.35.4"
	// KedaVersion is the KEDA release whose CRDs the ScaledObjects are checked against.
	KedaVersion = "2.21.0"
	// PromOperatorVersion is the prometheus-operator release of the PodMonitor and
	// PrometheusRule CRDs (the newest the module proxy serves of its root module).
	PromOperatorVersion = "0.88.0"
	// GatewayAPIVersion is the Gateway API release of the HTTPRoute CRD.
	GatewayAPIVersion = "1.6.3"
)

// builtin lists the Kubernetes kinds deploy/k8s uses: group ("" for core), version, kind.
var builtin = [][3]string{
	{"", "v1", "ConfigMap"},
	{"", "v1", "Namespace"},
	{"", "v1", "Secret"},
	{"", "v1", "Service"},
	{"", "v1", "ServiceAccount"},
	{"apps", "v1", "Deployment"},
	{"autoscaling", "v2", "HorizontalPodAutoscaler"},
	{"batch", "v1", "Job"},
	{"networking.k8s.io", "v1", "NetworkPolicy"},
	{"policy", "v1", "PodDisruptionBudget"},
}

// crds lists the CRD files to convert, by module.
var crds = []struct {
	module string
	files  []string
}{
	{"github.com/kedacore/keda/v2@v" + KedaVersion, []string{
		"config/crd/bases/keda.sh_scaledobjects.yaml",
		"config/crd/bases/keda.sh_triggerauthentications.yaml",
		"config/crd/bases/keda.sh_clustertriggerauthentications.yaml",
	}},
	{"github.com/prometheus-operator/prometheus-operator@v" + PromOperatorVersion, []string{
		"example/prometheus-operator-crd/monitoring.coreos.com_podmonitors.yaml",
		"example/prometheus-operator-crd/monitoring.coreos.com_prometheusrules.yaml",
	}},
	{"sigs.k8s.io/gateway-api@v" + GatewayAPIVersion, []string{
		"config/crd/standard/gateway.networking.k8s.io_httproutes.yaml",
	}},
}

func main() {
	log.SetFlags(0)
	out := filepath.Join("deploy", "k8s", "schemas")
	if _, err := os.Stat(out); err != nil {
		log.Fatalf("run from the repository root: %v", err)
	}
	kube := moduleDir("k8s.io/kubernetes@v" + KubeVersion)

	if err := genBuiltin(filepath.Join(kube, "api", "openapi-spec", "swagger.json"),
		filepath.Join(out, "v"+KubeVersion+"-standalone-strict")); err != nil {
		log.Fatal(err)
	}
	for _, c := range crds {
		dir := moduleDir(c.module)
		for _, f := range c.files {
			if err := genCRD(filepath.Join(dir, f), out); err != nil {
				log.Fatal(err)
			}
		}
	}
}

// moduleDir downloads a module through the Go module proxy (without touching go.mod) and
// returns its directory in the module cache.
func moduleDir(mod string) string {
	cmd := exec.Command("go", "mod", "download", "-json", mod)
	cmd.Stderr = os.Stderr
	raw, err := cmd.Output()
	if err != nil {
		log.Fatalf("go mod download %s: %v", mod, err)
	}
	var info struct{ Dir, Error string }
	if err := json.Unmarshal(raw, &info); err != nil || info.Dir == "" {
		log.Fatalf("go mod download %s: %v %s", mod, err, info.Error)
	}
	return info.Dir
}

type obj = map[string]any

func genBuiltin(swagger, dir string) error {
	raw, err := os.ReadFile(swagger)
	if err != nil {
		return err
	}
	var doc struct {
		Definitions map[string]obj `json:"definitions"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return fmt.Errorf("%s: %w", swagger, err)
	}
	defs := doc.Definitions
	// --kubernetes: IntOrString and Quantity accept both of their JSON forms.
	defs["io.k8s.apimachinery.pkg.util.intstr.IntOrString"] = obj{
		"oneOf": []any{obj{"type": "string"}, obj{"type": "integer"}}}
	defs["io.k8s.apimachinery.pkg.api.resource.Quantity"] = obj{
		"oneOf": []any{obj{"type": "string"}, obj{"type": "number"}}}
	// --kubernetes: apiVersion and kind take only the values of the type's GVKs.
	byGVK := map[[3]string]string{}
	for name, def := range defs {
		gvks, _ := def["x-kubernetes-group-version-kind"].([]any)
		props, _ := def["properties"].(obj)
		for _, g := range gvks {
			gvk := g.(obj)
			group, version, kind := gvk["group"].(string), gvk["version"].(string), gvk["kind"].(string)
			byGVK[[3]string{group, version, kind}] = name
			if props == nil {
				continue
			}
			apiVersion := version
			if group != "" {
				apiVersion = group + "/" + version
			}
			if p, ok := props["apiVersion"].(obj); ok {
				appendEnum(p, apiVersion)
			}
			if p, ok := props["kind"].(obj); ok {
				appendEnum(p, kind)
			}
		}
	}
	// --strict
	for _, def := range defs {
		denyAdditional(def, false)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, want := range builtin {
		name, ok := byGVK[want]
		if !ok {
			return fmt.Errorf("%s: no definition for %v", swagger, want)
		}
		// --stand-alone: every $ref inlined.
		schema := deref(defs[name], defs, nil).(obj)
		schema["$schema"] = "http://json-schema.org/schema#"
		if _, ok := schema["type"]; !ok {
			schema["type"] = "object"
		}
		if props, ok := schema["properties"].(obj); ok {
			schema["properties"] = allowNullOptional(props, nil, nil)
		}
		group, version, kind := want[0], want[1], want[2]
		file := strings.ToLower(kind) + "-"
		if group != "" {
			file += strings.ToLower(strings.Split(group, ".")[0]) + "-"
		}
		file += strings.ToLower(version) + ".json"
		if err := write(filepath.Join(dir, file), schema); err != nil {
			return err
		}
	}
	return nil
}

func genCRD(path, out string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	dec := yaml.NewDecoder(f)
	for {
		var crd struct {
			Kind string `yaml:"kind"`
			Spec struct {
				Group string `yaml:"group"`
				Names struct {
					Kind string `yaml:"kind"`
				} `yaml:"names"`
				Versions []struct {
					Name   string `yaml:"name"`
					Schema struct {
						OpenAPIV3Schema obj `yaml:"openAPIV3Schema"`
					} `yaml:"schema"`
				} `yaml:"versions"`
			} `yaml:"spec"`
		}
		if err := dec.Decode(&crd); err == io.EOF {
			return nil
		} else if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if crd.Kind != "CustomResourceDefinition" {
			continue
		}
		for _, v := range crd.Spec.Versions {
			schema := v.Schema.OpenAPIV3Schema
			if schema == nil {
				continue
			}
			schema = normalize(schema).(obj)
			// Strict, the root included (DENY_ROOT_ADDITIONAL_PROPERTIES).
			denyAdditional(schema, false)
			schema = replaceIntOrString(schema).(obj)
			dir := filepath.Join(out, crd.Spec.Group)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			file := strings.ToLower(crd.Spec.Names.Kind) + "_" + strings.ToLower(v.Name) + ".json"
			if err := write(filepath.Join(dir, file), schema); err != nil {
				return err
			}
		}
	}
}

func appendEnum(p obj, v string) {
	enum, _ := p["enum"].([]any)
	for _, e := range enum {
		if e == v {
			return
		}
	}
	p["enum"] = append(enum, v)
}

// denyAdditional sets additionalProperties false on every object that lists properties and
// does not say otherwise (kubectl's own client-side validation behaved so).
func denyAdditional(v any, skip bool) {
	switch t := v.(type) {
	case obj:
		if _, ok := t["properties"]; ok && !skip {
			if _, set := t["additionalProperties"]; !set {
				t["additionalProperties"] = false
			}
		}
		for _, c := range t {
			denyAdditional(c, false)
		}
	case []any:
		for _, c := range t {
			denyAdditional(c, false)
		}
	}
}

// deref returns a copy of v with every "#/definitions/X" reference replaced by (a copy
// of) X. seen guards against recursive types, which the kinds listed here do not have.
func deref(v any, defs map[string]obj, seen []string) any {
	switch t := v.(type) {
	case obj:
		if ref, ok := t["$ref"].(string); ok {
			name := strings.TrimPrefix(ref, "#/definitions/")
			for _, s := range seen {
				if s == name {
					// A recursive type: accept anything below this point.
					return obj{}
				}
			}
			def, ok := defs[name]
			if !ok {
				log.Fatalf("unresolved $ref %s", ref)
			}
			return deref(def, defs, append(seen, name))
		}
		c := make(obj, len(t))
		for k, e := range t {
			c[k] = deref(e, defs, seen)
		}
		return c
	case []any:
		c := make([]any, len(t))
		for i, e := range t {
			c[i] = deref(e, defs, seen)
		}
		return c
	}
	return v
}

// allowNullOptional makes the type of a property nullable unless its object lists required
// properties (openapi2jsonschema's allow_null_optional_fields, kept as is).
func allowNullOptional(v any, parent, grandParent any) any {
	switch t := v.(type) {
	case obj:
		c := make(obj, len(t))
		for k, e := range t {
			switch ev := e.(type) {
			case obj:
				c[k] = allowNullOptional(ev, t, parent)
			case []any:
				l := make([]any, len(ev))
				for i, x := range ev {
					l[i] = allowNullOptional(x, ev, parent)
				}
				c[k] = l
			case string:
				gp, _ := grandParent.(obj)
				_, hasRequired := gp["required"]
				if k == "type" && ev != "null" && !hasRequired {
					c[k] = []any{ev, "null"}
				} else {
					c[k] = ev
				}
			default:
				c[k] = ev
			}
		}
		return c
	}
	return v
}

// replaceIntOrString turns format int-or-string into its two JSON types.
func replaceIntOrString(v any) any {
	switch t := v.(type) {
	case obj:
		c := make(obj, len(t))
		for k, e := range t {
			if m, ok := e.(obj); ok && m["format"] == "int-or-string" {
				c[k] = obj{"oneOf": []any{obj{"type": "string"}, obj{"type": "integer"}}}
				continue
			}
			c[k] = replaceIntOrString(e)
		}
		return c
	case []any:
		c := make([]any, len(t))
		for i, e := range t {
			c[i] = replaceIntOrString(e)
		}
		return c
	}
	return v
}

// normalize turns what the YAML decoder made (map[string]any, and ints) into JSON's shapes.
func normalize(v any) any {
	switch t := v.(type) {
	case obj:
		c := make(obj, len(t))
		for k, e := range t {
			c[k] = normalize(e)
		}
		return c
	case map[any]any:
		c := make(obj, len(t))
		for k, e := range t {
			c[fmt.Sprint(k)] = normalize(e)
		}
		return c
	case []any:
		c := make([]any, len(t))
		for i, e := range t {
			c[i] = normalize(e)
		}
		return c
	}
	return v
}

func write(path string, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return err
	}
	log.Printf("%s (%d bytes)", path, buf.Len())
	return os.WriteFile(path, buf.Bytes(), 0o644)
}
