package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"gorm.io/gorm"

	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/platform/config"
	"github.com/junban/junban/internal/postgres/persist"
	"github.com/junban/junban/internal/testenv"
	"github.com/junban/junban/internal/testenv/resultgen"
)

// The test binary doubles as the worker: with this variable set it runs main.
const runMainEnv = "PERSIST_WORKER_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// syncBuffer collects the worker's output.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type worker struct {
	cmd    *exec.Cmd
	out    *syncBuffer
	http   string
	exited chan error
}

func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func startWorker(t *testing.T, env ...string) *worker {
	t.Helper()
	w := &worker{out: &syncBuffer{}, http: freeAddr(t), exited: make(chan error, 1)}
	w.cmd = exec.Command(os.Args[0])
	w.cmd.Env = append(os.Environ(), testenv.Env(t)...)
	w.cmd.Env = append(w.cmd.Env, runMainEnv+"=1", "JUNBAN_HTTP_ADDR="+w.http, "JUNBAN_LOG_FORMAT=console")
	w.cmd.Env = append(w.cmd.Env, env...)
	w.cmd.Stdout, w.cmd.Stderr = w.out, w.out
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { w.exited <- w.cmd.Wait() }()
	t.Cleanup(func() {
		w.cmd.Process.Kill()
		if t.Failed() || os.Getenv("PERSIST_WORKER_TEST_LOG") != "" {
			t.Logf("worker output:\n%s", w.out.String())
		}
	})
	return w
}

func (w *worker) get(path string) (int, string) {
	c := http.Client{Timeout: 3 * time.Second}
	resp, err := c.Get("http://" + w.http + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func send(t *testing.T, c *sqs.Client, queueURL string, rs []event.Result) {
	t.Helper()
	for lo := 0; lo < len(rs); lo += 10 {
		var entries []types.SendMessageBatchRequestEntry
		for i := lo; i < min(lo+10, len(rs)); i++ {
			b, err := json.Marshal(rs[i])
			if err != nil {
				t.Fatal(err)
			}
			entries = append(entries, types.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(string(b))})
		}
		out, err := c.SendMessageBatch(context.Background(), &sqs.SendMessageBatchInput{QueueUrl: aws.String(queueURL), Entries: entries})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Failed) > 0 {
			t.Fatalf("send: %s", aws.ToString(out.Failed[0].Message))
		}
	}
}

func count(t *testing.T, db *gorm.DB, table string) int64 {
	t.Helper()
	var n int64
	if err := db.Table(table).Count(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n
}

// dump renders the persisted rows without PostgreSQL's timestamps.
func dump(t *testing.T, db *gorm.DB) string {
	t.Helper()
	var b strings.Builder
	for _, q := range []string{
		`SELECT sku, safety_stock, version FROM skus ORDER BY sku`,
		`SELECT sku, lot_id, sellable, reserved, allocated, hidden, shipped, version FROM lots ORDER BY sku, lot_id`,
		`SELECT lcid, status, allocation, paid, lines, seq, last_event_id FROM orders ORDER BY lcid`,
		`SELECT event_id, entity, seq, outcome FROM inbox ORDER BY event_id`,
		`SELECT op_id, idx, event_id, lot_id, from_bucket, to_bucket, qty, sku_version FROM moves ORDER BY op_id, idx`,
	} {
		var s *string
		if err := db.Raw(`SELECT string_agg(t::text, E'\n') FROM (` + q + `) t`).Scan(&s).Error; err != nil {
			t.Fatal(err)
		}
		if s != nil {
			b.WriteString(*s)
		}
		b.WriteString("\n--\n")
	}
	return b.String()
}

// PostgreSQL out of reach for 20 s while results keep coming: the worker holds its
// batches, /readyz fails, nothing is deleted or dead-lettered, and once PostgreSQL is back
// every result is applied exactly as an in-order application would have left the rows.
func TestWorkerSurvivesPostgresOutage(t *testing.T) {
	ctx := context.Background()
	dbURL := testenv.PostgresURL(t)
	db, err := config.Postgres{URL: dbURL}.Open()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if s, err := db.DB(); err == nil {
			s.Close()
		}
	})
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	px := testenv.StartProxy(t, u.Host)
	u.Host = px.Addr()
	c := testenv.SQS(t)
	qs := testenv.NewQueues(t, c, 10)

	cfg := resultgen.Config{Seed: 99, SKUs: 8, Active: 30, Prefix: "out-"}
	stream := resultgen.New(cfg).Results(450)
	if _, err := persist.WriteSKUs(ctx, db, resultgen.Catalog(cfg)); err != nil {
		t.Fatal(err)
	}
	want := func() string {
		ref := testenv.Postgres(t)
		if _, err := persist.WriteSKUs(ctx, ref, resultgen.Catalog(cfg)); err != nil {
			t.Fatal(err)
		}
		for _, r := range stream {
			if _, err := persist.Apply(ctx, ref, []event.Result{r}); err != nil {
				t.Fatal(err)
			}
		}
		return dump(t, ref)
	}()

	w := startWorker(t,
		"DATABASE_URL="+u.String(),
		"JUNBAN_RESULTS_QUEUE="+qs.ResultsName, "JUNBAN_RESULTS_DLQ="+qs.ResultsDLQName,
		"JUNBAN_PERSIST_VISIBILITY=6s", "JUNBAN_SQS_WAIT_SECONDS=1",
		"JUNBAN_PERSIST_BATCH_MAX=40", "JUNBAN_PERSIST_RETRY_BASE=200ms", "JUNBAN_PERSIST_RETRY_MAX=2s",
	)
	testenv.WaitFor(t, 30*time.Second, "the worker to be ready", func() bool { code, _ := w.get("/readyz"); return code == 200 })

	send(t, c, qs.Results.URL, stream[:150])
	testenv.WaitFor(t, 30*time.Second, "the first results to be applied", func() bool { return count(t, db, "inbox") >= 100 })

	px.Down()
	down := time.Now()
	for lo := 150; lo < len(stream); lo += 30 {
		send(t, c, qs.Results.URL, stream[lo:min(lo+30, len(stream))])
		time.Sleep(300 * time.Millisecond) // deliberate: results keep coming during the outage
	}
	testenv.WaitFor(t, 15*time.Second, "/readyz to fail", func() bool {
		code, body := w.get("/readyz")
		return code == http.StatusServiceUnavailable && strings.Contains(body, "postgres")
	})
	during := count(t, db, "inbox")
	time.Sleep(20*time.Second - time.Since(down)) // deliberate: the outage lasts 20 s, and nothing may be applied meanwhile
	if n := count(t, db, "inbox"); n != during {
		t.Fatalf("results were applied while PostgreSQL was out of reach: %d -> %d", during, n)
	}
	px.Up()

	testenv.WaitFor(t, 90*time.Second, "every result to be applied", func() bool { return count(t, db, "inbox") == int64(len(stream)) })
	testenv.WaitFor(t, 15*time.Second, "/readyz to pass again", func() bool { code, _ := w.get("/readyz"); return code == 200 })
	if got := dump(t, db); got != want {
		t.Errorf("rows after the outage differ from an in-order application")
	}
	out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(qs.Results.DLQURL), MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Messages) > 0 {
		t.Errorf("%d result(s) went to the DLQ, first: %s", len(out.Messages), aws.ToString(out.Messages[0].Body))
	}
	_, metrics := w.get("/metrics")
	for _, m := range []string{"junban_persist_batch_size_count", "junban_persist_apply_failures_total", "junban_persist_lag_seconds_bucket", "junban_persist_conflicts_skipped_total"} {
		if !strings.Contains(metrics, m) {
			t.Errorf("/metrics lacks %s", m)
		}
	}
	if !strings.Contains(w.out.String(), "apply failed") {
		t.Error("the worker never logged a failed apply: did the outage reach it?")
	}

	w.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-w.exited:
		if err != nil {
			t.Errorf("worker exited with %v after SIGTERM", err)
		}
	case <-time.After(30 * time.Second):
		t.Error("worker did not stop within 30 s of SIGTERM")
	}
}

// A configuration with several mistakes is refused at once, each mistake named.
func TestWorkerReportsEveryConfigProblem(t *testing.T) {
	w := startWorker(t, "JUNBAN_PERSIST_HOLD_MAX=forever", "JUNBAN_PERSIST_BATCH_MAX=0", "JUNBAN_LOG_FORMAT=xml", "JUNBAN_PERSIST_VISIBILITY=1500ms")
	select {
	case err := <-w.exited:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() == 0 {
			t.Fatalf("worker exited with %v, want a non-zero exit", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("worker with a bad configuration kept running")
	}
	out := w.out.String()
	for _, want := range []string{"JUNBAN_PERSIST_HOLD_MAX", "JUNBAN_PERSIST_BATCH_MAX", "JUNBAN_LOG_FORMAT", "JUNBAN_PERSIST_VISIBILITY"} {
		if !strings.Contains(out, want) {
			t.Errorf("error output does not name %s:\n%s", want, out)
		}
	}
}

// SIGTERM while PostgreSQL is out of reach: the held batch goes back to SQS, the worker
// exits cleanly within its budget, and every message is still in the queue.
func TestWorkerShutdownDuringOutage(t *testing.T) {
	dbURL := testenv.PostgresURL(t)
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	px := testenv.StartProxy(t, u.Host)
	u.Host = px.Addr()
	c := testenv.SQS(t)
	qs := testenv.NewQueues(t, c, 10)
	w := startWorker(t,
		"DATABASE_URL="+u.String(), "JUNBAN_SHUTDOWN_BUDGET=10s",
		"JUNBAN_RESULTS_QUEUE="+qs.ResultsName, "JUNBAN_RESULTS_DLQ="+qs.ResultsDLQName,
		"JUNBAN_PERSIST_VISIBILITY=6s", "JUNBAN_SQS_WAIT_SECONDS=1",
	)
	testenv.WaitFor(t, 30*time.Second, "the worker to be ready", func() bool { code, _ := w.get("/readyz"); return code == 200 })
	px.Down()
	stream := resultgen.New(resultgen.Config{Seed: 5, Prefix: "shut-"}).Results(20)
	send(t, c, qs.Results.URL, stream)
	testenv.WaitFor(t, 30*time.Second, "a failed apply", func() bool { return strings.Contains(w.out.String(), "apply failed") })

	w.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-w.exited:
		if err != nil {
			t.Errorf("worker exited with %v after SIGTERM", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("worker did not stop after SIGTERM")
	}
	// Every message is still in the queue (the emulator's approximate counts are no
	// help: receive them all).
	seen := map[string]bool{}
	deadline := time.Now().Add(30 * time.Second)
	for len(seen) < len(stream) && time.Now().Before(deadline) {
		out, err := c.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(qs.Results.URL), MaxNumberOfMessages: 10, WaitTimeSeconds: 1, VisibilityTimeout: 60,
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range out.Messages {
			var r event.Result
			json.Unmarshal([]byte(aws.ToString(m.Body)), &r)
			seen[r.EventID] = true
		}
	}
	if len(seen) != len(stream) {
		t.Errorf("%d of %d results are still in the queue after the shutdown", len(seen), len(stream))
	}
}
