package outbound

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"gorm.io/gorm"
)

// Defaults of the cleanup.
const (
	// CleanupEveryDefault is how often the cleanup runs.
	CleanupEveryDefault = 5 * time.Minute
	// CleanupBatchDefault is the most rows one cleanup statement deletes, so that it holds
	// its locks briefly; a full run is followed by another at once.
	CleanupBatchDefault = 10_000
)

// Cleanup deletes up to CleanupBatchDefault outbox rows created more than retention ago,
// published or parked ones only when publishedOnly (a relay runs: an unpublished row waits
// for it however old), every one otherwise (no topic: GET /v1/events alone reads them). It runs
// under the outbox's advisory lock, so one replica cleans at a time; when another holds
// it, Cleanup deletes nothing and says so with locked.
func Cleanup(ctx context.Context, db *gorm.DB, retention time.Duration, publishedOnly bool) (deleted int64, locked bool, err error) {
	err = db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var ok bool
		if err := tx.Raw(lockSQL).Scan(&ok).Error; err != nil {
			return fmt.Errorf("lock: %w", err)
		}
		if !ok {
			locked = true
			return nil
		}
		cond := ""
		if publishedOnly {
			cond = " AND (published_at IS NOT NULL OR parked_at IS NOT NULL)"
		}
		res := tx.Exec(`DELETE FROM outbox WHERE id IN (
			SELECT id FROM outbox WHERE created_at < now() - make_interval(secs => ?)`+cond+` ORDER BY created_at LIMIT ?)`,
			retention.Seconds(), CleanupBatchDefault)
		if res.Error != nil {
			return res.Error
		}
		deleted = res.RowsAffected
		return nil
	})
	if err != nil {
		return 0, false, fmt.Errorf("outbound: cleanup: %w", err)
	}
	return deleted, locked, nil
}

// CleanerConfig configures a Cleaner.
type CleanerConfig struct {
	// DB is the database holding the outbox.
	DB *gorm.DB
	// Retention is how long a row is kept.
	Retention time.Duration
	// PublishedOnly keeps unpublished rows however old (a relay runs).
	PublishedOnly bool
	// Every is how often the cleanup runs; CleanupEveryDefault when 0.
	Every time.Duration
	// Logger logs failures (warn) and deletions (debug); zap.NewNop() when nil.
	Logger *zap.Logger
	// Registerer takes junban_outbox_deleted_total; none registered when nil.
	Registerer prometheus.Registerer
}

// Cleaner runs Cleanup every so often.
type Cleaner struct {
	cfg     CleanerConfig
	deleted prometheus.Counter
}

// NewCleaner checks cfg and returns a Cleaner; Run runs it.
func NewCleaner(cfg CleanerConfig) (*Cleaner, error) {
	if cfg.DB == nil {
		return nil, errors.New("outbound: cleaner: no DB")
	}
	if cfg.Retention <= 0 {
		return nil, errors.New("outbound: cleaner: retention must be positive")
	}
	if cfg.Every <= 0 {
		cfg.Every = CleanupEveryDefault
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	c, err := newDeletedCounter(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	return &Cleaner{cfg: cfg, deleted: c}, nil
}

// Run cleans up every Every (at once again after a full statement) until ctx ends, then
// returns nil; a failure is logged and the next run tries again.
func (c *Cleaner) Run(ctx context.Context) error {
	t := time.NewTicker(c.cfg.Every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		for ctx.Err() == nil {
			n, _, err := Cleanup(ctx, c.cfg.DB, c.cfg.Retention, c.cfg.PublishedOnly)
			if err != nil {
				if ctx.Err() == nil {
					c.cfg.Logger.Warn("outbox cleanup failed", zap.Error(err))
				}
				break
			}
			c.deleted.Add(float64(n))
			if n > 0 {
				c.cfg.Logger.Debug("outbox cleanup", zap.Int64("deleted", n))
			}
			if n < CleanupBatchDefault {
				break
			}
		}
	}
}
