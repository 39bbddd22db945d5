package deploy_test

import (
	"bufio"
	"bytes"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"go.yaml.in/yaml/v3"
)

var update = flag.Bool("update", false, "rewrite deploy/k8s/base/prometheus-rule.yaml from deploy/prometheus/junban-rules.yaml")

type (
	ruleFile struct {
		Groups []ruleGroup `yaml:"groups"`
	}
	ruleGroup struct {
		Name  string `yaml:"name"`
		Rules []rule `yaml:"rules"`
	}
	rule struct {
		Alert       string            `yaml:"alert,omitempty"`
		Record      string            `yaml:"record,omitempty"`
		Expr        string            `yaml:"expr"`
		For         string            `yaml:"for,omitempty"`
		Labels      map[string]string `yaml:"labels,omitempty"`
		Annotations map[string]string `yaml:"annotations,omitempty"`
	}
)

func promDir(t *testing.T) string { return filepath.Join(repoRoot(t), "deploy", "prometheus") }

func readRules(t *testing.T) ruleFile {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(promDir(t), "junban-rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var rf ruleFile
	if err := yaml.Unmarshal(raw, &rf); err != nil {
		t.Fatal(err)
	}
	if len(rf.Groups) == 0 {
		t.Fatal("no rule group")
	}
	return rf
}

func alertsOf(rf ruleFile) []rule {
	var out []rule
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				out = append(out, r)
			}
		}
	}
	return out
}

// mdAnchor is the anchor a Markdown heading gets on the repository's host (as docs'
// link check computes it): lower case, letters, digits, '-' and '_' kept, spaces as '-'.
func mdAnchor(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

// mdAnchors lists the anchors of a Markdown file's headings (outside code blocks).
func mdAnchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	anchors := map[string]bool{}
	fence := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "```") {
			fence = !fence
		}
		if !fence && strings.HasPrefix(line, "#") {
			anchors[mdAnchor(strings.TrimSpace(strings.TrimLeft(line, "#")))] = true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return anchors
}

// runbookProblems checks each alert's severity, summary and runbook_url: a path under docs/
// with an anchor that a heading of that file makes.
func runbookProblems(t *testing.T, alerts []rule) []string {
	t.Helper()
	var problems []string
	for _, a := range alerts {
		switch a.Labels["severity"] {
		case "page", "warn", "ticket":
		default:
			problems = append(problems, a.Alert+": severity "+a.Labels["severity"]+" is none of page, warn, ticket")
		}
		if a.Annotations["summary"] == "" {
			problems = append(problems, a.Alert+": no summary")
		}
		u := a.Annotations["runbook_url"]
		path, frag, ok := strings.Cut(u, "#")
		if !ok || !strings.HasPrefix(path, "docs/") || !strings.HasSuffix(path, ".md") || frag == "" {
			problems = append(problems, a.Alert+": runbook_url "+u+" is not docs/<file>.md#<anchor>")
			continue
		}
		file := filepath.Join(repoRoot(t), filepath.FromSlash(path))
		if _, err := os.Stat(file); err != nil {
			problems = append(problems, a.Alert+": runbook_url "+u+": "+err.Error())
			continue
		}
		if !mdAnchors(t, file)[frag] {
			problems = append(problems, a.Alert+": runbook_url "+u+": no heading of "+path+" has that anchor")
		}
	}
	return problems
}

// TestPrometheusRunbookURLs: every alert links to a heading that exists in docs/.
func TestPrometheusRunbookURLs(t *testing.T) {
	alerts := alertsOf(readRules(t))
	if len(alerts) < 40 {
		t.Fatalf("%d alerts: the rules file lost some", len(alerts))
	}
	for _, p := range runbookProblems(t, alerts) {
		t.Error(p)
	}
	// The check itself: a misspelt anchor and a missing file are reported.
	bad := []rule{
		{Alert: "A", Labels: map[string]string{"severity": "page"}, Annotations: map[string]string{"summary": "s", "runbook_url": "docs/runbooks/dead-letters.md#dead-letter-queue"}},
		{Alert: "B", Labels: map[string]string{"severity": "page"}, Annotations: map[string]string{"summary": "s", "runbook_url": "docs/runbooks/nowhere.md#x"}},
	}
	if got := runbookProblems(t, bad); len(got) != 2 {
		t.Errorf("the check reports %q for a misspelt anchor and a missing file", got)
	}
}

// ruleMetricRef finds the junban metric names an expression reads (recording rules' names, with
// a colon, excluded).
var ruleMetricRef = regexp.MustCompile(`\bjunban_[a-z0-9_]+`)

// TestPrometheusRulesReadCodeMetrics: every series a rule reads is a metric the Go code
// defines (a histogram's _bucket, _count and _sum included).
func TestPrometheusRulesReadCodeMetrics(t *testing.T) {
	code := codeMetrics(t)
	for _, g := range readRules(t).Groups {
		for _, r := range g.Rules {
			for _, name := range ruleMetricRef.FindAllString(r.Expr, -1) {
				if _, ok := code[name]; ok {
					continue
				}
				found := false
				for _, suf := range []string{"_bucket", "_count", "_sum"} {
					if k, ok := code[strings.TrimSuffix(name, suf)]; ok && strings.HasSuffix(name, suf) && k == histogram {
						found = true
					}
				}
				if !found {
					t.Errorf("rule %s%s reads %s, which no junban code defines", r.Alert, r.Record, name)
				}
			}
		}
	}
}

// TestPrometheusRulesTestsCoverEveryAlert: junban-rules_test.yaml fires every alert once and
// evaluates it once where it must stay silent.
func TestPrometheusRulesTestsCoverEveryAlert(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(promDir(t), "junban-rules_test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var tf struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string `yaml:"alertname"`
				ExpAlerts []any  `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	if err := yaml.Unmarshal(raw, &tf); err != nil {
		t.Fatal(err)
	}
	fires, silent := map[string]bool{}, map[string]bool{}
	for _, tc := range tf.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				silent[a.Alertname] = true
			}
		}
	}
	for _, a := range alertsOf(readRules(t)) {
		if !fires[a.Alert] {
			t.Errorf("%s: no test where it fires", a.Alert)
		}
		if !silent[a.Alert] {
			t.Errorf("%s: no test where it stays silent", a.Alert)
		}
	}
}

// TestPrometheusRuleInBaseMatchesRulesFile: the kustomize base's PrometheusRule holds the
// rules file's groups, unchanged. go test ./deploy/ -run TestPrometheusRuleInBase -update
// rewrites it.
func TestPrometheusRuleInBaseMatchesRulesFile(t *testing.T) {
	rf := readRules(t)
	path := filepath.Join(k8sDir(t), "base", "prometheus-rule.yaml")
	if *update {
		var b bytes.Buffer
		b.WriteString("# Written by `go test ./deploy/ -run TestPrometheusRuleInBase -update` from\n" +
			"# deploy/prometheus/junban-rules.yaml, which says what the rules are: edit that file.\n")
		enc := yaml.NewEncoder(&b)
		enc.SetIndent(2)
		doc := map[string]any{
			"apiVersion": "monitoring.coreos.com/v1",
			"kind":       "PrometheusRule",
			"metadata": map[string]any{
				"name": "junban", "namespace": "junban",
				"labels": map[string]string{"app.kubernetes.io/part-of": "junban"},
			},
			"spec": rf,
		}
		if err := enc.Encode(doc); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var pr struct {
		Kind string   `yaml:"kind"`
		Spec ruleFile `yaml:"spec"`
	}
	if err := yaml.Unmarshal(raw, &pr); err != nil {
		t.Fatal(err)
	}
	if pr.Kind != "PrometheusRule" || !reflect.DeepEqual(pr.Spec, rf) {
		t.Errorf("%s does not hold the groups of deploy/prometheus/junban-rules.yaml: run go test ./deploy/ -run TestPrometheusRuleInBase -update", path)
	}
}

// TestPrometheusRulesWithPromtool: promtool checks the rules and runs their unit tests
// (every alert fires on its bad series and stays silent on its good ones).
func TestPrometheusRulesWithPromtool(t *testing.T) {
	if testing.Short() {
		t.Skip("runs promtool (about 20 s of CPU); not in -short")
	}
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not found: scripts/promtool.sh installs it (Debian's package prometheus); make test-rules runs it")
	}
	for _, args := range [][]string{{"check", "rules", "junban-rules.yaml"}, {"test", "rules", "junban-rules_test.yaml"}} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = promDir(t)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}
