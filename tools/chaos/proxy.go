package chaos

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// cutProxy is a TCP proxy in front of one Redis node for the workers. cut closes every
// connection through it at once, with a reset (SO_LINGER 0), whatever is in flight on it:
// a script sent but not yet read by Redis, a script that ran whose reply is on its way,
// half a pipeline. The workers then see their connection fail mid-call and must tell an
// effect that happened from one that did not.
type cutProxy struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	conns  map[net.Conn]*pair // both ends of every pair
	closed bool
	wg     sync.WaitGroup
}

// startProxy listens on a free loopback port and forwards every connection to target.
func startProxy(target string) (*cutProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &cutProxy{ln: ln, target: target, conns: map[net.Conn]*pair{}}
	p.wg.Go(p.serve)
	return p, nil
}

// addr is the proxy's host:port; port its port.
func (p *cutProxy) addr() string { return p.ln.Addr().String() }
func (p *cutProxy) port() int    { return p.ln.Addr().(*net.TCPAddr).Port }

func (p *cutProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		p.wg.Go(func() { p.pipe(c) })
	}
}

// pipe connects a client to the target and copies both ways until either side ends or a
// cut closes both.
func (p *cutProxy) pipe(c net.Conn) {
	d := net.Dialer{Timeout: 2 * time.Second}
	s, err := d.DialContext(context.Background(), "tcp", p.target)
	if err != nil {
		// The node is down (killed, restarting): the client sees its connection refused.
		reset(c)
		return
	}
	pr := &pair{}
	if !p.track(pr, c, s) {
		reset(c)
		reset(s)
		return
	}
	done := make(chan struct{}, 2)
	cp := func(dst io.Writer, src net.Conn) {
		io.Copy(dst, src)
		done <- struct{}{}
	}
	go cp(stamped{s, &pr.sent}, c)
	go cp(stamped{c, &pr.answered}, s)
	<-done
	c.Close()
	s.Close()
	<-done
	p.untrack(c, s)
}

// pair is one client's connection and its connection to the node: when bytes last went
// each way (UnixNano).
type pair struct{ sent, answered atomic.Int64 }

// midCall tells whether the client's last bytes have had no answer yet: a call in flight.
func (pr *pair) midCall() bool { return pr.sent.Load() > pr.answered.Load() }

// stamped is a writer that records when it last wrote.
type stamped struct {
	w  io.Writer
	at *atomic.Int64
}

func (s stamped) Write(b []byte) (int, error) {
	s.at.Store(time.Now().UnixNano())
	return s.w.Write(b)
}

func (p *cutProxy) track(pr *pair, cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	for _, c := range cs {
		p.conns[c] = pr
	}
	return true
}

func (p *cutProxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		delete(p.conns, c)
	}
}

// cut resets every connection through the proxy and returns how many pairs it cut, and
// how many of them in the middle of a call (a request sent, its reply not yet through).
func (p *cutProxy) cut() (pairs, midCall int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	seen := map[*pair]bool{}
	for c, pr := range p.conns {
		if !seen[pr] {
			seen[pr] = true
			if pr.midCall() {
				midCall++
			}
		}
		reset(c)
	}
	return len(seen), midCall
}

// close stops listening, cuts what is open and waits for the copying to end.
func (p *cutProxy) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.ln.Close()
	p.cut()
	p.wg.Wait()
}

// reset closes c with a TCP reset rather than a FIN: the peer's next read fails at once.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.Close()
}

// proxies is one cutProxy per Redis node, by the node's own address.
type proxies map[string]*cutProxy

// startProxies starts a proxy in front of each address.
func startProxies(addrs []string) (proxies, error) {
	ps := proxies{}
	for _, a := range addrs {
		p, err := startProxy(a)
		if err != nil {
			ps.close()
			return nil, err
		}
		ps[a] = p
	}
	return ps, nil
}

// cut cuts every connection of every proxy; it returns the pairs cut, and those cut in
// the middle of a call.
func (ps proxies) cut() (pairs, midCall int) {
	for _, p := range ps {
		n, m := p.cut()
		pairs += n
		midCall += m
	}
	return pairs, midCall
}

func (ps proxies) close() {
	for _, p := range ps {
		p.close()
	}
}

// of returns the proxy address in front of the node at addr, or addr when there is none.
func (ps proxies) of(addr string) string {
	if p, ok := ps[addr]; ok {
		return p.addr()
	}
	return addr
}

// node returns the node's own address behind a proxy address, or addr itself.
func (ps proxies) node(addr string) string {
	for a, p := range ps {
		if p.addr() == addr {
			return a
		}
	}
	return addr
}
