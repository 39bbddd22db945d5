package deploy_test

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// metricKind tells which series suffixes a metric family has.
type metricKind int

const (
	counterOrGauge metricKind = iota
	histogram
	summary
)

// codeMetrics finds every Prometheus metric that junban's Go code (internal/ and cmd/, tests
// excluded) defines: each prometheus.{Counter,Gauge,Histogram,Summary}Opts literal, with its
// Namespace, Subsystem and Name resolved from string literals, constants, or — when the
// name is a function's parameter, as in internal/queue's helpers — from the string
// arguments of every call of that function. It returns the full names (namespace_subsystem_name).
func codeMetrics(t *testing.T) map[string]metricKind {
	t.Helper()
	root := repoRoot(t)
	metrics := map[string]metricKind{}
	for _, top := range []string{"internal", "cmd"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(p string, d os.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return err
			}
			for name, kind := range packageMetrics(t, p) {
				metrics[name] = kind
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(metrics) == 0 {
		t.Fatal("no metric found in the code: the extractor is broken")
	}
	return metrics
}

// pkgIndex is what the resolver needs of one package.
type pkgIndex struct {
	files  []*ast.File
	consts map[string]string // package-level string constants
}

func packageMetrics(t *testing.T, dir string) map[string]metricKind {
	fset := token.NewFileSet()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	idx := &pkgIndex{consts: map[string]string{}}
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, parser.SkipObjectResolution)
		if err != nil {
			// A file another engineer is still writing: the build tests report it.
			t.Logf("parse %s: %v", filepath.Join(dir, n), err)
			continue
		}
		idx.files = append(idx.files, f)
		for _, decl := range f.Decls {
			if gd, ok := decl.(*ast.GenDecl); ok && gd.Tok == token.CONST {
				addConsts(gd, idx.consts)
			}
		}
	}
	out := map[string]metricKind{}
	for _, f := range idx.files {
		var stack []ast.Node
		ast.Inspect(f, func(n ast.Node) bool {
			if n == nil {
				stack = stack[:len(stack)-1]
				return true
			}
			stack = append(stack, n)
			lit, ok := n.(*ast.CompositeLit)
			if !ok {
				return true
			}
			sel, ok := lit.Type.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "prometheus" {
				return true
			}
			kind := counterOrGauge
			switch sel.Sel.Name {
			case "CounterOpts", "GaugeOpts":
			case "HistogramOpts":
				kind = histogram
			case "SummaryOpts":
				kind = summary
			default:
				return true
			}
			fields := map[string][]string{}
			for _, el := range lit.Elts {
				kv, ok := el.(*ast.KeyValueExpr)
				if !ok {
					continue
				}
				key, ok := kv.Key.(*ast.Ident)
				if !ok {
					continue
				}
				fields[key.Name] = idx.resolve(kv.Value, slices.Clone(stack), 0)
			}
			if len(fields["Name"]) == 0 {
				t.Errorf("%s: a %s whose Name cannot be resolved", fset.Position(lit.Pos()), sel.Sel.Name)
				return true
			}
			for _, ns := range orEmpty(fields["Namespace"]) {
				for _, sub := range orEmpty(fields["Subsystem"]) {
					for _, name := range fields["Name"] {
						full := name
						if sub != "" {
							full = sub + "_" + full
						}
						if ns != "" {
							full = ns + "_" + full
						}
						out[full] = kind
					}
				}
			}
			return true
		})
	}
	return out
}

func orEmpty(v []string) []string {
	if len(v) == 0 {
		return []string{""}
	}
	return v
}

func addConsts(gd *ast.GenDecl, into map[string]string) {
	for _, spec := range gd.Specs {
		vs, ok := spec.(*ast.ValueSpec)
		if !ok {
			continue
		}
		for i, name := range vs.Names {
			if i < len(vs.Values) {
				if s, ok := stringLit(vs.Values[i]); ok {
					into[name.Name] = s
				}
			}
		}
	}
}

func stringLit(e ast.Expr) (string, bool) {
	bl, ok := e.(*ast.BasicLit)
	if !ok || bl.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(bl.Value)
	return s, err == nil
}

// resolve returns the string values e may have; stack holds e's enclosing nodes.
func (idx *pkgIndex) resolve(e ast.Expr, stack []ast.Node, depth int) []string {
	if depth > 4 {
		return nil
	}
	if s, ok := stringLit(e); ok {
		return []string{s}
	}
	id, ok := e.(*ast.Ident)
	if !ok {
		return nil
	}
	// Innermost first: a constant of an enclosing function, or one of its parameters.
	for i := len(stack) - 1; i >= 0; i-- {
		var ftype *ast.FuncType
		var body *ast.BlockStmt
		switch fn := stack[i].(type) {
		case *ast.FuncDecl:
			ftype, body = fn.Type, fn.Body
		case *ast.FuncLit:
			ftype, body = fn.Type, fn.Body
		default:
			continue
		}
		local := map[string]string{}
		if body != nil {
			for _, st := range body.List {
				if ds, ok := st.(*ast.DeclStmt); ok {
					if gd, ok := ds.Decl.(*ast.GenDecl); ok && gd.Tok == token.CONST {
						addConsts(gd, local)
					}
				}
			}
		}
		if v, ok := local[id.Name]; ok {
			return []string{v}
		}
		pos := 0
		for _, field := range ftype.Params.List {
			for _, n := range field.Names {
				if n.Name == id.Name {
					return idx.callArgs(funcName(stack, i), pos, depth)
				}
				pos++
			}
			if len(field.Names) == 0 {
				pos++
			}
		}
	}
	if v, ok := idx.consts[id.Name]; ok {
		return []string{v}
	}
	return nil
}

// funcName names the function at stack[i]: a declared function's name, or the variable a
// function literal is assigned to.
func funcName(stack []ast.Node, i int) string {
	switch fn := stack[i].(type) {
	case *ast.FuncDecl:
		return fn.Name.Name
	case *ast.FuncLit:
		if i > 0 {
			if as, ok := stack[i-1].(*ast.AssignStmt); ok && len(as.Lhs) == len(as.Rhs) {
				for j, r := range as.Rhs {
					if r == fn {
						if id, ok := as.Lhs[j].(*ast.Ident); ok {
							return id.Name
						}
					}
				}
			}
		}
	}
	return ""
}

// callArgs resolves argument pos of every call of the function named name in the package.
func (idx *pkgIndex) callArgs(name string, pos, depth int) []string {
	if name == "" {
		return nil
	}
	var out []string
	for _, f := range idx.files {
		var stack []ast.Node
		ast.Inspect(f, func(n ast.Node) bool {
			if n == nil {
				stack = stack[:len(stack)-1]
				return true
			}
			stack = append(stack, n)
			call, ok := n.(*ast.CallExpr)
			if !ok || pos >= len(call.Args) {
				return true
			}
			var called string
			switch fn := call.Fun.(type) {
			case *ast.Ident:
				called = fn.Name
			case *ast.IndexExpr: // a generic function with explicit type arguments
				if id, ok := fn.X.(*ast.Ident); ok {
					called = id.Name
				}
			}
			if called == name {
				out = append(out, idx.resolve(call.Args[pos], slices.Clone(stack), depth+1)...)
			}
			return true
		})
	}
	return out
}

// dashboard is the part of a Grafana dashboard the test reads; rows may nest panels.
type dashboard struct {
	UID           string  `json:"uid"`
	Title         string  `json:"title"`
	SchemaVersion int     `json:"schemaVersion"`
	Panels        []panel `json:"panels"`
	Templating    struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID      int     `json:"id"`
	Type    string  `json:"type"`
	Title   string  `json:"title"`
	Panels  []panel `json:"panels"`
	Targets []struct {
		Expr  string `json:"expr"`
		RefID string `json:"refId"`
	} `json:"targets"`
	GridPos *struct {
		H, W, X, Y int
	} `json:"gridPos"`
}

var metricRef = regexp.MustCompile(`\bjunban_[a-zA-Z0-9_]+`)

// TestDashboardMetricsExist: every junban_* series the dashboard's expressions (and its
// variables' queries) name is a metric the code defines, so a renamed or removed metric
// breaks this test instead of leaving an empty panel.
func TestDashboardMetricsExist(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(repoRoot(t), "deploy", "grafana", "junban-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	code := codeMetrics(t)
	problems, used := dashboardProblems(raw, code)
	for _, p := range problems {
		t.Error(p)
	}
	if len(used) < 20 {
		t.Errorf("the dashboard uses only %d junban series", len(used))
	}

	for _, name := range uncharted(code, used) {
		t.Errorf("metric %s is neither on the dashboard nor in leftOffDashboard (with the reason)", name)
	}
	for name := range leftOffDashboard {
		if _, ok := code[name]; !ok {
			t.Errorf("leftOffDashboard names %s, which the code does not define", name)
		}
	}
}

// leftOffDashboard are the metric families of the code the dashboard does not chart, each
// with the reason.
var leftOffDashboard = map[string]string{
	"junban_debug_sqs_calls_total":        "diagnosis only: exists with JUNBAN_PPROF=true (docs/operations.md)",
	"junban_debug_redis_roundtrips_total": "diagnosis only: exists with JUNBAN_PPROF=true (docs/operations.md)",
}

// uncharted lists the junban metric families of the code that no dashboard series reads and
// leftOffDashboard does not excuse.
func uncharted(code map[string]metricKind, used map[string]bool) []string {
	var missing []string
	for name, kind := range code {
		if !strings.HasPrefix(name, "junban_") || leftOffDashboard[name] != "" {
			continue
		}
		charted := used[name]
		if kind == histogram {
			charted = charted || used[name+"_bucket"] || used[name+"_count"] || used[name+"_sum"]
		}
		if !charted {
			missing = append(missing, name)
		}
	}
	slices.Sort(missing)
	return missing
}

// TestDashboardCoverageCheckFindsUnchartedMetric: a family charted by no panel is reported,
// and a name that only begins like another's does not count as charting it.
func TestDashboardCoverageCheckFindsUnchartedMetric(t *testing.T) {
	code := map[string]metricKind{
		"junban_outbox_parked": counterOrGauge, "junban_outbox_parked_total": counterOrGauge,
		"junban_persist_lag_seconds": histogram, "junban_debug_sqs_calls_total": counterOrGauge,
	}
	used := map[string]bool{"junban_outbox_parked_total": true, "junban_persist_lag_seconds_bucket": true}
	if got := uncharted(code, used); !slices.Equal(got, []string{"junban_outbox_parked"}) {
		t.Errorf("uncharted = %v, want [junban_outbox_parked]", got)
	}
}

// TestDashboardCheckFailsOnUnknownMetric proves the check can fail.
func TestDashboardCheckFailsOnUnknownMetric(t *testing.T) {
	code := map[string]metricKind{"junban_queue_received_total": counterOrGauge, "junban_persist_lag_seconds": histogram}
	good := `{"uid":"u","title":"t","schemaVersion":39,"panels":[{"id":1,"type":"row","title":"r","gridPos":{"h":1,"w":24,"x":0,"y":0},"panels":[]},
	  {"id":2,"type":"timeseries","title":"p","gridPos":{"h":8,"w":8,"x":0,"y":1},"targets":[
	    {"refId":"A","expr":"sum(rate(junban_queue_received_total[5m]))"},
	    {"refId":"B","expr":"histogram_quantile(0.99, sum by (le) (rate(junban_persist_lag_seconds_bucket[5m])))"}]}]}`
	if problems, _ := dashboardProblems([]byte(good), code); len(problems) != 0 {
		t.Fatalf("a correct dashboard is refused: %v", problems)
	}
	for _, bad := range []string{
		strings.Replace(good, "junban_queue_received_total", "junban_queue_recieved_total", 1), //nolint:misspell // a metric name misspelt on purpose
		strings.Replace(good, "junban_persist_lag_seconds_bucket", "junban_persist_lag_bucket", 1),
		strings.Replace(good, "junban_queue_received_total[5m]", "junban_queue_received_total_bucket[5m]", 1), // a counter has no buckets
		strings.Replace(good, `"id":2`, `"id":1`, 1),
	} {
		if problems, _ := dashboardProblems([]byte(bad), code); len(problems) == 0 {
			t.Errorf("not refused: %s", bad)
		}
	}
}

// dashboardProblems checks a dashboard against the code's metrics; it returns what is
// wrong and the junban_* series the dashboard uses.
func dashboardProblems(raw []byte, code map[string]metricKind) (problems []string, used map[string]bool) {
	used = map[string]bool{}
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		return []string{"dashboard: " + err.Error()}, used
	}
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if d.UID == "" || d.Title == "" || d.SchemaVersion == 0 {
		add("dashboard without uid, title or schemaVersion: %q %q %d", d.UID, d.Title, d.SchemaVersion)
	}
	series := map[string]bool{}
	for name, kind := range code {
		series[name] = true
		switch kind {
		case histogram:
			series[name+"_bucket"], series[name+"_sum"], series[name+"_count"] = true, true, true
		case summary:
			series[name+"_sum"], series[name+"_count"] = true, true
		}
	}
	ids := map[int]string{}
	exprs := 0
	check := func(where, expr string) {
		for _, ref := range metricRef.FindAllString(expr, -1) {
			used[ref] = true
			if !series[ref] {
				add("%s: %s is not a metric the code defines (expr %q)", where, ref, expr)
			}
		}
	}
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			if prev, dup := ids[p.ID]; dup || p.ID == 0 {
				add("panel %q: id %d missing or used by %q too", p.Title, p.ID, prev)
			}
			ids[p.ID] = p.Title
			if p.GridPos == nil {
				add("panel %q: no gridPos", p.Title)
			}
			if p.Type != "row" && p.Type != "text" && len(p.Targets) == 0 {
				add("panel %q: no query", p.Title)
			}
			for _, tg := range p.Targets {
				if strings.TrimSpace(tg.Expr) == "" {
					add("panel %q: target %s has no expr", p.Title, tg.RefID)
					continue
				}
				if !metricRef.MatchString(tg.Expr) {
					add("panel %q: expr %q names no junban metric", p.Title, tg.Expr)
				}
				exprs++
				check("panel "+strconv.Quote(p.Title), tg.Expr)
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	// No two panels overlap on the 24-column grid.
	type box struct {
		title      string
		h, w, x, y int
	}
	var boxes []box
	var collect func([]panel)
	collect = func(ps []panel) {
		for _, p := range ps {
			if g := p.GridPos; g != nil {
				if g.W < 1 || g.H < 1 || g.X < 0 || g.X+g.W > 24 {
					add("panel %q: gridPos %+v outside the 24-column grid", p.Title, *g)
				}
				for _, b := range boxes {
					if g.X < b.x+b.w && b.x < g.X+g.W && g.Y < b.y+b.h && b.y < g.Y+g.H {
						add("panels %q and %q overlap", b.title, p.Title)
					}
				}
				boxes = append(boxes, box{p.Title, g.H, g.W, g.X, g.Y})
			}
			collect(p.Panels)
		}
	}
	collect(d.Panels)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, _ := json.Marshal(v.Query)
		check("variable "+v.Name, string(q))
	}
	if exprs == 0 {
		add("no query in the dashboard")
	}
	return problems, used
}

// TestDashboardExtractorFindsKnownMetrics guards the extractor itself: metrics defined in
// each of the ways the code uses (literal names, constants, helper parameters) are found.
func TestDashboardExtractorFindsKnownMetrics(t *testing.T) {
	code := codeMetrics(t)
	for name, kind := range map[string]metricKind{
		"junban_order_events_total":                 counterOrGauge, // literals
		"junban_lockhandoff_turns_taken_total":      counterOrGauge, // function-local constants
		"junban_queue_received_total":               counterOrGauge, // closure -> helper parameter
		"junban_queue_published_total":              counterOrGauge, // helper parameter
		"junban_queue_handler_duration_seconds":     histogram,      // package constants
		"junban_persist_apply_duration_seconds":     histogram,
		"junban_lockhandoff_queue_depth_at_enqueue": histogram,
	} {
		got, ok := code[name]
		if !ok {
			t.Errorf("extractor misses %s", name)
		} else if got != kind {
			t.Errorf("%s: kind %d, want %d", name, got, kind)
		}
	}
	t.Logf("%d metrics in the code", len(code))
}
