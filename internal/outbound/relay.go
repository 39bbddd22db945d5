package outbound

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	snstypes "github.com/aws/aws-sdk-go-v2/service/sns/types"
	"github.com/cenkalti/backoff/v5"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"gorm.io/gorm"

	"github.com/junban/junban/internal/queue"
	"github.com/junban/junban/internal/tracing"
)

// Defaults of the relay's settings that the environment does not set.
const (
	// StatsEveryDefault is how often the relay reads ReadStats into its gauges.
	StatsEveryDefault = 5 * time.Second
	// BackoffMaxDefault caps the pause after rounds that failed one after the other.
	BackoffMaxDefault = 30 * time.Second
	// RoundTimeoutDefault bounds one round: its transaction, which holds the outbox's lock,
	// and its PublishBatch calls.
	RoundTimeoutDefault = time.Minute
)

// batchMax is the most entries SNS takes in one PublishBatch.
const batchMax = 10

// lockClass is the first key of the outbox's advisory lock; the second is the hash of the
// schema's name, so that junbans sharing a database in separate schemas do not wait for
// each other. Whoever holds it relays (or cleans up) for the whole table.
const lockClass = 0x6a62_6f78 // "jbox"

// lockSQL takes the outbox's advisory lock for the transaction, or answers false at once.
var lockSQL = "SELECT pg_try_advisory_xact_lock(" + strconv.Itoa(lockClass) + ", hashtext(current_schema()))"

// The message attributes of every published message, for subscription filter policies.
const (
	// KindAttribute is the message's kind (order.status_changed, stock.low, ...).
	KindAttribute = "kind"
	// EntityAttribute is the message's entity (an lcid, or "sku:" and a SKU).
	EntityAttribute = "entity"
)

// SNSPublisher is the part of the SNS client the relay uses (*sns.Client is one).
type SNSPublisher interface {
	PublishBatch(ctx context.Context, in *sns.PublishBatchInput, optFns ...func(*sns.Options)) (*sns.PublishBatchOutput, error)
}

// RelayConfig configures a Relay.
type RelayConfig struct {
	// DB is the database holding the outbox.
	DB *gorm.DB
	// SNS publishes the messages.
	SNS SNSPublisher
	// TopicARN is the topic published to; a FIFO topic (".fifo") gets each message in its
	// entity's message group, deduplicated by its id.
	TopicARN string
	// Poll is how often an idle relay looks for rows it was not told of (Kick); PollDefault when 0.
	Poll time.Duration
	// Publishers is how many PublishBatch calls are in flight; PublishersDefault when 0.
	Publishers int
	// RoundMax is the most rows a round reads; RoundMaxDefault when 0.
	RoundMax int
	// StatsEvery is how often the depth gauges are read; StatsEveryDefault when 0.
	StatsEvery time.Duration
	// BackoffMax caps the pause after failed rounds; BackoffMaxDefault when 0.
	BackoffMax time.Duration
	// RoundTimeout bounds a round; RoundTimeoutDefault when 0.
	RoundTimeout time.Duration
	// Logger logs failures (warn) and the start; zap.NewNop() when nil.
	Logger *zap.Logger
	// Registerer takes the relay's metrics; none registered when nil.
	Registerer prometheus.Registerer
}

// Relay publishes the outbox's rows to an SNS topic, at least once each, an entity's rows
// in seq order. Any number of relays may run on one database: a round runs only under the
// outbox's advisory lock, so one publishes at a time and the others wait for their next
// poll. A row is marked published in the round's transaction after SNS took it: a relay
// killed mid-round marks nothing, and the next round publishes the rows again (a copy,
// never a loss).
type Relay struct {
	cfg  RelayConfig
	fifo bool
	// topicName is the topic's name (the ARN's last part), as spans name a destination.
	topicName string
	log       *zap.Logger
	metrics   *RelayMetrics
	kick      chan struct{}
}

// NewRelay checks cfg and returns a Relay; Run runs it.
func NewRelay(cfg RelayConfig) (*Relay, error) {
	switch {
	case cfg.DB == nil:
		return nil, errors.New("outbound: relay: no DB")
	case cfg.SNS == nil:
		return nil, errors.New("outbound: relay: no SNS client")
	case cfg.TopicARN == "":
		return nil, errors.New("outbound: relay: no topic ARN")
	}
	if cfg.Poll <= 0 {
		cfg.Poll = PollDefault
	}
	if cfg.Publishers <= 0 {
		cfg.Publishers = PublishersDefault
	}
	if cfg.RoundMax <= 0 {
		cfg.RoundMax = RoundMaxDefault
	}
	if cfg.StatsEvery <= 0 {
		cfg.StatsEvery = StatsEveryDefault
	}
	if cfg.BackoffMax <= 0 {
		cfg.BackoffMax = BackoffMaxDefault
	}
	if cfg.RoundTimeout <= 0 {
		cfg.RoundTimeout = RoundTimeoutDefault
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	m, err := newRelayMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	return &Relay{
		topicName: cfg.TopicARN[strings.LastIndexByte(cfg.TopicARN, ':')+1:],
		cfg:       cfg,
		fifo:      Config{TopicARN: cfg.TopicARN}.FIFO(),
		log:       cfg.Logger.With(zap.String("topic", cfg.TopicARN)),
		metrics:   m,
		kick:      make(chan struct{}, 1),
	}, nil
}

// Metrics returns the relay's metrics.
func (r *Relay) Metrics() *RelayMetrics { return r.metrics }

// Kick wakes the relay up for rows just committed; it never blocks.
func (r *Relay) Kick() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// Run relays until ctx ends, then returns nil: a round on Kick, every Poll, and at once
// again after a full round. After rounds that failed one after the other, it pauses with
// a growing backoff (up to BackoffMax); PostgreSQL or SNS away never ends it.
func (r *Relay) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); r.readStats(ctx) }()
	defer wg.Wait()

	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.MaxInterval = r.cfg.Poll, r.cfg.BackoffMax
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		kick := r.kick
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		case <-kick:
		}
		res := r.round(ctx)
		wait := r.cfg.Poll
		switch {
		case res.failed():
			wait, kick = b.NextBackOff(), nil
		case res.full && res.published > 0:
			b.Reset()
			wait = 0
		default:
			b.Reset()
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(wait)
		if kick == nil {
			// Backing off: a kick must not cut the pause short.
			select {
			case <-ctx.Done():
				return nil
			case <-timer.C:
			}
			timer.Reset(0)
		}
	}
}

// readStats sets the depth gauges every StatsEvery until ctx ends.
func (r *Relay) readStats(ctx context.Context) {
	t := time.NewTicker(r.cfg.StatsEvery)
	defer t.Stop()
	for {
		if s, err := ReadStats(ctx, r.cfg.DB); err == nil {
			r.metrics.Depth.Set(float64(s.Unpublished))
			r.metrics.OldestUnpublished.Set(s.OldestUnpublished.Seconds())
		} else if ctx.Err() == nil {
			r.log.Debug("outbox stats", zap.Error(err))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// row is an outbox row as the relay reads it.
type row struct {
	ID        int64
	MessageID string
	Kind      string
	Entity    string
	Seq       int64
	Body      string
	CreatedAt time.Time
}

// logFields are the fields of a log line about the row: its entity, message id and the
// event that caused it (its body's caused_by).
func (rw *row) logFields() []zap.Field {
	var m struct {
		CausedBy Cause `json:"caused_by"`
	}
	_ = json.Unmarshal([]byte(rw.Body), &m)
	return []zap.Field{zap.String("entity", rw.Entity), zap.String("message_id", rw.MessageID), zap.String("event_id", m.CausedBy.EventID)}
}

// roundResult is what one round did.
type roundResult struct {
	result    string
	read      int
	published int
	failures  int
	full      bool
	err       error
}

func (rr roundResult) failed() bool {
	return rr.result == roundFailed
}

// round publishes what it can of the unpublished rows, under the outbox's lock.
func (r *Relay) round(ctx context.Context) (res roundResult) {
	defer func() {
		r.metrics.Rounds.WithLabelValues(res.result).Inc()
		if res.err != nil && ctx.Err() == nil {
			r.log.Warn("outbox relay round failed", zap.Error(res.err))
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, r.cfg.RoundTimeout)
	defer cancel()
	// The transaction outlives a cancelled ctx just enough to mark what SNS took, so a
	// stopping relay leaves no copy behind it; a killed one leaves them all.
	txCtx, txCancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.RoundTimeout)
	defer txCancel()
	tx := r.cfg.DB.WithContext(txCtx).Begin()
	if tx.Error != nil {
		return roundResult{result: roundFailed, err: fmt.Errorf("outbound: relay: begin: %w", tx.Error)}
	}
	defer tx.Rollback()
	var locked bool
	if err := tx.Raw(lockSQL).Scan(&locked).Error; err != nil {
		return roundResult{result: roundFailed, err: fmt.Errorf("outbound: relay: lock: %w", err)}
	}
	if !locked {
		return roundResult{result: roundLocked}
	}
	var rows []row
	if err := tx.Raw(`SELECT id, message_id, kind, entity, seq, body, created_at FROM outbox
		WHERE published_at IS NULL ORDER BY id LIMIT ?`, r.cfg.RoundMax).Scan(&rows).Error; err != nil {
		return roundResult{result: roundFailed, err: fmt.Errorf("outbound: relay: read: %w", err)}
	}
	res = roundResult{read: len(rows), full: len(rows) == r.cfg.RoundMax}
	if len(rows) == 0 {
		res.result = roundEmpty
		return res
	}
	taken, failures, err := r.publish(ctx, rows)
	res.published, res.failures = len(taken), failures
	if len(taken) > 0 {
		if err := tx.Exec(`UPDATE outbox SET published_at = now() WHERE id IN ?`, taken).Error; err != nil {
			return roundResult{result: roundFailed, read: len(rows), err: fmt.Errorf("outbound: relay: mark %d rows published: %w", len(taken), err)}
		}
		if err := tx.Commit().Error; err != nil {
			return roundResult{result: roundFailed, read: len(rows), err: fmt.Errorf("outbound: relay: commit: %w", err)}
		}
	}
	switch {
	case len(taken) == len(rows):
		res.result = roundPublished
	case len(taken) == 0:
		res.result, res.err = roundFailed, err
	default:
		res.result, res.err = roundPartial, err
	}
	return res
}

// publish publishes rows (ordered by id) through Publishers partitions, each entity's in
// one of them in seq order, and returns the ids of the rows SNS took, how many it refused
// or did not answer for, and the first error of a call.
func (r *Relay) publish(ctx context.Context, rows []row) (taken []int64, failures int, err error) {
	parts := make([][]*row, r.cfg.Publishers)
	for i := range rows {
		h := fnv.New32a()
		h.Write([]byte(rows[i].Entity))
		p := h.Sum32() % uint32(len(parts))
		parts[p] = append(parts[p], &rows[i])
	}
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		errs []error
	)
	for _, part := range parts {
		if len(part) == 0 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			t, f, err := r.publishPart(ctx, part)
			mu.Lock()
			defer mu.Unlock()
			taken, failures = append(taken, t...), failures+f
			if err != nil {
				errs = append(errs, err)
			}
		}()
	}
	wg.Wait()
	return taken, failures, errors.Join(errs...)
}

// publishPart publishes one partition's rows, batches of up to ten holding one row per
// entity at most; once an entity's row failed, its later rows wait for the next round, so
// an entity's messages never overtake each other. A failed call ends the partition's turn.
func (r *Relay) publishPart(ctx context.Context, part []*row) (taken []int64, failures int, err error) {
	// Each entity's rows, in seq order, entities in the order of their first row.
	var order []string
	pending := map[string][]*row{}
	for _, rw := range part {
		if _, ok := pending[rw.Entity]; !ok {
			order = append(order, rw.Entity)
		}
		pending[rw.Entity] = append(pending[rw.Entity], rw)
	}
	for len(order) > 0 {
		if ctx.Err() != nil {
			return taken, failures, ctx.Err()
		}
		batch := make([]*row, 0, batchMax)
		for _, e := range order[:min(batchMax, len(order))] {
			batch = append(batch, pending[e][0])
		}
		ok, err := r.publishBatch(ctx, batch)
		if err != nil {
			failures += len(batch)
			r.metrics.PublishFailures.Add(float64(len(batch)))
			return taken, failures, err
		}
		next := order[:0]
		for i, e := range order {
			switch {
			case i >= len(batch):
				next = append(next, e)
			case !ok[i]:
				failures++
				// Its later rows wait for the next round.
			case len(pending[e]) > 1:
				taken = append(taken, batch[i].ID)
				pending[e] = pending[e][1:]
				next = append(next, e)
			default:
				taken = append(taken, batch[i].ID)
			}
		}
		order = next
	}
	return taken, failures, nil
}

// publishBatch makes one PublishBatch call of rows and tells which of them SNS took.
func (r *Relay) publishBatch(ctx context.Context, rows []*row) (ok []bool, err error) {
	ctx, span := tracing.StartSend(ctx, tracing.SNS, r.topicName, len(rows))
	defer func() { tracing.End(span, err) }()
	entries := make([]snstypes.PublishBatchRequestEntry, len(rows))
	for i, rw := range rows {
		entries[i] = snstypes.PublishBatchRequestEntry{
			Id:      aws.String(strconv.Itoa(i)),
			Message: aws.String(rw.Body),
			MessageAttributes: map[string]snstypes.MessageAttributeValue{
				KindAttribute:   {DataType: aws.String("String"), StringValue: aws.String(rw.Kind)},
				EntityAttribute: {DataType: aws.String("String"), StringValue: aws.String(rw.Entity)},
			},
		}
		if r.fifo {
			entries[i].MessageGroupId = aws.String(queue.FIFOID(rw.Entity))
			entries[i].MessageDeduplicationId = aws.String(rw.MessageID)
		}
	}
	out, err := r.cfg.SNS.PublishBatch(ctx, &sns.PublishBatchInput{TopicArn: aws.String(r.cfg.TopicARN), PublishBatchRequestEntries: entries})
	if err != nil {
		if ctx.Err() == nil {
			r.log.Warn("outbox publish failed", append(append(tracing.LogFields(ctx), rows[0].logFields()...),
				zap.Int("messages", len(rows)), zap.Error(err))...)
		}
		return nil, fmt.Errorf("outbound: publish %d messages: %w", len(rows), err)
	}
	ok = make([]bool, len(rows))
	now := time.Now()
	for _, s := range out.Successful {
		if i, err := strconv.Atoi(aws.ToString(s.Id)); err == nil && i >= 0 && i < len(rows) {
			ok[i] = true
		}
	}
	for _, f := range out.Failed {
		i, err := strconv.Atoi(aws.ToString(f.Id))
		if err != nil || i < 0 || i >= len(rows) {
			continue
		}
		ok[i] = false
		r.log.Warn("outbox message refused", append(append(tracing.LogFields(ctx), rows[i].logFields()...),
			zap.String("code", aws.ToString(f.Code)), zap.String("reason", aws.ToString(f.Message)), zap.Bool("sender_fault", f.SenderFault))...)
	}
	for i, rw := range rows {
		if ok[i] {
			r.metrics.Published.WithLabelValues(rw.Kind).Inc()
			r.metrics.Lag.Observe(now.Sub(rw.CreatedAt).Seconds())
		} else {
			r.metrics.PublishFailures.Inc()
		}
	}
	return ok, nil
}
