package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/spf13/cobra"
	"gorm.io/gorm"

	"github.com/junban/junban/internal/aws/topics"
	"github.com/junban/junban/internal/domain"
	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/http/webhook"
	"github.com/junban/junban/internal/http/webhooksend"
	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/platform/cli"
	"github.com/junban/junban/internal/platform/config"
	"github.com/junban/junban/internal/postgres/inventorydb"
	"github.com/junban/junban/internal/queue"
	"github.com/junban/junban/internal/testenv/fleet"
	"github.com/junban/junban/internal/testenv/loadgen"
	"github.com/junban/junban/tools/sendlatency"
)

// loadgenOptions are the flags of loadgen beyond the workload's spec.
type loadgenOptions struct {
	spec               loadgen.Spec
	rate, webhookShare float64
	viaSNS             float64
	topic              string
	wait               time.Duration
	gateway, provider  string
	workerMetrics      string
	jsonOut            bool
	expiryWait         time.Duration
	locations          string
}

func loadgenCmd() *cobra.Command {
	o := loadgenOptions{spec: loadgen.DefaultSpec("")}
	c := &cobra.Command{
		Use:   "loadgen",
		Short: "send a realistic workload, wait for it to persist, print a summary",
		Long: "loadgen imports an inventory, sends a realistic workload (optionally part of it through the\n" +
			"webhook gateway), waits until every result is persisted and prints a summary. It fails (exit 1)\n" +
			"when results are missing, a SKU is oversold or a lot not conserved, with --json too.",
		Args: cli.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error { return runLoadgen(c.Context(), c.OutOrStdout(), o) },
	}
	fs, spec := c.Flags(), &o.spec
	fs.StringVar(&spec.Run, "run", "", "run name, the prefix of every id (default: lg<unix time>)")
	fs.Uint64Var(&spec.Seed, "seed", 1, "random seed (same seed, same workload)")
	fs.IntVar(&spec.Orders, "orders", spec.Orders, "number of orders")
	fs.IntVar(&spec.SKUs, "skus", spec.SKUs, "number of SKUs")
	fs.IntVar(&spec.LotsPerSKU, "lots", spec.LotsPerSKU, "lots per SKU (the last one planned)")
	fs.Int64Var(&spec.StockPerLot, "stock", spec.StockPerLot, "sellable units per on-hand lot")
	fs.Int64Var(&spec.SafetyStock, "safety-stock", spec.SafetyStock, "safety stock of every SKU")
	fs.Float64Var(&spec.SKUSkew, "skew", spec.SKUSkew, "popularity exponent: the i-th SKU is ordered in proportion to 1/i^skew (0 uniform)")
	fs.Float64Var(&spec.DuplicateShare, "duplicates", spec.DuplicateShare, "share of events delivered twice")
	fs.Float64Var(&spec.OutOfOrderShare, "out-of-order", spec.OutOfOrderShare, "share of orders paid before they are placed")
	fs.Float64Var(&spec.ShuffleShare, "shuffle", spec.ShuffleShare, "share of orders whose events arrive in random order")
	fs.Float64Var(&spec.CancelShare, "cancel", spec.CancelShare, "share of orders cancelled")
	fs.Float64Var(&spec.ChangeShare, "change", spec.ChangeShare, "share of orders whose lines change")
	fs.Float64Var(&spec.MoveShare, "move", spec.MoveShare, "share of orders whose first line's allocation moves to another location")
	fs.Float64Var(&spec.ReserveShare, "reserve", spec.ReserveShare, "share of orders placed in reserve mode")
	fs.Float64Var(&spec.AbandonedShare, "abandoned", 0, "share of the reserve orders abandoned: placed with a hold of -hold-for, never paid nor cancelled, expired by junban")
	fs.DurationVar(&spec.HoldFor, "hold-for", 5*time.Second, "the hold of an abandoned order (its order.placed's hold_for)")
	fs.Float64Var(&spec.ExtendShare, "extend", 0, "share of the abandoned orders whose hold is extended (to twice -hold-for) by an order.reservation_extended")
	fs.DurationVar(&o.expiryWait, "expiry-wait", time.Minute, "with -abandoned: how long to wait, once every result is in, for the abandoned holds to expire")
	fs.Float64Var(&spec.WarehouseShare, "warehouse", spec.WarehouseShare, "share of the events that are the warehouse's: lots registered and received, holds, damage, recalls, safety stock, new SKUs, returns (0: none)")
	fs.IntVar(&spec.Window, "window", spec.Window, "orders under way at once (0: all from the start)")
	fs.Float64Var(&o.rate, "rate", 0, "events per second (0: as fast as the queue takes them)")
	fs.DurationVar(&o.wait, "wait", 5*time.Minute, "how long to wait for every result to be persisted")
	fs.StringVar(&o.gateway, "gateway", "", "webhook gateway base URL; with it, payments go through the gateway")
	fs.StringVar(&o.provider, "provider", "", "webhook provider name in JUNBAN_WEBHOOK_PROVIDERS")
	fs.Float64Var(&o.webhookShare, "webhook-share", 0.3, "share of payments sent as webhooks (with -gateway)")
	fs.Float64Var(&o.viaSNS, "via-sns", 0, "share of the events published through an SNS topic the orders queue is subscribed to (non-raw delivery), 0..1")
	fs.StringVar(&o.topic, "topic", "", "with -via-sns: the topic's ARN (default: the topic "+loadgenTopic+", created where missing)")
	fs.StringVar(&o.locations, "locations", "", "comma-separated ids of the shop's registered locations (junbanctl locations set), or \"all\": spread the lots over them and route every order, a pickup (-pickup) or a ship_to near a shipping location")
	fs.Float64Var(&spec.PickupShare, "pickup", 0.15, "with -locations: share of the orders collected at a location that offers pickup")
	fs.BoolVar(&o.jsonOut, "json", false, "print the summary as JSON")
	fs.StringVar(&o.workerMetrics, "worker-metrics", "", "comma-separated host:port of the order-workers' health listeners; with it, the summary adds the deliveries they found done")
	return c
}

// runLoadgen imports an inventory, sends a realistic workload (optionally part of it
// through the webhook gateway), waits until every result is persisted and prints a summary.
func runLoadgen(ctx context.Context, w io.Writer, o loadgenOptions) error {
	spec := o.spec
	if spec.Run == "" {
		spec.Run = "lg" + strconv.FormatInt(time.Now().Unix(), 36)
	}
	if err := o.check(spec); err != nil {
		return err
	}
	pg, err := config.Load[config.Postgres]()
	if err != nil {
		return err
	}
	db, err := pg.Open()
	if err != nil {
		return err
	}
	if spec.Locations, err = registeredLocations(ctx, db, o.locations); err != nil {
		return err
	}
	sqsCfg, err := config.Load[config.SQS]()
	if err != nil {
		return err
	}
	c, err := queue.NewClient(ctx, sqsCfg)
	if err != nil {
		return err
	}
	ordersURL, err := queue.ResolveURL(ctx, c, sqsCfg.OrdersQueue)
	if err != nil {
		return err
	}
	dlqURL, err := queue.ResolveURL(ctx, c, sqsCfg.OrdersDLQ)
	if err != nil {
		return err
	}
	pub, err := queue.NewPublisher(queue.PublisherConfig{Client: c, QueueURL: ordersURL, Keys: domain.OrderKeys})
	if err != nil {
		return err
	}
	defer pub.Stop(context.Background()) //nolint:errcheck // the run counts each message by its Publish's own answer
	send, err := o.throughTopic(ctx, pub, c, sqsCfg, ordersURL)
	if err != nil {
		return err
	}
	rec := sendlatency.NewRecorder(send)
	cfg := loadgen.RunConfig{Spec: spec, Rate: o.rate, Wait: o.wait, Progress: os.Stderr, ExpiryWait: o.expiryWait,
		DLQDepth: func(ctx context.Context) (int, error) { return queueDepth(ctx, c, dlqURL) }}
	if err := o.wire(&cfg, rec); err != nil {
		return err
	}
	s, err := loadgen.Run(ctx, db, rec, cfg)
	if err != nil {
		return err
	}
	if err := printLoadgen(ctx, w, db, rec, s, o.jsonOut); err != nil {
		return err
	}
	// The exit status is the check's, with --json too: scripts test it.
	return summaryFailure(s)
}

// summaryFailure is the error of a run that lost results, oversold or did not conserve a
// lot; nil for a run that held.
func summaryFailure(s loadgen.Summary) error {
	if s.Missing > 0 || s.Oversold > 0 || s.Unconserved > 0 || s.OversoldLocations > 0 {
		return fmt.Errorf("loadgen: %d results missing, %d SKUs oversold, %d locations oversold, %d lots not conserved",
			s.Missing, s.Oversold, s.OversoldLocations, s.Unconserved)
	}
	return nil
}

// check refuses a workload or an option out of range.
func (o loadgenOptions) check(spec loadgen.Spec) error {
	if spec.Orders < 1 || spec.SKUs < 1 || spec.LotsPerSKU < 1 || spec.StockPerLot < 1 {
		return cli.Usagef("-orders, -skus, -lots and -stock must be positive")
	}
	if spec.WarehouseShare < 0 || spec.WarehouseShare > 0.5 || spec.Window < 0 {
		return cli.Usagef("-warehouse must be within [0, 0.5] and -window not negative")
	}
	if spec.AbandonedShare < 0 || spec.AbandonedShare > 1 || spec.ExtendShare < 0 || spec.ExtendShare > 1 ||
		(spec.AbandonedShare > 0 && spec.HoldFor < time.Second) {
		return cli.Usagef("-abandoned and -extend must be within [0, 1], and -hold-for at least 1s with -abandoned")
	}
	if o.viaSNS < 0 || o.viaSNS > 1 || o.topic != "" && o.viaSNS == 0 {
		return cli.Usagef("-via-sns must be within [0, 1], and above 0 with -topic")
	}
	return nil
}

// wire adds to cfg what the options ask for beyond the spec: the workers' metrics and
// the webhook gateway.
func (o loadgenOptions) wire(cfg *loadgen.RunConfig, rec *sendlatency.Recorder) error {
	if o.workerMetrics != "" {
		addrs := strings.Split(o.workerMetrics, ",")
		for i := range addrs {
			addrs[i] = strings.TrimSpace(addrs[i])
		}
		cfg.DuplicatesFound = func(ctx context.Context) (int, error) {
			n, err := fleet.MetricSum(ctx, loadgen.DuplicatesFoundSeries, addrs...)
			return int(n), err
		}
	}
	if o.gateway != "" {
		p, err := webhooksend.Provider(o.provider, "", "")
		if err != nil {
			return err
		}
		cfg.Webhook = rec.Webhook(gatewayWebhook(o.gateway, p))
		cfg.WebhookShare = o.webhookShare
		cfg.WebhookEventID = func(pid string) string { return webhook.OrderEventID(p.Name, pid) }
	}
	return nil
}

// loadgenTopic is the topic loadgen -via-sns creates when no -topic is given.
const loadgenTopic = "junban-loadgen"

// throughTopic is pub without -via-sns. With it, throughTopic subscribes the orders queue
// to the topic (non-raw delivery, as junbanctl topics subscribe does) and returns a
// publisher that sends that share of the events through the topic and the rest through pub.
func (o loadgenOptions) throughTopic(ctx context.Context, pub loadgen.Publisher, c *sqs.Client, sqsCfg config.SQS, ordersURL string) (loadgen.Publisher, error) {
	if o.viaSNS == 0 {
		return pub, nil
	}
	tcfg, err := config.Load[topics.Config]()
	if err != nil {
		return nil, err
	}
	sn, err := topics.NewClient(ctx, tcfg, sqsCfg.Endpoint)
	if err != nil {
		return nil, err
	}
	arn := o.topic
	if arn == "" {
		if arn, err = topics.Ensure(ctx, sn, loadgenTopic); err != nil {
			return nil, err
		}
	}
	if _, err := topics.Subscribe(ctx, sn, c, topics.Spec{TopicARN: arn, QueueURL: ordersURL}); err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "loadgen: %.0f%% of the events through %s\n", 100*o.viaSNS, arn)
	return loadgen.Split{Queue: pub, Other: topics.Publisher{Client: sn, TopicARN: arn}, Share: o.viaSNS}, nil
}

// printLoadgen prints the summary, with the send -> commit latency split.
func printLoadgen(ctx context.Context, w io.Writer, db *gorm.DB, rec *sendlatency.Recorder, s loadgen.Summary, jsonOut bool) error {
	// The summary's percentiles mix the events parked on purpose (sent before their
	// precondition: they wait for the workload's next send) with the rest; apart, the
	// rest is junban's own latency.
	inTurn, parked, _, err := sendlatency.Split(ctx, db, rec)
	if err != nil {
		return err
	}
	if jsonOut {
		out := struct {
			loadgen.Summary
			InTurn sendlatency.Stats `json:"latency_in_turn"`
			Parked sendlatency.Stats `json:"latency_parked_on_purpose"`
		}{s, inTurn, parked}
		return json.NewEncoder(w).Encode(out)
	}
	s.Print(w)
	fmt.Fprintf(w, "send -> commit, applied in turn      %s\n", inTurn)
	fmt.Fprintf(w, "send -> commit, parked on purpose    %s\n", parked)
	return nil
}

// registeredLocations returns the registered locations named in list (comma-separated
// ids, or "all"), in the registry's order; none for an empty list.
func registeredLocations(ctx context.Context, db *gorm.DB, list string) ([]stock.Location, error) {
	if list == "" {
		return nil, nil
	}
	all, err := inventorydb.Locations(ctx, db)
	if err != nil {
		return nil, err
	}
	if list == "all" {
		if len(all) == 0 {
			return nil, errors.New("loadgen: -locations all: the shop has no registered locations (junbanctl locations set)")
		}
		return all, nil
	}
	var out []stock.Location
	for _, id := range strings.Split(list, ",") {
		i := slices.IndexFunc(all, func(l stock.Location) bool { return l.ID == id })
		if i < 0 {
			return nil, fmt.Errorf("loadgen: -locations: %q is not a registered location (junbanctl locations list)", id)
		}
		out = append(out, all[i])
	}
	return out, nil
}

// gatewayWebhook delivers a payment as provider p would, signed, to the gateway.
func gatewayWebhook(base string, p webhook.Provider) loadgen.Webhook {
	client := &http.Client{Timeout: 30 * time.Second}
	typ := webhooksend.PaymentSucceeded(p.Kind)
	return func(ctx context.Context, pid string, ev event.Order) (int, error) {
		// A provider's retry carries the same payload: everything here derives from the event.
		body, err := webhooksend.Body(p.Kind, webhook.ProviderEvent{
			ID: pid, Type: typ, LCID: ev.LCID, OccurredAt: ev.OccurredAt.UTC().Truncate(time.Second),
			PaymentID: "pay_" + pid, Amount: 1000, Currency: "jpy",
		})
		if err != nil {
			return 0, err
		}
		req := &webhooksend.Request{URL: base + "/webhooks/" + p.Name, Provider: p, ID: pid, Body: body, Client: client}
		ans, err := req.Send(ctx)
		return ans.Code, err
	}
}

// queueDepth is SQS's ApproximateNumberOfMessages of a queue: the visible messages (the
// local emulator counts those in flight too). Nothing reads the DLQ during a run, so
// every message in it is visible.
func queueDepth(ctx context.Context, c *sqs.Client, url string) (int, error) {
	out, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       aws.String(url),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameAll},
	})
	if err != nil {
		return 0, err
	}
	n, _ := strconv.Atoi(out.Attributes["ApproximateNumberOfMessages"])
	return n, nil
}
