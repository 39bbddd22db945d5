package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/junban/junban/internal/order"
	"github.com/junban/junban/internal/platform/cli"
	"github.com/junban/junban/internal/postgres/persist"
)

// reindexReport is what holds reindex prints with --json.
type reindexReport struct {
	// Indexed counts the holds written into the due index.
	Indexed int `json:"indexed"`
	// Due counts those whose hold_until had passed when the command started: the
	// order-workers expire them on their next scan.
	Due int `json:"due"`
	// Soonest and Latest are the first and last hold_until indexed (absent: none).
	Soonest *time.Time `json:"soonest,omitempty"`
	Latest  *time.Time `json:"latest,omitempty"`
}

func holdsReindexCmd() *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "reindex [--json]",
		Short: "write every placed order's hold from PostgreSQL into the order-workers' due index",
		Long: "reindex reads the placed orders with a hold_until from PostgreSQL and writes each into the\n" +
			"due index in Redis that the order-workers scan, as after a loss of Redis. Writing a hold\n" +
			"that is indexed already changes nothing; a hold that moved or ended in Redis since its\n" +
			"result was persisted is refused with ERR_HOLD_NOT_DUE when it comes due (docs/operations.md).",
		Args: cli.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return runHoldsReindex(c.Context(), c.OutOrStdout(), asJSON)
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	return c
}

func runHoldsReindex(ctx context.Context, w io.Writer, asJSON bool) error {
	st, err := openStores(0)
	if err != nil {
		return err
	}
	defer st.close()
	rep, err := reindexHolds(time.Now(), func(yield func(persist.Hold) error) (int, error) {
		return persist.ScanHolds(ctx, st.db, yield)
	}, func(h persist.Hold) error {
		return order.IndexHold(ctx, st.rc, st.prefix, h.LCID, h.HoldUntil)
	})
	if asJSON {
		if jerr := json.NewEncoder(w).Encode(rep); jerr != nil && err == nil {
			err = jerr
		}
	} else {
		fmt.Fprintf(w, "indexed %d holds, %d of them due", rep.Indexed, rep.Due)
		if rep.Soonest != nil {
			fmt.Fprintf(w, " (soonest %s, latest %s)", rep.Soonest.Format(time.RFC3339), rep.Latest.Format(time.RFC3339))
		}
		fmt.Fprintln(w)
	}
	if err != nil {
		return fmt.Errorf("holds reindex: after %d holds: %w", rep.Indexed, err)
	}
	return nil
}

// reindexHolds passes every hold scan yields to index and reports what it indexed; it
// stops at the first error, and the report counts the holds indexed before it.
func reindexHolds(now time.Time, scan func(func(persist.Hold) error) (int, error), index func(persist.Hold) error) (reindexReport, error) {
	var rep reindexReport
	_, err := scan(func(h persist.Hold) error {
		if err := index(h); err != nil {
			return fmt.Errorf("order %s: %w", h.LCID, err)
		}
		rep.Indexed++
		if !h.HoldUntil.After(now) {
			rep.Due++
		}
		at := h.HoldUntil.UTC()
		if rep.Soonest == nil {
			rep.Soonest = &at
		}
		rep.Latest = &at
		return nil
	})
	return rep, err
}
