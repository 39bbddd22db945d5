package main

import (
	"strconv"
	"strings"
	"testing"

	"github.com/junban/junban/internal/domain"
	"github.com/junban/junban/internal/platform/config"
)

// requiredEnv sets what config.Load requires, so that a test of the settings needs no stack
// (nothing here connects).
func requiredEnv(t *testing.T) {
	t.Setenv("REDIS_URL", "redis://127.0.0.1:6379/0")
	t.Setenv("DATABASE_URL", "postgres://127.0.0.1:5432/junban?sslmode=disable")
	t.Setenv("AWS_REGION", "us-east-1")
}

// The ledger must not remember an op longer than the order remembers its event: a
// redelivery after the done marker expired would find its operations answered from
// memory, moving nothing, while the order counted them again.
func TestOpRetentionWithinDoneRetention(t *testing.T) {
	for _, c := range []struct {
		done, op string
		bad      bool
	}{
		{"96h", "168h", true},
		{"96h", "96h", false},
		{"168h", "96h", false},
	} {
		t.Setenv("JUNBAN_DONE_RETENTION", c.done)
		t.Setenv("JUNBAN_OP_RETENTION", c.op)
		_, err := config.Load[Config]()
		got := err != nil && strings.Contains(err.Error(), "JUNBAN_OP_RETENTION: must not be longer")
		if got != c.bad {
			t.Errorf("done %s, op %s: error %v, want the retention problem: %v", c.done, c.op, err, c.bad)
		}
	}
}

// Settings that lockhandoff would refuse only after Redis, PostgreSQL and SQS are
// connected, or would silently replace with its own defaults when 0, are refused by
// --check-config with the rest. (Fails for JUNBAN_DRAIN_MAX_EVENTS with its check
// loosened to < 0; tried.)
func TestConfigRefusesWhatLockhandoffWould(t *testing.T) {
	for name, value := range map[string]string{
		"JUNBAN_DRAIN_MAX_EVENTS": "0",
		"JUNBAN_DRAIN_MAX_TIME":   "0s",
		"JUNBAN_SWEEP_INTERVAL":   "-1s",
		"JUNBAN_PG_MAX_CONNS":     "0",
		"JUNBAN_LOG_LEVEL":        "loud",
		"JUNBAN_KEY_PREFIX":       "shop{eu}",
		// A wait list that could not take the largest event would refuse it for ever.
		"JUNBAN_MAX_WAIT_BYTES":        "1000",
		"JUNBAN_REDIS_MIN_REPLICAS":    "-1",
		"JUNBAN_REDIS_REPLICA_TIMEOUT": "0s",
		// A negative TTL would make every default hold end before its order was placed.
		"JUNBAN_RESERVATION_TTL":           "-1m",
		"JUNBAN_RESERVATION_SCAN_INTERVAL": "0s",
		// A default strategy no order could run would reject every order.
		"JUNBAN_ALLOCATION_STRATEGIES": "ranked,cheapest",
		"JUNBAN_LOCATIONS_TTL":         "-1s",
	} {
		t.Run(name, func(t *testing.T) {
			t.Setenv(name, value)
			_, err := config.Load[Config]()
			if err == nil || !strings.Contains(err.Error(), name) {
				t.Errorf("%s=%s: error %v, want one naming %s", name, value, err, name)
			}
		})
	}
}

// A cold start must not open a PostgreSQL connection per handler. (Fails without
// SetMaxOpenConns in openPostgres; tried.)
func TestPostgresConnectionsAreBounded(t *testing.T) {
	requiredEnv(t)
	t.Setenv("JUNBAN_PG_MAX_CONNS", "3")
	cfg, err := config.Load[Config]()
	if err != nil {
		t.Fatal(err)
	}
	db, err := openPostgres(cfg)
	if err != nil {
		t.Fatal(err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		t.Fatal(err)
	}
	defer sqlDB.Close()
	if got := sqlDB.Stats().MaxOpenConnections; got != 3 {
		t.Errorf("MaxOpenConnections = %d, want 3", got)
	}
}

// JUNBAN_MAX_LINES defaults to domain.MaxLinesDefault and is refused outside
// 1..domain.MaxLinesLimit (a turn decodes up to the limit, whatever the setting).
func TestMaxLinesSetting(t *testing.T) {
	requiredEnv(t)
	cfg, err := config.Load[Config]()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MaxLines != domain.MaxLinesDefault {
		t.Errorf("default %d, want domain.MaxLinesDefault %d", cfg.MaxLines, domain.MaxLinesDefault)
	}
	for _, v := range []string{"0", "-1", strconv.Itoa(domain.MaxLinesLimit + 1)} {
		t.Setenv("JUNBAN_MAX_LINES", v)
		if _, err := config.Load[Config](); err == nil || !strings.Contains(err.Error(), "JUNBAN_MAX_LINES") {
			t.Errorf("JUNBAN_MAX_LINES=%s: %v, want a refusal naming it", v, err)
		}
	}
}
