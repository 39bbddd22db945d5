package testenv

import (
	"bufio"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// PipelineCutter is a loopback TCP proxy in front of a Redis server that, on the first
// command its predicate matches, forwards that command and at most keep-1 of the commands
// the client sent behind it in the same write (one pipeline), lets the server run them,
// and then closes the client's connection without relaying their replies: the connection
// broke in the middle of a pipeline, after part of it ran. The pipeline's other commands
// never reach the server. go-redis sends the whole pipeline again on a new connection, so
// a test shows that the part that ran is not applied twice and the rest is not lost.
// Replies of commands before the matched one are relayed. A matched EVALSHA the server
// answers NOSCRIPT is cut all the same (the script never ran): a test loads its scripts
// before it arms the proxy.
type PipelineCutter struct {
	match func(args []string) bool
	keep  int
	ln    net.Listener

	armed atomic.Bool
	cuts  atomic.Int64
	ran   atomic.Int64
	lost  atomic.Int64
	mu    sync.Mutex
	conns []net.Conn
}

// StartPipelineCutter starts a PipelineCutter to target (host:port) on a free local port,
// armed with match and keep (at least 1); it stops when the test ends.
func StartPipelineCutter(t testing.TB, target string, keep int, match func(args []string) bool) *PipelineCutter {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testenv: pipeline cutter: %v", err)
	}
	p := &PipelineCutter{match: match, keep: max(keep, 1), ln: ln}
	p.armed.Store(true)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(c, target)
		}
	}()
	t.Cleanup(p.stop)
	return p
}

// Addr is the proxy's host:port.
func (p *PipelineCutter) Addr() string { return p.ln.Addr().String() }

// Cuts is how many pipelines the proxy cut so far (0 or 1 per Arm).
func (p *PipelineCutter) Cuts() int { return int(p.cuts.Load()) }

// Ran is how many commands of the cut pipelines the server ran before the cut.
func (p *PipelineCutter) Ran() int { return int(p.ran.Load()) }

// Lost is how many commands of the cut pipelines never reached the server (those that
// reached the proxy with the cut part).
func (p *PipelineCutter) Lost() int { return int(p.lost.Load()) }

// Arm cuts the next pipeline whose command match matches, after keep of its commands.
func (p *PipelineCutter) Arm(keep int, match func(args []string) bool) {
	p.mu.Lock()
	p.match, p.keep = match, max(keep, 1)
	p.mu.Unlock()
	p.armed.Store(true)
}

func (p *PipelineCutter) stop() {
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
}

func (p *PipelineCutter) track(cs ...net.Conn) {
	p.mu.Lock()
	p.conns = append(p.conns, cs...)
	p.mu.Unlock()
}

// take reports whether args starts the pipeline to cut, disarming the proxy, and how many
// of its commands to forward.
func (p *PipelineCutter) take(args []string) (int, bool) {
	if !p.armed.Load() {
		return 0, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.match == nil || !p.match(args) || !p.armed.CompareAndSwap(true, false) {
		return 0, false
	}
	return p.keep, true
}

func (p *PipelineCutter) serve(c net.Conn, target string) {
	up, err := net.Dial("tcp", target)
	if err != nil {
		c.Close()
		return
	}
	p.track(c, up)
	// cutFrom is the index, on this connection, of the first command whose reply is not
	// relayed, and cutLast that of the last command forwarded: once its reply came, the
	// server ran them all, and both connections close.
	var cutFrom, cutLast atomic.Int64
	cutFrom.Store(-1)
	cutLast.Store(-1)
	go func() {
		r := bufio.NewReader(c)
		left := 0
		for n := int64(0); ; n++ {
			raw, args, err := readCommand(r)
			if err != nil {
				up.Close()
				return
			}
			if left == 0 {
				if keep, ok := p.take(args); ok {
					left = keep
					cutFrom.Store(n)
				}
			}
			last := false
			if left > 0 {
				left--
				// The last command forwarded: keep of them, or the pipeline ends here (no
				// more of its bytes came with it). The rest, if any, is dropped with the
				// connection.
				last = left == 0 || r.Buffered() == 0
				if last {
					p.ran.Add(n - cutFrom.Load() + 1)
					cutLast.Store(n)
				}
			}
			if _, err := up.Write(raw); err != nil {
				return
			}
			if last {
				for r.Buffered() > 0 {
					if _, _, err := readCommand(r); err != nil {
						break
					}
					p.lost.Add(1)
				}
				return
			}
		}
	}()
	defer c.Close()
	defer up.Close()
	r := bufio.NewReader(up)
	for n := int64(0); ; {
		raw, push, err := readReply(r)
		if err != nil {
			return
		}
		if !push {
			if from := cutFrom.Load(); from >= 0 && n >= from {
				n++
				// cutLast is stored before the command that ends the cut part is written,
				// so it is known when its reply arrives.
				if last := cutLast.Load(); last >= 0 && n > last {
					p.cuts.Add(1)
					return
				}
				continue
			}
			n++
		}
		if _, err := c.Write(raw); err != nil {
			return
		}
	}
}
