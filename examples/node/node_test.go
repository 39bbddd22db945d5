// Package node_test runs the Node.js side of junban's contracts: the AsyncAPI document's
// check with @asyncapi/parser, and a Node.js producer and consumer against the local
// stack. Each test skips when node is absent; the npm packages are installed by
// scripts/node-examples.sh when missing.
package node_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	snstypes "github.com/aws/aws-sdk-go-v2/service/sns/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/google/uuid"

	"github.com/junban/junban/internal/aws/topics"
	"github.com/junban/junban/internal/domain"
	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/postgres/outbound"
	"github.com/junban/junban/internal/queue"
	"github.com/junban/junban/internal/testenv"
	"github.com/junban/junban/producer"
)

// nodeDir returns examples/node with its npm packages installed; it skips the test when
// node is absent, and under -short (it runs processes).
func nodeDir(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("runs node; not in -short")
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is absent")
	}
	out, err := exec.Command(filepath.Join(testenv.RepoRoot(), "scripts", "node-examples.sh")).Output()
	if err != nil {
		t.Fatalf("scripts/node-examples.sh: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// runNode runs a script of dir with args and env added, and returns its exit code, its
// standard output, and both outputs for a failure's message.
func runNode(t *testing.T, dir string, env []string, script string, args ...string) (code int, stdout, all string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", append([]string{script}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	all = out.String() + errOut.String()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode(), out.String(), all
		}
		t.Fatalf("node %s: %v\n%s", script, err, all)
	}
	return 0, out.String(), all
}

// The committed AsyncAPI document passes @asyncapi/parser (the version package-lock.json
// pins) without an error; a copy with a broken SQS binding does not, so the check can fail.
func TestAsyncAPIDocumentIsValid(t *testing.T) {
	dir := nodeDir(t)
	doc := filepath.Join(testenv.RepoRoot(), "docs", "contracts", "asyncapi.json")
	if code, _, out := runNode(t, dir, nil, "check-asyncapi.mjs", doc); code != 0 {
		t.Fatalf("docs/contracts/asyncapi.json: exit %d\n%s", code, out)
	}
	raw, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	sqsBinding := m["channels"].(map[string]any)["orders"].(map[string]any)["bindings"].(map[string]any)["sqs"].(map[string]any)
	sqsBinding["queue"].(map[string]any)["fifoQueue"] = "no"
	broken, _ := json.Marshal(m)
	bad := filepath.Join(t.TempDir(), "asyncapi.json")
	if err := os.WriteFile(bad, broken, 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, out := runNode(t, dir, nil, "check-asyncapi.mjs", bad)
	if code != 1 || !strings.Contains(out, "fifoQueue") {
		t.Fatalf("a document with a broken SQS binding: exit %d\n%s", code, out)
	}
}

// awsEnv points the Node SDK at the test stack's SQS.
func awsEnv(t *testing.T) []string {
	t.Helper()
	cfg := testenv.SQSConfig(t)
	return []string{"AWS_ENDPOINT_URL_SQS=" + cfg.Endpoint, "AWS_REGION=" + cfg.Region,
		"AWS_ACCESS_KEY_ID=" + cmpOr(os.Getenv("AWS_ACCESS_KEY_ID"), "test"),
		"AWS_SECRET_ACCESS_KEY=" + cmpOr(os.Getenv("AWS_SECRET_ACCESS_KEY"), "test")}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// The Node.js producer's order.placed, sent to a standard and to a FIFO orders queue, is
// an event the order-worker accepts (its envelope unwrapped and decoded within the
// worker's limits, producer.Check), the FIFO one with the ids junban's senders give.
func TestNodeProducerTheWorkerAccepts(t *testing.T) {
	dir := nodeDir(t)
	c := testenv.SQS(t)
	testenv.EachQueueKind(t, func(t *testing.T, newQueues testenv.NewQueuesFunc) {
		q := newQueues(t, c, 30)
		lcid := "LC-ノード-" + testenv.Name(t) // not ASCII: a FIFO group id is hashed
		code, _, out := runNode(t, dir, awsEnv(t), "producer.mjs", q.Orders.URL, lcid, "evt-node-1")
		if code != 0 {
			t.Fatalf("producer.mjs: exit %d\n%s", code, out)
		}
		got, err := c.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(q.Orders.URL),
			MaxNumberOfMessages: 10, WaitTimeSeconds: 5, MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{"MessageGroupId", "MessageDeduplicationId"}})
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Messages) != 1 {
			t.Fatalf("%d messages on the orders queue", len(got.Messages))
		}
		msg := got.Messages[0]
		inner, _, err := domain.Unwrap([]byte(aws.ToString(msg.Body)), 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := producer.Check(inner); err != nil {
			t.Fatalf("the worker refuses the Node producer's event: %v\n%s", err, inner)
		}
		ev, err := domain.Decode(inner, 0)
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type != event.OrderPlaced || ev.LCID != lcid || ev.ContractVersion() != event.Version {
			t.Errorf("decoded %s of %q, version %s", ev.Type, ev.LCID, ev.ContractVersion())
		}
		group, dedup, err := domain.OrderKeys(inner)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(q.Orders.URL, ".fifo") {
			if g, d := msg.Attributes["MessageGroupId"], msg.Attributes["MessageDeduplicationId"]; g != queue.FIFOID(group) || d != queue.FIFOID(dedup) {
				t.Errorf("group %q, deduplication %q; junban's are %q, %q", g, d, queue.FIFOID(group), queue.FIFOID(dedup))
			}
		}
	})
}

// The Node.js consumer reads outbound events from a queue subscribed to an outbound topic
// (an SNS notification each) and results from a results queue, as docs/outbound.md and
// docs/events.md describe them, and ignores a field it does not know.
func TestNodeConsumerReadsOutboundEventsAndResults(t *testing.T) {
	dir := nodeDir(t)
	c := testenv.SQS(t)
	q := testenv.NewQueues(t, c, 30)
	ctx := context.Background()

	// Outbound events: through SNS where the stack has it, else as raw delivery does.
	at := time.Date(2026, 12, 2, 9, 30, 0, 0, time.UTC)
	var bodies [][]byte
	for seq := int64(1); seq <= 2; seq++ {
		data, _ := json.Marshal(outbound.StockLevelData{AvailableToShip: 4, Threshold: 10, Level: outbound.LevelLow, Previous: outbound.LevelOK, AsOf: "2026-12-02"})
		b, err := json.Marshal(outbound.Message{ID: uuid.NewString(), Kind: outbound.StockLow, Entity: "sku:TEA-1", SKU: "TEA-1", Seq: seq,
			OccurredAt: at, CausedBy: outbound.Cause{EventID: "evt-1", Type: event.InventoryDamaged}, Data: data})
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		m["added_later"] = "a field a later junban may add" // within version 1
		b, _ = json.Marshal(m)
		if err := outbound.Validate(b); err != nil {
			t.Fatal(err)
		}
		bodies = append(bodies, b)
	}
	if testenv.HasSNS(t) {
		sn := testenv.SNS(t)
		topic := testenv.Topic(t, sn)
		if _, err := topics.Subscribe(ctx, sn, c, topics.Spec{TopicARN: topic, QueueURL: q.Orders.URL}); err != nil {
			t.Fatal(err)
		}
		for _, b := range bodies {
			if _, err := sn.Publish(ctx, &sns.PublishInput{TopicArn: aws.String(topic), Message: aws.String(string(b)),
				MessageAttributes: map[string]snstypes.MessageAttributeValue{
					outbound.KindAttribute: {DataType: aws.String("String"), StringValue: aws.String(string(outbound.StockLow))}}}); err != nil {
				t.Fatal(err)
			}
		}
	} else {
		for _, b := range bodies {
			if _, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(q.Orders.URL), MessageBody: aws.String(string(b))}); err != nil {
				t.Fatal(err)
			}
		}
	}
	code, out, all := runNode(t, dir, awsEnv(t), "consumer.mjs", q.Orders.URL, "2", "60")
	if code != 0 {
		t.Fatalf("consumer.mjs: exit %d\n%s", code, all)
	}
	seqs := map[float64]bool{}
	for _, line := range lines(out) {
		var s struct {
			Kind, Version, Entity string
			Seq                   float64
			Skipped               bool
		}
		if err := json.Unmarshal([]byte(line), &s); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		if s.Skipped || s.Kind != string(outbound.StockLow) || s.Version != event.Version || s.Entity != "sku:TEA-1" {
			t.Errorf("the consumer read %s", line)
		}
		seqs[s.Seq] = true
	}
	if !seqs[1] || !seqs[2] {
		t.Errorf("the consumer read seqs %v of 1 and 2\n%s", seqs, out)
	}

	// A result, as the order-worker writes it to the results queue.
	r, err := json.Marshal(event.Result{EventID: "evt-9", Entity: "LC-9", LCID: "LC-9", Seq: 1, Arrival: 1, Type: event.OrderPlaced,
		Outcome: event.Rejected, Reason: "ERR_SHORTAGE", ProcessedAt: at})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(q.Results.URL), MessageBody: aws.String(string(r))}); err != nil {
		t.Fatal(err)
	}
	code, out, all = runNode(t, dir, awsEnv(t), "consumer.mjs", q.Results.URL, "1", "60")
	if code != 0 || strings.TrimSpace(out) != `{"type":"order.placed","outcome":"rejected","entity":"LC-9","event_id":"evt-9"}` {
		t.Fatalf("consumer.mjs on the results queue: exit %d\n%s", code, all)
	}
}

func lines(s string) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			out = append(out, l)
		}
	}
	return out
}
