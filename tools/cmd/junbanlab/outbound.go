package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"gorm.io/gorm"

	"github.com/junban/junban/internal/platform/cli"
	"github.com/junban/junban/internal/platform/config"
	"github.com/junban/junban/internal/queue"
	"github.com/junban/junban/internal/testenv/outboundcheck"
)

// outboundCheckOptions are the flags of outbound check.
type outboundCheckOptions struct {
	queue       string
	quiet, wait time.Duration
	asJSON      bool
	// since is --since: the check's rows are those written at or after it.
	since string
}

func outboundCheckCmd() *cobra.Command {
	var o outboundCheckOptions
	c := &cobra.Command{
		Use:   "check --queue NAME_OR_URL [--wait D] [--quiet D] [--json]",
		Short: "drain a queue subscribed to the outbound topic and check it against the outbox",
		Long: "check receives and deletes every message of the queue --queue (subscribed to the outbound\n" +
			"topic, JUNBAN_OUTBOX_TOPIC_ARN; raw delivery or not) until it is quiet, validates each body\n" +
			"against its kind's JSON Schema, and compares what it got with the outbox table (DATABASE_URL):\n" +
			"committed rows never received (missing), messages no row holds (unknown), an entity's seqs\n" +
			"not 1..max (gaps), bodies that break the schema (invalid), and copies (duplicates: allowed,\n" +
			"the relay publishes at least once); per kind, received and rows. It first waits, up to\n" +
			"--wait, for the relay to have published every row. Exit 1 when anything is missing,\n" +
			"unknown, out of sequence or invalid. The queue is emptied: run it once per run. --since\n" +
			"limits the check to the rows a run wrote, in a database earlier runs wrote to too.",
		Args: cli.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error { return runOutboundCheck(c.Context(), c.OutOrStdout(), o) },
	}
	fs := c.Flags()
	fs.StringVar(&o.queue, "queue", "", "the subscriber queue, a name or URL (required)")
	fs.DurationVar(&o.wait, "wait", 30*time.Second, "how long to wait for the relay to publish every outbox row before draining (0: do not wait)")
	fs.DurationVar(&o.quiet, "quiet", outboundcheck.QuietDefault, "how long the queue must give nothing for the drain to end")
	fs.StringVar(&o.since, "since", "", "check only the rows written at or after this time (RFC 3339), e.g. the run's start in a database earlier runs wrote to")
	fs.BoolVar(&o.asJSON, "json", false, "print the report as JSON")
	return c
}

// runOutboundCheck drains the subscriber queue and checks it against the outbox; it fails
// when the check found a problem.
func runOutboundCheck(ctx context.Context, w io.Writer, o outboundCheckOptions) error {
	co, err := o.check()
	if err != nil {
		return err
	}
	pcfg, err := config.Load[config.Postgres]()
	if err != nil {
		return err
	}
	scfg, err := config.Load[config.SQS]()
	if err != nil {
		return err
	}
	db, err := pcfg.Open()
	if err != nil {
		return err
	}
	if sqlDB, err := db.DB(); err == nil {
		defer sqlDB.Close()
	}
	sq, err := queue.NewClient(ctx, scfg)
	if err != nil {
		return err
	}
	url, err := queue.ResolveURL(ctx, sq, o.queue)
	if err != nil {
		return err
	}
	got, err := outboundcheck.Drain(ctx, sq, url, o.drain(db))
	if err != nil {
		return err
	}
	rep, err := outboundcheck.Check(ctx, db, got, co)
	if err != nil {
		return err
	}
	if o.asJSON {
		err = cli.WriteJSON(w, rep)
	} else {
		rep.Print(w)
	}
	if err == nil && !rep.OK() {
		err = fmt.Errorf("outbound check: %s", strings.Join(rep.Problems(), "; "))
	}
	return err
}

// check checks the flags and returns the options of the check they ask for.
func (o outboundCheckOptions) check() (outboundcheck.CheckOptions, error) {
	var co outboundcheck.CheckOptions
	if o.queue == "" {
		return co, cli.Usagef("--queue is required")
	}
	if o.wait < 0 || o.quiet <= 0 {
		return co, cli.Usagef("--wait must not be negative, --quiet must be positive")
	}
	if o.since != "" {
		t, err := time.Parse(time.RFC3339Nano, o.since)
		if err != nil {
			return co, cli.Usagef("--since %q: want an RFC 3339 time (2026-12-02T14:00:00Z)", o.since)
		}
		co.Since = t
	}
	return co, nil
}

// drain is the drain the flags ask for: quiet for --quiet, after the relay published
// every row of db or --wait passed.
func (o outboundCheckOptions) drain(db *gorm.DB) outboundcheck.DrainOptions {
	opts := outboundcheck.DrainOptions{Quiet: o.quiet}
	if o.wait > 0 {
		// Past --wait the drain goes on without it: what is still unpublished is missing.
		deadline, published := time.Now().Add(o.wait), outboundcheck.Published(db)
		opts.Settled = func(ctx context.Context) (bool, error) {
			ok, err := published(ctx)
			return ok || time.Now().After(deadline), err
		}
	}
	return opts
}
