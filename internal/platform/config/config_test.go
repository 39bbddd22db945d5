package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

type testConfig struct {
	Common
	Redis
	Workers int `env:"JUNBAN_TEST_WORKERS" envDefault:"4"`
}

func (c testConfig) Validate() error {
	p := []error{c.Common.Validate(), c.Redis.Validate()}
	if c.Workers < 1 {
		p = append(p, errors.New("JUNBAN_TEST_WORKERS: must be at least 1"))
	}
	return errors.Join(p...)
}

func TestLoadReportsEveryProblemAtOnce(t *testing.T) {
	t.Setenv("JUNBAN_STACK_ENV", filepath.Join(t.TempDir(), "none.env"))
	os.Unsetenv("REDIS_URL")
	t.Setenv("JUNBAN_LOG_FORMAT", "xml")
	t.Setenv("JUNBAN_SHUTDOWN_BUDGET", "soon")
	t.Setenv("JUNBAN_LOG_LEVEL", "loud")
	t.Setenv("JUNBAN_KEY_PREFIX", "shop{1}")
	t.Setenv("JUNBAN_TEST_WORKERS", "0")
	_, err := Load[testConfig]()
	if err == nil {
		t.Fatal("invalid configuration accepted")
	}
	for _, want := range []string{"REDIS_URL", "JUNBAN_SHUTDOWN_BUDGET", "JUNBAN_LOG_FORMAT", "JUNBAN_LOG_LEVEL", "JUNBAN_KEY_PREFIX", "JUNBAN_TEST_WORKERS"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not name %s:\n%v", want, err)
		}
	}
}

func TestStackFileFillsOnlyUnsetVariables(t *testing.T) {
	file := filepath.Join(t.TempDir(), "stack.env")
	os.WriteFile(file, []byte("# comment\nREDIS_URL=redis://from-file:6379/0\nJUNBAN_SHUTDOWN_BUDGET=7s\n"), 0o600)
	t.Setenv("JUNBAN_STACK_ENV", file)
	t.Setenv("REDIS_URL", "")
	os.Unsetenv("REDIS_URL")
	t.Setenv("JUNBAN_SHUTDOWN_BUDGET", "3s")
	cfg, err := Load[testConfig]()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.URL != "redis://from-file:6379/0" {
		t.Errorf("REDIS_URL %q, want the file's", cfg.URL)
	}
	if cfg.ShutdownBudget != 3*time.Second {
		t.Errorf("the file overrode the environment: budget %s", cfg.ShutdownBudget)
	}
	if cfg.Workers != 4 || cfg.KeyPrefix != "junban" {
		t.Errorf("defaults not applied: %+v", cfg)
	}
}

func TestVarsListsNamesDefaultsAndRequired(t *testing.T) {
	vars, err := Vars[testConfig]()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Var{}
	for _, v := range vars {
		got[v.Name] = v
	}
	if !got["REDIS_URL"].Required || got["JUNBAN_TEST_WORKERS"].Default != "4" || got["JUNBAN_LOG_FORMAT"].Default != "json" {
		t.Fatalf("vars: %+v", vars)
	}
}

func TestRequiredVariablesMustNotBeEmpty(t *testing.T) {
	t.Setenv("JUNBAN_STACK_ENV", filepath.Join(t.TempDir(), "none.env"))
	t.Setenv("REDIS_URL", "")
	_, err := Load[testConfig]()
	if err == nil || !strings.Contains(err.Error(), "REDIS_URL") {
		t.Fatalf("an empty REDIS_URL was accepted: %v", err)
	}
}
