package config_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/junban/junban/internal/platform/config"
	"github.com/junban/junban/internal/testenv"
)

// A .junban/stack.env in the working directory, or in one above it, is not read unless
// JUNBAN_STACK_ENV names it: a stray file must not change a deployed binary's settings.
// The file here sets a log level no binary accepts; every binary, started below it
// without JUNBAN_STACK_ENV, ignores it and accepts its configuration, and with
// JUNBAN_STACK_ENV naming the file refuses the level. (Fails with LoadStackEnv looking
// the file up from the working directory again, as it once did; tried.)
func TestBinariesReadNoStackFileUnlessNamed(t *testing.T) {
	root := t.TempDir()
	file := filepath.Join(root, config.StackEnvFile)
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte("JUNBAN_LOG_LEVEL=loud\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cwd := filepath.Join(root, "deep", "er")
	if err := os.MkdirAll(cwd, 0o755); err != nil {
		t.Fatal(err)
	}
	base := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"),
		"REDIS_URL=redis://127.0.0.1:1/0", "DATABASE_URL=postgres://127.0.0.1:1/none", "AWS_REGION=us-east-1",
		"JUNBAN_WEBHOOK_PROVIDERS=acme:standard:whsec_" + strings.Repeat("QUJD", 8)}
	for _, bin := range binaries {
		path := testenv.Binary(t, bin)
		for _, named := range []bool{false, true} {
			cmd := exec.Command(path, "--check-config")
			cmd.Dir = cwd
			cmd.Env = base
			if named {
				cmd.Env = append(cmd.Env, config.StackEnvVar+"="+file)
			}
			out, err := cmd.CombinedOutput()
			switch {
			case !named && (err != nil || !strings.Contains(string(out), "configuration ok")):
				t.Errorf("%s in a directory below %s, JUNBAN_STACK_ENV unset: %v\n%s", bin, file, err, out)
			case named && (err == nil || !strings.Contains(string(out), "JUNBAN_LOG_LEVEL")):
				t.Errorf("%s with JUNBAN_STACK_ENV=%s: %v, want JUNBAN_LOG_LEVEL refused\n%s", bin, file, err, out)
			}
		}
	}
}
