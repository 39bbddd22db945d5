package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/junban/junban/internal/platform/cli"
	"github.com/junban/junban/internal/platform/config"
	"github.com/junban/junban/migrations"
)

// migrateReport is what migrate prints with --json.
type migrateReport struct {
	// Applied is the number of migrations this run applied (0: the schema was current).
	Applied int `json:"applied"`
}

func migrateCmd() *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "migrate",
		Short: "apply the database migrations",
		Args:  cli.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return runMigrate(c.Context(), c.OutOrStdout(), asJSON)
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	return c
}

func runMigrate(ctx context.Context, w io.Writer, asJSON bool) error {
	cfg, err := config.Load[config.Postgres]()
	if err != nil {
		return err
	}
	db, err := cfg.Open()
	if err != nil {
		return err
	}
	sqlDB, err := db.DB()
	if err != nil {
		return err
	}
	defer sqlDB.Close()
	n, err := migrations.Up(ctx, sqlDB)
	if err != nil {
		return err
	}
	if asJSON {
		return cli.WriteJSON(w, migrateReport{Applied: n})
	}
	fmt.Fprintf(w, "migrate: %d migration(s) applied\n", n)
	return nil
}

func stackCmd() *cobra.Command {
	return &cobra.Command{
		Use:       "stack up|down|status",
		Short:     "local stack: up | down | status",
		Long:      "stack runs scripts/stack.sh (found from the working directory upwards) with its one argument.",
		ValidArgs: []string{"up", "down", "status"},
		Args: func(c *cobra.Command, args []string) error {
			if len(args) != 1 {
				return cli.Usagef("junbanctl stack up|down|status")
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error { return runStack(c.Context(), args[0]) },
	}
}

// runStack runs scripts/stack.sh, found from the working directory upwards.
func runStack(ctx context.Context, arg string) error {
	dir, _ := os.Getwd()
	for {
		script := filepath.Join(dir, "scripts", "stack.sh")
		if _, err := os.Stat(script); err == nil {
			cmd := exec.CommandContext(ctx, "bash", script, arg)
			cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
			return cmd.Run()
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return fmt.Errorf("stack: scripts/stack.sh not found above the working directory")
		}
		dir = parent
	}
}
