package queue_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/junban/junban/internal/queue"
	"github.com/junban/junban/internal/testenv"
)

// A receive whose answer the emulator sent in full must not be lost because net/http was
// still finishing the request's body when the SDK had its answer. The SDK closes the body
// as soon as the answer's headers are in; the transport then copies what is left of it
// (nothing) and, through the SDK's body type, that copy reported io.EOF as an error: the
// transport closed the connection under the answer it was reading, the messages in it
// stayed invisible for the visibility timeout, and the SDK retried. Here a dialer holds
// the transport for 30 ms after it wrote the body, and a proxy before the emulator holds
// back the last bytes of each answer for 150 ms, so the SDK reads the answer while the
// transport is still in its body: what happened now and then on a loaded machine, every
// time. Without queue.GuardBodies this fails with "use of closed network connection".
func TestReceiveAnswerOutlivesTheRequestBodyClose(t *testing.T) {
	cfg := testenv.SQSConfig(t)
	base := testenv.SQS(t)
	q := testenv.NewQueues(t, base, 30)
	ctx := context.Background()
	if _, err := base.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(q.Orders.URL), MessageBody: aws.String("kept")}); err != nil {
		t.Fatal(err)
	}
	proxy := slowTailProxy(t, cfg.Endpoint, 150*time.Millisecond)
	hc := awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
		var d net.Dialer
		tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return pauseAfterBody{c.(*net.TCPConn), 30 * time.Millisecond}, nil
		}
	})
	c := sqs.New(sqs.Options{
		Region:           cfg.Region,
		BaseEndpoint:     aws.String(proxy),
		Credentials:      credentials.NewStaticCredentialsProvider("local", "local", ""),
		HTTPClient:       queue.GuardBodies(hc),
		RetryMaxAttempts: 1, // the answer must arrive whole the first time
	})
	out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(q.Orders.URL), MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
	if err != nil {
		t.Fatalf("receive through a slow tail: %v", err)
	}
	if len(out.Messages) != 1 || aws.ToString(out.Messages[0].Body) != "kept" {
		t.Fatalf("received %+v, want the one message", out.Messages)
	}
}

// pauseAfterBody is a connection whose transport, having written a request's body (the
// one write that goes through ReadFrom once the headers are flushed), is held for pause
// before it goes on: as if its goroutine were descheduled there.
type pauseAfterBody struct {
	*net.TCPConn
	pause time.Duration
}

func (c pauseAfterBody) ReadFrom(r io.Reader) (int64, error) {
	n, err := c.TCPConn.ReadFrom(r)
	time.Sleep(c.pause)
	return n, err
}

// slowTailProxy forwards connections to endpoint's host and returns its own URL; of each
// read from the server it forwards all but the last 8 bytes at once (an answer's headers
// and most of its body) and those after hold.
func slowTailProxy(t *testing.T, endpoint string, hold time.Duration) string {
	t.Helper()
	u, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			server, err := net.Dial("tcp", u.Host)
			if err != nil {
				client.Close()
				continue
			}
			go func() { io.Copy(server, client); server.Close() }()
			go func() {
				defer client.Close()
				buf := make([]byte, 64*1024)
				for {
					n, err := server.Read(buf)
					if n > 0 {
						half := max(n-8, 0)
						if _, werr := client.Write(buf[:half]); werr != nil {
							return
						}
						time.Sleep(hold)
						if _, werr := client.Write(buf[half:n]); werr != nil {
							return
						}
					}
					if err != nil {
						if !errors.Is(err, io.EOF) {
							t.Logf("proxy: %v", err)
						}
						return
					}
				}
			}()
		}
	}()
	return "http://" + ln.Addr().String()
}
