package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/junban/junban/internal/order"
	"github.com/junban/junban/internal/order/intake"
	"github.com/junban/junban/internal/order/turninfo"
	"github.com/junban/junban/internal/platform/cli"
	"github.com/junban/junban/internal/platform/config"
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

// entityArgs wants the one positional argument of the turn commands: an lcid, or
// "sku:<sku>" for an inventory entity.
var entityArgs = cli.OneArg("LCID (or sku:SKU)")

func turnShowCmd() *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "show LCID|sku:SKU",
		Short: "show an order's turn: holder, the event in hand and its failed runs, waiting and parked events",
		Args:  entityArgs,
		RunE: func(c *cobra.Command, args []string) error {
			return turnShow(c.Context(), c.OutOrStdout(), args[0], asJSON)
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	return c
}

// turnShow prints an entity's turn: holder, seq, the event in proc with its failed
// runs, the wait list's depth, the outbox and the parked events.
func turnShow(ctx context.Context, w io.Writer, entity string, asJSON bool) error {
	rc, prefix, err := redisFromEnv()
	if err != nil {
		return err
	}
	defer rc.Close()
	r, err := turninfo.Inspect(ctx, rc, prefix, entity)
	if err != nil {
		return err
	}
	if asJSON {
		return cli.WriteJSON(w, r)
	}
	printTurn(w, r)
	return nil
}

func printTurn(w io.Writer, r turninfo.Report) {
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

// turnSkipReport is what turn skip prints with --json.
type turnSkipReport struct {
	// Entity is the lcid or sku:SKU given.
	Entity string `json:"entity"`
	// EventID and Type are those of the event in proc, asked to be skipped.
	EventID string `json:"event_id"`
	Type    string `json:"type"`
	// Reason is the reason code the worker dead-letters the event with.
	Reason string `json:"reason"`
}

func turnSkipCmd() *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "skip LCID|sku:SKU",
		Short: "dead-letter the event in an order's turn (undoing what its runs did) so the turn moves on",
		Args:  entityArgs,
		RunE: func(c *cobra.Command, args []string) error {
			return runTurnSkip(c.Context(), c.OutOrStdout(), args[0], asJSON)
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	return c
}

// runTurnSkip quarantines the event in an entity's proc: a worker dead-letters it
// (ERR_SKIPPED), undoing what its runs did, and the turn moves on.
func runTurnSkip(ctx context.Context, w io.Writer, entity string, asJSON bool) error {
	rc, prefix, err := redisFromEnv()
	if err != nil {
		return err
	}
	defer rc.Close()
	pub, err := ordersPublisher(ctx)
	if err != nil {
		return err
	}
	defer pub.Stop(context.Background()) //nolint:errcheck // every Publish waited for its answer: nothing is left to flush
	env, err := turninfo.Skip(ctx, rc, prefix, entity, intake.Nudger(pub))
	if env == nil {
		return err
	}
	if asJSON {
		id, typ := eventHeader(env)
		return errors.Join(err, cli.WriteJSON(w, turnSkipReport{Entity: entity, EventID: id, Type: typ, Reason: string(order.ReasonSkipped)}))
	}
	fmt.Fprintf(w, "skip asked for %s: a worker dead-letters it with %s and moves the turn on\n", eventLabel(env), order.ReasonSkipped)
	return err
}

// eventHeader is the event id and type of an envelope ("" when it has none).
func eventHeader(env []byte) (id, typ string) {
	var h struct {
		EventID string `json:"event_id"`
		Type    string `json:"type"`
	}
	_ = json.Unmarshal(env, &h) // an envelope that does not decode shows no id and type
	return h.EventID, h.Type
}

func eventLabel(env []byte) string {
	id, typ := eventHeader(env)
	if id == "" {
		return fmt.Sprintf("the envelope in proc (%d bytes)", len(env))
	}
	return id + " (" + typ + ")"
}
