package ledger

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/junban/junban/internal/ledger/stock"
)

// LocationsKey is the hash of the shop's locations in Redis: location id -> the location's
// JSON (stock.EncodeLocation). One key, read by the workers so that no event needs a
// PostgreSQL read to know a location; junbanctl locations writes PostgreSQL first, then
// this hash. It has no SKU's hash tag: no SKU script reads it (a script may only touch its
// SKU's slot on a cluster), the Go side reads it and passes what an operation needs.
func LocationsKey(prefix string) string { return prefix + ":locations" }

// PublishLocations writes locs into the locations hash. With replace, the hash becomes
// exactly locs (fields of other locations are removed), atomically.
func PublishLocations(ctx context.Context, rc redis.UniversalClient, prefix string, locs []stock.Location, replace bool) error {
	key := LocationsKey(prefix)
	fields := make([]any, 0, 2*len(locs))
	for _, l := range locs {
		if err := l.Validate(); err != nil {
			return err
		}
		v, err := stock.EncodeLocation(l)
		if err != nil {
			return err
		}
		fields = append(fields, l.ID, v)
	}
	_, err := rc.TxPipelined(ctx, func(p redis.Pipeliner) error {
		if replace {
			p.Del(ctx, key)
		}
		if len(fields) > 0 {
			p.HSet(ctx, key, fields...)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("ledger: publish locations: %w", err)
	}
	return nil
}

// ReadLocations returns the published locations by rank, then id. The default location
// is among them with stock.DefaultLocationSettings while the shop has not set it.
func ReadLocations(ctx context.Context, rc redis.UniversalClient, prefix string) ([]stock.Location, error) {
	s, err := ReadShopLocations(ctx, rc, prefix)
	return s.All, err
}

// ReadShopLocations returns the published locations as ReadLocations does, and whether
// the shop has registered any (the hash is not empty).
func ReadShopLocations(ctx context.Context, rc HashReader, prefix string) (stock.ShopLocations, error) {
	h, err := rc.HGetAll(ctx, LocationsKey(prefix)).Result()
	if err != nil {
		return stock.ShopLocations{}, fmt.Errorf("ledger: read locations: %w", err)
	}
	out := make([]stock.Location, 0, len(h)+1)
	for id, v := range h {
		l, err := stock.DecodeLocation(v)
		if err != nil {
			return stock.ShopLocations{}, fmt.Errorf("ledger: location %s: %w", id, err)
		}
		if l.ID != id {
			return stock.ShopLocations{}, fmt.Errorf("ledger: location field %s holds location %s", id, l.ID)
		}
		out = append(out, l)
	}
	if _, ok := h[stock.DefaultLocation]; !ok {
		out = append(out, stock.DefaultLocationSettings())
	}
	stock.SortLocations(out)
	return stock.ShopLocations{All: out, Registered: len(h) > 0}, nil
}

// LocationCache reads the locations hash at most once per TTL and gives the last read
// in between, so that an allocation needs no read of its own (domain.LocationSource). A
// location the shop changes reaches the workers within the TTL; a location the shop just
// registered is found at once by a fresh read (Shop), which a step makes before it
// refuses a location it does not know.
type LocationCache struct {
	rc     HashReader
	prefix string
	ttl    time.Duration

	mu   sync.Mutex
	at   time.Time
	shop stock.ShopLocations
	read bool
}

// HashReader reads a whole hash: a go-redis client, or the order-worker's shared round
// trips (pipeshare.Client), so that a step's read of the locations waits for no round
// trip of its own.
type HashReader interface {
	HGetAll(ctx context.Context, key string) *redis.MapStringStringCmd
}

// NewLocationCache returns a cache of prefix's locations hash, read through rc; ttl <= 0
// reads every time.
func NewLocationCache(rc HashReader, prefix string, ttl time.Duration) *LocationCache {
	return &LocationCache{rc: rc, prefix: prefix, ttl: ttl}
}

// Locations returns the shop's locations as ReadLocations does, through the cache.
func (c *LocationCache) Locations(ctx context.Context) ([]stock.Location, error) {
	s, err := c.Shop(ctx, false)
	return s.All, err
}

// Shop implements domain.LocationSource: the last read within the TTL, or, with fresh
// or after the TTL, a new one.
func (c *LocationCache) Shop(ctx context.Context, fresh bool) (stock.ShopLocations, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !fresh && c.read && c.ttl > 0 && time.Since(c.at) < c.ttl {
		return c.shop, nil
	}
	s, err := ReadShopLocations(ctx, c.rc, c.prefix)
	if err != nil {
		return stock.ShopLocations{}, err
	}
	c.shop, c.at, c.read = s, time.Now(), true
	return s, nil
}
