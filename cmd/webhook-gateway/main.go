// Command webhook-gateway turns payment providers' signed webhooks into junban order
// events, exactly one per provider event (docs/webhooks.md).
package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/junban/junban/internal/config"
	"github.com/junban/junban/internal/health"
	"github.com/junban/junban/internal/idempotency"
	"github.com/junban/junban/internal/logging"
	"github.com/junban/junban/internal/queue"
	"github.com/junban/junban/internal/webhook"
)

// startTimeout bounds resolving the orders queue at start-up.
const startTimeout = 15 * time.Second

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "webhook-gateway:", err)
		os.Exit(1)
	}
}

func run() error {
	if handled, err := config.Preflight[webhook.Config](os.Args[1:]); handled {
		return err
	}
	cfg, err := config.Load[webhook.Config]()
	if err != nil {
		return err
	}
	providers, err := cfg.ProviderList()
	if err != nil {
		return err
	}
	log, err := logging.New("webhook-gateway", cfg.LogFormat, cfg.LogLevel)
	if err != nil {
		return err
	}
	defer log.Sync()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	rc, err := cfg.Redis.Client()
	if err != nil {
		return err
	}
	defer rc.Close()
	sqsc, err := queue.NewClient(ctx, cfg.SQS)
	if err != nil {
		return err
	}
	sctx, cancel := context.WithTimeout(ctx, startTimeout)
	ordersURL, err := queue.ResolveURL(sctx, sqsc, cfg.OrdersQueue)
	cancel()
	if err != nil {
		return err
	}

	guard, err := idempotency.New(rc, idempotency.Config{Prefix: cfg.KeyPrefix, LockTTL: cfg.LockTTL, Retention: cfg.Retention})
	if err != nil {
		return err
	}
	reg := health.NewRegistry()
	h, err := webhook.NewHandler(webhook.HandlerConfig{
		Providers:      providers,
		Guard:          guard,
		Publisher:      webhook.SQSPublisher{Client: sqsc, QueueURL: ordersURL},
		MaxBodyBytes:   cfg.MaxBodyBytes,
		Tolerance:      cfg.Tolerance,
		PublishTimeout: cfg.PublishTimeout,
		Logger:         log,
		Registerer:     reg,
	})
	if err != nil {
		return err
	}
	mux := webhook.NewMux(h, reg, map[string]health.Check{
		"redis": health.RedisCheck(rc),
		"sqs":   health.SQSCheck(sqsc, ordersURL),
	})
	srv := cfg.Server(mux)
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("listen on JUNBAN_HTTP_ADDR %s: %w", cfg.HTTPAddr, err)
	}
	names := make([]string, len(providers))
	for i, p := range providers {
		names[i] = p.Name + ":" + string(p.Kind)
	}
	log.Info("webhook-gateway listening",
		zap.String("addr", ln.Addr().String()),
		zap.Strings("providers", names),
		zap.String("orders_queue", ordersURL))

	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("http server: %w", err)
	case <-ctx.Done():
	}
	stop() // a second signal kills the process at once
	log.Info("webhook-gateway shutting down", zap.Duration("budget", cfg.ShutdownBudget))
	sctx, cancel = context.WithTimeout(context.Background(), cfg.ShutdownBudget)
	defer cancel()
	// Shutdown waits for in-flight deliveries, whose guarded sections finish or release.
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutdown within JUNBAN_SHUTDOWN_BUDGET: %w", err)
	}
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	log.Info("webhook-gateway stopped")
	return nil
}
