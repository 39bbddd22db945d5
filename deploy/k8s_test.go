package deploy_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/yannh/kubeconform/pkg/validator"
	"go.yaml.in/yaml/v3"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// k8sVersion is the Kubernetes release whose schemas deploy/k8s/schemas holds
// (deploy/k8s/schemas/gen.go writes them).
const k8sVersion = "1.35.4"

// defaultShutdownBudget is JUNBAN_SHUTDOWN_BUDGET's default (docs/configuration.md).
const defaultShutdownBudget = 25 * time.Second

// sdkVars are read by the AWS SDK or the Go runtime itself, not by junban's configuration.
var sdkVars = map[string]bool{"AWS_ACCESS_KEY_ID": true, "AWS_SECRET_ACCESS_KEY": true, "GOMEMLIMIT": true, "GOGC": true}

// k8sBinaries are the binaries with a Deployment: all of them.
var k8sBinaries = binaries

// k8sDir is deploy/k8s.
func k8sDir(t *testing.T) string { return filepath.Join(repoRoot(t), "deploy", "k8s") }

// k8sValidator is kubeconform, strict, reading only the vendored schemas: built-in kinds in
// kubeconform's own layout (v<version>-standalone-strict/<kind>-<group>-<version>.json) and
// CRDs as <group>/<kind>_<version>.json. A kind without a schema is an error.
func k8sValidator(t *testing.T) validator.Validator {
	t.Helper()
	schemas := filepath.Join(k8sDir(t), "schemas")
	v, err := validator.New([]string{
		schemas,
		schemas + "/{{ .Group }}/{{ .ResourceKind }}_{{ .ResourceAPIVersion }}.json",
	}, validator.Opts{
		Strict:               true,
		KubernetesVersion:    k8sVersion,
		IgnoreMissingSchemas: false,
	})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// k8sSource is one stream of manifests: an overlay as kustomize renders it, or an example.
type k8sSource struct {
	name string
	yaml []byte
}

// overlayNames lists the folders under deploy/k8s/overlays.
func overlayNames(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(k8sDir(t), "overlays"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	if len(names) == 0 {
		t.Fatal("no overlay under deploy/k8s/overlays")
	}
	return names
}

// renderOverlay builds deploy/k8s/overlays/<name> with kustomize, as `kubectl apply -k` does.
func renderOverlay(t *testing.T, name string) []byte {
	t.Helper()
	return renderKustomization(t, filepath.Join(k8sDir(t), "overlays", name))
}

func renderKustomization(t *testing.T, dir string) []byte {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	out, err := m.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// k8sSources are what the checks read: every overlay rendered, and the example Secret.
func k8sSources(t *testing.T) []k8sSource {
	t.Helper()
	var out []k8sSource
	for _, name := range overlayNames(t) {
		out = append(out, k8sSource{"deploy/k8s/overlays/" + name, renderOverlay(t, name)})
	}
	secret, err := os.ReadFile(filepath.Join(k8sDir(t), "examples", "secrets.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return append(out, k8sSource{"deploy/k8s/examples/secrets.yaml", secret})
}

func validate(v validator.Validator, name string, r io.Reader) []validator.Result {
	return v.Validate(name, io.NopCloser(r))
}

func resultError(r validator.Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: status %d: %v", r.Resource.Path, r.Status, r.Err)
	for _, ve := range r.ValidationErrors {
		fmt.Fprintf(&b, "\n    %s: %s", ve.Path, ve.Msg)
	}
	return b.String()
}

func TestK8sManifestsAreValid(t *testing.T) {
	v := k8sValidator(t)
	kinds := map[string]int{}
	for _, src := range k8sSources(t) {
		t.Run(src.name, func(t *testing.T) {
			results := validate(v, src.name, bytes.NewReader(src.yaml))
			if len(results) == 0 {
				t.Fatal("no resources")
			}
			for _, r := range results {
				switch r.Status {
				case validator.Valid:
					sig, err := r.Resource.Signature()
					if err != nil {
						t.Fatal(err)
					}
					kinds[sig.Kind]++
				case validator.Empty:
				default:
					t.Error(resultError(r))
				}
			}
		})
	}
	for kind, want := range map[string]int{
		"Deployment": 4, "Service": 2, "PodDisruptionBudget": 4, "ConfigMap": 5, "Secret": 1,
		"ServiceAccount": 4, "ScaledObject": 2, "TriggerAuthentication": 1, "Job": 1,
		"NetworkPolicy": 3, "PodMonitor": 2, "PrometheusRule": 1, "HTTPRoute": 1,
		"HorizontalPodAutoscaler": 2, "Namespace": 1,
	} {
		if kinds[kind] < want {
			t.Errorf("%d valid %s, want at least %d (all: %v)", kinds[kind], kind, want, kinds)
		}
	}
}

// TestK8sBrokenManifestsFail proves the validation can fail: wrong types, unknown fields and
// kinds without a schema are all refused, with the schemas read from disk only.
func TestK8sBrokenManifestsFail(t *testing.T) {
	v := k8sValidator(t)
	const deployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: broken
spec:
  replicas: %s
  selector:
    matchLabels: {app: broken}
  template:
    metadata:
      labels: {app: broken}
    spec:
      containers:
        - name: app
          image: junban/order-worker:0.1.0
          %s
`
	cases := []struct {
		name, manifest string
		want           validator.Status
		msg            string
	}{
		{"good control", fmt.Sprintf(deployment, "2", "imagePullPolicy: IfNotPresent"), validator.Valid, ""},
		{"replicas is a string", fmt.Sprintf(deployment, `"two"`, "imagePullPolicy: IfNotPresent"), validator.Invalid, "/spec/replicas"},
		{"unknown field (strict)", fmt.Sprintf(deployment, "2", "imagePullPolicyy: IfNotPresent"), validator.Invalid, "imagePullPolicyy"},
		{"probe without handler port", fmt.Sprintf(deployment, "2", "livenessProbe: {httpGet: {path: /healthz}}"), validator.Invalid, "port"},
		{"ScaledObject without a target", "apiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nmetadata: {name: x}\nspec:\n  triggers: [{type: aws-sqs-queue, metadata: {queueURL: orders}}]\n", validator.Invalid, "scaleTargetRef"},
		{"no schema for the kind", "apiVersion: example.com/v1\nkind: Unknown\nmetadata: {name: x}\n", validator.Error, "could not find schema"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			results := validate(v, c.name, strings.NewReader(c.manifest))
			if len(results) != 1 {
				t.Fatalf("%d results", len(results))
			}
			r := results[0]
			if r.Status != c.want {
				t.Fatalf("status %d, want %d: %s", r.Status, c.want, resultError(r))
			}
			if c.msg != "" && !strings.Contains(resultError(r), c.msg) {
				t.Errorf("error does not mention %q: %s", c.msg, resultError(r))
			}
		})
	}
}

// The parts of the manifests the checks below read.
type (
	manifest struct {
		APIVersion string `yaml:"apiVersion"`
		Kind       string `yaml:"kind"`
		Metadata   struct {
			Name        string            `yaml:"name"`
			Namespace   string            `yaml:"namespace"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"metadata"`
		Data       map[string]string `yaml:"data"`
		StringData map[string]string `yaml:"stringData"`
		Spec       yaml.Node         `yaml:"spec"`
		file       string
	}
	deploymentSpec struct {
		Replicas int `yaml:"replicas"`
		Selector struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"selector"`
		Template struct {
			Metadata struct {
				Labels map[string]string `yaml:"labels"`
			} `yaml:"metadata"`
			Spec podSpec `yaml:"spec"`
		} `yaml:"template"`
	}
	podSpec struct {
		ServiceAccountName            string `yaml:"serviceAccountName"`
		TerminationGracePeriodSeconds *int   `yaml:"terminationGracePeriodSeconds"`
		SecurityContext               struct {
			RunAsNonRoot *bool `yaml:"runAsNonRoot"`
		} `yaml:"securityContext"`
		Containers []container `yaml:"containers"`
	}
	container struct {
		Name    string   `yaml:"name"`
		Image   string   `yaml:"image"`
		Args    []string `yaml:"args"`
		EnvFrom []struct {
			ConfigMapRef *struct {
				Name string `yaml:"name"`
			} `yaml:"configMapRef"`
			SecretRef *struct {
				Name string `yaml:"name"`
			} `yaml:"secretRef"`
		} `yaml:"envFrom"`
		Env []struct {
			Name      string  `yaml:"name"`
			Value     *string `yaml:"value"`
			ValueFrom *struct {
				SecretKeyRef *struct {
					Name string `yaml:"name"`
					Key  string `yaml:"key"`
				} `yaml:"secretKeyRef"`
				ConfigMapKeyRef *struct {
					Name string `yaml:"name"`
					Key  string `yaml:"key"`
				} `yaml:"configMapKeyRef"`
			} `yaml:"valueFrom"`
		} `yaml:"env"`
		Ports []struct {
			Name          string `yaml:"name"`
			ContainerPort int    `yaml:"containerPort"`
		} `yaml:"ports"`
		LivenessProbe  *probe `yaml:"livenessProbe"`
		ReadinessProbe *probe `yaml:"readinessProbe"`
		Lifecycle      struct {
			PreStop *struct {
				Sleep *struct {
					Seconds int `yaml:"seconds"`
				} `yaml:"sleep"`
				Exec *struct {
					Command []string `yaml:"command"`
				} `yaml:"exec"`
			} `yaml:"preStop"`
		} `yaml:"lifecycle"`
		SecurityContext struct {
			AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
			ReadOnlyRootFilesystem   *bool `yaml:"readOnlyRootFilesystem"`
			RunAsNonRoot             *bool `yaml:"runAsNonRoot"`
			Privileged               *bool `yaml:"privileged"`
			Capabilities             struct {
				Drop []string `yaml:"drop"`
			} `yaml:"capabilities"`
		} `yaml:"securityContext"`
		Resources struct {
			Requests map[string]string `yaml:"requests"`
			Limits   map[string]string `yaml:"limits"`
		} `yaml:"resources"`
	}
	probe struct {
		HTTPGet *struct {
			Path string `yaml:"path"`
			Port any    `yaml:"port"`
		} `yaml:"httpGet"`
	}
)

// loadManifests decodes the example overlay as kustomize renders it, and the example Secret.
func loadManifests(t *testing.T) []manifest {
	t.Helper()
	secret, err := os.ReadFile(filepath.Join(k8sDir(t), "examples", "secrets.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return decodeManifests(t, map[string][]byte{
		"deploy/k8s/overlays/example":      renderOverlay(t, "example"),
		"deploy/k8s/examples/secrets.yaml": secret,
	})
}

// decodeManifests decodes the resources of each named stream.
func decodeManifests(t *testing.T, streams map[string][]byte) []manifest {
	t.Helper()
	var all []manifest
	for file, raw := range streams {
		dec := yaml.NewDecoder(bytes.NewReader(raw))
		for {
			var m manifest
			err := dec.Decode(&m)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			if m.Kind == "" {
				continue
			}
			m.file = file
			all = append(all, m)
		}
	}
	return all
}

func byKind(all []manifest, kind string) []manifest {
	var out []manifest
	for _, m := range all {
		if m.Kind == kind {
			out = append(out, m)
		}
	}
	return out
}

func find(all []manifest, kind, name string) *manifest {
	for i := range all {
		if all[i].Kind == kind && all[i].Metadata.Name == name {
			return &all[i]
		}
	}
	return nil
}

func deployments(t *testing.T, all []manifest) map[string]deploymentSpec {
	t.Helper()
	out := map[string]deploymentSpec{}
	for _, m := range byKind(all, "Deployment") {
		var spec deploymentSpec
		if err := m.Spec.Decode(&spec); err != nil {
			t.Fatalf("%s: %v", m.Metadata.Name, err)
		}
		out[m.Metadata.Name] = spec
	}
	if len(out) == 0 {
		t.Fatal("no Deployment")
	}
	return out
}

// envOf resolves the environment of a container: its env entries and the keys of the
// ConfigMaps and Secrets of its envFrom, each name with where it comes from.
func envOf(t *testing.T, all []manifest, c container) map[string]string {
	t.Helper()
	env := map[string]string{}
	for _, ef := range c.EnvFrom {
		switch {
		case ef.ConfigMapRef != nil:
			cm := find(all, "ConfigMap", ef.ConfigMapRef.Name)
			if cm == nil {
				t.Errorf("container %s: envFrom ConfigMap %q is not in the rendered overlay", c.Name, ef.ConfigMapRef.Name)
				continue
			}
			for k, v := range cm.Data {
				env[k] = v
			}
		case ef.SecretRef != nil:
			s := find(all, "Secret", ef.SecretRef.Name)
			if s == nil {
				t.Errorf("container %s: envFrom Secret %q has no example in deploy/k8s", c.Name, ef.SecretRef.Name)
				continue
			}
			for k := range s.StringData {
				env[k] = "(secret)"
			}
			for k := range s.Data {
				env[k] = "(secret)"
			}
		}
	}
	for _, e := range c.Env {
		switch {
		case e.Value != nil:
			env[e.Name] = *e.Value
		case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
			ref := e.ValueFrom.SecretKeyRef
			s := find(all, "Secret", ref.Name)
			if s == nil {
				t.Errorf("container %s: %s: Secret %q has no example in deploy/k8s", c.Name, e.Name, ref.Name)
			} else if _, ok := s.StringData[ref.Key]; !ok {
				if _, ok := s.Data[ref.Key]; !ok {
					t.Errorf("container %s: %s: Secret %q has no key %q", c.Name, e.Name, ref.Name, ref.Key)
				}
			}
			env[e.Name] = "(secret)"
		case e.ValueFrom != nil && e.ValueFrom.ConfigMapKeyRef != nil:
			ref := e.ValueFrom.ConfigMapKeyRef
			cm := find(all, "ConfigMap", ref.Name)
			if cm == nil {
				t.Errorf("container %s: %s: ConfigMap %q is not in the rendered overlay", c.Name, e.Name, ref.Name)
				continue
			}
			env[e.Name] = cm.Data[ref.Key]
		default:
			env[e.Name] = ""
		}
	}
	return env
}

// TestK8sShutdownBudget: the kubelet's grace period (which includes the preStop hook) must
// cover the preStop sleep, the binary's shutdown budget and a margin, or SIGKILL cuts the
// drain short.
func TestK8sShutdownBudget(t *testing.T) {
	all := loadManifests(t)
	for name, d := range deployments(t, all) {
		t.Run(name, func(t *testing.T) {
			ps := d.Template.Spec
			if ps.TerminationGracePeriodSeconds == nil {
				t.Fatal("terminationGracePeriodSeconds not set (the default 30s is too short)")
			}
			grace := time.Duration(*ps.TerminationGracePeriodSeconds) * time.Second
			for _, c := range ps.Containers {
				pre := c.Lifecycle.PreStop
				if pre == nil || (pre.Sleep == nil && pre.Exec == nil) {
					t.Errorf("container %s: no preStop hook", c.Name)
					continue
				}
				var sleep time.Duration
				if pre.Sleep != nil {
					sleep = time.Duration(pre.Sleep.Seconds) * time.Second
				} else if len(pre.Exec.Command) == 2 && pre.Exec.Command[0] == "sleep" {
					s, _ := strconv.Atoi(pre.Exec.Command[1])
					sleep = time.Duration(s) * time.Second
				} else {
					t.Errorf("container %s: preStop %v is not a plain sleep", c.Name, pre.Exec.Command)
				}
				if sleep <= 0 {
					t.Errorf("container %s: preStop sleeps %v: endpoints would not drain", c.Name, sleep)
				}
				budget := defaultShutdownBudget
				if v, ok := envOf(t, all, c)["JUNBAN_SHUTDOWN_BUDGET"]; ok {
					var err error
					if budget, err = time.ParseDuration(v); err != nil {
						t.Fatalf("JUNBAN_SHUTDOWN_BUDGET=%q: %v", v, err)
					}
				}
				const margin = 5 * time.Second
				if grace <= sleep+budget {
					t.Errorf("container %s: terminationGracePeriodSeconds %v <= preStop %v + budget %v", c.Name, grace, sleep, budget)
				}
				if grace < sleep+budget+margin {
					t.Errorf("container %s: terminationGracePeriodSeconds %v leaves less than %v over preStop %v + budget %v",
						c.Name, grace, margin, sleep, budget)
				}
			}
		})
	}
}

// TestK8sProbesAndSecurity: every container has a liveness probe on /healthz and a
// readiness probe on /readyz, both on the port of JUNBAN_HTTP_ADDR (the gateway's
// JUNBAN_WEBHOOK_ADMIN_ADDR when it sets one); runs non-root with a
// read-only root file system, no privilege escalation and no capabilities; and has
// resource requests and limits.
func TestK8sProbesAndSecurity(t *testing.T) {
	all := loadManifests(t)
	for name, d := range deployments(t, all) {
		t.Run(name, func(t *testing.T) {
			ps := d.Template.Spec
			if ps.SecurityContext.RunAsNonRoot == nil || !*ps.SecurityContext.RunAsNonRoot {
				t.Error("pod securityContext.runAsNonRoot is not true")
			}
			if len(ps.Containers) == 0 {
				t.Fatal("no container")
			}
			for _, c := range ps.Containers {
				env := envOf(t, all, c)
				addrVar := "JUNBAN_HTTP_ADDR"
				if env["JUNBAN_WEBHOOK_ADMIN_ADDR"] != "" {
					addrVar = "JUNBAN_WEBHOOK_ADMIN_ADDR"
				}
				addr := env[addrVar]
				_, port, err := net.SplitHostPort(addr)
				if err != nil || port == "0" {
					t.Fatalf("container %s: %s=%q: the probes need a fixed port", c.Name, addrVar, addr)
				}
				ports := map[string]string{}
				for _, p := range c.Ports {
					ports[p.Name] = strconv.Itoa(p.ContainerPort)
					ports[strconv.Itoa(p.ContainerPort)] = strconv.Itoa(p.ContainerPort)
				}
				for _, pr := range []struct {
					kind string
					p    *probe
					path string
				}{{"liveness", c.LivenessProbe, "/healthz"}, {"readiness", c.ReadinessProbe, "/readyz"}} {
					if pr.p == nil || pr.p.HTTPGet == nil {
						t.Errorf("container %s: no %s httpGet probe", c.Name, pr.kind)
						continue
					}
					if pr.p.HTTPGet.Path != pr.path {
						t.Errorf("container %s: %s probe on %q, want %q", c.Name, pr.kind, pr.p.HTTPGet.Path, pr.path)
					}
					if got := ports[fmt.Sprint(pr.p.HTTPGet.Port)]; got != port {
						t.Errorf("container %s: %s probe on port %v (%q), %s listens on %s",
							c.Name, pr.kind, pr.p.HTTPGet.Port, got, addrVar, port)
					}
				}
				sc := c.SecurityContext
				if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
					t.Errorf("container %s: allowPrivilegeEscalation is not false", c.Name)
				}
				if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
					t.Errorf("container %s: readOnlyRootFilesystem is not true", c.Name)
				}
				if sc.Privileged != nil && *sc.Privileged {
					t.Errorf("container %s: privileged", c.Name)
				}
				if len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" {
					t.Errorf("container %s: capabilities.drop is %v, want [ALL]", c.Name, sc.Capabilities.Drop)
				}
				for _, r := range []string{"cpu", "memory"} {
					if c.Resources.Requests[r] == "" || c.Resources.Limits[r] == "" {
						t.Errorf("container %s: no %s request or limit", c.Name, r)
					}
				}
			}
		})
	}
}

// TestK8sWiring: every Deployment has a ServiceAccount with an IRSA annotation, a
// PodDisruptionBudget that selects its pods, the workers a KEDA ScaledObject on SQS with an
// existing TriggerAuthentication, and the gateway a Service.
func TestK8sWiring(t *testing.T) {
	all := loadManifests(t)
	deps := deployments(t, all)
	for _, bin := range k8sBinaries {
		if _, ok := deps[bin]; !ok {
			t.Errorf("no Deployment %s", bin)
		}
	}
	if deps["order-worker"].Replicas != 2 {
		t.Errorf("order-worker replicas %d, want 2", deps["order-worker"].Replicas)
	}
	selects := func(sel, labels map[string]string) bool {
		if len(sel) == 0 {
			return false
		}
		for k, v := range sel {
			if labels[k] != v {
				return false
			}
		}
		return true
	}
	for name, d := range deps {
		labels := d.Template.Metadata.Labels
		if !selects(d.Selector.MatchLabels, labels) {
			t.Errorf("%s: selector %v does not select its template %v", name, d.Selector.MatchLabels, labels)
		}
		sa := find(all, "ServiceAccount", d.Template.Spec.ServiceAccountName)
		if sa == nil {
			t.Errorf("%s: ServiceAccount %q not in the rendered overlay", name, d.Template.Spec.ServiceAccountName)
		} else if !strings.HasPrefix(sa.Metadata.Annotations["eks.amazonaws.com/role-arn"], "arn:aws:iam::") {
			t.Errorf("%s: ServiceAccount %s has no IRSA role annotation", name, sa.Metadata.Name)
		}
		pdbs := 0
		for _, p := range byKind(all, "PodDisruptionBudget") {
			var spec struct {
				Selector struct {
					MatchLabels map[string]string `yaml:"matchLabels"`
				} `yaml:"selector"`
			}
			if err := p.Spec.Decode(&spec); err != nil {
				t.Fatal(err)
			}
			if selects(spec.Selector.MatchLabels, labels) {
				pdbs++
			}
		}
		if pdbs != 1 {
			t.Errorf("%s: %d PodDisruptionBudgets select its pods, want 1", name, pdbs)
		}
	}
	scaled := map[string]string{}
	for _, so := range byKind(all, "ScaledObject") {
		var spec struct {
			ScaleTargetRef struct {
				Name string `yaml:"name"`
			} `yaml:"scaleTargetRef"`
			MinReplicaCount *int `yaml:"minReplicaCount"`
			MaxReplicaCount *int `yaml:"maxReplicaCount"`
			Triggers        []struct {
				Type              string            `yaml:"type"`
				Metadata          map[string]string `yaml:"metadata"`
				AuthenticationRef struct {
					Name string `yaml:"name"`
					Kind string `yaml:"kind"`
				} `yaml:"authenticationRef"`
			} `yaml:"triggers"`
		}
		if err := so.Spec.Decode(&spec); err != nil {
			t.Fatal(err)
		}
		target := spec.ScaleTargetRef.Name
		if _, ok := deps[target]; !ok {
			t.Errorf("ScaledObject %s targets %q, no such Deployment", so.Metadata.Name, target)
		}
		if spec.MinReplicaCount == nil || spec.MaxReplicaCount == nil || *spec.MinReplicaCount < 1 || *spec.MaxReplicaCount < *spec.MinReplicaCount {
			t.Errorf("ScaledObject %s: min/max replicas unset or inconsistent", so.Metadata.Name)
		}
		for _, tr := range spec.Triggers {
			if tr.Type != "aws-sqs-queue" {
				continue
			}
			q := tr.Metadata["queueURL"]
			scaled[target] = q[strings.LastIndexByte(q, '/')+1:]
			if _, err := strconv.Atoi(tr.Metadata["queueLength"]); err != nil {
				t.Errorf("ScaledObject %s: queueLength %q", so.Metadata.Name, tr.Metadata["queueLength"])
			}
			kind := tr.AuthenticationRef.Kind
			if kind == "" {
				kind = "TriggerAuthentication"
			}
			if find(all, kind, tr.AuthenticationRef.Name) == nil {
				t.Errorf("ScaledObject %s: %s %q not in the rendered overlay", so.Metadata.Name, kind, tr.AuthenticationRef.Name)
			}
		}
	}
	for target, queue := range map[string]string{"order-worker": "orders", "persist-worker": "results"} {
		if scaled[target] != queue {
			t.Errorf("%s is scaled on SQS queue %q, want %q", target, scaled[target], queue)
		}
	}
	for _, name := range []string{"webhook-gateway", "junban-api"} {
		svc := find(all, "Service", name)
		if svc == nil {
			t.Fatalf("no Service %s", name)
		}
		var spec struct {
			Selector map[string]string `yaml:"selector"`
		}
		if err := svc.Spec.Decode(&spec); err != nil {
			t.Fatal(err)
		}
		if !selects(spec.Selector, deps[name].Template.Metadata.Labels) {
			t.Errorf("Service %s selects %v, not its pods", name, spec.Selector)
		}
	}
}

// buildBinary compiles ./cmd/<bin> into dir.
func buildBinary(t *testing.T, bin, dir string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a built " + bin + "; not in -short")
	}
	cmd := exec.Command("go", "build", "-o", dir+"/", "./cmd/"+bin)
	cmd.Dir = repoRoot(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/%s: %v\n%s", bin, err, out)
	}
	return filepath.Join(dir, bin)
}

// TestK8sEnvVarsAreRead: every variable a Deployment sets (env, and the keys of the
// ConfigMaps and Secrets of envFrom) is one its binary reads (its --env-vars), and every
// variable the binary requires is set.
func TestK8sEnvVarsAreRead(t *testing.T) {
	all := loadManifests(t)
	deps := deployments(t, all)
	dir := t.TempDir()
	for _, bin := range k8sBinaries {
		t.Run(bin, func(t *testing.T) {
			d, ok := deps[bin]
			if !ok {
				t.Fatalf("no Deployment %s", bin)
			}
			exe := buildBinary(t, bin, dir)
			out, err := exec.Command(exe, "--env-vars").Output()
			if err != nil {
				t.Fatalf("%s --env-vars: %v", bin, err)
			}
			read, required := map[string]bool{}, map[string]bool{}
			for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
				name, rest, _ := strings.Cut(line, "\t")
				read[name] = true
				if rest == "required" {
					required[name] = true
				}
			}
			if len(read) < 5 {
				t.Fatalf("%s reads only %d variables: %q", bin, len(read), out)
			}
			for _, c := range d.Template.Spec.Containers {
				env := envOf(t, all, c)
				for name := range env {
					if !read[name] && !sdkVars[name] {
						t.Errorf("container %s sets %s, which %s does not read", c.Name, name, bin)
					}
				}
				for name := range required {
					if _, ok := env[name]; !ok {
						t.Errorf("container %s does not set %s, which %s requires", c.Name, name, bin)
					}
				}
			}
		})
	}
}
