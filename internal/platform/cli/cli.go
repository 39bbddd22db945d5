// Package cli holds the command-line conventions of junban's two command-line tools,
// junbanctl and junbanlab, so that both answer alike: exit status 0 on success (and for
// --help, -h and help), 1 when the command failed, 2 for a mistake in the command line
// (unknown command or flag, a missing or extra argument, a flag value out of range) with
// the usage on standard error; commands that only group others; long flags written with
// one dash; one indented JSON document for --json.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/junban/junban/internal/platform/buildinfo"
)

// ErrUsage marks an error in the command line: exit code 2.
var ErrUsage = errors.New("usage")

// Usagef is a usage error: exit code 2, with the command's usage on standard error.
func Usagef(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrUsage, fmt.Sprintf(format, a...))
}

// NewRoot is a root command with the conventions: run alone or with a word that names
// none of its commands it is a usage error, a flag it does not know is a usage error,
// and Run (not cobra) prints the errors.
func NewRoot(use, short, long string, subs ...*cobra.Command) *cobra.Command {
	root := &cobra.Command{
		Use:           use,
		Short:         short,
		Long:          long,
		SilenceErrors: true,
		SilenceUsage:  true,
		Args:          SubcommandArgs,
		RunE:          NeedSubcommand,
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return fmt.Errorf("%w: %s: %w", ErrUsage, c.CommandPath(), err)
	})
	// --version and `version` print the same line as the services' --version.
	line := buildinfo.Read().Line(use)
	root.Version = line
	root.SetVersionTemplate("{{.Version}}\n")
	root.AddCommand(&cobra.Command{
		Use:   "version",
		Short: "print the version, the commit and the Go version",
		Args:  NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(c.OutOrStdout(), line)
			return err
		},
	})
	root.AddCommand(subs...)
	return root
}

// Main runs the command line of the process on root until SIGINT or SIGTERM cancels its
// context, and exits with Run's status.
func Main(root *cobra.Command) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := Run(ctx, root, os.Stdout, os.Stderr, os.Args[1:])
	stop()
	os.Exit(code)
}

// Run executes the command line args on root and returns the exit status; an error goes
// to stderr after root's name, a usage error with the usage of the command it concerns.
func Run(ctx context.Context, root *cobra.Command, stdout, stderr io.Writer, args []string) int {
	c, err := Execute(ctx, root, stdout, stderr, args)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, ErrUsage):
		fmt.Fprintln(stderr, root.Name()+":", err)
		fmt.Fprint(stderr, "\n"+c.UsageString())
		return 2
	default:
		fmt.Fprintln(stderr, root.Name()+":", err)
		return 1
	}
}

// Execute runs the command line args on root and returns the command it ran (root when
// none) and its error.
func Execute(ctx context.Context, root *cobra.Command, stdout, stderr io.Writer, args []string) (*cobra.Command, error) {
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetArgs(DoubleDashLongFlags(root, args))
	c, err := root.ExecuteContextC(ctx)
	if c == nil {
		c = root
	}
	return c, err
}

// Group is a command that only holds subcommands: run alone it is a usage error.
func Group(name, short string, subs ...*cobra.Command) *cobra.Command {
	g := &cobra.Command{Use: name, Short: short, Args: SubcommandArgs, RunE: NeedSubcommand}
	g.AddCommand(subs...)
	return g
}

// SubcommandArgs refuses a word after a group's name that names none of its commands.
func SubcommandArgs(c *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], c.CommandPath())
	c.SuggestionsMinimumDistance = 2
	if s := c.SuggestionsFor(args[0]); len(s) > 0 {
		msg += fmt.Sprintf(" (did you mean %s?)", strings.Join(s, ", "))
	}
	return Usagef("%s", msg)
}

// NeedSubcommand is the RunE of a group: run alone, it is a usage error.
func NeedSubcommand(c *cobra.Command, _ []string) error {
	return Usagef("%s needs a command", c.CommandPath())
}

// NoArgs refuses positional arguments: a value given without its flag would otherwise be
// ignored, and the command run with the default in its place.
func NoArgs(c *cobra.Command, args []string) error {
	if len(args) > 0 {
		return Usagef("%s takes no arguments, got %q", c.CommandPath(), args)
	}
	return nil
}

// OneArg wants exactly one non-empty positional argument, described by what.
func OneArg(what string) cobra.PositionalArgs {
	return func(c *cobra.Command, args []string) error {
		if len(args) != 1 || args[0] == "" {
			return Usagef("%s takes one %s, got %q", c.CommandPath(), what, args)
		}
		return nil
	}
}

// DoubleDashLongFlags rewrites -name and -name=value into --name and --name=value where
// name is a long flag of the command args run (or --help), so that command lines written
// for one dash, as junbanctl took them before, keep their meaning.
func DoubleDashLongFlags(root *cobra.Command, args []string) []string {
	c, _, err := root.Find(args)
	if err != nil || c == nil {
		return args
	}
	c.InitDefaultHelpFlag()
	fs := c.Flags()
	fs.AddFlagSet(c.InheritedFlags())
	out := slices.Clone(args)
	for i, a := range out {
		if a == "--" {
			break
		}
		if len(a) < 2 || a[0] != '-' || a[1] == '-' {
			continue
		}
		name, _, _ := strings.Cut(a[1:], "=")
		if fs.Lookup(name) != nil && (len(name) > 1 || fs.ShorthandLookup(name) == nil) {
			out[i] = "-" + a
		}
	}
	return out
}

// WriteJSON writes v as one indented JSON document.
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
