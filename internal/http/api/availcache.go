package api

import (
	"sync"
	"time"

	"github.com/junban/junban/internal/ledger/stock"
)

// Bounds of the availability cache.
const (
	// availCacheEntries bounds the answers kept; beyond it an arbitrary one leaves.
	availCacheEntries = 10_000
	// availCacheTTL bounds how long an answer is served for its version. A SKU's
	// version grows with every ledger operation, so within a lineage a version names one
	// state; a SKU reloaded from PostgreSQL after a Redis data loss may reuse a version,
	// and a recovery takes far longer than this.
	availCacheTTL = time.Second
)

// availCache keeps encoded availability answers by request, each valid only for the SKU
// version the script read it at: a hit costs one HGET of the version instead of the
// script's walk, and an answer is never served once any operation changed the SKU.
type availCache struct {
	mu  sync.Mutex
	m   map[availKey]availEntry
	now func() time.Time
}

type availKey struct {
	sku, date string
	mode      stock.Mode
	qty       int64
	location  string
}

type availEntry struct {
	version int64
	body    []byte
	at      time.Time
}

func newAvailCache() *availCache {
	return &availCache{m: map[availKey]availEntry{}, now: time.Now}
}

// get returns the answer to k read at version, if one is kept and young enough.
func (c *availCache) get(k availKey, version int64) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[k]
	if !ok || e.version != version || c.now().Sub(e.at) >= availCacheTTL {
		return nil, false
	}
	return e.body, true
}

// put keeps body as the answer to k at version.
func (c *availCache) put(k availKey, version int64, body []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[k]; !ok && len(c.m) >= availCacheEntries {
		for old := range c.m {
			delete(c.m, old)
			break
		}
	}
	c.m[k] = availEntry{version: version, body: body, at: c.now()}
}
