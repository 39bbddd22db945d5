// Package config reads junban's settings from the environment.
//
// Every binary parses one struct with caarlos0/env, which reports every missing or
// invalid variable in one error, so a user fixing a deployment sees all that is wrong at
// once. Variables not set in the environment are taken from the file JUNBAN_STACK_ENV
// names, when it names one (the local stack, scripts/stack.sh, writes .junban/stack.env).
package config

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"
	"time"

	"github.com/caarlos0/env/v11"
	"github.com/cenkalti/backoff/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	gormlogger "gorm.io/gorm/logger"

	"github.com/junban/junban/internal/platform/buildinfo"
	"github.com/junban/junban/internal/redis/replication"
)

// StackEnvFile is where the local stack (scripts/stack.sh) writes its endpoints,
// relative to the repository root. Nothing reads it unless JUNBAN_STACK_ENV names it.
const StackEnvFile = ".junban/stack.env"

// StackEnvVar names the file of defaults that LoadStackEnv reads. Unset, no file is read:
// a .junban/stack.env that happens to lie in a production pod's working directory (or any
// directory above it) changes nothing.
const StackEnvVar = "JUNBAN_STACK_ENV"

// LoadStackEnv sets the variables of the file named by JUNBAN_STACK_ENV that the
// environment does not set already. With JUNBAN_STACK_ENV unset it reads nothing; a named
// file that does not exist is not an error (tests name one on purpose to read none).
func LoadStackEnv() error {
	path := os.Getenv(StackEnvVar)
	if path == "" {
		return nil
	}
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("config: open stack env: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		if _, set := os.LookupEnv(k); !set {
			os.Setenv(k, v)
		}
	}
	return sc.Err()
}

// Defaulter is a configuration whose defaults are the named constants of the packages
// that own the settings. Load calls SetDefaults on the zero value before it parses the
// environment, so a variable left unset keeps the constant, and --env-vars prints the
// same values: a default is written once, in its package. A field with an envDefault tag
// (the settings config itself owns) takes the tag instead. SetDefaults of a struct that
// embeds others calls theirs.
type Defaulter interface{ SetDefaults() }

// defaults returns T's zero value with the SetDefaults of every struct in it applied,
// nested ones first, so that an embedded Defaulter is never lost to method promotion (two
// embedded ones would hide each other's).
func defaults[T any]() T {
	var cfg T
	setDefaults(reflect.ValueOf(&cfg).Elem())
	return cfg
}

func setDefaults(v reflect.Value) {
	for i := range v.NumField() {
		if f := v.Type().Field(i); f.IsExported() && f.Type.Kind() == reflect.Struct && f.Tag.Get("env") == "" {
			setDefaults(v.Field(i))
		}
	}
	if d, ok := v.Addr().Interface().(Defaulter); ok {
		d.SetDefaults()
	}
}

// Load reads the stack file (when JUNBAN_STACK_ENV names one), then parses the
// environment into a T on top of its defaults and validates it. The error lists every
// problem, one per line.
func Load[T any]() (T, error) {
	if err := LoadStackEnv(); err != nil {
		var zero T
		return zero, err
	}
	cfg := defaults[T]()
	err := env.Parse(&cfg)
	var problems []string
	if err != nil {
		var agg env.AggregateError
		if errors.As(err, &agg) {
			keys := fieldKeys(reflect.TypeOf(cfg), map[string][]string{})
			for _, e := range agg.Errors {
				problems = append(problems, describe(e, keys))
			}
		} else {
			problems = append(problems, err.Error())
		}
	}
	if v, ok := any(&cfg).(interface{ Validate() error }); ok {
		problems = append(problems, Problems(v.Validate())...)
	}
	if len(problems) > 0 {
		return cfg, &Error{Problems: problems}
	}
	return cfg, nil
}

// describe words a parse error with the variable's name: the parser names the struct
// field, and the value it refused stays in the field's default, which Validate accepts.
func describe(err error, keys map[string][]string) string {
	var pe env.ParseError
	if errors.As(err, &pe) && len(keys[pe.Name]) > 0 {
		return strings.Join(keys[pe.Name], " or ") + ": " + pe.Err.Error()
	}
	return err.Error()
}

// fieldKeys maps each field name of the struct type t (nested structs included) to the
// env keys of the fields of that name.
func fieldKeys(t reflect.Type, out map[string][]string) map[string][]string {
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		if key, _, _ := strings.Cut(f.Tag.Get("env"), ","); key != "" {
			out[f.Name] = append(out[f.Name], key)
		} else if f.Type.Kind() == reflect.Struct {
			fieldKeys(f.Type, out)
		}
	}
	return out
}

// Problems lists the problems in err, one per entry: the errors joined with errors.Join
// (nested joins included) each make one entry, any other error one.
func Problems(err error) []string {
	if err == nil {
		return nil
	}
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return []string{err.Error()}
	}
	var p []string
	for _, e := range j.Unwrap() {
		p = append(p, Problems(e)...)
	}
	return p
}

// Error lists every configuration problem found at start-up.
type Error struct{ Problems []string }

func (e *Error) Error() string {
	return "invalid configuration:\n  - " + strings.Join(e.Problems, "\n  - ")
}

// Common holds the settings every binary has.
type Common struct {
	// LogFormat is json (default) or console.
	LogFormat string `env:"JUNBAN_LOG_FORMAT" envDefault:"json"`
	// LogLevel is debug, info, warn or error.
	LogLevel string `env:"JUNBAN_LOG_LEVEL" envDefault:"info"`
	// HTTPAddr serves /healthz, /readyz and /metrics.
	HTTPAddr string `env:"JUNBAN_HTTP_ADDR" envDefault:"127.0.0.1:0"`
	// ShutdownBudget bounds graceful shutdown, under the 30 s that ECS and Kubernetes give.
	ShutdownBudget time.Duration `env:"JUNBAN_SHUTDOWN_BUDGET"`
}

// ShutdownBudgetDefault is JUNBAN_SHUTDOWN_BUDGET's default (and queue's, for consumers
// built without a budget): under the 30 s that ECS and Kubernetes give between SIGTERM
// and SIGKILL.
const ShutdownBudgetDefault = 25 * time.Second

// CommonSettings is c: a binary's configuration, which embeds Common, answers it.
func (c Common) CommonSettings() Common { return c }

// SetDefaults sets the defaults that are named constants.
func (c *Common) SetDefaults() { c.ShutdownBudget = ShutdownBudgetDefault }

// Validate checks the values that the parser cannot.
func (c Common) Validate() error {
	var p []error
	if c.LogFormat != "json" && c.LogFormat != "console" {
		p = append(p, fmt.Errorf(`JUNBAN_LOG_FORMAT: %q is neither "json" nor "console"`, c.LogFormat))
	}
	if _, err := zapcore.ParseLevel(c.LogLevel); err != nil {
		p = append(p, fmt.Errorf("JUNBAN_LOG_LEVEL: %q is not debug, info, warn or error", c.LogLevel))
	}
	if c.ShutdownBudget <= 0 {
		p = append(p, errors.New("JUNBAN_SHUTDOWN_BUDGET: must be positive"))
	}
	return errors.Join(p...)
}

// Redis says how to reach Redis/Valkey.
type Redis struct {
	// URL is a redis:// or rediss:// URL; with Cluster, the seed node.
	URL string `env:"REDIS_URL,required,notEmpty"`
	// Cluster connects with the cluster client (every junban script touches one hash tag).
	Cluster bool `env:"REDIS_CLUSTER" envDefault:"false"`
	// KeyPrefix starts every key junban writes, so tests and tenants never share keys.
	KeyPrefix string `env:"JUNBAN_KEY_PREFIX" envDefault:"junban"`
}

// Validate checks the key prefix: every junban key puts its entity in a Redis Cluster hash
// tag ({lcid}), which a brace in the prefix would replace, putting every key in one slot.
func (r Redis) Validate() error {
	var p []error
	if r.KeyPrefix == "" {
		p = append(p, errors.New("JUNBAN_KEY_PREFIX: must not be empty"))
	}
	if strings.ContainsAny(r.KeyPrefix, "{}") {
		p = append(p, errors.New("JUNBAN_KEY_PREFIX: must not contain '{' or '}' (Redis Cluster hash tags)"))
	}
	if r.URL != "" && r.parse(r.URL) != nil {
		p = append(p, urlError("REDIS_URL", r.URL, r.parse))
	}
	return errors.Join(p...)
}

// parse parses s as Client parses the URL.
func (r Redis) parse(s string) error {
	if r.Cluster {
		_, err := redis.ParseClusterURL(s)
		return err
	}
	_, err := redis.ParseURL(s)
	return err
}

// Client opens a client for the URL: a cluster client when Cluster is set. The error never
// shows the URL's password.
func (r Redis) Client() (redis.UniversalClient, error) {
	if r.Cluster {
		opt, err := redis.ParseClusterURL(r.URL)
		if err != nil {
			return nil, fmt.Errorf("config: %w", urlError("REDIS_URL", r.URL, r.parse))
		}
		return redis.NewClusterClient(opt), nil
	}
	opt, err := redis.ParseURL(r.URL)
	if err != nil {
		return nil, fmt.Errorf("config: %w", urlError("REDIS_URL", r.URL, r.parse))
	}
	return redis.NewClient(opt), nil
}

// RedisReplication says how many replicas a write needs before the worker lets go of what
// it would lose with the primary (see internal/redis/replication). Default: none, no WAIT sent.
type RedisReplication struct {
	// MinReplicas is how many replicas must acknowledge a take or a commit (WAIT) before
	// the SQS message is deleted or the results published; 0 turns it off.
	MinReplicas int `env:"JUNBAN_REDIS_MIN_REPLICAS" envDefault:"0"`
	// ReplicaTimeout bounds each WAIT; past it the write counts as not yet durable.
	ReplicaTimeout time.Duration `env:"JUNBAN_REDIS_REPLICA_TIMEOUT"`
	// WaitAOF asks for the primary's own AOF fsync as well (WAITAOF, Redis 7.2+, with
	// appendonly yes): checked at start-up.
	WaitAOF bool `env:"JUNBAN_REDIS_WAIT_AOF" envDefault:"false"`
	// ReplicaCheckInterval is how often, after start, MinReplicas is compared with the
	// replicas each primary has online.
	ReplicaCheckInterval time.Duration `env:"JUNBAN_REDIS_REPLICA_CHECK_INTERVAL"`
}

// SetDefaults takes the defaults from replication.
func (r *RedisReplication) SetDefaults() {
	r.ReplicaTimeout = replication.TimeoutDefault
	r.ReplicaCheckInterval = replication.CheckIntervalDefault
}

// MaxReplicaTimeout keeps a WAIT inside go-redis' default read timeout (3 s), which bounds
// the replies of the pipeline it ends.
const MaxReplicaTimeout = 2 * time.Second

// Validate checks the bounds.
func (r RedisReplication) Validate() error {
	var p []error
	if r.MinReplicas < 0 {
		p = append(p, errors.New("JUNBAN_REDIS_MIN_REPLICAS: must not be negative"))
	}
	if r.ReplicaTimeout < time.Millisecond || r.ReplicaTimeout > MaxReplicaTimeout {
		p = append(p, fmt.Errorf("JUNBAN_REDIS_REPLICA_TIMEOUT: must be 1ms..%v (inside the Redis client's read timeout)", MaxReplicaTimeout))
	}
	if r.ReplicaCheckInterval < time.Second {
		p = append(p, errors.New("JUNBAN_REDIS_REPLICA_CHECK_INTERVAL: must be at least 1s"))
	}
	return errors.Join(p...)
}

// Waiter returns the replication.Waiter of these settings, its metric in reg; with
// WaitAOF it refuses servers that cannot serve WAITAOF (older than 7.2, appendonly off).
func (r RedisReplication) Waiter(ctx context.Context, rc redis.UniversalClient, reg prometheus.Registerer) (*replication.Waiter, error) {
	w, err := replication.New(replication.Config{Replicas: r.MinReplicas, Timeout: r.ReplicaTimeout, AOF: r.WaitAOF, Registerer: reg})
	if err != nil {
		return nil, err
	}
	if err := w.Check(ctx, rc); err != nil {
		return nil, err
	}
	return w, nil
}

// Monitor starts comparing MinReplicas with the replicas each primary reports (off at 0):
// it refuses a setting the servers can never meet, and warns (log, metrics in reg) every
// ReplicaCheckInterval while a primary has fewer online, until ctx ends.
func (r RedisReplication) Monitor(ctx context.Context, rc redis.UniversalClient, reg prometheus.Registerer, log *zap.Logger) (*replication.Monitor, error) {
	m, err := replication.NewMonitor(replication.MonitorConfig{Redis: rc, Replicas: r.MinReplicas, Interval: r.ReplicaCheckInterval, Logger: log, Registerer: reg})
	if err != nil {
		return nil, err
	}
	if err := m.Start(ctx); err != nil {
		return nil, err
	}
	return m, nil
}

// Postgres says how to reach PostgreSQL.
type Postgres struct {
	// URL is a postgres:// connection string.
	URL string `env:"DATABASE_URL,required,notEmpty"`
}

// SQS says how to reach SQS and which queues to use.
type SQS struct {
	// Region is the AWS region.
	Region string `env:"AWS_REGION,required,notEmpty"`
	// Endpoint overrides the SQS endpoint (LocalStack, the local emulator); empty for AWS.
	Endpoint string `env:"AWS_ENDPOINT_URL_SQS"`
	// OrdersQueue is the name or URL of the orders queue.
	OrdersQueue string `env:"JUNBAN_ORDERS_QUEUE" envDefault:"orders"`
	// ResultsQueue is the name or URL of the results queue.
	ResultsQueue string `env:"JUNBAN_RESULTS_QUEUE" envDefault:"results"`
	// OrdersDLQ is the name or URL of the orders dead-letter queue.
	OrdersDLQ string `env:"JUNBAN_ORDERS_DLQ" envDefault:"orders-dlq"`
	// ResultsDLQ is the name or URL of the results dead-letter queue.
	ResultsDLQ string `env:"JUNBAN_RESULTS_DLQ" envDefault:"results-dlq"`
}

// QueuePair is a work queue and the dead-letter queue it redrives to, each a name or a URL.
type QueuePair struct {
	// Queue is the work queue.
	Queue string
	// DLQ is its dead-letter queue.
	DLQ string
}

// Pairs are junban's work queues with their dead-letter queues: the set `junbanctl queues
// create` makes, and the one docker-compose's LocalStack init script is checked against.
func (s SQS) Pairs() []QueuePair {
	return []QueuePair{{s.OrdersQueue, s.OrdersDLQ}, {s.ResultsQueue, s.ResultsDLQ}}
}

// Open connects gorm to PostgreSQL with pgx, logging nothing per statement; the error never
// shows the URL's password. It does not ping: a worker starts while PostgreSQL is down, and /readyz says so until it is back.
func (p Postgres) Open() (*gorm.DB, error) {
	db, err := gorm.Open(postgres.Open(p.URL), &gorm.Config{
		Logger:                 gormlogger.Discard,
		SkipDefaultTransaction: true,
		DisableAutomaticPing:   true,
	})
	if err != nil {
		// gorm's error is pgx's, which quotes the connection string: built again from the
		// redacted one.
		return nil, fmt.Errorf("config: %w", urlError("DATABASE_URL", p.URL, parsePostgres))
	}
	return db, nil
}

// OpenPool is Open with at most conns connections, kept idle up to five minutes.
func (p Postgres) OpenPool(conns int) (*gorm.DB, error) {
	db, err := p.Open()
	if err != nil {
		return nil, err
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, err
	}
	sqlDB.SetMaxOpenConns(conns)
	sqlDB.SetMaxIdleConns(conns)
	sqlDB.SetConnMaxIdleTime(5 * time.Minute)
	return db, nil
}

// Var describes one environment variable a configuration reads.
type Var struct {
	Name     string
	Default  string
	Required bool
}

// Vars lists the variables T reads, in field order, each with its default: the
// envDefault tag, or else the value SetDefaults gives the field (empty for a zero value).
func Vars[T any]() ([]Var, error) {
	d := defaults[T]()
	params, err := env.GetFieldParams(&d)
	if err != nil {
		return nil, err
	}
	values := map[string]string{}
	collect(reflect.ValueOf(d), values)
	out := make([]Var, 0, len(params))
	for _, p := range params {
		v := Var{Name: p.Key, Default: p.DefaultValue, Required: p.Required}
		if !p.HasDefaultValue {
			v.Default = values[p.Key]
		}
		out = append(out, v)
	}
	return out, nil
}

// collect maps each env key of the struct v (nested structs included) to its field's
// value as FormatDefault writes it; zero values are left out.
func collect(v reflect.Value, out map[string]string) {
	t := v.Type()
	for i := range t.NumField() {
		f, fv := t.Field(i), v.Field(i)
		if !f.IsExported() {
			continue
		}
		key, _, _ := strings.Cut(f.Tag.Get("env"), ",")
		switch {
		case key != "":
			if !fv.IsZero() {
				out[key] = FormatDefault(fv.Interface())
			}
		case fv.Kind() == reflect.Struct:
			collect(fv, out)
		}
	}
}

// FormatDefault writes a default as an operator would set it: durations without their
// zero tails ("168h", "1m", "20s", not "168h0m0s"), everything else with fmt.
func FormatDefault(v any) string {
	d, ok := v.(time.Duration)
	if !ok {
		return fmt.Sprint(v)
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// ErrUsage marks a mistake in a binary's command line: it exits 2.
var ErrUsage = errors.New("usage")

// UsageError is a mistake in a binary's command line, with the usage to print after it.
type UsageError struct {
	Err   error
	Usage string
}

func (e *UsageError) Error() string   { return "usage: " + e.Err.Error() }
func (e *UsageError) Unwrap() []error { return []error{ErrUsage, e.Err} }

// Binary describes a service binary for its --help.
type Binary struct {
	// Name is the binary's name, as it is invoked.
	Name string
	// Summary says in a sentence or two what the binary does.
	Summary string
}

// Preflight parses the flags every service binary has: --help (-h) prints the usage,
// --env-vars prints the variables the binary reads (name, required or default),
// --check-config loads and validates the configuration and says so. handled is true
// when one of them ran (or the command line was wrong): the binary then exits, 0 when
// err is nil, 2 when err is ErrUsage (an unknown flag or an argument; the usage is on
// standard error), 1 otherwise. The binaries take their configuration from the
// environment only, so any other flag or argument is a mistake.
func Preflight[T any](b Binary, args []string) (handled bool, err error) {
	fs := flag.NewFlagSet(b.Name, flag.ContinueOnError)
	envVars := fs.Bool("env-vars", false, "print the environment variables "+b.Name+" reads (name, then required or its default) and exit")
	checkConfig := fs.Bool("check-config", false, "load and validate the configuration from the environment, say so and exit")
	version := fs.Bool("version", false, "print the version, the commit and the Go version and exit")
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	var usage strings.Builder
	fmt.Fprintf(&usage, "usage: %s [--env-vars | --check-config | --version]\n       %s healthcheck [--ready]\n\n%s\n\n", b.Name, b.Name, b.Summary)
	fmt.Fprintf(&usage, "%s takes its configuration from environment variables only: --env-vars lists them\n"+
		"with their defaults; docs/configuration.md and docs/operations.md describe them.\n\nflags:\n", b.Name)
	fs.VisitAll(func(f *flag.Flag) { fmt.Fprintf(&usage, "  --%-14s %s\n", f.Name, f.Usage) })
	fmt.Fprintf(&usage, "  -h, --help       print this help and exit\n\n%s", healthcheckUsage)
	if len(args) > 0 && args[0] == "healthcheck" {
		return true, healthcheck[T](args[1:], usage.String())
	}
	err = fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fmt.Print(usage.String())
		return true, nil
	case err == nil && fs.NArg() > 0:
		err = fmt.Errorf("takes no arguments, got %q", fs.Args())
	}
	if err != nil {
		return true, &UsageError{Err: err, Usage: usage.String()}
	}
	switch {
	case *version:
		fmt.Println(buildinfo.Read().Line(b.Name))
		return true, nil
	case *envVars:
		vars, err := Vars[T]()
		if err != nil {
			return true, err
		}
		for _, v := range vars {
			switch {
			case v.Required:
				fmt.Printf("%s\trequired\n", v.Name)
			default:
				fmt.Printf("%s\tdefault=%s\n", v.Name, v.Default)
			}
		}
		return true, nil
	case *checkConfig:
		if _, err := Load[T](); err != nil {
			return true, err
		}
		fmt.Println("configuration ok")
		return true, nil
	}
	return false, nil
}

// Exit ends a service binary whose run returned err: status 0 when err is nil, 2 for a
// usage error, 1 otherwise, the error on standard error prefixed with the binary's name.
func Exit(name string, err error) {
	if err == nil {
		os.Exit(0)
	}
	fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
	if u, ok := errors.AsType[*UsageError](err); ok {
		fmt.Fprint(os.Stderr, "\n"+u.Usage)
	}
	if errors.Is(err, ErrUsage) {
		os.Exit(2)
	}
	os.Exit(1)
}

// StartupTimeoutDefault is JUNBAN_STARTUP_TIMEOUT's default: long enough for the SQS
// emulator, LocalStack or PostgreSQL that docker-compose starts beside a worker to come
// up, short enough that a worker that can never reach them exits and is seen to fail.
const StartupTimeoutDefault = 60 * time.Second

// Startup bounds a worker's start-up steps (the queue lookups, PostgreSQL, migrations).
type Startup struct {
	// Timeout is how long each start-up step is retried, with backoff, before the worker
	// exits; 0 retries until the worker is stopped.
	Timeout time.Duration `env:"JUNBAN_STARTUP_TIMEOUT"`
}

// SetDefaults sets Timeout's default.
func (s *Startup) SetDefaults() { s.Timeout = StartupTimeoutDefault }

// Validate checks the bound.
func (s Startup) Validate() error {
	if s.Timeout < 0 {
		return errors.New("JUNBAN_STARTUP_TIMEOUT: must not be negative")
	}
	return nil
}

// Start-up backoff: the pause after a step's first failure, doubling up to the cap, and
// the bound of one attempt.
const (
	startupPauseFirst = 500 * time.Millisecond
	startupPauseMax   = 15 * time.Second
	startupAttemptMax = 30 * time.Second
)

// Retry runs fn until it succeeds, ctx ends or s.Timeout has passed, logging each failure
// with the pause before the next attempt: a worker started before SQS or PostgreSQL
// answers waits for them instead of exiting on the first error. Each attempt gets at most
// 30 s. An error wrapped with backoff.Permanent ends the retries at once. The error names
// the step and wraps fn's last error.
func (s Startup) Retry(ctx context.Context, log *zap.Logger, step string, fn func(context.Context) error) error {
	attempt := 0
	var last error
	_, err := backoff.Retry(ctx, func() (struct{}, error) {
		attempt++
		actx, cancel := context.WithTimeout(ctx, startupAttemptMax)
		defer cancel()
		last = fn(actx)
		return struct{}{}, last
	},
		backoff.WithBackOff(&backoff.ExponentialBackOff{InitialInterval: startupPauseFirst, Multiplier: 2, MaxInterval: startupPauseMax}),
		backoff.WithMaxElapsedTime(s.Timeout),
		backoff.WithNotify(func(err error, pause time.Duration) {
			log.Warn("start-up step failed; retrying", zap.String("step", step), zap.Int("attempt", attempt),
				zap.Duration("pause", pause), zap.Error(err))
		}))
	if err == nil {
		return nil
	}
	if ctx.Err() != nil && last != nil {
		// Stopped while retrying: say what the step last failed with, too.
		return fmt.Errorf("%s: %w (last error: %v)", step, err, last)
	}
	return fmt.Errorf("%s: %w", step, err)
}
