package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/junban/junban/internal/http/api"
	"github.com/junban/junban/internal/platform/cli"
)

func orderCmd() *cobra.Command {
	var asJSON bool
	var limit int
	c := &cobra.Command{
		Use:   "order LCID",
		Short: "an order's state, timeline and turn",
		Long:  "order prints an order's state, timeline and turn: the document of GET /v1/orders/{lcid}.",
		Args:  cli.OneArg("LCID"),
		RunE: func(c *cobra.Command, args []string) error {
			return orderInfo(c.Context(), c.OutOrStdout(), args[0], limit, asJSON)
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print the document as JSON")
	c.Flags().IntVar(&limit, "events", 1000, "show at most this many timeline events")
	return c
}

func orderInfo(ctx context.Context, w io.Writer, lcid string, limit int, asJSON bool) error {
	if limit < 1 {
		return cli.Usagef("order: --events %d is below 1", limit)
	}
	d, closeDeps, err := readerDeps()
	if err != nil {
		return err
	}
	defer closeDeps()
	v, err := d.ReadOrder(ctx, lcid, limit, 0)
	if err != nil {
		return err
	}
	if asJSON {
		return cli.WriteJSON(w, v)
	}
	printOrder(w, v, limit)
	return nil
}

func printOrder(w io.Writer, v api.OrderView, limit int) {
	fmt.Fprintf(w, "order:    %s\n", v.LCID)
	if o := v.State; o != nil {
		fmt.Fprintf(w, "status:   %s\nalloc:    %s\npaid:     %v\nmode:     %s\ndate:     %s\nseq:      %d\n",
			o.Status, dash(o.Allocation), o.Paid, dash(string(o.Mode)), dash(o.TargetDate), v.StateSeq)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "LINE\tSKU\tQTY\tLOTS")
		for _, l := range o.Lines {
			lots := ""
			for i, q := range l.Lots {
				if i > 0 {
					lots += ", "
				}
				lots += fmt.Sprintf("%s x%d", q.LotID, q.Qty)
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", l.LineID, l.SKU, l.Qty, dash(lots))
		}
		tw.Flush()
	} else {
		fmt.Fprintln(w, "state:    none in Redis")
	}
	fmt.Fprintln(w, "\ntimeline:")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tEVENT\tTYPE\tOUTCOME\tREASON\tPROCESSED\tCOMMITTED\tMOVES")
	for _, e := range v.Timeline {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%d\n", e.Seq, e.EventID, e.Type, e.Outcome, dash(e.Reason),
			e.ProcessedAt.Format(time.RFC3339Nano), e.CommittedAt.Format(time.RFC3339Nano), len(e.Moves))
	}
	tw.Flush()
	if v.TimelineNextCursor != "" {
		fmt.Fprintf(w, "(more events: --events above %d)\n", limit)
	}
	fmt.Fprintln(w, "\nturn:")
	printTurn(w, v.Turn)
}
