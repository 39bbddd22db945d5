// Package tools_test checks that the lab stays apart from what runs in production: the
// binaries under cmd/ (the services and junbanctl) link none of tools/ nor of the test
// fixtures under internal/testenv, and the services' go.mod requires none of the lab's
// modules.
package tools_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/junban/junban/internal/testenv"
)

const module = "github.com/junban/junban"

// Every binary under cmd/ (the four services and junbanctl, and any added later) links no
// package under tools/ or internal/testenv (the fixtures the services' tests share with the
// lab: loadgen, resultgen, fleet, outboundcheck): `go list -deps`, the binary's own imports
// and theirs, tests apart. A failure names the package and who imports it. (Fails with
// junbanctl importing internal/testenv/loadgen; tried.)
func TestBinariesLinkNoTools(t *testing.T) {
	root := testenv.RepoRoot()
	dirs, err := os.ReadDir(filepath.Join(root, "cmd"))
	if err != nil {
		t.Fatal(err)
	}
	var bins []string
	for _, d := range dirs {
		if d.IsDir() {
			bins = append(bins, d.Name())
		}
	}
	for _, want := range []string{"order-worker", "persist-worker", "webhook-gateway", "junban-api", "junbanctl"} {
		if !slices.Contains(bins, want) {
			t.Fatalf("cmd/ has %v, not %s", bins, want)
		}
	}
	for _, bin := range bins {
		deps := listDeps(t, root, "./cmd/"+bin)
		if _, ok := deps[module+"/internal/platform/config"]; !ok {
			t.Fatalf("go list -deps ./cmd/%s: no internal/platform/config among %d packages: the listing is not the binary's", bin, len(deps))
		}
		for pkg := range deps {
			if under(pkg, module+"/tools") || under(pkg, module+"/internal/testenv") {
				t.Errorf("cmd/%s links %s (imported by %s): tooling and test fixtures belong to junbanlab and the tests, not to a binary that runs in production",
					bin, pkg, strings.Join(importersOf(deps, pkg), ", "))
			}
		}
	}
}

// under says whether pkg is dir or a package below it.
func under(pkg, dir string) bool { return pkg == dir || strings.HasPrefix(pkg, dir+"/") }

// labOnly are the modules only the lab, the console's browser test or the benchmarks use,
// and the lab's module itself: the services' go.mod requires none of them (tools/go.mod
// does). The collector's pdata is not here: internal/testenv's OTLP receiver, which the
// services' own trace tests use, decodes with it.
var labOnly = []string{
	"github.com/chromedp/chromedp",
	"github.com/chromedp/cdproto",
	"github.com/go-redsync/redsync",
	module + "/tools",
}

// The services' go.mod requires none of labOnly, directly or as // indirect. (Fails with
// the root go.mod of before the lab's module, which required chromedp, cdproto and
// redsync; tried.)
func TestServicesModuleRequiresNoLab(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	reqs, err := requires(string(raw))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := reqs["github.com/redis/go-redis/v9"]; !ok {
		t.Fatalf("go.mod: no github.com/redis/go-redis/v9 among %d requirements: the parse is not go.mod's", len(reqs))
	}
	for mod := range reqs {
		for _, lab := range labOnly {
			if under(mod, lab) {
				t.Errorf("go.mod requires %s, which only the lab uses: it belongs in tools/go.mod", mod)
			}
		}
	}
}

// requires are the module paths of a go.mod's require directives, in blocks or on one line.
func requires(gomod string) (map[string]bool, error) {
	reqs := map[string]bool{}
	inBlock := false
	for i, line := range strings.Split(gomod, "\n") {
		if c := strings.Index(line, "//"); c >= 0 {
			line = line[:c]
		}
		f := strings.Fields(line)
		switch {
		case len(f) == 0:
		case inBlock && f[0] == ")":
			inBlock = false
		case inBlock:
			if len(f) != 2 {
				return nil, fmt.Errorf("go.mod:%d: a requirement of %d fields: %q", i+1, len(f), line)
			}
			reqs[f[0]] = true
		case f[0] == "require" && len(f) == 2 && f[1] == "(":
			inBlock = true
		case f[0] == "require":
			if len(f) != 3 {
				return nil, fmt.Errorf("go.mod:%d: a require of %d fields: %q", i+1, len(f), line)
			}
			reqs[f[1]] = true
		}
	}
	if inBlock {
		return nil, errors.New("go.mod: a require block with no closing parenthesis")
	}
	return reqs, nil
}

// listDeps is `go list -deps pkg`: every package the binary links, with its imports.
func listDeps(t *testing.T, root, pkg string) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, pkg)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("go list -deps %s: %v\n%s", pkg, err, stderr)
	}
	deps := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		deps[f[0]] = f[1:]
	}
	return deps
}

// importersOf are the packages of deps that import pkg.
func importersOf(deps map[string][]string, pkg string) []string {
	var by []string
	for p, imports := range deps {
		if slices.Contains(imports, pkg) {
			by = append(by, strings.TrimPrefix(p, module+"/"))
		}
	}
	slices.Sort(by)
	return by
}
