package webhook_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/http/webhook"
	"github.com/junban/junban/internal/testenv"
)

// bodyProbe wraps a handler and counts the requests whose body has begun to arrive in it:
// a test waits on it to know that a slow client is inside the gateway, being read.
type bodyProbe struct {
	started atomic.Int32
}

func (p *bodyProbe) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = &probedBody{ReadCloser: r.Body, started: &p.started}
		next.ServeHTTP(w, r)
	})
}

type probedBody struct {
	io.ReadCloser
	once    sync.Once
	started *atomic.Int32
}

func (b *probedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.once.Do(func() { b.started.Add(1) })
	}
	return n, err
}

// slowClient opens a TCP connection to base, sends the headers of a POST with a declared
// 100 KB body, then the body a byte at a time until the test ends.
func slowClient(t *testing.T, base, path string) net.Conn {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	t.Cleanup(func() {
		close(stop)
		conn.Close()
		wg.Wait()
	})
	if _, err := fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{", path, u.Host); err != nil {
		t.Fatal(err)
	}
	wg.Go(func() {
		// Deliberately slow: one byte every 100 ms, the attack itself.
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if _, err := conn.Write([]byte(" ")); err != nil {
					return
				}
			}
		}
	})
	return conn
}

// Clients that send their body slowly do not hold the in-flight slots: with
// MaxInFlight 2 and four connections dribbling a declared 100 KB body a byte at a time
// (at least two already being read by the gateway), a correctly signed delivery gets its 200.
//
// Failed against the handler that took its slot before it read the body: the good
// delivery got 503 busy while the slow bodies held both slots.
func TestSlowBodiesDoNotStarveDeliveries(t *testing.T) {
	t.Parallel()
	probe := &bodyProbe{}
	const bound, slow = 2, 4
	g := newGateway(t, options{maxInFlight: bound, wrap: probe.wrap})
	for range slow {
		slowClient(t, g.url, "/webhooks/stripe")
	}
	// As many slow bodies as there are slots are being read: had they taken the slots,
	// nothing else could get in.
	testenv.WaitFor(t, 30*time.Second, "the slow bodies to be read by the gateway", func() bool {
		return probe.started.Load() >= bound
	})
	a := g.post(delivery{provider: g.stripe, body: stripeBody(t, "evt_amid_slow", "payment_intent.succeeded", "LC-1", 1200)})
	if a.code != http.StatusOK {
		t.Fatalf("signed delivery amid %d slow bodies: %d %s, want 200", slow, a.code, a.body)
	}
	if n := counterValue(t, g.reg, "junban_webhook_busy_refusals_total"); n != 0 {
		t.Errorf("busy_refusals_total = %v, want 0", n)
	}
	g.exactlyOne(webhook.OrderEventID("stripe", "evt_amid_slow"), event.PaymentConfirmed)
}

// A body that does not arrive within BodyReadTimeout gets 408 body_timeout and the
// connection is closed, however slowly its client keeps sending.
//
// Broken variant tried: without the read deadline the slow client is read for as long
// as it sends (the test server has no ReadTimeout), and no answer comes before the
// test's 30 s bound.
func TestSlowBodyCutOffAtTheDeadline(t *testing.T) {
	t.Parallel()
	g := newGateway(t, options{bodyTimeout: 300 * time.Millisecond})
	conn := slowClient(t, g.url, "/webhooks/stripe")
	conn.SetReadDeadline(time.Now().Add(30 * time.Second)) // bounds a hang, not a timing assertion
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to a slow body: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(b), `"body_timeout"`) || !resp.Close {
		t.Fatalf("slow body: %d %s (close %v), want 408 body_timeout and the connection closed", resp.StatusCode, b, resp.Close)
	}
	if n := counterValue(t, g.reg, "junban_webhook_body_timeouts_total"); n != 1 {
		t.Errorf("body_timeouts_total = %v, want 1", n)
	}
	if evs := g.orderEvents(); len(evs) != 0 {
		t.Fatalf("order events for a body that never came: %+v", evs)
	}
}
