package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/junban/junban/internal/config"
	"github.com/junban/junban/internal/order"
)

// redisFromEnv connects to the Redis of REDIS_URL (JUNBAN_KEY_PREFIX, REDIS_CLUSTER) and
// returns the client with the key prefix.
func redisFromEnv() (redis.UniversalClient, string, error) {
	cfg, err := config.Load[config.Redis]()
	if err != nil {
		return nil, "", err
	}
	rc, err := cfg.Client()
	if err != nil {
		return nil, "", err
	}
	return rc, cfg.KeyPrefix, nil
}

// entityArg parses the one positional argument of the turn commands: an lcid, or
// "sku:<sku>" for an inventory entity.
func entityArg(fs *flag.FlagSet, args []string) (string, error) {
	if err := parseFlags(fs, args, true); err != nil {
		return "", err
	}
	if fs.NArg() != 1 || fs.Arg(0) == "" {
		return "", fmt.Errorf("%w: %s takes one LCID (or sku:SKU), got %q", errUsage, fs.Name(), fs.Args())
	}
	return fs.Arg(0), nil
}

// runTurnShow prints an entity's turn: holder, seq, the event in proc with its failed
// runs, the wait list's depth, the outbox and the parked events.
func runTurnShow(ctx context.Context, args []string) error { return turnShow(ctx, os.Stdout, args) }

func turnShow(ctx context.Context, w io.Writer, args []string) error {
	fs := flag.NewFlagSet("turn show", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print the report as JSON")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: junbanctl turn show [--json] LCID|sku:SKU")
		fs.PrintDefaults()
	}
	entity, err := entityArg(fs, args)
	if err != nil {
		return err
	}
	rc, prefix, err := redisFromEnv()
	if err != nil {
		return err
	}
	defer rc.Close()
	r, err := order.InspectTurn(ctx, rc, prefix, entity)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	printTurn(w, r)
	return nil
}

func printTurn(w io.Writer, r order.TurnReport) {
	holder := "free"
	if r.Holder != "" {
		holder = fmt.Sprintf("%s (lease %v left)", r.Holder, time.Duration(r.LeaseLeftMs)*time.Millisecond)
	}
	fmt.Fprintf(w, "entity:   %s\nholder:   %s\nseq:      %d\nresults:  %d\n", r.Entity, holder, r.Seq, r.ResultSeq)
	if p := r.Proc; p != nil {
		fmt.Fprintf(w, "in proc:  %s %s (since %s)\n", p.EventID, p.Type, p.EnqueuedAt.Format(time.RFC3339))
		fmt.Fprintf(w, "attempts: %d failed", p.Attempts)
		if p.SkipAsked {
			fmt.Fprint(w, ", skip asked")
		}
		fmt.Fprintln(w)
		if p.LastError != "" {
			fmt.Fprintf(w, "last err: %s (%s)\n", p.LastError, p.LastFail.Format(time.RFC3339))
		}
	} else {
		fmt.Fprintln(w, "in proc:  nothing")
	}
	fmt.Fprintf(w, "waiting:  %d\noutbox:   %d unpublished\nparked:   %d\n", r.WaitDepth, r.Outbox, len(r.Parked))
	for _, p := range r.Parked {
		fmt.Fprintf(w, "  %s %s (since %s)\n", p.EventID, p.Type, p.ParkedAt.Format(time.RFC3339))
	}
}

// runTurnSkip quarantines the event in an entity's proc: a worker dead-letters it
// (ERR_SKIPPED), undoing what its runs did, and the turn moves on.
func runTurnSkip(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("turn skip", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: junbanctl turn skip LCID|sku:SKU")
		fs.PrintDefaults()
	}
	entity, err := entityArg(fs, args)
	if err != nil {
		return err
	}
	rc, prefix, err := redisFromEnv()
	if err != nil {
		return err
	}
	defer rc.Close()
	pub, err := ordersPublisher(ctx)
	if err != nil {
		return err
	}
	defer pub.Close()
	env, err := order.SkipTurn(ctx, rc, prefix, entity, order.Nudger(pub))
	if env != nil {
		fmt.Printf("skip asked for %s: a worker dead-letters it with %s and moves the turn on\n", eventLabel(env), order.ReasonSkipped)
	}
	return err
}

func eventLabel(env []byte) string {
	var h struct {
		EventID string `json:"event_id"`
		Type    string `json:"type"`
	}
	if json.Unmarshal(env, &h) != nil || h.EventID == "" {
		return fmt.Sprintf("the envelope in proc (%d bytes)", len(env))
	}
	return h.EventID + " (" + h.Type + ")"
}
