package testenv

import (
	"bufio"
	"bytes"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/junban/junban/internal/platform/config"
)

// ReplyDropper is a loopback TCP proxy in front of a Redis server that forwards every
// command and, for the first one its predicate matches, lets the server run it and then
// closes the client's connection instead of relaying the reply: the reply is lost after
// the write happened. Commands the client pipelined behind the matched one are not
// forwarded (the connection broke after the matched command was written). go-redis
// retries a command whose connection broke after it was written, so the command runs a
// second time on a new connection: a test shows what a second run does.
type ReplyDropper struct {
	t     testing.TB
	match func(args []string) bool
	ln    net.Listener
	addr  string

	armed   atomic.Bool
	dropped atomic.Int64
	mu      sync.Mutex
	conns   []net.Conn
	last    []string
}

// StartReplyDropper starts a ReplyDropper to target (host:port) on a free local port,
// armed with match; it stops when the test ends.
func StartReplyDropper(t testing.TB, target string, match func(args []string) bool) *ReplyDropper {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testenv: reply dropper: %v", err)
	}
	d := &ReplyDropper{t: t, match: match, ln: ln, addr: ln.Addr().String()}
	d.armed.Store(true)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go d.serve(c, target)
		}
	}()
	t.Cleanup(d.stop)
	return d
}

// Addr is the proxy's host:port.
func (d *ReplyDropper) Addr() string { return d.addr }

// Dropped is how many replies the proxy dropped so far (0 or 1 per Arm).
func (d *ReplyDropper) Dropped() int { return int(d.dropped.Load()) }

// DroppedCommand returns the arguments of the last command whose reply was dropped.
func (d *ReplyDropper) DroppedCommand() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.last
}

// Arm drops the reply of the next command match matches.
func (d *ReplyDropper) Arm(match func(args []string) bool) {
	d.mu.Lock()
	d.match = match
	d.mu.Unlock()
	d.armed.Store(true)
}

func (d *ReplyDropper) stop() {
	d.ln.Close()
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, c := range d.conns {
		c.Close()
	}
}

func (d *ReplyDropper) track(c net.Conn) {
	d.mu.Lock()
	d.conns = append(d.conns, c)
	d.mu.Unlock()
}

func (d *ReplyDropper) serve(c net.Conn, target string) {
	up, err := net.Dial("tcp", target)
	if err != nil {
		c.Close()
		return
	}
	d.track(c)
	d.track(up)
	// dropAt is the index of the command, on this connection, whose reply is dropped;
	// ran tells the command reader whether the server ran it (false: it answered
	// NOSCRIPT, and the command reader goes on, still armed).
	var dropAt atomic.Int64
	dropAt.Store(-1)
	ran := make(chan bool, 1)
	done := make(chan struct{})
	go func() {
		r := bufio.NewReader(c)
		for n := int64(0); ; n++ {
			raw, args, err := readCommand(r)
			if err != nil {
				up.Close()
				return
			}
			matched := d.take(args)
			if matched {
				dropAt.Store(n)
			}
			if _, err := up.Write(raw); err != nil {
				up.Close()
				return
			}
			if matched {
				select {
				case executed := <-ran:
					if !executed {
						continue
					}
				case <-done:
				}
				return // nothing behind it reaches the server
			}
		}
	}()
	defer close(done)
	defer c.Close()
	defer up.Close()
	r := bufio.NewReader(up)
	for n := int64(0); ; {
		raw, push, err := readReply(r)
		if err != nil {
			return
		}
		if !push {
			if n == dropAt.Load() {
				if !bytes.HasPrefix(raw, []byte("-NOSCRIPT")) {
					d.dropped.Add(1)
					ran <- true
					return // the server ran it; the client never hears
				}
				dropAt.Store(-1)
				d.armed.Store(true)
				ran <- false
			}
			n++
		}
		if _, err := c.Write(raw); err != nil {
			return
		}
	}
}

// take reports whether args is the command whose reply is dropped, disarming the proxy.
func (d *ReplyDropper) take(args []string) bool {
	if !d.armed.Load() {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.match == nil || !d.match(args) || !d.armed.CompareAndSwap(true, false) {
		return false
	}
	d.last = args
	return true
}

// ScriptCall matches an EVALSHA of hash, or an EVAL of the script whose SHA-1 is hash
// (a redis.Script's Hash()).
func ScriptCall(hash string) func(args []string) bool {
	return func(args []string) bool {
		if len(args) < 2 {
			return false
		}
		switch strings.ToUpper(args[0]) {
		case "EVALSHA", "EVALSHA_RO":
			return strings.EqualFold(args[1], hash)
		case "EVAL", "EVAL_RO":
			s := sha1.Sum([]byte(args[1]))
			return hex.EncodeToString(s[:]) == strings.ToLower(hash)
		}
		return false
	}
}

// CommandOn matches the command name (any case) on a command that names key among its
// arguments.
func CommandOn(name, key string) func(args []string) bool {
	return func(args []string) bool {
		if len(args) == 0 || !strings.EqualFold(args[0], name) {
			return false
		}
		for _, a := range args[1:] {
			if a == key {
				return true
			}
		}
		return false
	}
}

var errRESP = errors.New("testenv: bad RESP")

// readCommand reads one client command (a RESP array of bulk strings, as go-redis sends
// them), returning its bytes and arguments.
func readCommand(r *bufio.Reader) ([]byte, []string, error) {
	line, err := readLine(r)
	if err != nil {
		return nil, nil, err
	}
	raw := append([]byte(nil), line...)
	if line[0] != '*' {
		return raw, strings.Fields(string(line)), nil // an inline command
	}
	n, err := strconv.Atoi(string(line[1 : len(line)-2]))
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %q", errRESP, line)
	}
	args := make([]string, 0, n)
	for range n {
		hdr, err := readLine(r)
		if err != nil {
			return nil, nil, err
		}
		if hdr[0] != '$' {
			return nil, nil, fmt.Errorf("%w: %q", errRESP, hdr)
		}
		size, err := strconv.Atoi(string(hdr[1 : len(hdr)-2]))
		if err != nil || size < 0 {
			return nil, nil, fmt.Errorf("%w: %q", errRESP, hdr)
		}
		body := make([]byte, size+2)
		if _, err := io.ReadFull(r, body); err != nil {
			return nil, nil, err
		}
		raw = append(raw, hdr...)
		raw = append(raw, body...)
		args = append(args, string(body[:size]))
	}
	return raw, args, nil
}

// readReply reads one whole server reply (RESP2 or RESP3); push says it is an
// out-of-band push message, not the reply to a command.
func readReply(r *bufio.Reader) (raw []byte, push bool, err error) {
	raw, err = readValue(r, nil)
	return raw, len(raw) > 0 && raw[0] == '>', err
}

func readValue(r *bufio.Reader, raw []byte) ([]byte, error) {
	line, err := readLine(r)
	if err != nil {
		return nil, err
	}
	raw = append(raw, line...)
	head := string(line[1 : len(line)-2])
	switch line[0] {
	case '+', '-', ':', ',', '#', '_', '(':
		return raw, nil
	case '$', '!', '=':
		size, err := strconv.Atoi(head)
		if err != nil {
			return nil, fmt.Errorf("%w: %q", errRESP, line)
		}
		if size < 0 {
			return raw, nil
		}
		body := make([]byte, size+2)
		if _, err := io.ReadFull(r, body); err != nil {
			return nil, err
		}
		return append(raw, body...), nil
	case '*', '~', '>', '%', '|':
		n, err := strconv.Atoi(head)
		if err != nil {
			return nil, fmt.Errorf("%w: %q", errRESP, line)
		}
		if line[0] == '%' || line[0] == '|' {
			n *= 2
		}
		for range max(n, 0) {
			if raw, err = readValue(r, raw); err != nil {
				return nil, err
			}
		}
		if line[0] == '|' { // an attribute comes before the value it describes
			return readValue(r, raw)
		}
		return raw, nil
	}
	return nil, fmt.Errorf("%w: %q", errRESP, line)
}

func readLine(r *bufio.Reader) ([]byte, error) {
	line, err := r.ReadSlice('\n')
	if err != nil {
		return nil, err
	}
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return nil, fmt.Errorf("%w: %q", errRESP, line)
	}
	return append([]byte(nil), line...), nil
}

// RedisAddr is the host:port of the test Redis.
func RedisAddr(t testing.TB) string {
	t.Helper()
	u, err := url.Parse(RedisURL(t))
	if err != nil {
		t.Fatalf("testenv: REDIS_URL: %v", err)
	}
	return u.Host
}

// RedisVia returns a client of the test Redis that connects through addr (a proxy's),
// closed when the test ends.
func RedisVia(t testing.TB, addr string) redis.UniversalClient {
	t.Helper()
	u, err := url.Parse(RedisURL(t))
	if err != nil {
		t.Fatalf("testenv: REDIS_URL: %v", err)
	}
	u.Host = addr
	rc, err := config.Redis{URL: u.String()}.Client()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rc.Close() })
	return rc
}
