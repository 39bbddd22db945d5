// Command junbanctl is junban's admin and developer CLI: migrations, inventory import,
// sending events, reconcile, benchmarks and the local stack.
//
// Exit status: 0 on success (and for --help, -h and help), 1 when the command failed,
// 2 for a mistake in the command line (unknown command or flag, a missing or extra
// argument, a flag value out of range), with the usage on standard error.
package main

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
)

// errUsage marks an error in the command line: exit code 2.
var errUsage = errors.New("usage")

// usagef is a usage error: exit code 2, with the command's usage on standard error.
func usagef(format string, a ...any) error {
	return fmt.Errorf("%w: %s", errUsage, fmt.Sprintf(format, a...))
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := run(ctx, os.Stdout, os.Stderr, os.Args[1:])
	stop()
	os.Exit(code)
}

// run executes the command line args and returns the exit status.
func run(ctx context.Context, stdout, stderr io.Writer, args []string) int {
	c, err := execute(ctx, stdout, stderr, args)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintln(stderr, "junbanctl:", err)
		fmt.Fprint(stderr, "\n"+c.UsageString())
		return 2
	default:
		fmt.Fprintln(stderr, "junbanctl:", err)
		return 1
	}
}

// execute runs the command line args and returns the command it ran and its error.
func execute(ctx context.Context, stdout, stderr io.Writer, args []string) (*cobra.Command, error) {
	root := newRootCmd()
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetArgs(doubleDashLongFlags(root, args))
	c, err := root.ExecuteContextC(ctx)
	if c == nil {
		c = root
	}
	return c, err
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "junbanctl",
		Short: "junban's admin and developer CLI",
		Long: "junbanctl is junban's admin and developer CLI: migrations, inventory import, sending events,\n" +
			"reconcile, the dead-letter queues, benchmarks and the local stack.\n\n" +
			"Every command reads its settings from the environment, as the services do (README.md,\n" +
			"\"Configuration\"). Exit status: 0 success, 1 failure, 2 a mistake in the command line.",
		SilenceErrors: true,
		SilenceUsage:  true,
		Args:          subcommandArgs,
		RunE:          needSubcommand,
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return fmt.Errorf("%w: %s: %w", errUsage, c.CommandPath(), err)
	})
	root.AddCommand(
		migrateCmd(), stackCmd(), sendCmd(), loadgenCmd(),
		group("dlq", "list and redrive the dead-letter queues", dlqListCmd(), dlqRedriveCmd()),
		group("inventory", "import SKUs and lots", inventoryImportCmd()),
		group("bench", "benchmarks (docs/benchmarks.md)", benchLockCmd(), benchAllocCmd(), benchAPICmd(), benchE2ECmd(), benchPersistCmd()),
		chaosCmd(),
		group("turn", "inspect and unstick an order's turn", turnShowCmd(), turnSkipCmd()),
		stockCmd(), orderCmd(), reconcileCmd(),
		ledgerCmd(),
		group("queues", "create the queues", queuesCreateCmd()),
		group("webhook", "send signed webhooks to a running gateway", webhookSendCmd(), webhookStormCmd()),
	)
	return root
}

// group is a command that only holds subcommands: run alone it is a usage error.
func group(name, short string, subs ...*cobra.Command) *cobra.Command {
	g := &cobra.Command{Use: name, Short: short, Args: subcommandArgs, RunE: needSubcommand}
	g.AddCommand(subs...)
	return g
}

// subcommandArgs refuses a word after a group's name that names none of its commands.
func subcommandArgs(c *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], c.CommandPath())
	c.SuggestionsMinimumDistance = 2
	if s := c.SuggestionsFor(args[0]); len(s) > 0 {
		msg += fmt.Sprintf(" (did you mean %s?)", strings.Join(s, ", "))
	}
	return usagef("%s", msg)
}

func needSubcommand(c *cobra.Command, _ []string) error {
	return usagef("%s needs a command", c.CommandPath())
}

// noArgs refuses positional arguments: a value given without its flag would otherwise be
// ignored, and the command run with the default in its place.
func noArgs(c *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef("%s takes no arguments, got %q", c.CommandPath(), args)
	}
	return nil
}

// oneArg wants exactly one non-empty positional argument, described by what.
func oneArg(what string) cobra.PositionalArgs {
	return func(c *cobra.Command, args []string) error {
		if len(args) != 1 || args[0] == "" {
			return usagef("%s takes one %s, got %q", c.CommandPath(), what, args)
		}
		return nil
	}
}

// doubleDashLongFlags rewrites -name and -name=value into --name and --name=value where
// name is a long flag of the command args run (or --help), so that command lines written
// for one dash, as junbanctl took them before, keep their meaning.
func doubleDashLongFlags(root *cobra.Command, args []string) []string {
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

// writeJSON writes v as one indented JSON document.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
