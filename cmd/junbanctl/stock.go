package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/junban/junban/internal/http/api"
	"github.com/junban/junban/internal/ledger"
	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/platform/cli"
	"github.com/junban/junban/internal/postgres/inventorydb"
)

// readerDeps opens what api.Deps's readers need: Redis, PostgreSQL and the ledger over
// them. close releases them.
func readerDeps() (api.Deps, func(), error) {
	st, err := openStores(2)
	if err != nil {
		return api.Deps{}, nil, err
	}
	led, err := ledger.New(ledger.Config{Redis: st.rc, Prefix: st.prefix, Loader: inventorydb.PGLoader{DB: st.db}})
	if err != nil {
		st.close()
		return api.Deps{}, nil, err
	}
	return api.Deps{Redis: st.rc, Prefix: st.prefix, DB: st.db, Ledger: led}, st.close, nil
}

// stockOptions are the flags of stock.
type stockOptions struct {
	date, mode string
	qty        int64
	asJSON     bool
}

func stockCmd() *cobra.Command {
	var o stockOptions
	c := &cobra.Command{
		Use:   "stock [--date YYYY-MM-DD [--mode ship|reserve] [--qty N]] [--json] SKU",
		Short: "a SKU's lots and buckets; with --date what an allocation would get (availability)",
		Long: "stock prints a SKU's lots and buckets and, with --date, its availability: the same\n" +
			"documents as GET /v1/skus/{sku} and /v1/skus/{sku}/availability.",
		Args: cli.OneArg("SKU"),
		RunE: func(c *cobra.Command, args []string) error {
			return printStock(c.Context(), c.OutOrStdout(), args[0], o)
		},
	}
	fs := c.Flags()
	fs.StringVar(&o.date, "date", "", "target date (YYYY-MM-DD): also show what an allocation on it would get")
	fs.StringVar(&o.mode, "mode", string(stock.ModeShip), "allocation mode with --date: ship or reserve")
	fs.Int64Var(&o.qty, "qty", 0, "with --date: whether an allocation of this quantity would succeed")
	fs.BoolVar(&o.asJSON, "json", false, "print the documents as JSON")
	return c
}

func printStock(ctx context.Context, w io.Writer, sku string, o stockOptions) error {
	if o.date == "" && (o.qty != 0 || o.mode != string(stock.ModeShip)) {
		return cli.Usagef("stock: --mode and --qty need --date")
	}
	if o.qty < 0 {
		return cli.Usagef("stock: --qty %d is negative", o.qty)
	}
	d, closeDeps, err := readerDeps()
	if err != nil {
		return err
	}
	defer closeDeps()
	v, err := d.ReadSKU(ctx, sku)
	if err != nil {
		return err
	}
	var av *api.AvailabilityAnswer
	if o.date != "" {
		a, err := d.Ledger.Availability(ctx, ledger.AvailabilityRequest{SKU: sku, TargetDate: o.date, Mode: stock.Mode(o.mode), Qty: o.qty})
		if err != nil {
			return err
		}
		ans, err := d.WithNetwork(ctx, a)
		if err != nil {
			return err
		}
		av = &ans
	}
	if o.asJSON {
		return cli.WriteJSON(w, struct {
			SKU          api.SKUView             `json:"sku"`
			Availability *api.AvailabilityAnswer `json:"availability,omitempty"`
		}{v, av})
	}
	printSKU(w, v)
	if av != nil {
		fmt.Fprintln(w)
		printAvailability(w, *av)
	}
	return nil
}

func printSKU(w io.Writer, v api.SKUView) {
	fmt.Fprintf(w, "sku:           %s (from %s)\nversion:       %d\nsafety stock:  %d\n", v.SKU.SKU, v.Source, v.Version, v.SafetyStock)
	if len(v.LocationSafety) > 0 {
		fmt.Fprint(w, "at locations: ")
		for _, loc := range slices.Sorted(maps.Keys(v.LocationSafety)) {
			fmt.Fprintf(w, " %s %d", loc, v.LocationSafety[loc])
		}
		fmt.Fprintln(w)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "LOT\tLOCATION\tKIND\tGOOD\tBEST BEFORE\tREG\tVALID\tSELLABLE\tRESERVED\tALLOCATED\tHIDDEN\tSHIPPED")
	for _, l := range v.Lots {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%v\t%s\t%d\t%s..%s\t%d\t%d\t%d\t%d\t%d\n", l.LotID, stock.LocationOf(l), l.Kind, l.Good,
			dash(l.BestBefore), l.RegSeq, l.ValidFrom, l.ValidTo, l.Sellable, l.Reserved, l.Allocated, l.Hidden, l.Shipped)
	}
	tw.Flush()
}

func printAvailability(w io.Writer, a api.AvailabilityAnswer) {
	fmt.Fprintf(w, "availability on %s, %s: %d (sellable %d", a.TargetDate, a.Mode, a.Available, a.Sellable)
	if a.Mode == stock.ModeShip {
		fmt.Fprintf(w, " less safety stock %d", a.SafetyStock)
	}
	if a.Waiting > 0 {
		fmt.Fprintf(w, " less %d waiting for stock", a.Waiting)
	}
	fmt.Fprintf(w, ") at version %d\n", a.Version)
	take := map[string]int64{}
	for _, t := range a.Take {
		take[t.LotID] = t.Qty
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ORDER\tLOT\tKIND\tBEST BEFORE\tSELLABLE\tTAKES")
	for i, c := range a.Candidates {
		t := "-"
		if q, ok := take[c.LotID]; ok {
			t = fmt.Sprint(q)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%s\n", i+1, c.LotID, c.Kind, dash(c.BestBefore), c.Sellable, t)
	}
	tw.Flush()
	if len(a.Locations) > 0 {
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "LOCATION\tSELLABLE\tSAFETY STOCK\tAVAILABLE PINNED THERE\tQTY FITS\tNETWORK")
		for _, l := range a.Locations {
			fits := "-"
			if a.Qty > 0 {
				fits = fmt.Sprint(l.OK)
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%v\n", l.Location, l.Sellable, l.SafetyStock, l.Available, fits, l.Network)
		}
		tw.Flush()
	}
	if n := a.Network; n != nil {
		fmt.Fprintf(w, "network (the locations that are enabled and ship): %d available (sellable %d)\n", n.Available, n.Sellable)
		switch {
		case a.Qty == 0:
		case n.OK:
			fmt.Fprintf(w, "an order of %d without routing fields would succeed there (by rank), taking %s\n", a.Qty, lotQtys(n.Take))
		default:
			fmt.Fprintf(w, "an order of %d without routing fields would fail there (by rank): %s (%s)\n", a.Qty, n.Reason, n.Detail)
		}
	}
	switch {
	case a.Qty == 0:
	case a.OK:
		fmt.Fprintf(w, "an allocation of %d would succeed\n", a.Qty)
	default:
		fmt.Fprintf(w, "an allocation of %d would fail: %s (%s)\n", a.Qty, a.Reason, a.Detail)
	}
}

// lotQtys writes lots and quantities as "L1 3, L2 1".
func lotQtys(ls []stock.LotQty) string {
	parts := make([]string, len(ls))
	for i, l := range ls {
		parts[i] = fmt.Sprintf("%s %d", l.LotID, l.Qty)
	}
	return strings.Join(parts, ", ")
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
