package service_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/junban/junban/internal/platform/config"
	"github.com/junban/junban/internal/platform/service"
)

// helperConfig is the helper binary's configuration.
type helperConfig struct {
	config.Common
}

// TestMain runs the helper service when the test binary is started as one.
func TestMain(m *testing.M) {
	if mode := os.Getenv("JUNBAN_SERVICE_HELPER"); mode != "" {
		helper(mode == "kills")
		return
	}
	os.Exit(m.Run())
}

// helper is a service whose shutdown takes two seconds: it says "ready", and "stopping"
// once its context ended.
func helper(kills bool) {
	err := service.Run(config.Binary{Name: "helper", Summary: "a test service"}, service.Options{SecondSignalKills: kills}, nil,
		func(ctx context.Context, env service.Env[helperConfig]) error {
			if env.Log == nil || env.Registry == nil || env.Config.ShutdownBudget != config.ShutdownBudgetDefault {
				return errors.New("env incomplete")
			}
			fmt.Println("ready")
			<-ctx.Done()
			fmt.Println("stopping")
			time.Sleep(2 * time.Second) // deliberate: a shutdown long enough for a second signal
			return nil
		})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// start runs the helper and waits for its "ready".
func start(t *testing.T, mode string) (*exec.Cmd, *bufio.Scanner) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "JUNBAN_SERVICE_HELPER="+mode, "JUNBAN_STACK_ENV=", "JUNBAN_LOG_LEVEL=error")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	sc := bufio.NewScanner(out)
	expect(t, sc, "ready")
	return cmd, sc
}

func expect(t *testing.T, sc *bufio.Scanner, line string) {
	t.Helper()
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == line {
			return
		}
	}
	t.Fatalf("the helper ended before it printed %q", line)
}

// With SecondSignalKills, a second SIGTERM during the shutdown kills the process at once.
// (Fails without the AfterFunc that stops catching the signals: the helper finishes its
// shutdown and exits 0; tried.)
func TestSecondSignalKills(t *testing.T) {
	cmd, sc := start(t, "kills")
	_ = cmd.Process.Signal(syscall.SIGTERM)
	expect(t, sc, "stopping")
	_ = cmd.Process.Signal(syscall.SIGTERM)
	err := cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("the helper exited with %v, want killed by SIGTERM", err)
	}
	if ws, ok := exit.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
		t.Fatalf("the helper exited with %v, want killed by SIGTERM", err)
	}
}

// Without it, a second SIGTERM is caught: the shutdown runs to its end and the process
// exits 0.
func TestSecondSignalIsCaught(t *testing.T) {
	cmd, sc := start(t, "catches")
	_ = cmd.Process.Signal(syscall.SIGTERM)
	expect(t, sc, "stopping")
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the helper exited with %v, want 0", err)
	}
}
