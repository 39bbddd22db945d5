// Package idempotency runs a piece of work once per key, however often and however
// concurrently it is asked for, and answers every later request with the first
// response. It is modelled on AWS Powertools' idempotency utility.
//
// A key goes through three states:
//
//   - new: nobody has started it. Begin takes an in-progress lock (SET NX PX with a
//     random token) and the caller does the work.
//   - in progress: a holder is working on it. Other callers get ErrInProgress until the
//     holder completes, releases, or dies; a dead holder's lock expires after LockTTL and
//     the next caller takes over.
//   - completed: the holder stored its response with a hash of the payload; the record
//     is kept for Retention. A caller with the same payload hash gets the stored
//     response (a replay); one with another hash gets ErrPayloadMismatch.
//
// Every write to the lock is fenced by its value (token and payload hash) in Lua, so a
// holder that lost its lock never deletes or overwrites the next holder's state. The
// lock and the record of a key share a hash tag: the scripts run on Redis Cluster too.
package idempotency

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Defaults of Config.
const (
	// LockTTLDefault is how long an in-progress lock lives: the longest the guarded work
	// may take, and how long a dead holder blocks its key.
	LockTTLDefault = 30 * time.Second
	// RetentionDefault is how long a completed record is kept: a payment provider's whole
	// retry window (Stripe retries for three days).
	RetentionDefault = 72 * time.Hour
	// PrefixDefault starts every key when Config.Prefix is empty.
	PrefixDefault = "junban"
)

// Errors of Begin and Complete, matched with errors.Is.
var (
	// ErrInProgress: another holder is working on the key (a concurrent duplicate).
	ErrInProgress = errors.New("idempotency: already in progress")
	// ErrPayloadMismatch: the key is known with another payload hash.
	ErrPayloadMismatch = errors.New("idempotency: same key, different payload")
	// ErrLockLost: Complete found another holder's lock (ours had expired and was taken
	// over), or a record written by another holder; nothing was written.
	ErrLockLost = errors.New("idempotency: lock lost")
)

// Config configures a Guard. Zero values stand for the defaults.
type Config struct {
	// Redis holds the locks and the completed records (required).
	Redis redis.UniversalClient
	// Prefix starts every key (config.Redis.KeyPrefix); it must not contain '{' or '}'.
	Prefix string
	// LockTTL is the in-progress lock's lifetime. Default LockTTLDefault.
	LockTTL time.Duration
	// Retention is how long a completed record is kept. Default RetentionDefault.
	Retention time.Duration
	// Now is the clock that stamps completed records. Default time.Now.
	Now func() time.Time
	// Token returns a new random lock token (no ':'). Default 128 bits from crypto/rand.
	// Tokens must never repeat: a Begin or Complete that finds its own token in Redis is
	// taken for a resend of that same call (go-redis retries after a lost reply).
	Token func() (string, error)
}

// Validate reports every invalid setting at once.
func (c Config) Validate() error {
	var errs []error
	if c.Redis == nil {
		errs = append(errs, errors.New("Redis is required"))
	}
	if strings.ContainsAny(c.Prefix, "{}") {
		errs = append(errs, fmt.Errorf("prefix %q contains a hash tag brace", c.Prefix))
	}
	if c.LockTTL < 0 {
		errs = append(errs, fmt.Errorf("lock TTL %v is negative", c.LockTTL))
	} else if c.LockTTL > 0 && c.LockTTL < time.Millisecond {
		errs = append(errs, fmt.Errorf("lock TTL %v is under a millisecond", c.LockTTL))
	}
	if c.Retention < 0 {
		errs = append(errs, fmt.Errorf("retention %v is negative", c.Retention))
	} else if c.Retention > 0 && c.Retention < time.Millisecond {
		errs = append(errs, fmt.Errorf("retention %v is under a millisecond", c.Retention))
	}
	if len(errs) > 0 {
		return fmt.Errorf("idempotency: config: %w", errors.Join(errs...))
	}
	return nil
}

// SetDefaults sets the zero fields that have a default.
func (c *Config) SetDefaults() {
	if c.Prefix == "" {
		c.Prefix = PrefixDefault
	}
	if c.LockTTL == 0 {
		c.LockTTL = LockTTLDefault
	}
	if c.Retention == 0 {
		c.Retention = RetentionDefault
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Token == nil {
		c.Token = randomToken
	}
}

func randomToken() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// Hash returns the payload hash Begin expects: hex SHA-256 of b.
func Hash(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// State is where a key stands.
type State int

// States of a key.
const (
	StateNew State = iota + 1
	StateInProgress
	StateCompleted
)

func (s State) String() string {
	switch s {
	case StateNew:
		return "new"
	case StateInProgress:
		return "in_progress"
	case StateCompleted:
		return "completed"
	}
	return "unknown"
}

var (
	//go:embed begin.lua
	beginLua    string
	beginScript = redis.NewScript(beginLua)
	//go:embed complete.lua
	completeLua    string
	completeScript = redis.NewScript(completeLua)
	//go:embed release.lua
	releaseLua    string
	releaseScript = redis.NewScript(releaseLua)
)

// Guard runs work once per key. It is safe for concurrent use.
type Guard struct {
	rc  redis.UniversalClient
	cfg Config
}

// New returns a Guard over cfg.Redis, or an error naming what cfg lacks.
func New(cfg Config) (*Guard, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.SetDefaults()
	return &Guard{rc: cfg.Redis, cfg: cfg}, nil
}

// LockTTL is the guard's in-progress lock lifetime.
func (g *Guard) LockTTL() time.Duration { return g.cfg.LockTTL }

// keys builds the lock and record keys of key. Both share one hash tag so that one
// script may touch them on Redis Cluster; a key with braces would bend the tag, so
// its hash stands in for it.
func (g *Guard) keys(key string) (lock, done string) {
	tag := key
	if tag == "" || strings.ContainsAny(tag, "{}") {
		tag = "h:" + Hash([]byte(key))
	}
	base := g.cfg.Prefix + ":idem:{" + tag + "}"
	return base + ":lock", base + ":done"
}

// Claim is the answer of Begin.
type Claim struct {
	// State is the key's state when Begin looked.
	State State
	// Response is the stored response of a completed key.
	Response []byte
	// CompletedAt is when a completed key was completed.
	CompletedAt time.Time
	// RetryAfter is the remaining lifetime of another holder's lock (StateInProgress).
	RetryAfter time.Duration

	g          *Guard
	lock, done string
	value      string
	hash       string
}

// Begin looks key up with the payload's hash (see Hash) and takes the in-progress
// lock when the key is new:
//
//   - new: a Claim with StateNew; the caller does the work, then calls Complete with
//     its response, or Release when the work failed and may be retried;
//   - completed, same hash: a Claim with StateCompleted and the stored Response;
//   - in progress, same hash: a Claim with StateInProgress and ErrInProgress;
//   - another hash: a Claim with the state found and ErrPayloadMismatch.
//
// A resend of the call (go-redis retries a script whose reply was lost) finds the lock
// holding this call's own token and answers new again, not in progress.
//
// Any other error (Redis cannot be reached) comes with a nil Claim.
func (g *Guard) Begin(ctx context.Context, key, payloadHash string) (*Claim, error) {
	token, err := g.cfg.Token()
	if err != nil {
		return nil, fmt.Errorf("idempotency: token: %w", err)
	}
	if strings.Contains(token, ":") {
		return nil, fmt.Errorf("idempotency: token %q contains ':'", token)
	}
	lock, done := g.keys(key)
	c := &Claim{g: g, lock: lock, done: done, value: token + ":" + payloadHash, hash: payloadHash}
	res, err := beginScript.Run(ctx, g.rc, []string{lock, done}, token, payloadHash, g.cfg.LockTTL.Milliseconds()).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("idempotency: begin %q: %w", key, err)
	}
	if len(res) == 0 {
		return nil, fmt.Errorf("idempotency: begin %q: empty answer", key)
	}
	switch res[0] {
	case "new":
		c.State = StateNew
		return c, nil
	case "completed":
		c.State = StateCompleted
		if len(res) > 1 {
			c.Response = []byte(res[1])
		}
		if len(res) > 2 {
			if ms, err := strconv.ParseInt(res[2], 10, 64); err == nil {
				c.CompletedAt = time.UnixMilli(ms)
			}
		}
		return c, nil
	case "in_progress":
		c.State = StateInProgress
		if len(res) > 1 {
			if ms, err := strconv.ParseInt(res[1], 10, 64); err == nil && ms > 0 {
				c.RetryAfter = time.Duration(ms) * time.Millisecond
			}
		}
		return c, fmt.Errorf("%w: %q", ErrInProgress, key)
	case "mismatch":
		c.State = StateCompleted
		if len(res) > 1 && res[1] == "in_progress" {
			c.State = StateInProgress
		}
		return c, fmt.Errorf("%w: %q", ErrPayloadMismatch, key)
	}
	return nil, fmt.Errorf("idempotency: begin %q: unexpected answer %q", key, res[0])
}

// Complete stores response as the key's completed record for the retention and drops
// the lock. It is fenced by the lock: when the lock expired and another holder took
// over (or completed), nothing is written and the error is ErrLockLost. When the lock
// expired and nobody took over, the record is written all the same: the work did happen.
// The record keeps the claim's token, so a resend of the call after a lost reply
// succeeds too.
func (c *Claim) Complete(ctx context.Context, response []byte) error {
	if c.State != StateNew {
		return fmt.Errorf("idempotency: complete of a claim in state %s", c.State)
	}
	n, err := completeScript.Run(ctx, c.g.rc, []string{c.lock, c.done},
		c.value, c.hash, response, c.g.cfg.Now().UnixMilli(), c.g.cfg.Retention.Milliseconds()).Int()
	if err != nil {
		return fmt.Errorf("idempotency: complete: %w", err)
	}
	if n == 0 {
		return ErrLockLost
	}
	return nil
}

// Release drops the lock without a record, so that the next request does the work
// again (the work failed). It never deletes another holder's lock; releasing a lock
// that is no longer ours is not an error.
func (c *Claim) Release(ctx context.Context) error {
	if c.State != StateNew {
		return nil
	}
	if err := releaseScript.Run(ctx, c.g.rc, []string{c.lock}, c.value).Err(); err != nil {
		return fmt.Errorf("idempotency: release: %w", err)
	}
	return nil
}

// Result is the answer of Do.
type Result struct {
	// Response is the work's response, or the stored one of a replay.
	Response []byte
	// Replayed says the work was done before and Response is the stored one.
	Replayed bool
}

// Do runs fn once for key: a new key runs fn and stores its response; a completed one
// returns the stored response without running fn. A failing fn releases the lock and
// its error is returned, so that a retry runs it again. Errors: ErrInProgress,
// ErrPayloadMismatch, fn's error, or a Redis error (when Complete fails after fn
// succeeded, the Result holds fn's response along with the error).
func (g *Guard) Do(ctx context.Context, key, payloadHash string, fn func(ctx context.Context) ([]byte, error)) (Result, error) {
	c, err := g.Begin(ctx, key, payloadHash)
	if err != nil {
		return Result{}, err
	}
	if c.State == StateCompleted {
		return Result{Response: c.Response, Replayed: true}, nil
	}
	resp, err := fn(ctx)
	if err != nil {
		if rerr := c.Release(context.WithoutCancel(ctx)); rerr != nil {
			err = errors.Join(err, rerr)
		}
		return Result{}, err
	}
	if err := c.Complete(context.WithoutCancel(ctx), resp); err != nil {
		return Result{Response: resp}, err
	}
	return Result{Response: resp}, nil
}
