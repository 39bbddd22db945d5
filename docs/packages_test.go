package docs_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// packageDirs lists the directories under cmd/, internal/ and tools/ (when there is one)
// that hold Go files, as slash paths from the repository's root.
func packageDirs(t *testing.T, root string) []string {
	t.Helper()
	var dirs []string
	for _, top := range []string{"cmd", "internal", "tools"} {
		base := filepath.Join(root, top)
		if _, err := os.Stat(base); os.IsNotExist(err) && top == "tools" {
			continue
		}
		err := filepath.WalkDir(base, func(p string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() {
				return nil
			}
			if d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			goFiles, err := filepath.Glob(filepath.Join(p, "*.go"))
			if err != nil {
				return err
			}
			if len(goFiles) > 0 {
				rel, err := filepath.Rel(root, p)
				if err != nil {
					return err
				}
				dirs = append(dirs, filepath.ToSlash(rel))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return dirs
}

// repoPath is a backticked path under cmd/, internal/ or tools/ in a doc, or tools itself
// (a package of its own: tests only).
var repoPath = regexp.MustCompile("`((?:cmd|internal|tools)(?:/[A-Za-z0-9_./-]*[A-Za-z0-9_])?)`")

// docs/architecture.md names every package under cmd/, internal/ and tools/ (in
// backticks, as `internal/order`), and every such path it names exists. A package
// added, moved or removed without its line fails here. (Fails with the line of
// internal/redis/keyscan removed, and with a line for internal/nothing added; tried.)
func TestArchitectureNamesEveryPackage(t *testing.T) {
	root := repoRoot(t)
	raw, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	named := map[string]bool{}
	for _, m := range repoPath.FindAllStringSubmatch(string(raw), -1) {
		named[m[1]] = true
	}
	dirs := packageDirs(t, root)
	if len(dirs) == 0 {
		t.Fatal("no package found under cmd/ or internal/")
	}
	for _, d := range dirs {
		if !named[d] {
			t.Errorf("docs/architecture.md does not name the package %s: add its line under \"Packages\"", d)
		}
	}
	for p := range named {
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(p))); err != nil {
			t.Errorf("docs/architecture.md names %s, which does not exist", p)
		}
	}
}
