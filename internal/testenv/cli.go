package testenv

import (
	"bytes"
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// CheckServiceCommandLine checks the command line every service binary shares
// (config.Preflight): --help and -h print the usage, with its flags and where its settings
// are, and exit 0; --env-vars lists the variables; an unknown flag or an argument exits 2
// with the usage on standard error (before, both were ignored and the binary started);
// --check-config without settings fails, exit 1; --version prints the build; healthcheck
// without settings fails, exit 1, and with a wrong flag exits 2.
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
		{[]string{"--help"}, 0, []string{usage, "--env-vars", "--check-config", "--version", name + " healthcheck", "environment variables", "docs/operations.md"}, nil},
		{[]string{"--version"}, 0, []string{name + " ", "(revision ", ", go1."}, nil},
		{[]string{"healthcheck"}, 1, nil, []string{"invalid configuration"}},
		{[]string{"healthcheck", "--bogus"}, 2, nil, []string{"flag provided but not defined: -bogus", usage}},
		{[]string{"healthcheck", "now"}, 2, nil, []string{"healthcheck takes no arguments"}},
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

// CheckCommandLine runs the CLI bin (junbanctl, junbanlab: see Binary) with args and no
// settings, so that a command line that reached a service fails instead of passing by
// luck: it must exit with code and print what stdout and stderr name. Besides, a usage
// error (exit 2) prints the usage on standard error, and a command that failed prints
// nothing on standard output.
func CheckCommandLine(t *testing.T, bin string, args []string, code int, stdout, stderr string) {
	t.Helper()
	name := filepath.Base(bin)
	cmd := exec.Command(bin, args...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + t.TempDir(), "JUNBAN_STACK_ENV=/nonexistent/stack.env"}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	got := 0
	if exit, ok := errors.AsType[*exec.ExitError](err); ok {
		got = exit.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if got != code || !strings.Contains(out.String(), stdout) || !strings.Contains(errOut.String(), stderr) {
		t.Errorf("%s %q: exit %d, want %d (stdout contains %q, stderr %q)\nstdout:\n%s\nstderr:\n%s",
			name, args, got, code, stdout, stderr, out.String(), errOut.String())
	}
	if code == 2 && !strings.Contains(errOut.String(), "Usage:") {
		t.Errorf("%s %q: a usage error without the usage on stderr:\n%s", name, args, errOut.String())
	}
	if code != 0 && out.Len() > 0 {
		t.Errorf("%s %q: exit %d with standard output:\n%s", name, args, got, out.String())
	}
}

// DecodeJSON decodes data, which must be one JSON document, into v; a field v does not
// have is an error, since a command's --json names are the documented ones. what names
// the command in a failure.
func DecodeJSON(t testing.TB, what string, data []byte, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: %v\n%s", what, err, data)
	}
	if dec.More() {
		t.Fatalf("%s printed more than one document", what)
	}
}
