package loadgen

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"gorm.io/gorm"

	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/platform/progress"
)

// Publisher puts order events on the orders queue.
type Publisher interface {
	PublishBatch(ctx context.Context, bodies [][]byte) error
}

// Webhook delivers a payment event through the gateway as the provider would: it
// returns the HTTP status. providerEventID is the provider's id of that delivery.
type Webhook func(ctx context.Context, providerEventID string, ev event.Order) (int, error)

// RunConfig configures a load run.
type RunConfig struct {
	Spec Spec
	// Rate is events per second; 0 sends as fast as the queue takes them.
	Rate float64
	// Senders is how many batches of ten may be on their way to the queue at once; 0 or 1:
	// one after the other. One sender is bound by the latency of SendMessageBatch, which
	// on a loaded machine is below what a fleet takes (bench e2e uses several).
	Senders int
	// WebhookShare of the payment events go through the gateway instead of the queue.
	WebhookShare float64
	// Webhook sends one webhook; nil sends every event to the queue.
	Webhook Webhook
	// WebhookEventID is the order event id the gateway derives from a provider event id.
	WebhookEventID func(providerEventID string) string
	// Wait bounds the wait for every event's result in PostgreSQL.
	Wait time.Duration
	// Progress receives the progress bars; nil shows none.
	Progress io.Writer
	// DLQDepth counts the messages in the orders DLQ (nil: not counted).
	DLQDepth func(ctx context.Context) (int, error)
	// ExpiryWait bounds the wait, once every result is in, for the abandoned orders'
	// holds to pass and junban to expire them (0: no wait; the summary counts what
	// expired by then).
	ExpiryWait time.Duration
	// DuplicatesFound reads the order-workers' count of deliveries that found their
	// event done already (the series DuplicatesFoundSeries); nil: not counted.
	DuplicatesFound func(ctx context.Context) (int, error)
}

// DuplicatesFoundSeries is the order-workers' metric series behind RunConfig.DuplicatesFound.
const DuplicatesFoundSeries = `junban_order_replayed_total{kind="duplicate"}`

// Summary is what a run did, for people (Print) and for machines (JSON).
type Summary struct {
	Run                  string         `json:"run"`
	Orders               int            `json:"orders"`
	SKUs                 int            `json:"skus"`
	NewSKUs              int            `json:"skus_registered"`
	Sent                 int            `json:"events_sent"`
	Distinct             int            `json:"events_distinct"`
	WebhooksSent         int            `json:"webhooks_sent"`
	WebhookStatus        map[int]int    `json:"webhook_status,omitempty"`
	Persisted            int            `json:"results_persisted"`
	Applied              int            `json:"applied"`
	Rejected             int            `json:"rejected"`
	RejectedBy           map[string]int `json:"rejected_by_reason"`
	Missing              int            `json:"missing"`
	DLQ                  int            `json:"dlq"`
	OrdersByStatus       map[string]int `json:"orders_by_status"`
	EarlyPayments        int            `json:"early_payments"`
	EarlyPaymentsApplied int            `json:"early_payments_applied"`
	Oversold             int            `json:"oversold_skus"`
	Unconserved          int            `json:"unconserved_lots"`
	P50MS                float64        `json:"p50_ms"`
	P95MS                float64        `json:"p95_ms"`
	P99MS                float64        `json:"p99_ms"`
	ElapsedS             float64        `json:"elapsed_s"`
	EventsPerS           float64        `json:"events_per_s"`

	// Abandoned counts the abandoned reserve orders (Spec.AbandonedShare); Expired those
	// of them junban expired, HoldsLeft those still placed with a hold when the summary
	// was taken (its hold not passed, or not expired within RunConfig.ExpiryWait).
	Abandoned int `json:"abandoned"`
	Expired   int `json:"abandoned_expired"`
	HoldsLeft int `json:"abandoned_holds_left"`

	// ByType splits the outcomes by event type: the orders' and the warehouse's
	// (IsWarehouse) side by side.
	ByType map[event.Type]*Outcomes `json:"by_type"`
	// DuplicatesSent is what the workload sent twice: sent minus distinct.
	DuplicatesSent int `json:"duplicates_sent"`
	// DuplicatesFoundDone is the order-workers' own count of deliveries that found their
	// event done and had no effect (SQS redeliveries included; a duplicate of an event
	// still parked is absorbed by the parked list instead); nil when not counted.
	DuplicatesFoundDone *int `json:"duplicates_found_done,omitempty"`

	// Locations are the figures per location the run's lots are at, by location id; set
	// when the workload spreads its lots over locations (Spec.Locations).
	Locations []LocationFigures `json:"locations,omitempty"`
	// OversoldLocations counts locations whose orders hold more than came in there.
	OversoldLocations int `json:"oversold_locations"`
}

// LocationFigures are the run's lots at one location, in PostgreSQL after the run.
type LocationFigures struct {
	Location string `json:"location"`
	Lots     int    `json:"lots"`
	// In is what came in, from the import and the moves (imported, plus what moves
	// brought in from outside or by a transfer, less what they took out): not read from
	// the lots.
	In int64 `json:"in"`
	// Sellable, Held (reserved and allocated, not shipped yet), Shipped and Defective are
	// the lots' buckets summed.
	Sellable  int64 `json:"sellable"`
	Held      int64 `json:"held"`
	Shipped   int64 `json:"shipped"`
	Defective int64 `json:"defective"`
	// TransferredOut and TransferredIn are the units transfers took from the location's
	// lots and brought into them (both for a transfer cancelled: out, then back in).
	TransferredOut int64 `json:"transferred_out"`
	TransferredIn  int64 `json:"transferred_in"`
}

// Outcomes counts the results of one kind of event.
type Outcomes struct {
	Applied    int            `json:"applied"`
	Rejected   int            `json:"rejected"`
	RejectedBy map[string]int `json:"rejected_by_reason,omitempty"`
}

// Add counts n results of one outcome (and, when rejected, reason).
func (o *Outcomes) Add(outcome, reason string, n int) {
	if outcome == event.Applied {
		o.Applied += n
		return
	}
	o.Rejected += n
	if o.RejectedBy == nil {
		o.RejectedBy = map[string]int{}
	}
	o.RejectedBy[reason] += n
}

// IsWarehouse tells the warehouse feed's event types (the SKUs' inventory events, and
// returns) from the orders' own.
func IsWarehouse(t event.Type) bool {
	return strings.HasPrefix(string(t), "inventory.") || t == event.OrderReturned
}

// Run imports the inventory, sends the workload, waits until every event's result is
// in PostgreSQL (or cfg.Wait passed), and summarizes.
func Run(ctx context.Context, db *gorm.DB, pub Publisher, cfg RunConfig) (Summary, error) {
	w := Generate(cfg.Spec)
	s := Summary{Run: cfg.Spec.Run, Orders: len(w.Orders), SKUs: len(w.Inventory), NewSKUs: len(w.NewSKUs), WebhookStatus: map[int]int{}}
	if err := Import(ctx, db, w.Inventory); err != nil {
		return s, err
	}
	// Payments chosen for the webhook path travel under the id the gateway derives.
	viaWebhook := map[string]string{} // original payment id -> provider event id
	webhookIDs := map[string]string{} // derived order event id -> provider event id
	if cfg.Webhook != nil && cfg.WebhookShare > 0 {
		n := 0
		for i, e := range w.Events {
			if e.Type != event.PaymentConfirmed {
				continue
			}
			pid, ok := viaWebhook[e.EventID]
			if !ok {
				n++
				if float64(n%100) >= cfg.WebhookShare*100 {
					continue
				}
				pid = "pe_" + e.EventID
				viaWebhook[e.EventID] = pid
			}
			w.Events[i].EventID = cfg.WebhookEventID(pid)
			webhookIDs[w.Events[i].EventID] = pid
		}
	}
	sent := map[string]time.Time{}
	var sentMu sync.Mutex
	start := time.Now()
	bar := newBar(cfg.Progress, len(w.Events), "sending")
	var tick <-chan time.Time
	batch := 10
	if cfg.Rate > 0 {
		per := time.Duration(float64(time.Second) * float64(batch) / cfg.Rate)
		t := time.NewTicker(max(per, time.Millisecond))
		defer t.Stop()
		tick = t.C
	}
	senders := make(chan struct{}, max(cfg.Senders, 1))
	var sends sync.WaitGroup
	var sendErr error
	var sendErrOnce sync.Once
	failed := make(chan struct{})
	send := func(bodies [][]byte) {
		senders <- struct{}{}
		sends.Go(func() {
			defer func() { <-senders }()
			if err := pub.PublishBatch(ctx, bodies); err != nil {
				sendErrOnce.Do(func() { sendErr = fmt.Errorf("loadgen: send: %w", err); close(failed) })
			}
		})
	}
	gates := w.Gates
	for i := 0; i < len(w.Events); {
		end := min(i+batch, len(w.Events))
		if len(gates) > 0 && gates[0].At <= end {
			if gates[0].At <= i {
				// Everything before the gate is on the queue; its results come next.
				sends.Wait()
				if sendErr != nil {
					return s, sendErr
				}
				if err := awaitResults(ctx, db, gates[0].After, cfg.Wait); err != nil {
					return s, err
				}
				gates = gates[1:]
				continue
			}
			end = gates[0].At
		}
		select {
		case <-failed:
			sends.Wait()
			return s, sendErr
		default:
		}
		if tick != nil {
			select {
			case <-tick:
			case <-ctx.Done():
				return s, ctx.Err()
			}
		}
		var bodies [][]byte
		now := time.Now()
		for _, e := range w.Events[i:end] {
			sentMu.Lock()
			first, ok := sent[e.EventID]
			if !ok {
				sent[e.EventID], first = now, now
			}
			sentMu.Unlock()
			if w.AtSend[e.EventID] {
				// A copy carries its original's occurred_at, so it is the same event.
				e.OccurredAt = first.UTC().Truncate(time.Millisecond)
			}
			if pid, ok := webhookIDs[e.EventID]; ok {
				status, err := cfg.Webhook(ctx, pid, e)
				if err != nil {
					return s, fmt.Errorf("loadgen: webhook: %w", err)
				}
				s.WebhooksSent++
				s.WebhookStatus[status]++
				continue
			}
			b, err := json.Marshal(e)
			if err != nil {
				return s, err
			}
			bodies = append(bodies, b)
		}
		if len(bodies) > 0 {
			send(bodies)
		}
		s.Sent += end - i
		bar.Add(end - i)
		i = end
	}
	sends.Wait()
	if sendErr != nil {
		return s, sendErr
	}
	bar.Finish()
	s.Distinct = len(sent)
	s.DuplicatesSent = s.Sent - s.Distinct

	ids := make([]string, 0, len(sent))
	for id := range sent {
		ids = append(ids, id)
	}
	committed, err := waitPersisted(ctx, db, ids, cfg)
	if err != nil {
		return s, err
	}
	s.ElapsedS = time.Since(start).Seconds()
	var lat []time.Duration
	for id, at := range committed {
		lat = append(lat, at.Sub(sent[id]))
	}
	s.Persisted = len(committed)
	s.Missing = len(ids) - len(committed)
	if s.ElapsedS > 0 {
		s.EventsPerS = float64(s.Persisted) / s.ElapsedS
	}
	slices.Sort(lat)
	s.P50MS, s.P95MS, s.P99MS = pct(lat, 0.50), pct(lat, 0.95), pct(lat, 0.99)
	if err := s.awaitExpiries(ctx, db, w.Abandoned, cfg.ExpiryWait); err != nil {
		return s, err
	}
	if err := s.countOutcomes(ctx, db, cfg.Spec.Run, ids); err != nil {
		return s, err
	}
	if err := s.countEarlyPayments(ctx, db, w, viaWebhook, cfg); err != nil {
		return s, err
	}
	if err := s.checkStock(ctx, db, w); err != nil {
		return s, err
	}
	if cfg.DLQDepth != nil {
		if s.DLQ, err = cfg.DLQDepth(ctx); err != nil {
			return s, err
		}
	}
	if cfg.DuplicatesFound != nil {
		n, err := cfg.DuplicatesFound(ctx)
		if err != nil {
			return s, err
		}
		s.DuplicatesFoundDone = &n
	}
	return s, nil
}

func pct(sorted []time.Duration, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted)-1) * p)
	return float64(sorted[i].Microseconds()) / 1000
}

func newBar(w io.Writer, n int, what string) progress.Bar { return progress.New(w, n, what) }

// commitOverlap is how far back each poll of the inbox looks before the newest commit
// it saw: committed_at is its transaction's start, so a batch that committed later can
// carry an earlier time. A final exact look catches anything older.
const commitOverlap = 5 * time.Second

// waitPersisted follows the inbox until every id has a row and returns their commit
// times. It reads only recent rows on each poll, so it stays light on a busy database.
func waitPersisted(ctx context.Context, db *gorm.DB, ids []string, cfg RunConfig) (map[string]time.Time, error) {
	wait := cfg.Wait
	if wait <= 0 {
		wait = 5 * time.Minute
	}
	deadline := time.Now().Add(wait)
	want := make(map[string]bool, len(ids))
	for _, id := range ids {
		want[id] = true
	}
	bar := newBar(cfg.Progress, len(ids), "persisted")
	defer bar.Finish()
	got := map[string]time.Time{}
	since := time.Now().Add(-time.Hour)
	type row struct {
		EventID     string
		CommittedAt time.Time
	}
	take := func(rows []row) {
		for _, r := range rows {
			if want[r.EventID] {
				got[r.EventID] = r.CommittedAt
			}
			if r.CommittedAt.After(since) {
				since = r.CommittedAt
			}
		}
	}
	for len(got) < len(ids) && time.Now().Before(deadline) {
		var rows []row
		err := db.WithContext(ctx).Raw(`SELECT event_id, committed_at FROM inbox WHERE committed_at > ?`, since.Add(-commitOverlap)).Scan(&rows).Error
		if err != nil {
			return nil, fmt.Errorf("loadgen: inbox: %w", err)
		}
		take(rows)
		bar.Set(len(got))
		if len(got) == len(ids) {
			break
		}
		select {
		case <-ctx.Done():
			return got, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
	// The exact look for whatever the polls may have passed over.
	var missing []string
	for id := range want {
		if _, ok := got[id]; !ok {
			missing = append(missing, id)
		}
	}
	for i := 0; i < len(missing); i += 10000 {
		var rows []row
		err := db.WithContext(ctx).Raw(`SELECT event_id, committed_at FROM inbox WHERE event_id IN ?`, missing[i:min(i+10000, len(missing))]).Scan(&rows).Error
		if err != nil {
			return nil, fmt.Errorf("loadgen: inbox: %w", err)
		}
		take(rows)
	}
	return got, nil
}

// awaitResults waits until every id has its result in the inbox (a Gate).
func awaitResults(ctx context.Context, db *gorm.DB, ids []string, wait time.Duration) error {
	if wait <= 0 {
		wait = 5 * time.Minute
	}
	deadline := time.Now().Add(wait)
	for {
		var n int64
		if err := db.WithContext(ctx).Raw(`SELECT count(*) FROM inbox WHERE event_id IN ?`, ids).Scan(&n).Error; err != nil {
			return fmt.Errorf("loadgen: inbox: %w", err)
		}
		if int(n) == len(ids) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("loadgen: the results of %v, which the rest of the workload waits for, are not in PostgreSQL after %s", ids, wait)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (s *Summary) countOutcomes(ctx context.Context, db *gorm.DB, run string, ids []string) error {
	s.RejectedBy = map[string]int{}
	s.ByType = map[event.Type]*Outcomes{}
	// In chunks: PostgreSQL takes at most 65535 parameters in one statement.
	for i := 0; i < len(ids); i += 10000 {
		var rows []struct {
			Type, Outcome, Reason string
			N                     int
		}
		err := db.WithContext(ctx).Raw(`SELECT type, outcome, reason, count(*) AS n FROM inbox WHERE event_id IN ? GROUP BY 1, 2, 3`,
			ids[i:min(i+10000, len(ids))]).Scan(&rows).Error
		if err != nil {
			return err
		}
		for _, r := range rows {
			if r.Outcome == event.Applied {
				s.Applied += r.N
			} else {
				s.Rejected += r.N
				s.RejectedBy[r.Reason] += r.N
			}
			o := s.ByType[event.Type(r.Type)]
			if o == nil {
				o = &Outcomes{}
				s.ByType[event.Type(r.Type)] = o
			}
			o.Add(r.Outcome, r.Reason, r.N)
		}
	}
	var st []struct {
		Status string
		N      int
	}
	if err := db.WithContext(ctx).Raw(`SELECT status, count(*) AS n FROM orders WHERE lcid LIKE ? GROUP BY 1`, run+"-LC-%").Scan(&st).Error; err != nil {
		return err
	}
	s.OrdersByStatus = map[string]int{}
	for _, r := range st {
		s.OrdersByStatus[r.Status] = r.N
	}
	return nil
}

// awaitExpiries waits, up to wait, until none of the abandoned orders is placed with a
// hold any more, and counts them by what became of them.
func (s *Summary) awaitExpiries(ctx context.Context, db *gorm.DB, lcids []string, wait time.Duration) error {
	s.Abandoned = len(lcids)
	if len(lcids) == 0 {
		return nil
	}
	deadline := time.Now().Add(wait)
	for {
		var n struct{ Expired, Left int }
		if err := db.WithContext(ctx).Raw(`SELECT count(*) FILTER (WHERE status = 'expired') AS expired,
  count(*) FILTER (WHERE status = 'placed' AND hold_until IS NOT NULL) AS left
FROM orders WHERE lcid IN ?`, lcids).Scan(&n).Error; err != nil {
			return err
		}
		s.Expired, s.HoldsLeft = n.Expired, n.Left
		if n.Left == 0 || !time.Now().Before(deadline) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// countEarlyPayments counts the payments sent before their order's placement that were
// applied: parked in the order's turn until the placement, then applied in order.
func (s *Summary) countEarlyPayments(ctx context.Context, db *gorm.DB, w Workload, viaWebhook map[string]string, cfg RunConfig) error {
	if len(w.EarlyPayments) == 0 {
		return nil
	}
	ids := make([]string, 0, len(w.EarlyPayments))
	for _, id := range w.EarlyPayments {
		if pid, ok := viaWebhook[id]; ok {
			id = cfg.WebhookEventID(pid)
		}
		ids = append(ids, id)
	}
	s.EarlyPayments = len(ids)
	var n int64
	err := db.WithContext(ctx).Raw(`SELECT count(*) FROM inbox WHERE outcome = 'applied' AND event_id IN ?`, ids).Scan(&n).Error
	s.EarlyPaymentsApplied = int(n)
	return err
}

// checkStock counts SKUs that hold more than they had (oversold) and lots not conserved.
// A lot's stock changes between its buckets, and from or to the outside world only by
// the warehouse's moves (a registration, a receipt's count, an adjustment: from or to
// "external"); so each bucket of each lot in PostgreSQL must be what was imported (zero
// for a lot registered during the run) plus the moves into it, less the moves out of
// it, as the moves table records them, and no bucket may be negative.
func (s *Summary) checkStock(ctx context.Context, db *gorm.DB, w Workload) error {
	prefix := w.Inventory[0].SKU[:strings.LastIndex(w.Inventory[0].SKU, "-SKU-")] + "-SKU-%"
	var rows []struct {
		SKU, LotID, Location                                      string
		Sellable, Reserved, Allocated, Hidden, Shipped, Defective int64
	}
	if err := db.WithContext(ctx).Raw(`SELECT sku, lot_id, location, sellable, reserved, allocated, hidden, shipped, defective FROM lots WHERE sku LIKE ?`, prefix).Scan(&rows).Error; err != nil {
		return err
	}
	var moves []struct {
		SKU, LotID, FromBucket, ToBucket string
		Qty                              int64
	}
	if err := db.WithContext(ctx).Raw(`SELECT sku, lot_id, from_bucket, to_bucket, sum(qty) AS qty FROM moves WHERE sku LIKE ? GROUP BY 1, 2, 3, 4`, prefix).Scan(&moves).Error; err != nil {
		return err
	}
	type key struct{ sku, lot string }
	want := map[key]map[string]int64{}
	skuTotal := map[string]int64{}
	lotIn := map[key]int64{} // imported, then plus what came in from outside
	transitOut, transitIn := map[key]int64{}, map[key]int64{}
	at := func(k key) map[string]int64 {
		if want[k] == nil {
			want[k] = map[string]int64{}
		}
		return want[k]
	}
	for _, sku := range w.Inventory {
		for _, l := range sku.Lots {
			b := at(key{sku.SKU, l.LotID})
			b[stock.Sellable], b[stock.Reserved], b[stock.Allocated] = l.Sellable, l.Reserved, l.Allocated
			b[stock.Hidden], b[stock.Shipped], b[stock.Defective] = l.Hidden, l.Shipped, l.Defective
			skuTotal[sku.SKU] += l.Sellable + l.Reserved + l.Allocated + l.Hidden + l.Shipped + l.Defective
			lotIn[key{sku.SKU, l.LotID}] = l.Sellable + l.Reserved + l.Allocated + l.Hidden + l.Shipped + l.Defective
		}
	}
	for _, m := range moves {
		switch {
		case m.ToBucket == event.Transit:
			transitOut[key{m.SKU, m.LotID}] += m.Qty
		case m.FromBucket == event.Transit:
			transitIn[key{m.SKU, m.LotID}] += m.Qty
		}
		b := at(key{m.SKU, m.LotID})
		b[m.FromBucket] -= m.Qty
		b[m.ToBucket] += m.Qty
	}
	for k, b := range want {
		skuTotal[k.sku] -= b[stock.External]             // what came in from outside, less what left
		lotIn[k] -= b[stock.External] + b[event.Transit] // a transfer's units leave one lot for another
	}
	held := map[string]int64{}
	byLoc := map[string]*LocationFigures{}
	for _, r := range rows {
		if len(w.Locations) > 0 {
			f := byLoc[r.Location]
			if f == nil {
				f = &LocationFigures{Location: r.Location}
				byLoc[r.Location] = f
			}
			f.Lots++
			f.In += lotIn[key{r.SKU, r.LotID}]
			f.TransferredOut += transitOut[key{r.SKU, r.LotID}]
			f.TransferredIn += transitIn[key{r.SKU, r.LotID}]
			f.Sellable += r.Sellable
			f.Held += r.Reserved + r.Allocated
			f.Shipped += r.Shipped
			f.Defective += r.Defective
		}
		b := want[key{r.SKU, r.LotID}]
		got := map[string]int64{stock.Sellable: r.Sellable, stock.Reserved: r.Reserved, stock.Allocated: r.Allocated,
			stock.Hidden: r.Hidden, stock.Shipped: r.Shipped, stock.Defective: r.Defective}
		for bucket, q := range got {
			if q != b[bucket] || q < 0 {
				s.Unconserved++
				break
			}
		}
		held[r.SKU] += r.Reserved + r.Allocated + r.Shipped
	}
	for sku, h := range held {
		if h > skuTotal[sku] {
			s.Oversold++
		}
	}
	for _, f := range byLoc {
		// What a location's orders hold or took is at most what came in there.
		if f.Held+f.Shipped > f.In {
			s.OversoldLocations++
		}
		s.Locations = append(s.Locations, *f)
	}
	slices.SortFunc(s.Locations, func(a, b LocationFigures) int { return strings.Compare(a.Location, b.Location) })
	return nil
}

// Print writes the summary as a table.
func (s Summary) Print(out io.Writer) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "run\t%s\n", s.Run)
	if s.NewSKUs > 0 {
		fmt.Fprintf(tw, "orders / SKUs\t%d / %d (+%d registered during the run)\n", s.Orders, s.SKUs, s.NewSKUs)
	} else {
		fmt.Fprintf(tw, "orders / SKUs\t%d / %d\n", s.Orders, s.SKUs)
	}
	fmt.Fprintf(tw, "events sent (with duplicates)\t%d\n", s.Sent)
	fmt.Fprintf(tw, "distinct events\t%d\n", s.Distinct)
	if s.WebhooksSent > 0 {
		fmt.Fprintf(tw, "webhooks sent (status: count)\t%d %s\n", s.WebhooksSent, fmtStatus(s.WebhookStatus))
	}
	fmt.Fprintf(tw, "duplicate deliveries sent\t%d\n", s.DuplicatesSent)
	if s.DuplicatesFoundDone != nil {
		fmt.Fprintf(tw, "deliveries found done (order-workers)\t%d (no effect, nothing published again)\n", *s.DuplicatesFoundDone)
	}
	fmt.Fprintf(tw, "results persisted\t%d (missing %d)\n", s.Persisted, s.Missing)
	fmt.Fprintf(tw, "applied / rejected\t%d / %d\n", s.Applied, s.Rejected)
	var orders, warehouse Outcomes
	var whTypes []string
	for t, o := range s.ByType {
		side := &orders
		if IsWarehouse(t) {
			side = &warehouse
			whTypes = append(whTypes, string(t))
		}
		for r, n := range o.RejectedBy {
			side.Add(event.Rejected, r, n)
		}
		side.Add(event.Applied, "", o.Applied)
	}
	fmt.Fprintf(tw, "  order events\t%d / %d\n", orders.Applied, orders.Rejected)
	for _, r := range sortedKeys(orders.RejectedBy) {
		fmt.Fprintf(tw, "    %s\t%d\n", r, orders.RejectedBy[r])
	}
	fmt.Fprintf(tw, "  warehouse events\t%d / %d\n", warehouse.Applied, warehouse.Rejected)
	sort.Strings(whTypes)
	for _, t := range whTypes {
		o := s.ByType[event.Type(t)]
		var why []string
		for _, r := range sortedKeys(o.RejectedBy) {
			why = append(why, fmt.Sprintf("%s %d", r, o.RejectedBy[r]))
		}
		line := fmt.Sprintf("    %s\t%d / %d", t, o.Applied, o.Rejected)
		if len(why) > 0 {
			line += " (" + strings.Join(why, ", ") + ")"
		}
		fmt.Fprintln(tw, line)
	}
	statuses := make([]string, 0, len(s.OrdersByStatus))
	for st := range s.OrdersByStatus {
		statuses = append(statuses, st)
	}
	sort.Strings(statuses)
	for _, st := range statuses {
		fmt.Fprintf(tw, "orders %s\t%d\n", st, s.OrdersByStatus[st])
	}
	if s.EarlyPayments > 0 {
		fmt.Fprintf(tw, "payments sent before their placement\t%d (%d applied in turn after it)\n", s.EarlyPayments, s.EarlyPaymentsApplied)
	}
	if s.Abandoned > 0 {
		fmt.Fprintf(tw, "abandoned reservations\t%d (%d expired, %d still held)\n", s.Abandoned, s.Expired, s.HoldsLeft)
	}
	fmt.Fprintf(tw, "oversold SKUs\t%d\n", s.Oversold)
	if len(s.Locations) > 0 {
		fmt.Fprintf(tw, "oversold locations\t%d\n", s.OversoldLocations)
		fmt.Fprintf(tw, "per location\tlots / in / sellable / held / shipped / defective / transferred out / in\n")
		for _, f := range s.Locations {
			fmt.Fprintf(tw, "  %s\t%d / %d / %d / %d / %d / %d / %d / %d\n", f.Location, f.Lots, f.In, f.Sellable, f.Held, f.Shipped, f.Defective,
				f.TransferredOut, f.TransferredIn)
		}
	}
	fmt.Fprintf(tw, "lots not conserved\t%d\n", s.Unconserved)
	fmt.Fprintf(tw, "orders DLQ\t%d\n", s.DLQ)
	fmt.Fprintf(tw, "send -> commit p50 / p95 / p99\t%.0f / %.0f / %.0f ms\n", s.P50MS, s.P95MS, s.P99MS)
	fmt.Fprintf(tw, "elapsed\t%.1f s (%.0f events/s persisted)\n", s.ElapsedS, s.EventsPerS)
	tw.Flush()
}

func sortedKeys(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func fmtStatus(m map[int]int) string {
	keys := make([]int, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%d: %d", k, m[k]))
	}
	return "(" + strings.Join(parts, ", ") + ")"
}
