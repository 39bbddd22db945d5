package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/junban/junban/internal/ledger"
	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/platform/cli"
	"github.com/junban/junban/internal/postgres/inventorydb"
)

func locationsCmd() *cobra.Command {
	return cli.Group("locations", "the shop's locations: set, list, publish to the workers",
		locationsSetCmd(), locationsListCmd(), locationsPublishCmd())
}

func locationsSetCmd() *cobra.Command {
	var (
		l           = stock.Location{Kind: stock.LocationWarehouse, Ships: true, Enabled: true}
		lat, lon    string
		markets     string
		asJSON      bool
		kindFlagDoc = fmt.Sprintf("%s or %s", stock.LocationWarehouse, stock.LocationStore)
	)
	c := &cobra.Command{
		Use:   "set LOCATION [flags]",
		Short: "register a location, or replace its settings",
		Long: "set writes a location to PostgreSQL (table locations), then to the workers' Redis\n" +
			"(JUNBAN_KEY_PREFIX:locations). Every setting is the flag's: a flag left out takes its\n" +
			"default, not the location's current value. Lots name their location in inventory events\n" +
			"(data.location); a lot without one is at the location \"default\".",
		Args: cli.OneArg("LOCATION"),
		RunE: func(c *cobra.Command, args []string) error {
			l.ID = args[0]
			if (lat == "") != (lon == "") {
				return cli.Usagef("%s: --lat and --lon go together", c.CommandPath())
			}
			if lat != "" {
				la, err1 := strconv.ParseFloat(lat, 64)
				lo, err2 := strconv.ParseFloat(lon, 64)
				if err1 != nil || err2 != nil {
					return cli.Usagef("%s: --lat %q and --lon %q must be numbers (degrees)", c.CommandPath(), lat, lon)
				}
				l.Lat, l.Lon = &la, &lo
			}
			if markets != "" {
				l.Markets = strings.Split(markets, ",")
			}
			if err := l.Validate(); err != nil {
				return cli.Usagef("%s: %v", c.CommandPath(), err)
			}
			return locationsSet(c.Context(), c.OutOrStdout(), l, asJSON)
		},
	}
	f := c.Flags()
	f.StringVar(&l.Kind, "kind", l.Kind, kindFlagDoc)
	f.IntVar(&l.Rank, "rank", 0, "rank for the ranked allocation: lower first")
	f.BoolVar(&l.Ships, "ships", true, "ships online orders")
	f.BoolVar(&l.Pickup, "pickup", false, "offers pickup")
	f.StringVar(&lat, "lat", "", "latitude in degrees (with --lon)")
	f.StringVar(&lon, "lon", "", "longitude in degrees (with --lat)")
	f.StringVar(&markets, "markets", "", "comma-separated markets it serves (none: every market)")
	f.BoolVar(&l.Enabled, "enabled", true, "a disabled location keeps its stock but allocates none")
	f.BoolVar(&asJSON, "json", false, "print the location as JSON")
	return c
}

func locationsSet(ctx context.Context, w io.Writer, l stock.Location, asJSON bool) error {
	st, err := openStores(1)
	if err != nil {
		return err
	}
	defer st.close()
	if err := inventorydb.PutLocation(ctx, st.db, l); err != nil {
		return err
	}
	if err := ledger.PublishLocations(ctx, st.rc, st.prefix, []stock.Location{l}, false); err != nil {
		return fmt.Errorf("%w (PostgreSQL has it: run junbanctl locations publish)", err)
	}
	if asJSON {
		return cli.WriteJSON(w, l)
	}
	fmt.Fprintf(w, "locations set: %s\n", describeLocation(l))
	return nil
}

func describeLocation(l stock.Location) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s rank %d", l.ID, l.Kind, l.Rank)
	for _, f := range []struct {
		on   bool
		name string
	}{{l.Ships, "ships"}, {l.Pickup, "pickup"}, {!l.Enabled, "disabled"}} {
		if f.on {
			b.WriteString(" " + f.name)
		}
	}
	if l.Lat != nil {
		fmt.Fprintf(&b, " at %g,%g", *l.Lat, *l.Lon)
	}
	if len(l.Markets) > 0 {
		fmt.Fprintf(&b, " markets %s", strings.Join(l.Markets, ","))
	}
	return b.String()
}

func locationsListCmd() *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "list [--json]",
		Short: "list the locations PostgreSQL holds",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return withLocations(c.Context(), func(_ *stores, locs []stock.Location) error {
				if asJSON {
					return cli.WriteJSON(c.OutOrStdout(), locs)
				}
				for _, l := range locs {
					fmt.Fprintln(c.OutOrStdout(), describeLocation(l))
				}
				return nil
			})
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print the locations as JSON")
	return c
}

func locationsPublishCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "publish",
		Short: "copy PostgreSQL's locations to the workers' Redis, replacing what it holds",
		Long: "publish makes JUNBAN_KEY_PREFIX:locations in Redis exactly PostgreSQL's table locations:\n" +
			"after a Redis data loss, or when a set wrote PostgreSQL but not Redis.",
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return withLocations(c.Context(), func(st *stores, locs []stock.Location) error {
				if err := ledger.PublishLocations(c.Context(), st.rc, st.prefix, locs, true); err != nil {
					return err
				}
				fmt.Fprintf(c.OutOrStdout(), "locations publish: %d location(s) published\n", len(locs))
				return nil
			})
		},
	}
}

// withLocations runs fn with the stores and the locations PostgreSQL holds.
func withLocations(ctx context.Context, fn func(st *stores, locs []stock.Location) error) error {
	st, err := openStores(1)
	if err != nil {
		return err
	}
	defer st.close()
	locs, err := inventorydb.Locations(ctx, st.db)
	if err != nil {
		return err
	}
	return fn(&st, locs)
}
