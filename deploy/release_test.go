package deploy_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// scripts/release.sh --dry-run: every binary for both platforms with the version in
// its ldflags, the SBOM from the pinned cyclonedx-gomod, the checksums; nothing written.
func TestReleaseScriptDryRun(t *testing.T) {
	out := filepath.Join(t.TempDir(), "dist")
	cmd := exec.Command(filepath.Join(repoRoot(t), "scripts", "release.sh"), "--dry-run", "--out", out)
	cmd.Dir = repoRoot(t)
	cmd.Env = append(os.Environ(), "VERSION=v1.2.3-rc.1")
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("release.sh --dry-run: %v\n%s", err, b)
	}
	plan := string(b)
	dir := out + "/v1.2.3-rc.1/"
	for _, arch := range []string{"amd64", "arm64"} {
		for _, bin := range append([]string{"junbanctl"}, binaries...) {
			var line string
			for l := range strings.Lines(plan) {
				if strings.Contains(l, "-o "+dir+bin+"_linux_"+arch+" ./cmd/"+bin) {
					line = l
				}
			}
			for _, want := range []string{"CGO_ENABLED=0", "GOOS=linux", "GOARCH=" + arch, "go build -trimpath",
				"buildinfo.version=v1.2.3-rc.1", "buildinfo.revision="} {
				if !strings.Contains(line, want) {
					t.Errorf("%s for %s: no build with %q in the plan:\n%s", bin, arch, want, plan)
				}
			}
		}
	}
	for _, want := range []string{"github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod@v1.10.0 mod -json", dir + "sbom.cdx.json", dir + "VERSION", "sha256sum", "SHA256SUMS"} {
		if !strings.Contains(plan, want) {
			t.Errorf("the plan lacks %q:\n%s", want, plan)
		}
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("a dry run wrote %s (%v)", out, err)
	}
}

// Every version of CHANGELOG.md is a tag v<version> of the repository, and every tag of
// that form is a version of CHANGELOG.md. A clone made without tags has nothing to compare
// and says so.
func TestTagsMatchTheChangelog(t *testing.T) {
	root := repoRoot(t)
	b, err := os.ReadFile(filepath.Join(root, "CHANGELOG.md"))
	if err != nil {
		t.Fatal(err)
	}
	versions := map[string]bool{}
	for l := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(l, "## "); ok && v != "Unreleased\n" {
			name, _, _ := strings.Cut(v, " ")
			versions["v"+name] = true
		}
	}
	if len(versions) == 0 {
		t.Fatal("CHANGELOG.md names no released version")
	}
	cmd := exec.Command("git", "tag", "--list", "v[0-9]*")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git tag: %v", err)
	}
	tags := strings.Fields(string(out))
	if len(tags) == 0 {
		t.Logf("this clone has no tags; the CHANGELOG's %d versions are not compared", len(versions))
		return
	}
	seen := map[string]bool{}
	for _, tag := range tags {
		seen[tag] = true
		if !versions[tag] {
			t.Errorf("tag %s is no version of CHANGELOG.md", tag)
		}
	}
	for v := range versions {
		if !seen[v] {
			t.Errorf("CHANGELOG.md's version %s has no tag", v)
		}
	}
}
