// Package service is the start every junban service binary shares: the flags
// (--env-vars, --check-config, --help), the configuration from the environment, the
// runtime's tuning, the logger with its traces, the metrics registry and a context that
// ends on SIGINT or SIGTERM. A binary's main.go then holds only its wiring.
package service

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/junban/junban/internal/http/health"
	"github.com/junban/junban/internal/platform/config"
	"github.com/junban/junban/internal/platform/tracing"
)

// Options are what the binaries' starts differ in.
type Options struct {
	// TuneRuntime tunes the Go runtime first (config.TuneRuntime, which may start the
	// process again in place): the workers, whose handlers run on every core.
	TuneRuntime bool
	// SecondSignalKills stops catching SIGINT and SIGTERM once the first has arrived, so
	// that a second one kills the process at once, in the middle of its shutdown.
	SecondSignalKills bool
}

// Env is what a binary's run starts with.
type Env[C any] struct {
	// Config is the binary's configuration, loaded and validated.
	Config C
	// Log is the binary's logger; its spans go out through tracing.
	Log *zap.Logger
	// Registry holds the binary's metrics, for its /metrics.
	Registry *prometheus.Registry
}

// Configured is a binary's configuration: it embeds config.Common.
type Configured interface {
	CommonSettings() config.Common
}

// Main runs a service binary with the process's arguments and exits with run's outcome
// (config.Exit: 0, 1, or 2 for a usage error).
func Main[C Configured](b config.Binary, opts Options, run func(ctx context.Context, env Env[C]) error) {
	config.Exit(b.Name, Run(b, opts, os.Args[1:], run))
}

// Run is Main's start without the exit: the flags in args, the configuration, the tuning,
// the logger and traces (flushed when run returns), the registry, and a context that ends
// on the first SIGINT or SIGTERM; then run.
func Run[C Configured](b config.Binary, opts Options, args []string, run func(ctx context.Context, env Env[C]) error) error {
	if handled, err := config.Preflight[C](b, args); handled {
		return err
	}
	cfg, err := config.Load[C]()
	if err != nil {
		return err
	}
	var tuneErr error
	if opts.TuneRuntime {
		tuneErr = config.TuneRuntime()
	}
	common := cfg.CommonSettings()
	log, done, err := tracing.Observe(b.Name, common.LogFormat, common.LogLevel)
	if err != nil {
		return err
	}
	defer done()
	if opts.TuneRuntime {
		config.WarnUntuned(log, tuneErr)
	}

	signaled, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	// run's context ends after the signals are let go (with SecondSignalKills), so that a
	// second one during its shutdown is never caught.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	context.AfterFunc(signaled, func() {
		if opts.SecondSignalKills {
			stop()
		}
		cancel()
	})
	return run(ctx, Env[C]{Config: cfg, Log: log, Registry: health.NewRegistry()})
}
