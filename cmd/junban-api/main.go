// Command junban-api serves junban's read side over HTTP: stock and availability,
// orders with their timeline and turn, stuck turns and the dead-letter queues
// (internal/http/api, docs/api.md), and the operator console at / (internal/http/console,
// docs/console.md).
package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
	"gorm.io/gorm"

	"github.com/junban/junban/internal/domain"
	"github.com/junban/junban/internal/http/api"
	"github.com/junban/junban/internal/http/console"
	"github.com/junban/junban/internal/http/health"
	"github.com/junban/junban/internal/ledger"
	"github.com/junban/junban/internal/ledger/backorders"
	"github.com/junban/junban/internal/order/intake"
	"github.com/junban/junban/internal/platform/config"
	"github.com/junban/junban/internal/platform/lifecycle"
	"github.com/junban/junban/internal/platform/service"
	"github.com/junban/junban/internal/postgres/inventorydb"
	"github.com/junban/junban/internal/queue"
)

// startTimeout bounds resolving the orders queue at start-up.
const startTimeout = 15 * time.Second

// binary is what --help says about junban-api.
var binary = config.Binary{Name: "junban-api", Summary: "junban-api serves junban's read side over HTTP (docs/api.md) and the operator console at /\n(docs/console.md)."}

// Config is junban-api's configuration: the API's, and the console's beside it.
type Config struct {
	api.Config
	// Console are the console's sessions (JUNBAN_CONSOLE_*).
	Console console.Settings
}

// Validate checks both, every problem at once.
func (c Config) Validate() error { return errors.Join(c.Config.Validate(), c.Console.Validate()) }

func main() { service.Main(binary, service.Options{SecondSignalKills: true}, run) }

// run wires the API and serves until the first SIGINT or SIGTERM; a second one kills it
// at once. The API server, the backorder gauges, the admin server and the publisher stop
// in that order, within JUNBAN_SHUTDOWN_BUDGET.
func run(ctx context.Context, env service.Env[Config]) error {
	cfg, log, reg := env.Config.Config, env.Log, env.Registry
	d, err := openDeps(ctx, cfg, reg)
	if err != nil {
		return err
	}
	defer d.close()
	handler, err := buildHandler(cfg, env.Config.Console, d, log, reg)
	if err != nil {
		return err
	}
	hs, err := newAdmin(cfg, d, log, reg)
	if err != nil {
		return err
	}
	srv := cfg.Server(handler)
	ln, err := net.Listen("tcp", srv.Addr)
	if err != nil {
		return fmt.Errorf("listen on JUNBAN_API_ADDR %s: %w", srv.Addr, err)
	}
	gauges, err := backorders.New(backorders.Config{Queues: d.led, Interval: cfg.BackorderScanInterval, Logger: log, Registerer: reg})
	if err != nil {
		return err
	}
	r := lifecycle.Runner{Logger: log, Budget: cfg.ShutdownBudget}
	r.Add(lifecycle.Part{Name: "publisher", Service: lifecycle.Stopper(d.pub.Stop), LogStopError: true})
	r.Add(lifecycle.Part{Name: "admin server", Service: hs, LogStopError: true})
	r.Add(lifecycle.Part{Name: "backorder gauges", Service: lifecycle.NewLoop(gauges.Run)})
	r.Add(lifecycle.Part{Name: "api server", Service: lifecycle.NewHTTPServer(srv, ln)})
	return r.Run(ctx, func() {
		read, _ := api.ParseTokens(string(cfg.ReadTokens))
		admin, _ := api.ParseTokens(string(cfg.AdminTokens))
		// The token counts, never the tokens.
		log.Info("junban-api listening", zap.String("addr", ln.Addr().String()), zap.String("admin_addr", hs.Addr()),
			zap.Int("read_tokens", len(read)), zap.Int("admin_tokens", len(admin)), zap.Bool("open", len(read)+len(admin) == 0),
			zap.Stringer("allowed_hosts", cfg.Hosts()))
	})
}

// deps are what junban-api reads from and acts on.
type deps struct {
	rc        redis.UniversalClient
	db        *gorm.DB
	sqs       *sqs.Client
	ordersURL string
	// led is the ledger over Redis, loading SKUs from PostgreSQL.
	led *ledger.Ledger
	// pub nudges the order-workers after a skip.
	pub *queue.Publisher
}

// openDeps opens Redis, PostgreSQL and SQS, and the publisher to the orders queue.
func openDeps(ctx context.Context, cfg api.Config, reg prometheus.Registerer) (*deps, error) {
	rc, err := cfg.Redis.Client()
	if err != nil {
		return nil, err
	}
	d := &deps{rc: rc}
	if err := d.open(ctx, cfg, reg); err != nil {
		d.close()
		return nil, err
	}
	return d, nil
}

func (d *deps) open(ctx context.Context, cfg api.Config, reg prometheus.Registerer) error {
	var err error
	if d.db, err = cfg.Postgres.OpenPool(cfg.PGMaxConns); err != nil {
		return err
	}
	if d.led, err = ledger.New(ledger.Config{Redis: d.rc, Prefix: cfg.KeyPrefix, Loader: inventorydb.PGLoader{DB: d.db}}); err != nil {
		return err
	}
	if d.sqs, err = queue.NewClient(ctx, cfg.SQS, queue.CountRequests(reg)); err != nil {
		return err
	}
	sctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	if d.ordersURL, err = queue.ResolveURL(sctx, d.sqs, cfg.OrdersQueue); err != nil {
		return err
	}
	d.pub, err = queue.NewPublisher(queue.PublisherConfig{Client: d.sqs, QueueURL: d.ordersURL, Keys: domain.OrderKeys})
	return err
}

// close stops the publisher (shutdown has stopped it already, within the budget, unless
// the API server failed) and closes Redis.
func (d *deps) close() {
	if d.pub != nil {
		_ = d.pub.Stop(context.Background())
	}
	d.rc.Close()
}

// buildHandler is the API with the operator console at `/` (internal/http/console), over the
// API's handlers and tokens, answering only the names of JUNBAN_API_ALLOWED_HOSTS.
func buildHandler(cfg api.Config, cs console.Settings, d *deps, log *zap.Logger, reg *prometheus.Registry) (http.Handler, error) {
	h, err := api.New(api.ServerConfig{
		Deps: api.Deps{Redis: d.rc, Prefix: cfg.KeyPrefix, DB: d.db, Ledger: d.led,
			SQS: d.sqs, Queues: cfg.SQS, Nudge: intake.Nudger(d.pub), TraceURL: cfg.TraceURL},
		Options: api.OptionsOf(cfg), Logger: log, Registerer: reg,
	})
	if err != nil {
		return nil, err
	}
	cons, err := console.New(console.Config{API: h, Redis: d.rc, Prefix: cfg.KeyPrefix, DB: d.db, SQS: d.sqs, Queues: cfg.SQS, Logger: log,
		SecureCookie: cs.Secure(cfg.Addr), SessionLifetime: cs.SessionLifetime, SessionIdle: cs.SessionIdle})
	if err != nil {
		return nil, err
	}
	// The Host check covers the console's pages too: a rebinding page reaches neither.
	return api.OnlyHosts(cfg.Hosts(), console.Mount(h, cons)), nil
}

// newAdmin is the server of /healthz, /readyz and /metrics on JUNBAN_HTTP_ADDR.
func newAdmin(cfg api.Config, d *deps, log *zap.Logger, reg *prometheus.Registry) (*health.Server, error) {
	hs, err := health.New(health.Config{Addr: cfg.HTTPAddr, Registry: reg, Logger: log})
	if err != nil {
		return nil, err
	}
	hs.AddCheck("redis", health.RedisCheck(d.rc))
	hs.AddCheck("postgres", health.PostgresCheck(d.db))
	hs.AddCheck("sqs", health.SQSCheck(d.sqs, d.ordersURL))
	return hs, nil
}
