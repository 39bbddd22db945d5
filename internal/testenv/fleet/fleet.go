// Package fleet runs junban's binaries as child processes on one machine, for the
// end-to-end benchmark and other whole-system runs: each with its own environment, its
// own log file and a readiness wait on its /readyz.
package fleet

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ReadyTimeoutDefault bounds the wait for a process's /readyz.
const ReadyTimeoutDefault = 30 * time.Second

// Proc is one running binary.
type Proc struct {
	Name string
	Addr string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
	log  *os.File
}

// BinDir finds the directory of junban's binaries: dir if given, else the directory of
// the running executable when it holds order-worker.
func BinDir(dir string) (string, error) {
	if dir != "" {
		return dir, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	d := filepath.Dir(exe)
	if _, err := os.Stat(filepath.Join(d, "order-worker")); err != nil {
		return "", fmt.Errorf("fleet: no order-worker beside %s; build with `make build` or give the binaries' directory", exe)
	}
	return d, nil
}

// FreeAddr returns a free loopback address.
func FreeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// Options are Start's knobs beyond the environment it adds.
type Options struct {
	// DropInherited removes from the environment the process inherits every variable
	// whose name starts with one of these prefixes (e.g. "OTEL_", so that a measurement
	// with tracing off is off whatever the shell exports); env still sets its own.
	DropInherited []string
}

// Start runs binDir/bin with the current environment plus env and JUNBAN_HTTP_ADDR on a
// free port, logging to logDir/name.log, and waits until its /readyz answers 200.
func Start(ctx context.Context, binDir, bin, name, logDir string, env []string) (*Proc, error) {
	return StartWith(ctx, binDir, bin, name, logDir, env, Options{})
}

// StartWith is Start with options.
func StartWith(ctx context.Context, binDir, bin, name, logDir string, env []string, o Options) (*Proc, error) {
	addr, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	log, err := os.Create(filepath.Join(logDir, name+".log"))
	if err != nil {
		return nil, err
	}
	p := &Proc{Name: name, Addr: addr, log: log, done: make(chan struct{})}
	p.cmd = exec.Command(filepath.Join(binDir, bin))
	p.cmd.Env = append(append(inherited(os.Environ(), o.DropInherited), env...), "JUNBAN_HTTP_ADDR="+addr)
	p.cmd.Stdout, p.cmd.Stderr = log, log
	if err := p.cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("fleet: start %s: %w", name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		log.Close()
		close(p.done)
	}()
	if err := p.waitReady(ctx, ReadyTimeoutDefault); err != nil {
		p.Kill()
		return nil, err
	}
	return p, nil
}

// inherited is environ without the variables whose names start with one of drop.
func inherited(environ, drop []string) []string {
	if len(drop) == 0 {
		return environ
	}
	out := make([]string, 0, len(environ))
next:
	for _, kv := range environ {
		for _, prefix := range drop {
			if strings.HasPrefix(kv, prefix) {
				continue next
			}
		}
		out = append(out, kv)
	}
	return out
}

func (p *Proc) waitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	client := &http.Client{Timeout: time.Second}
	for time.Now().Before(deadline) {
		select {
		case <-p.done:
			return fmt.Errorf("fleet: %s exited before it was ready (%v); see its log", p.Name, p.err)
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		resp, err := client.Get("http://" + p.Addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("fleet: %s not ready after %s", p.Name, timeout)
}

// Metric reads the process's /metrics and returns the value of one series, written as
// the page writes it (`name` or `name{label="value"}`); 0 when the page does not have it
// (a counter is not written before its first increment).
func (p *Proc) Metric(ctx context.Context, series string) (float64, error) {
	v, err := Metric(ctx, p.Addr, series)
	if err != nil {
		return 0, fmt.Errorf("fleet: %s: %w", p.Name, err)
	}
	return v, nil
}

// MetricSum adds up one series (see Metric) over the listeners at addrs.
func MetricSum(ctx context.Context, series string, addrs ...string) (float64, error) {
	sum := 0.0
	for _, a := range addrs {
		v, err := Metric(ctx, a, series)
		if err != nil {
			return 0, err
		}
		sum += v
	}
	return sum, nil
}

// Metric reads one series (name with its labels, exactly as exposed) from the /metrics
// of the listener at addr (host:port); a series not exposed reads 0.
func Metric(ctx context.Context, addr, series string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("metrics of %s: %w", addr, err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if ok && name == series {
			return strconv.ParseFloat(value, 64)
		}
	}
	return 0, sc.Err()
}

// Pid is the process's id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Kill sends SIGKILL and waits for the process to end.
func (p *Proc) Kill() {
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// Stop sends SIGTERM and waits up to timeout, then kills; it returns the exit error of
// a process that stopped by itself in time.
func (p *Proc) Stop(timeout time.Duration) error {
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		var ee *exec.ExitError
		if errors.As(p.err, &ee) && !ee.Exited() {
			return nil // ended by the signal itself
		}
		return p.err
	case <-time.After(timeout):
		p.Kill()
		return fmt.Errorf("fleet: %s did not stop within %s", p.Name, timeout)
	}
}
