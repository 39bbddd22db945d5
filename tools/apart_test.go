// Package tools_test checks that the tree under tools/ stays apart from what runs in
// production: the binaries under cmd/ (the services and junbanctl) link none of it.
package tools_test

import (
	"errors"
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
// package under tools/: `go list -deps`, the binary's own imports and theirs, tests
// apart. A failure names the tools/ package and who imports it. (Fails with junbanctl
// importing tools/loadgen again; tried.)
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
		if _, ok := deps[module+"/internal/config"]; !ok {
			t.Fatalf("go list -deps ./cmd/%s: no internal/config among %d packages: the listing is not the binary's", bin, len(deps))
		}
		for pkg := range deps {
			if pkg == module+"/tools" || strings.HasPrefix(pkg, module+"/tools/") {
				t.Errorf("cmd/%s links %s (imported by %s): tooling belongs to junbanlab, not to a binary that runs in production",
					bin, pkg, strings.Join(importersOf(deps, pkg), ", "))
			}
		}
	}
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
