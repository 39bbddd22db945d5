package ledger

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/junban/junban/internal/ledger/stock"
)

var (
	//go:embed reindex.lua
	reindexLua    string
	reindexScript = redis.NewScript(scriptHeader() + candidatesLua + reindexLua)
)

// reindexAttempts bounds the reads of a SKU whose lots an older version (or another key
// layout) keeps changing while Reindex computes their keys.
const reindexAttempts = 10

// Reindexed is what Reindex found on one SKU, and did.
type Reindexed struct {
	SKU string `json:"sku"`
	// Found is false when Redis does not hold the SKU: there is nothing to re-index.
	Found bool `json:"found"`
	// Layout: the SKU was stamped with another key layout, or with none (written before
	// the stamp).
	Layout bool `json:"layout"`
	// Index: its candidate index held other records than the current layout gives.
	Index bool `json:"index"`
	// Keys counts its lots whose stored key was missing, or not the current layout's key
	// for their meta.
	Keys int `json:"keys"`
	// Rewritten: Reindex rewrote the SKU (never on a dry run, nor when nothing differed).
	Rewritten bool `json:"rewritten"`
}

// Stale tells whether the SKU differed from the current key layout in anything.
func (r Reindexed) Stale() bool { return r.Layout || r.Index || r.Keys > 0 }

// Reindex rewrites the SKU's candidate index, its lots' stored keys and its layout stamp
// as the current key layout (AllocKey) gives them, when any of them differs; with dryRun
// it only tells what differs. It reads the SKU and computes every key in Go, then writes in
// one script (reindex.lua) that takes the stock as operations left it meanwhile, so it may
// run beside live traffic; only a lot an older version wrote in between makes it read
// again. Running it again changes nothing. An operation that meets a SKU in another
// layout, or a lot without its key, runs it itself (ERR_REINDEX).
func (l *Ledger) Reindex(ctx context.Context, sku string, dryRun bool) (Reindexed, error) {
	if err := stock.CheckSKU(sku); err != nil {
		return Reindexed{SKU: sku}, err
	}
	key := Key(l.prefix, sku)
	for range reindexAttempts {
		h, err := l.shared.HGetAll(ctx, key).Result()
		if err != nil {
			return Reindexed{SKU: sku}, fmt.Errorf("ledger: reindex sku=%s: %w", sku, err)
		}
		if len(h) == 0 {
			return Reindexed{SKU: sku}, nil
		}
		s, err := decodeHash(sku, h)
		if err != nil {
			return Reindexed{SKU: sku}, fmt.Errorf("ledger: reindex: %w", err)
		}
		r, args := reindexPlan(h, s.Lots)
		r.SKU = sku
		if !r.Stale() || dryRun {
			return r, nil
		}
		switch n, err := reindexScript.Run(ctx, l.shared, []string{key}, args...).Int(); {
		case err != nil:
			return Reindexed{SKU: sku}, fmt.Errorf("ledger: reindex sku=%s: %w", sku, err)
		case n == 1:
			r.Rewritten = true
			return r, nil
		case n == -1: // gone since the read
			return Reindexed{SKU: sku}, nil
		}
	}
	return Reindexed{SKU: sku}, fmt.Errorf("ledger: reindex sku=%s: its lots changed on each of %d reads", sku, reindexAttempts)
}

// reindexPlan compares the SKU's hash h (lots decoded from it) with the current key layout
// and returns what differs and reindex.lua's arguments.
func reindexPlan(h map[string]string, lots []stock.Lot) (Reindexed, []any) {
	r := Reindexed{Found: true, Layout: h[fieldLayout] != keyLayout}
	var have strings.Builder
	on, err := strconv.Atoi(h[fieldChunks])
	r.Index = err != nil
	for i := range on {
		c, ok := h["o:"+strconv.Itoa(i)]
		r.Index = r.Index || !ok
		have.WriteString(c)
	}
	r.Index = r.Index || have.String() != strings.Join(buildIndex(lots), "")
	args := make([]any, 0, 1+2*len(lots))
	args = append(args, indexChunk)
	for _, lt := range lots {
		stored := storedKey(lt, h["m:"+lt.LotID])
		if h["k:"+lt.LotID] != stored {
			r.Keys++
		}
		args = append(args, lt.LotID, stored)
	}
	return r, args
}

// ReindexReport counts what ReindexAll found and did.
type ReindexReport struct {
	// KeyLayout is the layout SKUs were compared with (and rewritten in).
	KeyLayout string `json:"key_layout"`
	DryRun    bool   `json:"dry_run"`
	// SKUs counts the SKUs looked at; Stale those that differed from KeyLayout, Rewritten
	// those rewritten; Layout, Index and Keys count what differed (Keys: lots).
	SKUs      int `json:"skus"`
	Stale     int `json:"stale"`
	Rewritten int `json:"rewritten"`
	Layout    int `json:"layout"`
	Index     int `json:"index"`
	Keys      int `json:"keys"`
	// Absent counts the SKUs Redis did not hold (named, or gone since the scan).
	Absent int `json:"absent"`
}

func (rep *ReindexReport) add(r Reindexed) {
	rep.SKUs++
	switch {
	case !r.Found:
		rep.Absent++
		return
	case r.Stale():
		rep.Stale++
	}
	if r.Rewritten {
		rep.Rewritten++
	}
	if r.Layout {
		rep.Layout++
	}
	if r.Index {
		rep.Index++
	}
	rep.Keys += r.Keys
}

// ReindexAll runs Reindex on the given SKUs, or on every SKU in Redis when skus is empty
// (ScanSKUs; on a cluster, every master's at once), and counts. The first error stops it.
func (l *Ledger) ReindexAll(ctx context.Context, skus []string, dryRun bool) (ReindexReport, error) {
	rep := ReindexReport{KeyLayout: keyLayout, DryRun: dryRun}
	var mu sync.Mutex
	one := func(sku string) error {
		r, err := l.Reindex(ctx, sku, dryRun)
		if err != nil {
			return err
		}
		mu.Lock()
		rep.add(r)
		mu.Unlock()
		return nil
	}
	if len(skus) > 0 {
		for _, sku := range skus {
			if err := one(sku); err != nil {
				return rep, err
			}
		}
		return rep, nil
	}
	err := l.ScanSKUs(ctx, one)
	mu.Lock()
	defer mu.Unlock()
	return rep, err
}
