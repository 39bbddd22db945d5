package deploy_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/junban/junban/internal/platform/config"
)

// siteTokens are the words of the base that components/site replaces with the overlay's
// site.yaml; none may reach a rendered overlay.
var siteTokens = regexp.MustCompile(`\b(REGION|ACCOUNT|GATEWAY_NAME|GATEWAY_NAMESPACE|WEBHOOK_HOST|MONITORING_NAMESPACE)\b`)

// TestK8sSiteValuesWrittenOnce: the example site's account and region are written in one
// file, its site.yaml, and every token of the base is filled in the rendered overlay.
func TestK8sSiteValuesWrittenOnce(t *testing.T) {
	for _, name := range overlayNames(t) {
		out := renderOverlay(t, name)
		if m := siteTokens.FindAll(out, -1); len(m) > 0 {
			t.Errorf("overlay %s: tokens left unreplaced: %q", name, m)
		}
		if strings.Contains(string(out), "junban-site") {
			t.Errorf("overlay %s: the local ConfigMap junban-site reached the output", name)
		}
	}
	example := string(renderOverlay(t, "example"))
	for value, want := range map[string]int{"123456789012": 8, "ap-northeast-1": 6} {
		if got := strings.Count(example, value); got < want {
			t.Errorf("the example overlay holds %q %d times, want at least %d: a replacement target is missed", value, got, want)
		}
	}
	root := k8sDir(t)
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p == filepath.Join(root, "schemas") {
			return filepath.SkipDir
		}
		if d.IsDir() || filepath.Ext(p) != ".yaml" || p == filepath.Join(root, "overlays", "example", "site.yaml") {
			return nil
		}
		raw, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, v := range []string{"123456789012", "ap-northeast-1"} {
			if strings.Contains(string(raw), v) {
				rel, _ := filepath.Rel(root, p)
				t.Errorf("%s writes %q: the site's values belong in overlays/<site>/site.yaml", rel, v)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// podTemplate is the part of a Deployment's or a Job's pod template the checks read.
type podTemplate struct {
	Metadata struct {
		Labels      map[string]string `yaml:"labels"`
		Annotations map[string]string `yaml:"annotations"`
	} `yaml:"metadata"`
	Spec podSpec `yaml:"spec"`
}

// workloads returns the pod template of every Deployment and Job, by name.
func workloads(t *testing.T, all []manifest) map[string]podTemplate {
	t.Helper()
	out := map[string]podTemplate{}
	for _, m := range all {
		if m.Kind != "Deployment" && m.Kind != "Job" {
			continue
		}
		var spec struct {
			Template podTemplate `yaml:"template"`
		}
		if err := m.Spec.Decode(&spec); err != nil {
			t.Fatalf("%s %s: %v", m.Kind, m.Metadata.Name, err)
		}
		out[m.Metadata.Name] = spec.Template
	}
	return out
}

type labelSelector struct {
	MatchLabels      map[string]string `yaml:"matchLabels"`
	MatchExpressions []struct {
		Key      string   `yaml:"key"`
		Operator string   `yaml:"operator"`
		Values   []string `yaml:"values"`
	} `yaml:"matchExpressions"`
}

// matches is a Kubernetes label selector's meaning; an empty selector selects everything.
func (s labelSelector) matches(labels map[string]string) bool {
	for k, v := range s.MatchLabels {
		if labels[k] != v {
			return false
		}
	}
	for _, e := range s.MatchExpressions {
		v, ok := labels[e.Key]
		switch e.Operator {
		case "In":
			if !ok || !slices.Contains(e.Values, v) {
				return false
			}
		case "NotIn":
			if ok && slices.Contains(e.Values, v) {
				return false
			}
		case "Exists":
			if !ok {
				return false
			}
		case "DoesNotExist":
			if ok {
				return false
			}
		default:
			return false
		}
	}
	return true
}

type (
	netPolicy struct {
		name        string
		PodSelector labelSelector `yaml:"podSelector"`
		PolicyTypes []string      `yaml:"policyTypes"`
		Ingress     []netRule     `yaml:"ingress"`
		Egress      []netRule     `yaml:"egress"`
	}
	netRule struct {
		Peers []netPeer `yaml:"from"`
		To    []netPeer `yaml:"to"`
		Ports []struct {
			Protocol string `yaml:"protocol"`
			Port     any    `yaml:"port"`
		} `yaml:"ports"`
	}
	netPeer struct {
		NamespaceSelector *labelSelector `yaml:"namespaceSelector"`
		PodSelector       *labelSelector `yaml:"podSelector"`
		IPBlock           *struct {
			CIDR string `yaml:"cidr"`
		} `yaml:"ipBlock"`
	}
)

func netPolicies(t *testing.T, all []manifest) []netPolicy {
	t.Helper()
	var out []netPolicy
	for _, m := range byKind(all, "NetworkPolicy") {
		var p netPolicy
		if err := m.Spec.Decode(&p); err != nil {
			t.Fatalf("NetworkPolicy %s: %v", m.Metadata.Name, err)
		}
		p.name = m.Metadata.Name
		out = append(out, p)
	}
	return out
}

// flow is one connection a pod needs: out to a port, or in on a port from a namespace.
type flow struct {
	egress    bool
	protocol  string
	port      int
	namespace string // the peer's namespace; "" outside the cluster
}

func (f flow) String() string {
	if f.egress {
		return fmt.Sprintf("egress %s/%d to namespace %q", f.protocol, f.port, f.namespace)
	}
	return fmt.Sprintf("ingress %s/%d from namespace %q", f.protocol, f.port, f.namespace)
}

// netAllows says whether the policies let the pod (labels, named container ports) have the
// flow: with Kubernetes' semantics, a pod no policy of that direction selects is open, and
// one that some policy selects is open only to what one of those policies' rules allows.
func netAllows(policies []netPolicy, labels map[string]string, ports map[string]int, f flow) bool {
	dir := "Ingress"
	if f.egress {
		dir = "Egress"
	}
	isolated := false
	for _, p := range policies {
		if !p.PodSelector.matches(labels) || !slices.Contains(p.PolicyTypes, dir) {
			continue
		}
		isolated = true
		rules := p.Ingress
		if f.egress {
			rules = p.Egress
		}
		for _, r := range rules {
			if ruleAllows(r, ports, f) {
				return true
			}
		}
	}
	return !isolated
}

func ruleAllows(r netRule, ports map[string]int, f flow) bool {
	portOK := len(r.Ports) == 0
	for _, p := range r.Ports {
		proto := p.Protocol
		if proto == "" {
			proto = "TCP"
		}
		if proto != f.protocol {
			continue
		}
		switch v := p.Port.(type) {
		case nil:
			portOK = true
		case int:
			portOK = portOK || v == f.port
		case string:
			// A named port is resolved on the selected pod (ingress) only.
			portOK = portOK || (!f.egress && ports[v] == f.port)
		}
	}
	if !portOK {
		return false
	}
	peers := r.Peers
	if f.egress {
		peers = r.To
	}
	if len(peers) == 0 {
		return true
	}
	for _, peer := range peers {
		if f.namespace == "" {
			// Outside the cluster (ElastiCache, RDS, AWS): only an unrestricted ipBlock.
			if peer.IPBlock != nil && peer.IPBlock.CIDR == "0.0.0.0/0" {
				return true
			}
			continue
		}
		if peer.PodSelector != nil || peer.IPBlock != nil || peer.NamespaceSelector == nil {
			continue
		}
		if peer.NamespaceSelector.matches(map[string]string{"kubernetes.io/metadata.name": f.namespace}) {
			return true
		}
	}
	return false
}

// siteValue reads a key of the example overlay's site.yaml.
func siteValue(t *testing.T, key string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(k8sDir(t), "overlays", "example", "site.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var site struct {
		Data map[string]string `yaml:"data"`
	}
	if err := yaml.Unmarshal(raw, &site); err != nil {
		t.Fatal(err)
	}
	if site.Data[key] == "" {
		t.Fatalf("site.yaml has no %s", key)
	}
	return site.Data[key]
}

// neededFlows derives what each workload must reach from what it is configured with: DNS
// in kube-system always; outside the cluster, Redis when REDIS_URL is set, PostgreSQL with
// DATABASE_URL, the AWS APIs (443) with AWS_REGION; in, the port of its Service (the
// gateway's from the Gateway's namespace, the API's from another namespace of the cluster)
// and its metrics port from Prometheus's namespace.
func neededFlows(t *testing.T, all []manifest, name string, pod podTemplate) []map[string]any {
	t.Helper()
	ports := containerPorts(pod)
	var flows []map[string]any
	add := func(f flow, why string) { flows = append(flows, map[string]any{"flow": f, "why": why}) }
	add(flow{egress: true, protocol: "UDP", port: 53, namespace: "kube-system"}, "DNS")
	for _, c := range pod.Spec.Containers {
		env := envOf(t, all, c)
		if _, ok := env["REDIS_URL"]; ok {
			add(flow{egress: true, protocol: "TCP", port: 6379}, "REDIS_URL")
		}
		if _, ok := env["DATABASE_URL"]; ok {
			add(flow{egress: true, protocol: "TCP", port: 5432}, "DATABASE_URL")
		}
		if _, ok := env["AWS_REGION"]; ok {
			add(flow{egress: true, protocol: "TCP", port: 443}, "AWS_REGION (SQS, SNS, STS)")
		}
	}
	if p, ok := pod.Metadata.Annotations["prometheus.io/port"]; ok {
		n, err := strconv.Atoi(p)
		if err != nil {
			t.Fatalf("%s: prometheus.io/port %q", name, p)
		}
		add(flow{protocol: "TCP", port: n, namespace: siteValue(t, "monitoring-namespace")}, "metrics")
	}
	for _, svc := range byKind(all, "Service") {
		var spec struct {
			Selector map[string]string `yaml:"selector"`
			Ports    []struct {
				TargetPort any `yaml:"targetPort"`
			} `yaml:"ports"`
		}
		if err := svc.Spec.Decode(&spec); err != nil {
			t.Fatal(err)
		}
		if !(labelSelector{MatchLabels: spec.Selector}).matches(pod.Metadata.Labels) {
			continue
		}
		// The API's clients: the storefront's namespace, say (any namespace may call it).
		ns := "storefront"
		if name == "webhook-gateway" {
			ns = siteValue(t, "gateway-namespace")
		}
		for _, p := range spec.Ports {
			port, ok := p.TargetPort.(int)
			if s, isName := p.TargetPort.(string); isName {
				port, ok = ports[s]
			}
			if !ok {
				t.Fatalf("Service %s: targetPort %v is no port of %s", svc.Metadata.Name, p.TargetPort, name)
			}
			add(flow{protocol: "TCP", port: port, namespace: ns}, "Service "+svc.Metadata.Name)
		}
	}
	return flows
}

func containerPorts(pod podTemplate) map[string]int {
	ports := map[string]int{}
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			ports[p.Name] = p.ContainerPort
		}
	}
	return ports
}

// netProblems lists the flows the policies refuse, and a missing default deny.
func netProblems(t *testing.T, all []manifest) []string {
	t.Helper()
	policies := netPolicies(t, all)
	var problems []string
	denies := false
	for _, p := range policies {
		if len(p.PodSelector.MatchLabels)+len(p.PodSelector.MatchExpressions) == 0 &&
			slices.Contains(p.PolicyTypes, "Ingress") && slices.Contains(p.PolicyTypes, "Egress") &&
			len(p.Ingress)+len(p.Egress) == 0 {
			denies = true
		}
	}
	if !denies {
		problems = append(problems, "no default-deny NetworkPolicy (every pod, Ingress and Egress, no rule)")
	}
	for name, pod := range workloads(t, all) {
		ports := containerPorts(pod)
		for _, need := range neededFlows(t, all, name, pod) {
			f := need["flow"].(flow)
			if !netAllows(policies, pod.Metadata.Labels, ports, f) {
				problems = append(problems, fmt.Sprintf("%s: %v (%s) is not allowed", name, f, need["why"]))
			}
		}
		// Default deny holds: nothing in from an arbitrary namespace on an arbitrary port.
		stranger := flow{protocol: "TCP", port: 22, namespace: "elsewhere"}
		if netAllows(policies, pod.Metadata.Labels, ports, stranger) {
			problems = append(problems, fmt.Sprintf("%s: %v is allowed", name, stranger))
		}
	}
	slices.Sort(problems)
	return problems
}

// TestK8sNetworkPolicies: a default deny, and for every workload exactly the flows its
// configuration needs are open (DNS; Redis, PostgreSQL and AWS as its environment says; its
// Service's port and its metrics port in).
func TestK8sNetworkPolicies(t *testing.T) {
	all := loadManifests(t)
	if p := netProblems(t, all); len(p) > 0 {
		t.Errorf("NetworkPolicies:\n  %s", strings.Join(p, "\n  "))
	}
}

// TestK8sNetworkPolicyCheckFindsGaps runs the check on broken variants of the manifests:
// without the default deny, and without the persist-worker's egress policy (its PostgreSQL
// and SQS connections are then refused).
func TestK8sNetworkPolicyCheckFindsGaps(t *testing.T) {
	all := loadManifests(t)
	without := func(kind, name string) []manifest {
		return slices.DeleteFunc(slices.Clone(all), func(m manifest) bool { return m.Kind == kind && m.Metadata.Name == name })
	}
	for _, c := range []struct {
		name string
		drop string
		want []string
	}{
		{"no default deny", "default-deny", []string{"no default-deny NetworkPolicy", "junban-migrate: ingress TCP/22"}},
		{"no persist-worker egress", "persist-worker", []string{"persist-worker: egress TCP/5432", "persist-worker: egress TCP/443"}},
		{"no DNS", "dns", []string{"order-worker: egress UDP/53", "junban-migrate: egress UDP/53"}},
		{"no metrics ingress", "metrics", []string{"order-worker: ingress TCP/8080 from namespace", "webhook-gateway: ingress TCP/9090"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := strings.Join(netProblems(t, without("NetworkPolicy", c.drop)), "\n")
			for _, w := range c.want {
				if !strings.Contains(got, w) {
					t.Errorf("without NetworkPolicy %s the check does not report %q; it reports:\n%s", c.drop, w, got)
				}
			}
		})
	}
}

// podMonitorProblems: every pod that announces a metrics port (prometheus.io/port) is
// scraped by exactly one PodMonitor, on a named port that is that port.
func podMonitorProblems(t *testing.T, all []manifest) []string {
	t.Helper()
	type monitor struct {
		name      string
		Selector  labelSelector `yaml:"selector"`
		Endpoints []struct {
			Port string `yaml:"port"`
			Path string `yaml:"path"`
		} `yaml:"podMetricsEndpoints"`
	}
	var monitors []monitor
	for _, m := range byKind(all, "PodMonitor") {
		var pm monitor
		if err := m.Spec.Decode(&pm); err != nil {
			t.Fatal(err)
		}
		pm.name = m.Metadata.Name
		monitors = append(monitors, pm)
	}
	var problems []string
	for name, pod := range workloads(t, all) {
		want, ok := pod.Metadata.Annotations["prometheus.io/port"]
		if !ok {
			continue
		}
		ports := containerPorts(pod)
		var scraped []string
		for _, pm := range monitors {
			if !pm.Selector.matches(pod.Metadata.Labels) {
				continue
			}
			for _, ep := range pm.Endpoints {
				if strconv.Itoa(ports[ep.Port]) == want && ep.Path == pod.Metadata.Annotations["prometheus.io/path"] {
					scraped = append(scraped, pm.name)
				} else {
					problems = append(problems, fmt.Sprintf("%s: PodMonitor %s scrapes port %q path %s, metrics are on %s %s",
						name, pm.name, ep.Port, ep.Path, want, pod.Metadata.Annotations["prometheus.io/path"]))
				}
			}
		}
		if len(scraped) != 1 {
			problems = append(problems, fmt.Sprintf("%s: scraped by %d PodMonitors %v, want 1", name, len(scraped), scraped))
		}
	}
	slices.Sort(problems)
	return problems
}

func TestK8sPodMonitors(t *testing.T) {
	all := loadManifests(t)
	if p := podMonitorProblems(t, all); len(p) > 0 {
		t.Errorf("PodMonitors:\n  %s", strings.Join(p, "\n  "))
	}
	// A broken variant: the gateway scraped on its public port, which serves no /metrics.
	broken := slices.Clone(all)
	for i, m := range broken {
		if m.Kind == "PodMonitor" && m.Metadata.Name == "webhook-gateway" {
			var node yaml.Node
			if err := yaml.Unmarshal([]byte("podMetricsEndpoints: [{port: http, path: /metrics}]\nselector: {matchLabels: {app.kubernetes.io/name: webhook-gateway}}\n"), &node); err != nil {
				t.Fatal(err)
			}
			broken[i].Spec = *node.Content[0]
		}
	}
	if got := strings.Join(podMonitorProblems(t, broken), "\n"); !strings.Contains(got, `webhook-gateway: PodMonitor webhook-gateway scrapes port "http"`) {
		t.Errorf("a PodMonitor on the gateway's public port is not reported: %q", got)
	}
}

// TestK8sAutoscaling: the gateway and the API have an HPA on CPU over a Deployment that
// requests CPU (a utilization target needs a request), with at least two replicas; the
// workers are scaled by KEDA (TestK8sWiring) and have no HPA of their own.
func TestK8sAutoscaling(t *testing.T) {
	all := loadManifests(t)
	deps := deployments(t, all)
	hpas := map[string]bool{}
	for _, h := range byKind(all, "HorizontalPodAutoscaler") {
		var spec struct {
			ScaleTargetRef struct {
				Kind string `yaml:"kind"`
				Name string `yaml:"name"`
			} `yaml:"scaleTargetRef"`
			MinReplicas int `yaml:"minReplicas"`
			MaxReplicas int `yaml:"maxReplicas"`
			Metrics     []struct {
				Resource struct {
					Name string `yaml:"name"`
				} `yaml:"resource"`
			} `yaml:"metrics"`
		}
		if err := h.Spec.Decode(&spec); err != nil {
			t.Fatal(err)
		}
		target := spec.ScaleTargetRef.Name
		d, ok := deps[target]
		if spec.ScaleTargetRef.Kind != "Deployment" || !ok {
			t.Errorf("HPA %s targets %s %q, no such Deployment", h.Metadata.Name, spec.ScaleTargetRef.Kind, target)
			continue
		}
		hpas[target] = true
		if spec.MinReplicas < 2 || spec.MaxReplicas < spec.MinReplicas {
			t.Errorf("HPA %s: min %d max %d", h.Metadata.Name, spec.MinReplicas, spec.MaxReplicas)
		}
		for _, m := range spec.Metrics {
			if m.Resource.Name == "" {
				continue
			}
			for _, c := range d.Template.Spec.Containers {
				if c.Resources.Requests[m.Resource.Name] == "" {
					t.Errorf("HPA %s scales on %s; container %s requests none", h.Metadata.Name, m.Resource.Name, c.Name)
				}
			}
		}
	}
	for _, name := range []string{"webhook-gateway", "junban-api"} {
		if !hpas[name] {
			t.Errorf("no HPA for %s", name)
		}
	}
	for _, name := range []string{"order-worker", "persist-worker"} {
		if hpas[name] {
			t.Errorf("%s has an HPA besides its KEDA ScaledObject: the two would fight", name)
		}
	}
}

// TestK8sMigrationJob: the schema is migrated by one Job running `junbanctl migrate` with
// what config.Postgres requires and nothing it does not read, under the same pod security as
// the services; the persist-worker does not migrate on its own.
func TestK8sMigrationJob(t *testing.T) {
	all := loadManifests(t)
	jobs := byKind(all, "Job")
	if len(jobs) != 1 {
		t.Fatalf("%d Jobs, want the migration Job alone", len(jobs))
	}
	var spec struct {
		Template podTemplate `yaml:"template"`
	}
	if err := jobs[0].Spec.Decode(&spec); err != nil {
		t.Fatal(err)
	}
	vars, err := config.Vars[config.Postgres]()
	if err != nil {
		t.Fatal(err)
	}
	read := map[string]bool{}
	for _, v := range vars {
		read[v.Name] = true
	}
	ps := spec.Template.Spec
	if ps.SecurityContext.RunAsNonRoot == nil || !*ps.SecurityContext.RunAsNonRoot {
		t.Error("the Job's pod securityContext.runAsNonRoot is not true")
	}
	for _, c := range ps.Containers {
		if !strings.Contains(c.Image, "/junbanctl:") || !slices.Equal(c.Args, []string{"migrate"}) {
			t.Errorf("container %s runs %s %v, want junbanctl migrate", c.Name, c.Image, c.Args)
		}
		env := envOf(t, all, c)
		for name := range env {
			if !read[name] {
				t.Errorf("container %s sets %s, which junbanctl migrate (config.Postgres) does not read", c.Name, name)
			}
		}
		for _, v := range vars {
			if _, ok := env[v.Name]; v.Required && !ok {
				t.Errorf("container %s does not set %s, which junbanctl migrate requires", c.Name, v.Name)
			}
		}
		sc := c.SecurityContext
		if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.ReadOnlyRootFilesystem == nil ||
			!*sc.ReadOnlyRootFilesystem || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" {
			t.Errorf("container %s: not the services' container security context", c.Name)
		}
	}
	pw := find(all, "Deployment", "persist-worker")
	var d deploymentSpec
	if err := pw.Spec.Decode(&d); err != nil {
		t.Fatal(err)
	}
	if got := envOf(t, all, d.Template.Spec.Containers[0])["JUNBAN_MIGRATE"]; got != "false" {
		t.Errorf("persist-worker JUNBAN_MIGRATE=%q: replicas started at once would race on the schema", got)
	}
}

// TestK8sHTTPRoute: the Gateway routes POST /webhooks/ alone, to a port of the gateway's
// Service that reaches the container's public port (never the admin port).
func TestK8sHTTPRoute(t *testing.T) {
	all := loadManifests(t)
	routes := byKind(all, "HTTPRoute")
	if len(routes) != 1 {
		t.Fatalf("%d HTTPRoutes, want 1", len(routes))
	}
	var spec struct {
		ParentRefs []struct {
			Name      string `yaml:"name"`
			Namespace string `yaml:"namespace"`
		} `yaml:"parentRefs"`
		Hostnames []string `yaml:"hostnames"`
		Rules     []struct {
			Matches []struct {
				Path struct {
					Type  string `yaml:"type"`
					Value string `yaml:"value"`
				} `yaml:"path"`
				Method string `yaml:"method"`
			} `yaml:"matches"`
			BackendRefs []struct {
				Name string `yaml:"name"`
				Port int    `yaml:"port"`
			} `yaml:"backendRefs"`
		} `yaml:"rules"`
	}
	if err := routes[0].Spec.Decode(&spec); err != nil {
		t.Fatal(err)
	}
	if len(spec.ParentRefs) != 1 || spec.ParentRefs[0].Namespace != siteValue(t, "gateway-namespace") || spec.ParentRefs[0].Name != siteValue(t, "gateway-name") {
		t.Errorf("parentRefs %+v: not the site's Gateway", spec.ParentRefs)
	}
	if !slices.Equal(spec.Hostnames, []string{siteValue(t, "webhook-host")}) {
		t.Errorf("hostnames %v: not the site's webhook host", spec.Hostnames)
	}
	svc := find(all, "Service", "webhook-gateway")
	if svc == nil {
		t.Fatal("no Service webhook-gateway")
	}
	var svcSpec struct {
		Ports []struct {
			Port       int    `yaml:"port"`
			TargetPort string `yaml:"targetPort"`
		} `yaml:"ports"`
	}
	if err := svc.Spec.Decode(&svcSpec); err != nil {
		t.Fatal(err)
	}
	if len(spec.Rules) == 0 {
		t.Fatal("no rule")
	}
	for _, r := range spec.Rules {
		for _, m := range r.Matches {
			if m.Method != "POST" || m.Path.Type != "PathPrefix" || m.Path.Value != "/webhooks/" {
				t.Errorf("match %+v: want POST on the path prefix /webhooks/ only", m)
			}
		}
		if len(r.Matches) == 0 {
			t.Error("a rule without matches routes every path")
		}
		for _, b := range r.BackendRefs {
			target := ""
			for _, p := range svcSpec.Ports {
				if p.Port == b.Port {
					target = p.TargetPort
				}
			}
			if b.Name != "webhook-gateway" || target != "http" {
				t.Errorf("backend %s:%d reaches container port %q, want the gateway's public port http", b.Name, b.Port, target)
			}
		}
	}
}
