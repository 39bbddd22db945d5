package testenv

import (
	"strings"
	"testing"
)

// CheckServiceCommandLine checks the command line every service binary shares
// (config.Preflight): --help and -h print the usage, with its flags and where its settings
// are, and exit 0; --env-vars lists the variables; an unknown flag or an argument exits 2
// with the usage on standard error (before, both were ignored and the binary started);
// --check-config without settings fails, exit 1.
func CheckServiceCommandLine(t *testing.T, name string) {
	t.Helper()
	bin := Binary(t, name)
	env := []string{"HOME=" + t.TempDir(), "JUNBAN_STACK_ENV=/nonexistent/stack.env"}
	usage := "usage: " + name
	cases := []struct {
		args           []string
		code           int
		stdout, stderr []string
	}{
		{[]string{"--help"}, 0, []string{usage, "--env-vars", "--check-config", "environment variables", "docs/operations.md"}, nil},
		{[]string{"-h"}, 0, []string{usage, "--env-vars"}, nil},
		{[]string{"-help"}, 0, []string{usage}, nil},
		{[]string{"--env-vars"}, 0, []string{"JUNBAN_LOG_LEVEL\tdefault=info"}, nil},
		{[]string{"--bogus"}, 2, nil, []string{"flag provided but not defined: -bogus", usage, "--env-vars"}},
		{[]string{"serve"}, 2, nil, []string{"takes no arguments", usage}},
		{[]string{"--check-config"}, 1, nil, []string{"invalid configuration"}},
	}
	for _, tc := range cases {
		code, stdout, stderr := Exec(t, bin, env, tc.args...)
		ok := code == tc.code
		for _, s := range tc.stdout {
			ok = ok && strings.Contains(stdout, s)
		}
		for _, s := range tc.stderr {
			ok = ok && strings.Contains(stderr, s)
		}
		if !ok {
			t.Errorf("%s %q: exit %d, want %d with %q on stdout, %q on stderr\nstdout:\n%s\nstderr:\n%s",
				name, tc.args, code, tc.code, tc.stdout, tc.stderr, stdout, stderr)
		}
	}
}
