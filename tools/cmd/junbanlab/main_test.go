package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/platform/cli"
	"github.com/junban/junban/internal/testenv"
	"github.com/junban/junban/tools/allocbench"
	"github.com/junban/junban/tools/apibench"
	"github.com/junban/junban/tools/lockbench"
	"github.com/junban/junban/tools/persistbench"
	"github.com/junban/junban/tools/queuebench"
)

// lab runs the junbanlab command named by words (e.g. "bench lock") with args in this
// process, its standard output to w (nil: discarded), and returns the command's error.
func lab(ctx context.Context, w io.Writer, words string, args []string) error {
	if w == nil {
		w = io.Discard
	}
	_, err := cli.Execute(ctx, newRootCmd(), w, io.Discard, append(strings.Fields(words), args...))
	return err
}

// labEnv points every setting a command reads at the test's own Redis prefix,
// PostgreSQL schema and queues.
func labEnv(t *testing.T) testenv.Queues {
	t.Helper()
	_, prefix := testenv.Redis(t)
	t.Setenv("REDIS_URL", testenv.RedisURL(t))
	t.Setenv("JUNBAN_KEY_PREFIX", prefix)
	t.Setenv("DATABASE_URL", testenv.PostgresURL(t))
	q := testenv.NewQueues(t, testenv.SQS(t), 5)
	q.Setenv(t)
	return q
}

// The command-line conventions, on the built binary, as junbanctl's: help exits 0 with the
// usage on standard output; a mistake in the command line exits 2 with the usage on
// standard error; a failure exits 1; one-dash long flags keep working. No case needs a
// service.
func TestCommandLineExitCodes(t *testing.T) {
	bin := testenv.Binary(t, "junbanlab")
	cases := []struct {
		args           []string
		code           int
		stdout, stderr string
	}{
		{[]string{"--help"}, 0, "Available Commands:", ""},
		{[]string{"-h"}, 0, "loadgen", ""},
		{[]string{"help", "bench", "alloc"}, 0, "--baseline", ""},
		{[]string{"bench", "lock", "-h"}, 0, "--detached", ""},
		{[]string{"chaos", "-help"}, 0, "--redis-cluster", ""},
		{[]string{"completion", "bash"}, 0, "junbanlab", ""},
		{nil, 2, "", "needs a command"},
		{[]string{"bogus"}, 2, "", `unknown command "bogus"`},
		{[]string{"migrate"}, 2, "", `unknown command "migrate"`},
		{[]string{"bench"}, 2, "", "Available Commands:"},
		{[]string{"bench", "lok"}, 2, "", "did you mean lock?"},
		{[]string{"bench", "persist", "extra"}, 2, "", "takes no arguments"},
		{[]string{"bench", "alloc", "--lots", "0"}, 2, "", "--lots 1..100000"},
		{[]string{"bench", "e2e", "-duration", "0s"}, 2, "", "-duration must be positive"},
		{[]string{"bench", "e2e", "-h"}, 0, "--tracing", ""},
		{[]string{"bench", "e2e", "--tracing", "--outbound"}, 2, "", "--tracing and --outbound"},
		{[]string{"loadgen", "-orders", "0"}, 2, "", "-orders, -skus, -lots and -stock must be positive"},
		{[]string{"chaos", "--events", "0"}, 2, "", "--events, --duration, --kills and --runs must be positive"},
		{[]string{"chaos", "--runs", "0"}, 2, "", "--events, --duration, --kills and --runs must be positive"},
		{[]string{"chaos", "--redis-cluster", "--replicas", "3"}, 2, "", "--replicas must be 1 or 2"},
		{[]string{"chaos", "--redis-cluster", "--min-replicas", "2"}, 2, "", "--min-replicas within 0..--replicas"},
		{[]string{"chaos", "--replica-restart"}, 2, "", "--replica-restart needs --redis-cluster"},
		{[]string{"bench", "alloc", "--baseline", "no-such-revision"}, 1, "", "no-such-revision"},
		{[]string{"bench", "cost", "--baseline-bin", "/no/such/dir"}, 2, "", "no order-worker in /no/such/dir"},
		{[]string{"outbound"}, 2, "", "needs a command"},
		{[]string{"outbound", "check"}, 2, "", "--queue is required"},
		{[]string{"outbound", "check", "--queue", "q", "--quiet", "0s"}, 2, "", "--quiet must be positive"},
		{[]string{"outbound", "check", "-h"}, 0, "--wait", ""},
		{[]string{"outbound", "check", "--queue", "q", "--since", "yesterday"}, 2, "", "want an RFC 3339 time"},
	}
	for _, tc := range cases {
		testenv.CheckCommandLine(t, bin, tc.args, tc.code, tc.stdout, tc.stderr)
	}
}

// decode runs the command with args and --json and decodes its standard output, which
// must be one JSON document, into v (unknown fields are an error: the names are the
// documented ones). It returns the command's error.
func decode(t *testing.T, v any, words string, args ...string) error {
	t.Helper()
	var out bytes.Buffer
	err := lab(context.Background(), &out, words, append(args, "--json"))
	testenv.DecodeJSON(t, fmt.Sprintf("junbanlab %s %q --json (command: %v)", words, args, err), out.Bytes(), v)
	return err
}

// The benchmarks' --json, at sizes that only show the document is whole: the figures
// are not looked at, only that the run measured something.
func TestJSONOfTheBenchmarks(t *testing.T) {
	if testing.Short() {
		t.Skip("runs four short benchmarks")
	}
	labEnv(t)
	var alloc allocbench.Report
	if err := decode(t, &alloc, "bench alloc", "--duration", "300ms", "--rounds", "1", "--sweep=false", "--clients", "2", "--lots", "3"); err != nil || alloc.Junban <= 0 || alloc.Lots != 3 {
		t.Fatalf("bench alloc: %+v, %v", alloc, err)
	}
	var api apibench.Report
	if err := decode(t, &api, "bench api", "--fleet=false", "--duration", "200ms", "--rounds", "1", "--clients", "2", "--allocators", "1", "--skus", "2", "--lots", "2"); err != nil || api.Availability.OpsPerSec <= 0 || api.SKUs != 2 {
		t.Fatalf("bench api: %+v, %v", api, err)
	}
	var lock lockbench.Result
	if err := decode(t, &lock, "bench lock", "--duration", "200ms"); err != nil || lock.Hot.HandoffEPS <= 0 {
		t.Fatalf("bench lock: %+v, %v", lock, err)
	}
	// 40 waiting lines: the adjustment, then fills, stock.MaxResultFills lines each.
	var queue queuebench.Report
	if err := decode(t, &queue, "bench queue", "--lines", "40", "--rounds", "1"); err != nil || queue.Lines != 40 ||
		queue.Operations != (40+stock.MaxResultFills-1)/stock.MaxResultFills || queue.FillsPerSecond <= 0 || queue.AllocationsPerSecond <= 0 {
		t.Fatalf("bench queue: %+v, %v", queue, err)
	}
	var persist persistbench.Result
	if err := decode(t, &persist, "bench persist", "--duration", "2s", "--parts", "0", "--backlog", "20", "--receivers", "2"); err != nil || persist.BatchedEPS <= 0 || persist.SingleEPS <= 0 {
		t.Fatalf("bench persist: %+v, %v", persist, err)
	}
}
