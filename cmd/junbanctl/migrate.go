package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/junban/junban/internal/config"
	"github.com/junban/junban/migrations"
)

func runMigrate(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	if err := parseFlags(fs, args, false); err != nil {
		return err
	}
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
	fmt.Printf("migrate: %d migration(s) applied\n", n)
	return nil
}

// runStack runs scripts/stack.sh, found from the working directory upwards.
func runStack(ctx context.Context, args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("%w: junbanctl stack up|down|status", errUsage)
	}
	dir, _ := os.Getwd()
	for {
		script := filepath.Join(dir, "scripts", "stack.sh")
		if _, err := os.Stat(script); err == nil {
			cmd := exec.CommandContext(ctx, "bash", script, args[0])
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
