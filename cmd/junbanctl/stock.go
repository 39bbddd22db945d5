package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/junban/junban/internal/api"
	"github.com/junban/junban/internal/config"
	"github.com/junban/junban/internal/ledger"
)

// readerDeps opens what api.Deps's readers need: Redis, PostgreSQL and the ledger over
// them. close releases them.
func readerDeps() (api.Deps, func(), error) {
	rcfg, err := config.Load[config.Redis]()
	if err != nil {
		return api.Deps{}, nil, err
	}
	pcfg, err := config.Load[config.Postgres]()
	if err != nil {
		return api.Deps{}, nil, err
	}
	rc, err := rcfg.Client()
	if err != nil {
		return api.Deps{}, nil, err
	}
	db, err := pcfg.OpenPool(2)
	if err != nil {
		rc.Close()
		return api.Deps{}, nil, err
	}
	d := api.Deps{Redis: rc, Prefix: rcfg.KeyPrefix, DB: db,
		Ledger: ledger.New(rc, rcfg.KeyPrefix, ledger.PGLoader{DB: db}, ledger.Config{})}
	return d, func() {
		rc.Close()
		if sqlDB, err := db.DB(); err == nil {
			sqlDB.Close()
		}
	}, nil
}

// runStock prints a SKU's lots and buckets and, with --date, its availability: the same
// documents as GET /v1/skus/{sku} and /v1/skus/{sku}/availability.
func runStock(ctx context.Context, args []string) error { return stock(ctx, os.Stdout, args) }

func stock(ctx context.Context, w io.Writer, args []string) error {
	fs := flag.NewFlagSet("stock", flag.ContinueOnError)
	date := fs.String("date", "", "target date (YYYY-MM-DD): also show what an allocation on it would get")
	mode := fs.String("mode", string(ledger.ModeShip), "allocation mode with --date: ship or reserve")
	qty := fs.Int64("qty", 0, "with --date: whether an allocation of this quantity would succeed")
	asJSON := fs.Bool("json", false, "print the documents as JSON")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: junbanctl stock [--date YYYY-MM-DD [--mode ship|reserve] [--qty N]] [--json] SKU")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args, true); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: stock takes one SKU, got %q", errUsage, fs.Args())
	}
	if *date == "" && (*qty != 0 || *mode != string(ledger.ModeShip)) {
		return fmt.Errorf("%w: stock: --mode and --qty need --date", errUsage)
	}
	if *qty < 0 {
		return fmt.Errorf("%w: stock: --qty %d is negative", errUsage, *qty)
	}
	sku := fs.Arg(0)
	d, closeDeps, err := readerDeps()
	if err != nil {
		return err
	}
	defer closeDeps()
	v, err := d.ReadSKU(ctx, sku)
	if err != nil {
		return err
	}
	var av *ledger.Availability
	if *date != "" {
		a, err := d.Ledger.Availability(ctx, ledger.AvailabilityRequest{SKU: sku, TargetDate: *date, Mode: ledger.Mode(*mode), Qty: *qty})
		if err != nil {
			return err
		}
		av = &a
	}
	if *asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			SKU          api.SKUView          `json:"sku"`
			Availability *ledger.Availability `json:"availability,omitempty"`
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
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "LOT\tKIND\tGOOD\tBEST BEFORE\tREG\tVALID\tSELLABLE\tRESERVED\tALLOCATED\tHIDDEN\tSHIPPED")
	for _, l := range v.Lots {
		fmt.Fprintf(tw, "%s\t%s\t%v\t%s\t%d\t%s..%s\t%d\t%d\t%d\t%d\t%d\n", l.LotID, l.Kind, l.Good, dash(l.BestBefore), l.RegSeq,
			l.ValidFrom, l.ValidTo, l.Sellable, l.Reserved, l.Allocated, l.Hidden, l.Shipped)
	}
	tw.Flush()
}

func printAvailability(w io.Writer, a ledger.Availability) {
	fmt.Fprintf(w, "availability on %s, %s: %d (sellable %d", a.TargetDate, a.Mode, a.Available, a.Sellable)
	if a.Mode == ledger.ModeShip {
		fmt.Fprintf(w, " less safety stock %d", a.SafetyStock)
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
	switch {
	case a.Qty == 0:
	case a.OK:
		fmt.Fprintf(w, "an allocation of %d would succeed\n", a.Qty)
	default:
		fmt.Fprintf(w, "an allocation of %d would fail: %s (%s)\n", a.Qty, a.Reason, a.Detail)
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
