package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// proc is a child process that chaos starts, kills and restarts: a worker replica or
// the Redis server. Its output goes to a log file that every restart appends to.
type proc struct {
	name string
	path string
	args []string
	env  []string
	log  string
	// httpAddr, when set, is polled for /readyz.
	httpAddr string

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{}
	killing bool
	// exits counts the times the process ended without chaos asking it to.
	exits int
	// stopped is true once Close ran: the watcher no longer restarts it.
	stopped bool
	// gen counts the starts; counters are its metrics, read by Env.watch.
	gen      int
	counters counters
}

// generation is the number of the current run.
func (p *proc) generation() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.gen
}

// start runs the process once more; the previous run must have ended.
func (p *proc) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return errors.New("chaos: " + p.name + " is closed")
	}
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(f, "=== %s start %s\n", time.Now().Format(time.RFC3339Nano), p.name)
	cmd := exec.Command(p.path, p.args...)
	cmd.Env = p.env
	cmd.Stdout, cmd.Stderr = f, f
	// Own process group: a Ctrl-C at the terminal reaches junbanlab only, which then
	// stops everything in order; Pdeathsig ends the child if junbanlab itself is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("chaos: start %s: %w", p.name, err)
	}
	done := make(chan struct{})
	p.cmd, p.done, p.killing = cmd, done, false
	p.gen++
	go func() {
		cmd.Wait()
		f.Close()
		p.mu.Lock()
		if !p.killing && !p.stopped {
			p.exits++
		}
		p.mu.Unlock()
		close(done)
	}()
	return nil
}

// kill sends SIGKILL and waits until the process is gone.
func (p *proc) kill() {
	p.signal(syscall.SIGKILL)
}

// stop sends SIGTERM and waits up to timeout, then SIGKILL.
func (p *proc) stop(timeout time.Duration) {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.killing = true
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(timeout):
		p.kill()
	}
}

func (p *proc) signal(sig syscall.Signal) {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.killing = true
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Signal(sig)
	<-done
}

// running tells whether the current run has not ended.
func (p *proc) running() bool {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	if done == nil {
		return false
	}
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// close stops the process for good.
func (p *proc) close(timeout time.Duration) {
	p.stop(timeout)
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
}

// unexpectedExits is how often the process ended on its own.
func (p *proc) unexpectedExits() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exits
}

// waitReady polls /readyz until it answers 200, the process ends or timeout passes.
func (p *proc) waitReady(ctx context.Context, timeout time.Duration) error {
	if p.httpAddr == "" {
		return nil
	}
	deadline := time.Now().Add(timeout)
	client := &http.Client{Timeout: time.Second}
	for {
		resp, err := client.Get("http://" + p.httpAddr + "/readyz")
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if !p.running() {
			return fmt.Errorf("chaos: %s exited before it was ready; see %s", p.name, p.log)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("chaos: %s not ready after %s; see %s", p.name, timeout, p.log)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// supervise restarts the process after delay whenever it ended on its own, as an
// orchestrator would (an order-worker that cannot reach PostgreSQL at start exits).
// Deliberate kills restart through the fault schedule instead.
func (p *proc) supervise(ctx context.Context, delay time.Duration) {
	for {
		p.mu.Lock()
		done, stopped := p.done, p.stopped
		p.mu.Unlock()
		if stopped {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-done:
		}
		p.mu.Lock()
		restart := !p.killing && !p.stopped
		p.mu.Unlock()
		if !restart {
			// A deliberate kill: wait for the schedule to start it again.
			select {
			case <-ctx.Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		p.start()
	}
}

// freePort asks the kernel for a free TCP port on the loopback interface.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func addr(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }

// tail returns the last n bytes of a file, for error messages.
func tail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return ""
	}
	off := max(0, st.Size()-n)
	b := make([]byte, st.Size()-off)
	f.ReadAt(b, off)
	return string(b)
}

// logPath names a log file in dir.
func logPath(dir, name string) string { return filepath.Join(dir, name+".log") }
