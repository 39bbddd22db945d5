// Command webhook-gateway turns payment providers' signed webhooks into junban order
// events, exactly one per provider event (docs/webhooks.md).
package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/junban/junban/internal/domain"
	"github.com/junban/junban/internal/http/health"
	"github.com/junban/junban/internal/http/webhook"
	"github.com/junban/junban/internal/platform/config"
	"github.com/junban/junban/internal/platform/lifecycle"
	"github.com/junban/junban/internal/platform/service"
	"github.com/junban/junban/internal/queue"
	"github.com/junban/junban/internal/redis/idempotency"
)

// startTimeout bounds resolving the orders queue at start-up.
const startTimeout = 15 * time.Second

// binary is what --help says about webhook-gateway.
var binary = config.Binary{Name: "webhook-gateway", Summary: "webhook-gateway turns payment providers' signed webhooks into junban order events, exactly\none per provider event (docs/webhooks.md)."}

func main() { service.Main(binary, service.Options{SecondSignalKills: true}, run) }

// run wires the gateway and serves until the first SIGINT or SIGTERM; a second one kills
// it at once.
func run(ctx context.Context, env service.Env[webhook.Config]) error {
	cfg, log, reg := env.Config, env.Log, env.Registry
	providers, err := cfg.ProviderList()
	if err != nil {
		return err
	}
	rc, err := cfg.Redis.Client()
	if err != nil {
		return err
	}
	defer rc.Close()
	sqsc, err := queue.NewClient(ctx, cfg.SQS, queue.CountRequests(reg))
	if err != nil {
		return err
	}
	sctx, cancel := context.WithTimeout(ctx, startTimeout)
	ordersURL, err := queue.ResolveURL(sctx, sqsc, cfg.OrdersQueue)
	cancel()
	if err != nil {
		return err
	}
	h, err := buildHandler(cfg, providers, rc, webhook.SQSPublisher{Client: sqsc, QueueURL: ordersURL, Keys: domain.OrderKeys}, log, reg)
	if err != nil {
		return err
	}
	checks := map[string]health.Check{
		"redis": health.RedisCheck(rc),
		"sqs":   health.SQSCheck(sqsc, ordersURL),
	}
	ls, err := listen(cfg, h, reg, checks, log)
	if err != nil {
		return err
	}
	// Both listeners stop together, within one budget. Shutdown waits for in-flight
	// deliveries, whose guarded sections finish or release.
	r := lifecycle.Runner{Logger: log, Budget: cfg.ShutdownBudget}
	r.Add(lifecycle.Part{Name: "listeners", Service: lifecycle.Together(
		lifecycle.NewHTTPServer(ls[0].srv, ls[0].ln), lifecycle.NewHTTPServer(ls[1].srv, ls[1].ln))})
	if err := r.Run(ctx, func() { logListening(log, ls, providers, ordersURL) }); err != nil {
		return err
	}
	log.Info("webhook-gateway stopped")
	return nil
}

// buildHandler is the webhook handler: each provider event guarded by its idempotency key,
// then published to the orders queue.
func buildHandler(cfg webhook.Config, providers []webhook.Provider, rc redis.UniversalClient, pub webhook.Publisher, log *zap.Logger, reg prometheus.Registerer) (*webhook.Handler, error) {
	guard, err := idempotency.New(idempotency.Config{Redis: rc, Prefix: cfg.KeyPrefix, LockTTL: cfg.LockTTL, Retention: cfg.Retention})
	if err != nil {
		return nil, err
	}
	return webhook.NewHandler(webhook.HandlerConfig{
		Providers:       providers,
		Guard:           guard,
		Publisher:       pub,
		MaxBodyBytes:    cfg.MaxBodyBytes,
		Tolerance:       cfg.Tolerance,
		PublishTimeout:  cfg.PublishTimeout,
		MaxInFlight:     cfg.MaxInFlight,
		BodyReadTimeout: cfg.BodyReadTimeout,
		Logger:          log,
		Registerer:      reg,
	})
}

// listener is one of the gateway's HTTP servers and its bound socket.
type listener struct {
	setting string // the variable that names the address
	srv     *http.Server
	ln      net.Listener
}

// listen binds the public listener, which the providers reach, and the admin one, which
// the probes and the metrics scrape reach.
func listen(cfg webhook.Config, h *webhook.Handler, reg *prometheus.Registry, checks map[string]health.Check, log *zap.Logger) ([]*listener, error) {
	ls := []*listener{
		{setting: "JUNBAN_HTTP_ADDR", srv: cfg.Server(webhook.NewPublicMux(h))},
		{setting: "JUNBAN_WEBHOOK_ADMIN_ADDR", srv: cfg.AdminServer(webhook.NewAdminMux(webhook.Admin{Gatherer: reg, Checks: checks, Logger: log}))},
	}
	for i, l := range ls {
		var err error
		if l.ln, err = net.Listen("tcp", l.srv.Addr); err != nil {
			for _, prev := range ls[:i] {
				prev.ln.Close()
			}
			return nil, fmt.Errorf("listen on %s %s: %w", l.setting, l.srv.Addr, err)
		}
	}
	return ls, nil
}

func logListening(log *zap.Logger, ls []*listener, providers []webhook.Provider, ordersURL string) {
	names := make([]string, len(providers))
	for i, p := range providers {
		names[i] = p.Name + ":" + string(p.Kind)
	}
	log.Info("webhook-gateway listening",
		zap.String("addr", ls[0].ln.Addr().String()),
		zap.String("admin_addr", ls[1].ln.Addr().String()),
		zap.Strings("providers", names),
		zap.String("orders_queue", ordersURL))
}
