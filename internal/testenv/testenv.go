// Package testenv gives tests their own corner of the real services: a Redis key
// prefix, a PostgreSQL schema with the migrations applied, and SQS queues with unique
// names. The services come from the environment, or from the file JUNBAN_STACK_ENV names
// (`make test` sets it to the stack's .junban/stack.env; nothing is looked up implicitly);
// a test that cannot reach them fails and says how to start them. WaitFor waits for a
// condition with a deadline, for tests that wait for something to happen.
//
// Under -short (`make test-unit`) every helper that hands out a service, a built binary
// or a server process of its own skips the test instead, so the unit tier needs nothing
// but the Go toolchain.
package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/junban/junban/internal/platform/config"
	"github.com/junban/junban/internal/queue"
	"github.com/junban/junban/migrations"
)

var loadOnce sync.Once

// skipShort skips the test under -short: it needs what (a service, a build, a process).
func skipShort(t testing.TB, what string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("needs %s; not in -short", what)
	}
}

func load(t testing.TB, what string) {
	t.Helper()
	skipShort(t, what)
	loadOnce.Do(func() {
		if err := config.LoadStackEnv(); err != nil {
			t.Fatalf("testenv: %v", err)
		}
	})
}

func need(t testing.TB, name string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		t.Fatalf("testenv: %s is not set; start the stack with `make stack` and export "+
			"JUNBAN_STACK_ENV=<repository>/.junban/stack.env (make test does), or set %s", name, name)
	}
	return v
}

// ID returns a short random name part, unique per call.
func ID() string {
	b := make([]byte, 5)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// Name returns a name unique to this test run, usable as a key prefix, schema or queue name.
func Name(t testing.TB) string {
	base := strings.ToLower(t.Name())
	base = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, base)
	if len(base) > 30 {
		base = base[:30]
	}
	return "t_" + base + "_" + ID()
}

// RedisURL returns the URL of the test Redis.
func RedisURL(t testing.TB) string {
	t.Helper()
	load(t, "Redis")
	return need(t, "REDIS_URL")
}

// Redis returns a client and a key prefix of the test's own; the prefix's keys are
// deleted when the test ends.
func Redis(t testing.TB) (redis.UniversalClient, string) {
	t.Helper()
	rc, err := config.Redis{URL: RedisURL(t)}.Client()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := rc.Ping(ctx).Err(); err != nil {
		t.Fatalf("testenv: redis at %s: %v (run `make stack`)", RedisURL(t), err)
	}
	prefix := Name(t)
	t.Cleanup(func() {
		ctx := context.Background()
		iter := rc.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			rc.Del(ctx, iter.Val())
		}
		rc.Close()
	})
	return rc, prefix
}

// PostgresURL returns a connection string for a fresh schema in the test database,
// with junban's migrations applied; the schema is dropped when the test ends.
func PostgresURL(t testing.TB) string {
	t.Helper()
	load(t, "PostgreSQL")
	base := need(t, "JUNBAN_TEST_DATABASE_URL")
	admin, err := config.Postgres{URL: base}.Open()
	if err != nil {
		t.Fatal(err)
	}
	schema := Name(t)
	if err := admin.Exec("CREATE SCHEMA " + schema).Error; err != nil {
		t.Fatalf("testenv: postgres at %s: %v (run `make stack`)", base, err)
	}
	t.Cleanup(func() {
		admin.Exec("DROP SCHEMA " + schema + " CASCADE")
		if sqlDB, err := admin.DB(); err == nil {
			sqlDB.Close()
		}
	})
	sep := "?"
	if strings.Contains(base, "?") {
		sep = "&"
	}
	url := base + sep + "search_path=" + schema
	db, err := config.Postgres{URL: url}.Open()
	if err != nil {
		t.Fatal(err)
	}
	sqlDB, _ := db.DB()
	defer sqlDB.Close()
	if _, err := migrations.Up(context.Background(), sqlDB); err != nil {
		t.Fatal(err)
	}
	return url
}

// Postgres returns a gorm handle on a fresh, migrated schema of the test's own.
func Postgres(t testing.TB) *gorm.DB {
	t.Helper()
	db, err := config.Postgres{URL: PostgresURL(t)}.Open()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if sqlDB, err := db.DB(); err == nil {
			sqlDB.Close()
		}
	})
	return db
}

// SQSConfig returns the SQS settings of the test stack.
func SQSConfig(t testing.TB) config.SQS {
	t.Helper()
	load(t, "the SQS emulator")
	region := os.Getenv("AWS_REGION")
	if region == "" {
		region = "us-east-1"
	}
	return config.SQS{Region: region, Endpoint: need(t, "AWS_ENDPOINT_URL_SQS")}
}

// SQS returns a client for the test SQS endpoint (the local emulator).
func SQS(t testing.TB) *sqs.Client {
	t.Helper()
	c, err := queue.NewClient(context.Background(), SQSConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Queues are one test's orders and results queues, each with its dead-letter queue.
type Queues struct {
	Orders, Results queue.Pair
	// Names as given to CreateQueue, for a subprocess's environment.
	OrdersName, ResultsName, OrdersDLQName, ResultsDLQName string
}

// NewQueues creates orders and results queues (and DLQs, maxReceiveCount 5) unique to
// the test, with the given visibility timeout in seconds.
func NewQueues(t testing.TB, c *sqs.Client, visibility int) Queues {
	t.Helper()
	return newQueues(t, c, visibility, "")
}

// NewFIFOQueues is NewQueues with FIFO queues: each of the four names ends in ".fifo".
func NewFIFOQueues(t testing.TB, c *sqs.Client, visibility int) Queues {
	t.Helper()
	return newQueues(t, c, visibility, queue.FIFOSuffix)
}

// NewQueuesFunc is NewQueues or NewFIFOQueues.
type NewQueuesFunc func(t testing.TB, c *sqs.Client, visibility int) Queues

// EachQueueKind runs f as one subtest per kind of SQS queue, "standard" and "fifo", with
// the constructor of that kind's queues: a test written once runs on both.
func EachQueueKind(t *testing.T, f func(t *testing.T, newQueues NewQueuesFunc)) {
	t.Helper()
	for _, k := range []struct {
		name string
		new  NewQueuesFunc
	}{{"standard", NewQueues}, {"fifo", NewFIFOQueues}} {
		t.Run(k.name, func(t *testing.T) { f(t, k.new) })
	}
}

// newQueues creates the test's four queues, suffix at the end of each name.
func newQueues(t testing.TB, c *sqs.Client, visibility int, suffix string) Queues {
	t.Helper()
	n := Name(t)
	if len(n) > 60 {
		n = n[:60]
	}
	q := Queues{OrdersName: n + "-orders" + suffix, ResultsName: n + "-results" + suffix}
	q.OrdersDLQName, q.ResultsDLQName = n+"-orders-dlq"+suffix, n+"-results-dlq"+suffix
	ctx := context.Background()
	var err error
	if q.Orders, err = queue.EnsurePair(ctx, c, q.OrdersName, q.OrdersDLQName, 5, visibility); err != nil {
		t.Fatalf("testenv: %v (run `make stack`)", err)
	}
	if q.Results, err = queue.EnsurePair(ctx, c, q.ResultsName, q.ResultsDLQName, 5, visibility); err != nil {
		t.Fatal(err)
	}
	return q
}

// Setenv points the settings of a command run in the test's process at the test SQS
// endpoint and at q's four queues, until the test ends.
func (q Queues) Setenv(t testing.TB) {
	t.Helper()
	cfg := SQSConfig(t)
	t.Setenv("AWS_ENDPOINT_URL_SQS", cfg.Endpoint)
	t.Setenv("AWS_REGION", cfg.Region)
	t.Setenv("JUNBAN_ORDERS_QUEUE", q.OrdersName)
	t.Setenv("JUNBAN_ORDERS_DLQ", q.OrdersDLQName)
	t.Setenv("JUNBAN_RESULTS_QUEUE", q.ResultsName)
	t.Setenv("JUNBAN_RESULTS_DLQ", q.ResultsDLQName)
}

// Env returns the environment a subprocess (a junban binary) needs to use the same
// services as the test, as KEY=VALUE pairs.
func Env(t testing.TB) []string {
	t.Helper()
	load(t, "the stack's services")
	var out []string
	for _, k := range []string{"REDIS_URL", "AWS_ENDPOINT_URL_SQS", "AWS_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} {
		if v := os.Getenv(k); v != "" {
			out = append(out, fmt.Sprintf("%s=%s", k, v))
		}
	}
	return out
}

// Get answers GET url's status and body (at most 1 MiB of it).
func Get(t testing.TB, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, string(b)
}
