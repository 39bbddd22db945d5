package order

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/junban/junban/internal/domain"
	"github.com/junban/junban/internal/ledger"
	"github.com/junban/junban/internal/ledger/stock"
)

// durableRefusals is the ledger of a step on a Redis Cluster with Config.Replication on:
// a refusal counts only once its SKU's primary had replicas acknowledge it.
//
// The ledger remembers a refusal by op id, as it does an applied operation, and the step
// acts on it: it undoes the event's earlier operations, on their own primaries. If the
// refusing primary then failed over before it replicated the refusal, while the step's
// commit was lost with the order's primary, the event's re-run would meet the undos (kept
// on their primaries, answering as done) but not the refusal: run anew against the stock
// of the moment, the operation could be applied, and the event with it, over earlier
// lines whose units its undos had given back. With the refusal acknowledged first, the
// re-run meets it as the first run did. (An applied operation needs no such wait: a
// re-run that meets its record gone runs it anew, and the step's later operations follow
// from that answer.)
type durableRefusals struct {
	domain.Ledger
	p *Processor
}

// stepLedger is the ledger a step runs on: durableRefusals where it is needed.
func (p *Processor) stepLedger() domain.Ledger {
	if _, ok := p.rc.(*redis.ClusterClient); !ok || !p.cfg.Replication.On() {
		return p.ledger
	}
	return durableRefusals{Ledger: p.ledger, p: p}
}

// Apply runs op; a refusal is returned once replicated, and a refusal that is not (yet)
// is a transient error: the step fails and runs again.
func (l durableRefusals) Apply(ctx context.Context, op stock.Op) (stock.Result, error) {
	r, err := l.Ledger.Apply(ctx, op)
	if _, refused := stock.Rejection(err); !refused || r.SKU == "" {
		return r, err
	}
	key := ledger.Key(l.p.cfg.Prefix, r.SKU)
	marker := key + ":replicated"
	acked := l.p.cfg.Replication.Pipelined(ctx, l.p.rc, key, "ledger", func(pp redis.Pipeliner) {
		pp.Set(ctx, marker, 1, time.Minute)
	})
	if acked != nil {
		return r, fmt.Errorf("order: refusal %s on sku %s not replicated: %w", r.OpID, r.SKU, acked)
	}
	return r, err
}
