package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// workerBinaries are the binaries a chaos run starts.
var workerBinaries = []string{"order-worker", "persist-worker"}

// Binaries returns a directory holding the worker binaries: dir itself when given;
// otherwise a fresh `go build` of the repository found upwards from the working
// directory into buildDir; otherwise the directory of the running executable, when the
// workers sit next to it (a `make build` bin/ outside the repository). It says which.
func Binaries(ctx context.Context, dir, buildDir string) (string, string, error) {
	if dir != "" {
		if err := hasWorkers(dir); err != nil {
			return "", "", err
		}
		return dir, "given", nil
	}
	if root := repoRoot(); root != "" {
		if _, err := exec.LookPath("go"); err == nil {
			if err := os.MkdirAll(buildDir, 0o755); err != nil {
				return "", "", err
			}
			args := []string{"build", "-o", buildDir + string(os.PathSeparator)}
			for _, b := range workerBinaries {
				args = append(args, "./cmd/"+b)
			}
			cmd := exec.CommandContext(ctx, "go", args...)
			cmd.Dir = root
			if out, err := cmd.CombinedOutput(); err != nil {
				return "", "", fmt.Errorf("chaos: go build in %s: %w\n%s", root, err, out)
			}
			return buildDir, "built from " + root, nil
		}
	}
	if exe, err := os.Executable(); err == nil {
		d := filepath.Dir(exe)
		if hasWorkers(d) == nil {
			return d, "next to " + filepath.Base(exe), nil
		}
	}
	return "", "", errors.New("chaos: no worker binaries: run inside the repository (with go on PATH), put them next to junbanlab, or pass --bin DIR")
}

func hasWorkers(dir string) error {
	for _, b := range workerBinaries {
		st, err := os.Stat(filepath.Join(dir, b))
		if err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			return fmt.Errorf("chaos: %s has no executable %s", dir, b)
		}
	}
	return nil
}

// repoRoot is the directory of junban's go.mod, found upwards from the working directory.
func repoRoot() string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.Contains(string(b), "module github.com/junban/junban\n") {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}
