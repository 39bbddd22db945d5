package cli

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// testRoot is a root with a group of one command that fails, succeeds, or finds its
// flag out of range, as --mode says.
func testRoot() *cobra.Command {
	var mode string
	run := &cobra.Command{
		Use:  "run",
		Args: NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			switch mode {
			case "fail":
				return errors.New("it failed")
			case "range":
				return Usagef("--mode %s is out of range", mode)
			}
			return WriteJSON(c.OutOrStdout(), map[string]string{"mode": mode})
		},
	}
	run.Flags().StringVar(&mode, "mode", "ok", "ok, fail or range")
	return NewRoot("tool", "a tool", "a tool for the test", Group("grp", "a group", run))
}

// Run's exit status and what it prints, in the process: 0 with the command's output, 1
// with the error after the root's name, 2 with the error and the usage of the command
// that the mistake concerns, on standard error; a one-dash long flag is taken.
func TestRunExitStatus(t *testing.T) {
	for _, tc := range []struct {
		args           []string
		code           int
		stdout, stderr []string
	}{
		{[]string{"grp", "run"}, 0, []string{"{\n  \"mode\": \"ok\"\n}\n"}, nil},
		{[]string{"grp", "run", "-mode", "fail"}, 1, nil, []string{"tool: it failed\n"}},
		{[]string{"grp", "run", "--mode=range"}, 2, nil, []string{"tool: usage: --mode range is out of range", "Usage:\n  tool grp run [flags]"}},
		{[]string{"grp", "run", "extra"}, 2, nil, []string{"tool grp run takes no arguments", "Usage:"}},
		{[]string{"grp", "rn"}, 2, nil, []string{`unknown command "rn" for "tool grp" (did you mean run?)`, "Usage:"}},
		{[]string{"grp"}, 2, nil, []string{"tool grp needs a command", "Available Commands:"}},
		{nil, 2, nil, []string{"tool needs a command"}},
		{[]string{"grp", "run", "--bogus"}, 2, nil, []string{"unknown flag: --bogus", "Usage:"}},
		{[]string{"grp", "run", "-h"}, 0, []string{"--mode"}, nil},
	} {
		var stdout, stderr bytes.Buffer
		code := Run(context.Background(), testRoot(), &stdout, &stderr, tc.args)
		ok := code == tc.code && (tc.stdout != nil || stdout.Len() == 0)
		for _, s := range tc.stdout {
			ok = ok && strings.Contains(stdout.String(), s)
		}
		for _, s := range tc.stderr {
			ok = ok && strings.Contains(stderr.String(), s)
		}
		if !ok {
			t.Errorf("%q: exit %d, want %d with %q on stdout, %q on stderr\nstdout:\n%s\nstderr:\n%s",
				tc.args, code, tc.code, tc.stdout, tc.stderr, stdout.String(), stderr.String())
		}
	}
}
