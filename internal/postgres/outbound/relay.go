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
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	snstypes "github.com/aws/aws-sdk-go-v2/service/sns/types"
	"github.com/aws/smithy-go"
	"github.com/cenkalti/backoff/v5"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"gorm.io/gorm"

	"github.com/junban/junban/internal/platform/tracing"
	"github.com/junban/junban/internal/queue"
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

// snsMaxBytes is the most bytes SNS takes in one message with its attributes, and in one
// PublishBatch's messages together (AWS's documented limit, for every topic).
const snsMaxBytes = 262_144

// The reasons a row is parked, the label of junban_outbox_parked_total.
const (
	// parkTooLarge: the message with its attributes is over snsMaxBytes.
	parkTooLarge = "too_large"
	// parkInvalidCharacters: the message or an attribute holds a character SNS refuses.
	parkInvalidCharacters = "invalid_characters"
	// parkRefused: SNS refused the message sent alone as the sender's fault.
	parkRefused = "refused"
)

var parkReasons = []string{parkTooLarge, parkInvalidCharacters, parkRefused}

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
	// held are the entities whose row failed in the last round (neither taken nor parked):
	// the next round retries each one's first row alone, after the others, and reads the
	// window past their later rows, so an entity SNS keeps failing holds up no other.
	held []string
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
		case res.full && res.published+res.parked > 0:
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
			r.metrics.ParkedRows.Set(float64(s.Parked))
			r.metrics.OldestUnpublished.Set(s.OldestUnpublished.Seconds())
		} else if ctx.Err() == nil {
			r.log.Debug("outbox stats", zap.Error(err))
		}
		if levels, err := ReadStockLevels(ctx, r.cfg.DB); err == nil {
			setStockLevels(r.metrics.StockLevels, levels)
		} else if ctx.Err() == nil {
			r.log.Debug("outbox stock levels", zap.Error(err))
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
	parked    int
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
	rows, full, err := r.read(tx)
	if err != nil {
		return roundResult{result: roundFailed, err: fmt.Errorf("outbound: relay: read: %w", err)}
	}
	res = roundResult{read: len(rows), full: full}
	if len(rows) == 0 {
		res.result = roundEmpty
		return res
	}
	taken, parked, held, failures, err := r.publish(ctx, rows)
	res.published, res.parked, res.failures = len(taken), len(parked), failures
	if len(taken) > 0 {
		if err := tx.Exec(`UPDATE outbox SET published_at = now() WHERE id IN ?`, taken).Error; err != nil {
			return roundResult{result: roundFailed, read: len(rows), err: fmt.Errorf("outbound: relay: mark %d rows published: %w", len(taken), err)}
		}
	}
	for _, p := range parked {
		if err := tx.Exec(`UPDATE outbox SET parked_at = now(), parked_reason = ? WHERE id = ?`, p.reason, p.row.ID).Error; err != nil {
			return roundResult{result: roundFailed, read: len(rows), err: fmt.Errorf("outbound: relay: park row %d: %w", p.row.ID, err)}
		}
	}
	if len(taken)+len(parked) > 0 {
		if err := tx.Commit().Error; err != nil {
			return roundResult{result: roundFailed, read: len(rows), err: fmt.Errorf("outbound: relay: commit: %w", err)}
		}
	}
	r.held = held[:min(len(held), r.cfg.RoundMax)]
	// Counted once committed: a parked row is set aside for good only then.
	for _, p := range parked {
		r.metrics.Parked.WithLabelValues(p.reason).Inc()
		r.log.Warn("outbox row parked: SNS can never take it", append(p.row.logFields(),
			zap.Int64("id", p.row.ID), zap.String("reason", p.reason), zap.String("detail", p.detail), zap.Int("bytes", p.row.size()))...)
	}
	switch {
	case len(taken)+len(parked) == len(rows):
		res.result = roundPublished
	case len(taken)+len(parked) == 0:
		res.result, res.err = roundFailed, err
	default:
		res.result, res.err = roundPartial, err
	}
	return res
}

// parkedRow is a row SNS can never take, why (a park reason) and what SNS said, if anything.
type parkedRow struct {
	row            *row
	reason, detail string
}

// size is the row's message size as SNS counts it: the body, and each attribute's name,
// data type ("String") and value.
func (rw *row) size() int {
	const attr = len("String")
	return len(rw.Body) + len(KindAttribute) + attr + len(rw.Kind) + len(EntityAttribute) + attr + len(rw.Entity)
}

// fault is why SNS can never take the row (a park reason), or "" when it may.
func (rw *row) fault() string {
	switch {
	case rw.size() > snsMaxBytes:
		return parkTooLarge
	case !snsChars(rw.Body) || !snsChars(rw.Kind) || !snsChars(rw.Entity):
		return parkInvalidCharacters
	}
	return ""
}

// snsChars tells whether s is UTF-8 holding only characters SNS and SQS allow in a
// message: #x9 | #xA | #xD | #x20-#xD7FF | #xE000-#xFFFD | #x10000-#x10FFFF.
func snsChars(s string) bool {
	for _, r := range s {
		// An invalid byte decodes as U+FFFD, which is allowed: utf8.ValidString catches it.
		if !(r == 0x9 || r == 0xA || r == 0xD || (r >= 0x20 && r <= 0xD7FF) || (r >= 0xE000 && r <= 0xFFFD) || r >= 0x10000) {
			return false
		}
	}
	return utf8.ValidString(s)
}

// read reads the rows of a round: up to RoundMax rows by id, those of the held entities
// left out, and then the first row of each held entity. full tells whether the first read
// was cut at RoundMax.
func (r *Relay) read(tx *gorm.DB) (rows []row, full bool, err error) {
	const cols = `SELECT id, message_id, kind, entity, seq, body, created_at FROM outbox WHERE published_at IS NULL AND parked_at IS NULL`
	if len(r.held) == 0 {
		err = tx.Raw(cols+` ORDER BY id LIMIT ?`, r.cfg.RoundMax).Scan(&rows).Error
		return rows, len(rows) == r.cfg.RoundMax, err
	}
	if err := tx.Raw(cols+` AND entity NOT IN ? ORDER BY id LIMIT ?`, r.held, r.cfg.RoundMax).Scan(&rows).Error; err != nil {
		return nil, false, err
	}
	full = len(rows) == r.cfg.RoundMax
	var heads []row
	// An entity's rows are found by its (entity, seq) index: its first unpublished one.
	if err := tx.Raw(`SELECT DISTINCT ON (entity) id, message_id, kind, entity, seq, body, created_at FROM outbox
		WHERE entity IN ? AND published_at IS NULL AND parked_at IS NULL ORDER BY entity, seq`, r.held).Scan(&heads).Error; err != nil {
		return nil, false, err
	}
	return append(rows, heads...), full, nil
}

// publish publishes rows (ordered by id) through Publishers partitions, each entity's in
// one of them in seq order, and returns the ids of the rows SNS took, the rows it can never
// take (to park), the entities to hold for the next round, how many rows it refused or did
// not answer for, and the first error of a call.
func (r *Relay) publish(ctx context.Context, rows []row) (taken []int64, parked []parkedRow, hold []string, failures int, err error) {
	held := make(map[string]bool, len(r.held))
	for _, e := range r.held {
		held[e] = true
	}
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
			t, pk, hd, f, err := r.publishPart(ctx, part, held)
			mu.Lock()
			defer mu.Unlock()
			taken, parked, hold, failures = append(taken, t...), append(parked, pk...), append(hold, hd...), failures+f
			if err != nil {
				errs = append(errs, err)
			}
		}()
	}
	wg.Wait()
	return taken, parked, hold, failures, errors.Join(errs...)
}

// publishPart publishes one partition's rows, batches of up to ten entries and snsMaxBytes
// bytes holding one row per entity at most, and then the rows of the held entities, each
// alone. A row SNS can never take is parked, and its entity's next row goes on; once an
// entity's row failed otherwise, its later rows wait for the next round, so an entity's
// messages never overtake each other, and the entity is held. A failed call ends the
// partition's turn; the held entities it did not reach stay held.
func (r *Relay) publishPart(ctx context.Context, part []*row, held map[string]bool) (taken []int64, parked []parkedRow, hold []string, failures int, err error) {
	// Each entity's rows, in seq order, entities in the order of their first row.
	var order, heads []string
	pending := map[string][]*row{}
	for _, rw := range part {
		if f := rw.fault(); f != "" {
			parked = append(parked, parkedRow{row: rw, reason: f})
			continue
		}
		if _, ok := pending[rw.Entity]; !ok {
			if held[rw.Entity] {
				heads = append(heads, rw.Entity)
			} else {
				order = append(order, rw.Entity)
			}
		}
		pending[rw.Entity] = append(pending[rw.Entity], rw)
	}
	// try sends batch, the first row of each of entities; a taken or parked row's entity
	// goes on with its next row, a failed one's is held.
	try := func(entities []string, batch []*row) (next []string, err error) {
		out, err := r.send(ctx, batch)
		for i, e := range entities {
			switch {
			case i >= len(batch):
				next = append(next, e)
				continue
			case out[i].taken:
				taken = append(taken, batch[i].ID)
			case out[i].park != "":
				parked = append(parked, parkedRow{row: batch[i], reason: out[i].park, detail: out[i].detail})
			default:
				failures++
				r.metrics.PublishFailures.Inc()
				hold = append(hold, e)
				continue
			}
			if len(pending[e]) > 1 {
				pending[e] = pending[e][1:]
				next = append(next, e)
			}
		}
		return next, err
	}
	for len(order) > 0 {
		if ctx.Err() != nil {
			return taken, parked, append(hold, heads...), failures, ctx.Err()
		}
		batch := make([]*row, 0, batchMax)
		size := 0
		for _, e := range order {
			rw := pending[e][0]
			if len(batch) == batchMax || len(batch) > 0 && size+rw.size() > snsMaxBytes {
				break
			}
			batch, size = append(batch, rw), size+rw.size()
		}
		if order, err = try(order, batch); err != nil {
			return taken, parked, append(hold, heads...), failures, err
		}
	}
	// A held entity has one row read, its first: it goes alone, so that it fails no other.
	for i, e := range heads {
		if ctx.Err() != nil {
			return taken, parked, append(hold, heads[i:]...), failures, ctx.Err()
		}
		if _, err := try([]string{e}, pending[e][:1]); err != nil {
			return taken, parked, append(hold, heads[i+1:]...), failures, err
		}
	}
	return taken, parked, hold, failures, nil
}

// outcome is what became of a row sent: SNS took it, or it is to be parked (why, and what
// SNS said), or neither (it goes again next round).
type outcome struct {
	taken        bool
	park, detail string
}

// send publishes batch and tells what became of each row. When SNS refuses the whole
// call for a message's sake (a batch too long, a message it does not allow), send splits
// the batch in halves and sends each, down to single rows; a row refused so alone is to be
// parked. Any other error ends send, the rows not yet taken left to the next round.
func (r *Relay) send(ctx context.Context, batch []*row) ([]outcome, error) {
	out, err := r.publishBatch(ctx, batch)
	if err == nil {
		return out, nil
	}
	out = make([]outcome, len(batch))
	if !messageFault(err) {
		return out, err
	}
	if len(batch) == 1 {
		out[0].park, out[0].detail = parkRefused, err.Error()
		return out, nil
	}
	h := len(batch) / 2
	a, err := r.send(ctx, batch[:h])
	copy(out, a)
	if err != nil {
		return out, err
	}
	b, err := r.send(ctx, batch[h:])
	copy(out[h:], b)
	return out, err
}

// messageFault tells whether SNS refused a whole call for a message in it: the codes AWS
// answers for a batch too long, or a message too long or holding characters it does not
// allow. The same codes about the topic (its ARN) are no message's fault.
func messageFault(err error) bool {
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		return false
	}
	switch ae.ErrorCode() {
	case "BatchRequestTooLong", "InvalidParameter", "InvalidParameterValue", "ParameterValueInvalid":
		return !strings.Contains(ae.ErrorMessage(), "TopicArn")
	}
	return false
}

// publishBatch makes one PublishBatch call of rows and tells what became of each: taken,
// refused as the sender's fault (to park), or neither.
func (r *Relay) publishBatch(ctx context.Context, rows []*row) (out []outcome, err error) {
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
	res, err := r.cfg.SNS.PublishBatch(ctx, &sns.PublishBatchInput{TopicArn: aws.String(r.cfg.TopicARN), PublishBatchRequestEntries: entries})
	if err != nil {
		if ctx.Err() == nil {
			r.log.Warn("outbox publish failed", append(append(tracing.LogFields(ctx), rows[0].logFields()...),
				zap.Int("messages", len(rows)), zap.Int("bytes", batchSize(rows)), zap.Error(err))...)
		}
		return nil, fmt.Errorf("outbound: publish %d messages: %w", len(rows), err)
	}
	out = make([]outcome, len(rows))
	now := time.Now()
	for _, s := range res.Successful {
		if i, err := strconv.Atoi(aws.ToString(s.Id)); err == nil && i >= 0 && i < len(rows) {
			out[i].taken = true
		}
	}
	for _, f := range res.Failed {
		i, err := strconv.Atoi(aws.ToString(f.Id))
		if err != nil || i < 0 || i >= len(rows) {
			continue
		}
		out[i].taken = false
		if f.SenderFault {
			out[i].park, out[i].detail = parkRefused, aws.ToString(f.Code)+": "+aws.ToString(f.Message)
			continue
		}
		r.log.Warn("outbox message refused", append(append(tracing.LogFields(ctx), rows[i].logFields()...),
			zap.String("code", aws.ToString(f.Code)), zap.String("reason", aws.ToString(f.Message)), zap.Bool("sender_fault", f.SenderFault))...)
	}
	for i, rw := range rows {
		if out[i].taken {
			r.metrics.Published.WithLabelValues(rw.Kind).Inc()
			r.metrics.Lag.Observe(now.Sub(rw.CreatedAt).Seconds())
		}
	}
	return out, nil
}

// batchSize is the bytes of rows' messages together, as SNS counts them.
func batchSize(rows []*row) int {
	n := 0
	for _, rw := range rows {
		n += rw.size()
	}
	return n
}
