package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/http/webhook"
	"github.com/junban/junban/internal/http/webhooksend"
	"github.com/junban/junban/internal/platform/cli"
	"github.com/junban/junban/internal/platform/config"
	"github.com/junban/junban/internal/queue"
)

// webhookFlags are the flags send and storm share: what to sign and where to send it.
type webhookFlags struct {
	url, provider, kind, secret, typ, id, lcid, currency, bodyFile string
	amount                                                         int64
	skew, timeout                                                  time.Duration
}

func (f *webhookFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.url, "url", "http://127.0.0.1:8080", "the gateway's base URL")
	fs.StringVar(&f.provider, "provider", "stripe", "provider name: the path /webhooks/NAME")
	fs.StringVar(&f.kind, "kind", "", "stripe or standard (default: the provider's kind in JUNBAN_WEBHOOK_PROVIDERS)")
	fs.StringVar(&f.secret, "secret", "", "signing secret (default: the provider's first secret in JUNBAN_WEBHOOK_PROVIDERS)")
	fs.StringVar(&f.typ, "type", "", "provider event type (default: the kind's payment succeeded type)")
	fs.StringVar(&f.id, "id", "", "provider event id (default: a random one)")
	fs.StringVar(&f.lcid, "lcid", "LC-000001", "the order's lcid")
	fs.Int64Var(&f.amount, "amount", 1000, "payment amount")
	fs.StringVar(&f.currency, "currency", "jpy", "payment currency")
	fs.StringVar(&f.bodyFile, "body", "", "send this file as the body instead (still signed; -id is the webhook-id)")
	fs.DurationVar(&f.skew, "skew", 0, "sign with the clock moved by this much (a stale or future timestamp)")
	fs.DurationVar(&f.timeout, "timeout", 30*time.Second, "per-request timeout")
}

func (f *webhookFlags) build() (*webhooksend.Request, error) {
	p, err := webhooksend.Provider(f.provider, f.kind, f.secret)
	if err != nil {
		return nil, err
	}
	id := f.id
	if id == "" {
		b := make([]byte, 8)
		rand.Read(b)
		id = map[webhook.Kind]string{webhook.KindStripe: "evt_", webhook.KindStandard: "msg_"}[p.Kind] + hex.EncodeToString(b)
	}
	var body []byte
	if f.bodyFile != "" {
		if body, err = os.ReadFile(f.bodyFile); err != nil {
			return nil, err
		}
	} else {
		typ := f.typ
		if typ == "" {
			typ = webhooksend.PaymentSucceeded(p.Kind)
		}
		body, err = webhooksend.Body(p.Kind, webhook.ProviderEvent{
			ID: id, Type: typ, LCID: f.lcid, OccurredAt: time.Now().UTC().Truncate(time.Second),
			PaymentID: "pay_" + id, Amount: f.amount, Currency: f.currency,
		})
		if err != nil {
			return nil, err
		}
	}
	return &webhooksend.Request{
		URL: f.url + "/webhooks/" + p.Name, Provider: p, ID: id, Body: body, Skew: f.skew,
		Client: &http.Client{Timeout: f.timeout},
	}, nil
}

// providerEventID is the id the gateway keys the delivery w by.
func providerEventID(w *webhooksend.Request) (string, error) {
	ev, err := webhook.Parse(w.Provider.Kind, w.ID, w.Body)
	if err != nil {
		return "", err
	}
	return ev.ID, nil
}

// webhookSendReport is what webhook send prints with --json.
type webhookSendReport struct {
	// Status is the gateway's HTTP status.
	Status int `json:"status"`
	// Replayed is true when the gateway answered with the response of an earlier delivery.
	Replayed bool `json:"replayed"`
	// Body is the gateway's answer.
	Body string `json:"body"`
}

func webhookSendCmd() *cobra.Command {
	var f webhookFlags
	var asJSON bool
	c := &cobra.Command{
		Use:   "send",
		Short: "send one signed webhook to a running gateway",
		Long:  "send sends one correctly signed webhook and prints the answer; a non-2xx answer is a failure (exit 1).",
		Args:  cli.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return runWebhookSend(c.Context(), c.OutOrStdout(), &f, asJSON)
		},
	}
	f.register(c.Flags())
	c.Flags().BoolVar(&asJSON, "json", false, "print the answer as JSON")
	return c
}

// runWebhookSend sends one correctly signed webhook and prints the answer; a non-2xx
// answer is an error (exit 1).
func runWebhookSend(ctx context.Context, out io.Writer, f *webhookFlags, asJSON bool) error {
	w, err := f.build()
	if err != nil {
		return err
	}
	a, err := w.Send(ctx)
	if err != nil {
		return err
	}
	if asJSON {
		err = cli.WriteJSON(out, webhookSendReport{Status: a.Code, Replayed: a.Replayed, Body: string(a.Body)})
	} else {
		replayed := ""
		if a.Replayed {
			replayed = " (replayed)"
		}
		fmt.Fprintf(out, "HTTP %d%s\n%s", a.Code, replayed, a.Body)
	}
	if a.Code/100 != 2 {
		return errors.Join(err, fmt.Errorf("webhook send: the gateway answered %d", a.Code))
	}
	return err
}

// stormOptions are the flags of webhook storm beyond the request's.
type stormOptions struct {
	n, retries int
	retryDelay time.Duration
	count      bool
	queue      string
	wait       time.Duration
	asJSON     bool
}

// stormReport is what webhook storm found; printed as JSON with --json.
type stormReport struct {
	Provider        string `json:"provider"`
	ProviderEventID string `json:"provider_event_id"`
	OrderEventID    string `json:"order_event_id"`
	Deliveries      int    `json:"deliveries"`
	Retries         int    `json:"retries"`
	StormMs         int64  `json:"storm_ms"`
	// Answers counts the answers by phase and status: "storm 200", "retry 200 (replayed)", ...
	Answers   map[string]int `json:"answers"`
	OK        int            `json:"ok_200"`
	Conflicts int            `json:"conflict_409"`
	Others    int            `json:"others"`
	// OrderEvents is the number of order events of the delivery found on the orders queue
	// (nil with --count=false); CountComplete is false when the count stopped early.
	OrderEvents   *int     `json:"order_events,omitempty"`
	CountComplete bool     `json:"count_complete,omitempty"`
	Problems      []string `json:"problems"`
}

func webhookStormCmd() *cobra.Command {
	var f webhookFlags
	var o stormOptions
	c := &cobra.Command{
		Use:   "storm",
		Short: "send N concurrent duplicate webhooks plus late retries",
		Long: `storm delivers one event N times at once, then a few late retries, prints how the gateway
answered, and counts the order events of that delivery on the orders queue: exactly one must be there.

The count reads the queue without deleting: each message is received once with a visibility timeout
that hides it while counting, and made visible again at the end. A worker consuming the same queue
may take the event first, so run the storm against a queue nobody consumes (start the gateway with
JUNBAN_ORDERS_QUEUE=<name> and pass --queue <name>), or pass --count=false.`,
		Args: cli.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error { return runWebhookStorm(c.Context(), c.OutOrStdout(), &f, o) },
	}
	fs := c.Flags()
	f.register(fs)
	fs.IntVarP(&o.n, "n", "n", 50, "concurrent deliveries of the same event")
	fs.IntVar(&o.retries, "retries", 3, "late retries after the storm, one after the other")
	fs.DurationVar(&o.retryDelay, "retry-delay", time.Second, "pause before the late retries")
	fs.BoolVar(&o.count, "count", true, "count the order events on the orders queue")
	fs.StringVar(&o.queue, "queue", "", "orders queue name or URL (default JUNBAN_ORDERS_QUEUE)")
	fs.DurationVar(&o.wait, "wait", 5*time.Second, "how long to keep reading the queue")
	fs.BoolVar(&o.asJSON, "json", false, "print the report as JSON")
	return c
}

// runWebhookStorm runs the storm, reports it and fails unless every answer was 200 or
// 409, the late retries were replayed, and exactly one order event reached the queue.
func runWebhookStorm(ctx context.Context, out io.Writer, f *webhookFlags, o stormOptions) error {
	if o.n < 1 || o.retries < 0 {
		return cli.Usagef("-n must be positive and -retries not negative")
	}
	if o.wait <= 0 || o.wait > maxCountWait {
		// The messages read are hidden for the wait and 30 s more: SQS allows at most 12 h.
		return cli.Usagef("-wait must be positive and at most %s", maxCountWait)
	}
	w, err := f.build()
	if err != nil {
		return err
	}
	pid, err := providerEventID(w)
	if err != nil {
		return fmt.Errorf("webhook storm: the body is not a valid %s event: %w", w.Provider.Kind, err)
	}
	rep := stormReport{Provider: w.Provider.Name, ProviderEventID: pid, OrderEventID: webhook.OrderEventID(w.Provider.Name, pid),
		Deliveries: o.n, Retries: o.retries}
	if err := storm(ctx, w, o, &rep); err != nil {
		return err
	}
	if o.count {
		found, complete, err := countOrderEvents(ctx, o.queue, rep.OrderEventID, o.wait)
		if err != nil {
			return err
		}
		rep.OrderEvents, rep.CountComplete = &found, complete
	}
	rep.check()
	if o.asJSON {
		err = cli.WriteJSON(out, rep)
	} else {
		rep.print(out)
	}
	if len(rep.Problems) > 0 {
		return errors.Join(err, errors.New("webhook storm: "+joinLines(rep.Problems)))
	}
	return err
}

// storm delivers w o.n times at once, then o.retries times one after the other, and
// counts the answers in rep.
func storm(ctx context.Context, w *webhooksend.Request, o stormOptions, rep *stormReport) error {
	rep.Answers = map[string]int{}
	var mu sync.Mutex
	record := func(phase string, a webhooksend.Answer, err error) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err != nil:
			rep.Answers[phase+" error"]++
		case a.Code == http.StatusOK && a.Replayed:
			rep.Answers[phase+" 200 (replayed)"]++
		default:
			rep.Answers[fmt.Sprintf("%s %d", phase, a.Code)]++
		}
	}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range o.n {
		wg.Go(func() {
			<-start
			a, err := w.Send(ctx)
			record("storm", a, err)
		})
	}
	began := time.Now()
	close(start)
	wg.Wait()
	rep.StormMs = time.Since(began).Milliseconds()
	if o.retries > 0 {
		select {
		case <-time.After(o.retryDelay):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	for range o.retries {
		a, err := w.Send(ctx)
		record("retry", a, err)
	}
	return nil
}

// check sums the answers and lists the problems.
func (r *stormReport) check() {
	for k, n := range r.Answers {
		switch k {
		case "storm 200", "storm 200 (replayed)", "retry 200", "retry 200 (replayed)":
			r.OK += n
		case "storm 409", "retry 409":
			r.Conflicts += n
		default:
			r.Others += n
		}
	}
	r.Problems = []string{}
	if r.Others > 0 {
		r.Problems = append(r.Problems, fmt.Sprintf("%d answers were neither 200 nor 409", r.Others))
	}
	if r.Retries > 0 && r.Answers["retry 200 (replayed)"] != r.Retries {
		r.Problems = append(r.Problems, fmt.Sprintf("%d of %d late retries were answered with the first response", r.Answers["retry 200 (replayed)"], r.Retries))
	}
	switch {
	case r.OrderEvents == nil:
	case !r.CountComplete:
		r.Problems = append(r.Problems, fmt.Sprintf("the queue still had messages when counting stopped (%s after -wait, or %d messages read): the count may be low; count on a queue of the test's own (-queue)", countGrace, countMaxMessages))
	case *r.OrderEvents != 1:
		r.Problems = append(r.Problems, fmt.Sprintf("%d order events reached the queue, want exactly 1 (a worker consuming the queue takes them first: see -queue)", *r.OrderEvents))
	}
}

func (r *stormReport) print(w io.Writer) {
	fmt.Fprintf(w, "provider %s, provider event %s, order event %s\n", r.Provider, r.ProviderEventID, r.OrderEventID)
	fmt.Fprintf(w, "%d concurrent deliveries in %v, then %d late retries:\n", r.Deliveries, time.Duration(r.StormMs)*time.Millisecond, r.Retries)
	for _, k := range slices.Sorted(maps.Keys(r.Answers)) {
		fmt.Fprintf(w, "  %-24s %d\n", k, r.Answers[k])
	}
	fmt.Fprintf(w, "200: %d  409: %d  others: %d\n", r.OK, r.Conflicts, r.Others)
	if r.OrderEvents != nil {
		fmt.Fprintf(w, "order events on the queue for %s: %d\n", r.OrderEventID, *r.OrderEvents)
	}
	if len(r.Problems) == 0 {
		fmt.Fprintln(w, "ok")
	}
}

func joinLines(s []string) string {
	var b bytes.Buffer
	for i, l := range s {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(l)
	}
	return b.String()
}

// Bounds of countOrderEvents: on a queue with steady traffic (a live orders queue) a
// receive never comes back empty, and every message read stays hidden until the end.
// (Variables so that a test can shorten them.)
var (
	countGrace       = 30 * time.Second
	countMaxMessages = 10000
)

// maxCountWait keeps the visibility of the messages read (wait + countGrace) within SQS's 12 h.
const maxCountWait = 12*time.Hour - 30*time.Second

// countOrderEvents counts the distinct messages carrying eventID on the orders queue,
// reading for wait without deleting anything, then makes every message it saw visible
// again. It reads until a receive after wait comes back empty (complete), or stops
// countGrace after wait or after countMaxMessages messages (not complete).
func countOrderEvents(ctx context.Context, nameOrURL, eventID string, wait time.Duration) (found int, complete bool, err error) {
	cfg, err := config.Load[config.SQS]()
	if err != nil {
		return 0, false, err
	}
	if nameOrURL == "" {
		nameOrURL = cfg.OrdersQueue
	}
	c, err := queue.NewClient(ctx, cfg)
	if err != nil {
		return 0, false, err
	}
	url, err := queue.ResolveURL(ctx, c, nameOrURL)
	if err != nil {
		return 0, false, err
	}
	hide := int32((wait + countGrace).Seconds())
	seen := map[string]bool{}
	var receipts []string
	deadline := time.Now().Add(wait)
	for len(seen) < countMaxMessages && time.Now().Before(deadline.Add(countGrace)) {
		r, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(url), MaxNumberOfMessages: 10, WaitTimeSeconds: 1, VisibilityTimeout: hide,
		})
		if err != nil {
			return 0, false, fmt.Errorf("webhook storm: receive from %s: %w", url, err)
		}
		for _, m := range r.Messages {
			receipts = append(receipts, aws.ToString(m.ReceiptHandle))
			// The emulator may hand out one message twice in a response: count ids.
			if seen[aws.ToString(m.MessageId)] {
				continue
			}
			seen[aws.ToString(m.MessageId)] = true
			var o event.Order
			if json.Unmarshal([]byte(aws.ToString(m.Body)), &o) == nil && o.EventID == eventID {
				found++
			}
		}
		if len(r.Messages) == 0 && time.Now().After(deadline) {
			complete = true
			break
		}
	}
	for i := 0; i < len(receipts); i += 10 {
		var entries []types.ChangeMessageVisibilityBatchRequestEntry
		for j, rh := range receipts[i:min(i+10, len(receipts))] {
			entries = append(entries, types.ChangeMessageVisibilityBatchRequestEntry{
				Id: aws.String(fmt.Sprint(j)), ReceiptHandle: aws.String(rh), VisibilityTimeout: 0,
			})
		}
		if _, err := c.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(url), Entries: entries}); err != nil {
			fmt.Fprintf(os.Stderr, "webhook storm: messages stay hidden for %ds: %v\n", hide, err)
			break
		}
	}
	return found, complete, nil
}
