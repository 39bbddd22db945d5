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

func queueCmd() *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "queue [--json] SKU",
		Short: "a SKU's waiting lines (backorders) in serving order",
		Long: "queue prints the lines waiting for a SKU's stock, the next one served first, with the\n" +
			"units they wait for: the same document as GET /v1/skus/{sku}/queue, every line on one page.",
		Args: cli.OneArg("SKU"),
		RunE: func(c *cobra.Command, args []string) error {
			return printQueue(c.Context(), c.OutOrStdout(), args[0], asJSON)
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print the document as JSON")
	return c
}

func printQueue(ctx context.Context, w io.Writer, sku string, asJSON bool) error {
	d, closeDeps, err := readerDeps()
	if err != nil {
		return err
	}
	defer closeDeps()
	v, entries, err := d.ReadQueue(ctx, sku)
	if err != nil {
		return err
	}
	for i, e := range entries {
		v.Entries = append(v.Entries, api.QueueLineOf(i+1, e))
	}
	if asJSON {
		return cli.WriteJSON(w, v)
	}
	fmt.Fprintf(w, "sku:      %s (from %s)\nwaiting:  %d units, %d lines\n", v.SKU, v.Source, v.Waiting, v.Lines)
	if len(v.Entries) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "POS\tORDER\tLINE\tWANTS\tMODE\tTARGET DATE\tCLASS\tSEQ\tQUEUED AT")
	for _, l := range v.Entries {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t%s\t%d\t%d\t%s\n", l.Position, l.Holder, l.Line, l.Want, l.Mode, l.TargetDate,
			l.Class, l.Seq, l.QueuedAt.Format(time.RFC3339))
	}
	return tw.Flush()
}
