// Command junban-api serves junban's read side over HTTP: stock and availability,
// orders with their timeline and turn, stuck turns and the dead-letter queues
// (internal/api, docs/api.md), and the operator console at / (internal/console,
// docs/console.md).
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

	"github.com/junban/junban/internal/api"
	"github.com/junban/junban/internal/config"
	"github.com/junban/junban/internal/console"
	"github.com/junban/junban/internal/health"
	"github.com/junban/junban/internal/inventorydb"
	"github.com/junban/junban/internal/ledger"
	"github.com/junban/junban/internal/logging"
	"github.com/junban/junban/internal/order"
	"github.com/junban/junban/internal/queue"
)

// startTimeout bounds resolving the orders queue at start-up.
const startTimeout = 15 * time.Second

// binary is what --help says about junban-api.
var binary = config.Binary{Name: "junban-api", Summary: "junban-api serves junban's read side over HTTP (docs/api.md) and the operator console at /\n(docs/console.md)."}

func main() {
	config.Exit(binary.Name, run())
}

func run() error {
	if handled, err := config.Preflight[api.Config](binary, os.Args[1:]); handled {
		return err
	}
	cfg, err := config.Load[api.Config]()
	if err != nil {
		return err
	}
	log, err := logging.New("junban-api", cfg.LogFormat, cfg.LogLevel)
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
	db, err := cfg.Postgres.OpenPool(cfg.PGMaxConns)
	if err != nil {
		return err
	}
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
	pub, err := queue.NewPublisher(queue.PublisherConfig{Client: sqsc, QueueURL: ordersURL})
	if err != nil {
		return err
	}
	defer pub.Stop(context.Background())

	reg := health.NewRegistry()
	led, err := ledger.New(ledger.Config{Redis: rc, Prefix: cfg.KeyPrefix, Loader: inventorydb.PGLoader{DB: db}})
	if err != nil {
		return err
	}
	h, err := api.New(api.Deps{
		Redis: rc, Prefix: cfg.KeyPrefix, DB: db,
		Ledger: led,
		SQS:    sqsc, Queues: cfg.SQS, Nudge: order.Nudger(pub),
		Log: log, Registerer: reg,
	}, api.OptionsOf(cfg))
	if err != nil {
		return err
	}
	// The operator console at `/` (internal/console), over the API's handlers and tokens.
	cons, err := console.New(console.Deps{API: h, Redis: rc, Prefix: cfg.KeyPrefix, DB: db, SQS: sqsc, Queues: cfg.SQS, Log: log})
	if err != nil {
		return err
	}
	hs := health.New(reg, log)
	hs.AddCheck("redis", health.RedisCheck(rc))
	hs.AddCheck("postgres", health.PostgresCheck(db))
	hs.AddCheck("sqs", health.SQSCheck(sqsc, ordersURL))
	if err := hs.Start(cfg.HTTPAddr); err != nil {
		return fmt.Errorf("listen on JUNBAN_HTTP_ADDR %s: %w", cfg.HTTPAddr, err)
	}
	srv := cfg.Server(console.Mount(h, cons))
	ln, err := net.Listen("tcp", srv.Addr)
	if err != nil {
		return fmt.Errorf("listen on JUNBAN_API_ADDR %s: %w", srv.Addr, err)
	}
	read, _ := api.ParseTokens(string(cfg.ReadTokens))
	admin, _ := api.ParseTokens(string(cfg.AdminTokens))
	// The token counts, never the tokens.
	log.Info("junban-api listening", zap.String("addr", ln.Addr().String()), zap.String("admin_addr", hs.Addr()),
		zap.Int("read_tokens", len(read)), zap.Int("admin_tokens", len(admin)), zap.Bool("open", len(read)+len(admin) == 0))

	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("http server: %w", err)
	case <-ctx.Done():
	}
	stop() // a second signal kills the process at once
	log.Info("junban-api shutting down", zap.Duration("budget", cfg.ShutdownBudget))
	sctx, cancel = context.WithTimeout(context.Background(), cfg.ShutdownBudget)
	defer cancel()
	err = srv.Shutdown(sctx)
	_ = hs.Stop(sctx)
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}
