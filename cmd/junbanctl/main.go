// Command junbanctl is junban's admin and developer CLI: migrations, inventory import,
// sending events, reconcile, benchmarks and the local stack.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
)

// command is one junbanctl subcommand; args are the words after its name.
type command struct {
	summary string
	run     func(ctx context.Context, args []string) error
}

// commands lists every subcommand; each lives in its own file.
var commands = map[string]command{
	"migrate":          {"apply the database migrations", runMigrate},
	"stack":            {"local stack: up | down | status", runStack},
	"send":             {"put order events on the orders queue (JSON lines or flags)", runSend},
	"loadgen":          {"send a realistic workload, wait for it to persist, print a summary", runLoadgen},
	"dlq list":         {"list a dead-letter queue's messages with their reasons", runDLQList},
	"dlq redrive":      {"move a dead-letter queue's messages back to their queue", runDLQRedrive},
	"inventory import": {"import SKUs and lots from a CSV or JSON-lines file", runInventoryImport},
	"bench lock":       {"benchmark the per-order turn against redsync", runBenchLock},
	"bench alloc":      {"benchmark the allocation script against a JSON document and PostgreSQL", runBenchAlloc},
	"bench api":        {"benchmark availability reads through the API against a bare Redis GET, and a cart against single calls", runBenchAPI},
	"bench e2e":        {"benchmark events/s from send to commit against the SQS ceiling", runBenchE2E},
	"bench persist":    {"benchmark batched persistence against one result per transaction", runBenchPersist},
	"chaos":            {"run a fault-injection load and check the invariants", runChaos},
	"turn show":        {"show an order's turn: holder, the event in hand and its failed runs, waiting and parked events", runTurnShow},
	"turn skip":        {"dead-letter the event in an order's turn (undoing what its runs did) so the turn moves on", runTurnSkip},
	"stock":            {"a SKU's lots and buckets; with --date what an allocation would get (availability)", runStock},
	"order":            {"an order's state, timeline and turn", runOrder},
	"reconcile":        {"compare Redis with PostgreSQL; --repair rewrites PostgreSQL", runReconcile},
	"queues create":    {"create the queues, their DLQs and redrive policies where missing (idempotent)", runQueuesCreate},
	"webhook send":     {"send one signed webhook to a running gateway", runWebhookSend},
	"webhook storm":    {"send N concurrent duplicate webhooks plus late retries", runWebhookStorm},
}

// errUsage marks an error in the command line: exit code 2.
var errUsage = errors.New("usage")

// parseFlags parses args into fs. A bad flag is a usage error, and so is any positional
// argument unless the command takes some: a value given without its flag would otherwise
// be ignored, and the command run with the default in its place.
func parseFlags(fs *flag.FlagSet, args []string, positional bool) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %s: %w", errUsage, fs.Name(), err)
	}
	if !positional && fs.NArg() > 0 {
		return fmt.Errorf("%w: %s takes no arguments, got %q", errUsage, fs.Name(), fs.Args())
	}
	return nil
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	err := dispatch(ctx, os.Args[1:])
	switch {
	case err == nil:
	case errors.Is(err, errUsage), errors.Is(err, flag.ErrHelp):
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "junbanctl:", err)
		os.Exit(1)
	}
}

func dispatch(ctx context.Context, args []string) error {
	// The longest command name that prefixes args wins ("bench lock" over "bench").
	for n := min(len(args), 2); n > 0; n-- {
		if c, ok := commands[strings.Join(args[:n], " ")]; ok {
			return c.run(ctx, args[n:])
		}
	}
	usage()
	switch {
	case len(args) == 0:
		return fmt.Errorf("%w: no command", errUsage)
	case args[0] == "help" || args[0] == "-h" || args[0] == "--help":
		return nil
	}
	return fmt.Errorf("%w: unknown command %q", errUsage, strings.Join(args, " "))
}

func usage() {
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintln(os.Stderr, "usage: junbanctl COMMAND [flags]\n\ncommands:")
	for _, n := range names {
		fmt.Fprintf(os.Stderr, "  %-18s %s\n", n, commands[n].summary)
	}
}
