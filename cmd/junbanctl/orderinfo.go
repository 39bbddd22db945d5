package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"
)

// runOrder prints an order's state, timeline and turn: the document of GET /v1/orders/{lcid}.
func runOrder(ctx context.Context, args []string) error { return orderInfo(ctx, os.Stdout, args) }

func orderInfo(ctx context.Context, w io.Writer, args []string) error {
	fs := flag.NewFlagSet("order", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print the document as JSON")
	limit := fs.Int("events", 1000, "show at most this many timeline events")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: junbanctl order [--json] [--events N] LCID")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args, true); err != nil {
		return err
	}
	if fs.NArg() != 1 || fs.Arg(0) == "" {
		return fmt.Errorf("%w: order takes one LCID, got %q", errUsage, fs.Args())
	}
	if *limit < 1 {
		return fmt.Errorf("%w: order: --events %d is below 1", errUsage, *limit)
	}
	d, closeDeps, err := readerDeps()
	if err != nil {
		return err
	}
	defer closeDeps()
	v, err := d.ReadOrder(ctx, fs.Arg(0), *limit, 0)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
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
		fmt.Fprintf(w, "(more events: --events above %d)\n", *limit)
	}
	fmt.Fprintln(w, "\nturn:")
	printTurn(w, v.Turn)
	return nil
}
