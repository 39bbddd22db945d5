package testenv

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	binMu   sync.Mutex
	binDir  string
	binDone = map[string]bool{}
)

// RepoRoot is the repository's top directory.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(filepath.Dir(file)))
}

// Binary builds cmd/<name> (a service or junbanctl), else tools/cmd/<name> (junbanlab),
// once per test process and returns its path.
func Binary(t testing.TB, name string) string {
	t.Helper()
	skipShort(t, "a built "+name)
	binMu.Lock()
	defer binMu.Unlock()
	if binDir == "" {
		d, err := os.MkdirTemp("", "junban-testbin-")
		if err != nil {
			t.Fatal(err)
		}
		binDir = d
	}
	path := filepath.Join(binDir, name)
	if !binDone[name] {
		// junbanlab is built in the lab's module (tools/go.mod), the rest in the services'.
		dir := RepoRoot()
		if _, err := os.Stat(filepath.Join(dir, "cmd", name)); err != nil {
			dir = filepath.Join(dir, "tools")
		}
		cmd := exec.Command("go", "build", "-o", path, "./cmd/"+name)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("testenv: build %s: %v\n%s", name, err, out)
		}
		binDone[name] = true
	}
	return path
}

// Proc is a junban binary running as a child process of a test.
type Proc struct {
	Name string
	cmd  *exec.Cmd
	out  *lockedBuffer
	done chan struct{}
	err  error
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Start runs the binary path with env (KEY=VALUE, on top of PATH and HOME only, so the
// stack file is not read unless env says so). It is killed when the test ends, and its
// output is shown if the test failed.
func Start(t testing.TB, name, path string, env []string) *Proc {
	t.Helper()
	p := &Proc{Name: name, out: &lockedBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(path)
	p.cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"),
		"JUNBAN_STACK_ENV=/nonexistent/stack.env"}, env...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("testenv: start %s: %v", name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("--- output of %s ---\n%s", name, p.Output())
		}
	})
	return p
}

// Output is what the process printed so far.
func (p *Proc) Output() string { return p.out.String() }

// Kill sends SIGKILL and waits for the process to end.
func (p *Proc) Kill() {
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// Stop sends SIGTERM and waits up to timeout for the process to exit; it reports the
// exit error and whether it exited in time.
func (p *Proc) Stop(timeout time.Duration) (error, bool) {
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return p.err, true
	case <-time.After(timeout):
		return nil, false
	}
}

// Exited tells whether the process has ended.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Exec runs the binary at path with args and only the environment env (plus PATH), waits
// for it and returns its exit status and output.
func Exec(t testing.TB, path string, env []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(path, args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	var o, e strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if exit, ok := errors.AsType[*exec.ExitError](err); ok {
		return exit.ExitCode(), o.String(), e.String()
	} else if err != nil {
		t.Fatalf("testenv: run %s: %v", path, err)
	}
	return 0, o.String(), e.String()
}
