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

// durableLedger is the ledger of a step on a Redis Cluster with Config.Replication on:
// what one operation answered counts only once its SKU's primary had replicas acknowledge
// it, before the step acts on the answer on another primary.
//
// A step's later operations follow from its earlier ones' answers, and each runs on its
// SKU's primary. If a primary fails over before it replicated an operation, while a
// later operation of the step stays on its own primary, the event's re-run meets the
// later one's record but runs the lost one anew against the stock of the moment, and may
// get another answer:
//
//   - a refusal, where the first run's operation applied: the re-run is rejected before
//     it reaches the later operation again, and nothing undoes that one (a lines change
//     whose growing SKU is refused leaves another SKU's released units sellable while the
//     order still holds them);
//   - an applied operation, where the first run's was refused: the first run's undos of
//     the event's earlier operations stay, and the event applies over units they gave
//     back.
//
// So before an operation on another primary than the last applied operation's, that
// primary's replicas acknowledge it (pending), and a refusal is returned only once
// replicated. Operations on one primary need no wait between them: its replication
// stream is ordered, so a promoted replica that has the later one has the earlier. The
// last applied operation is covered by the commit (Processor.ledgerReplicated).
type durableLedger struct {
	domain.Ledger
	p *Processor
	// pending is the SKU of the last applied operation whose primary has not had replicas
	// acknowledge it yet ("" for none).
	pending string
}

// SellableByLocation reads through to the ledger (domain.LocationStock) without a
// replication wait: a read moves nothing, and a plan made from a stale one is refused by
// the allocation's own check (ERR_STALE_PLAN).
func (l *durableLedger) SellableByLocation(ctx context.Context, sku, date string) (map[string]int64, error) {
	r, ok := l.Ledger.(domain.LocationStock)
	if !ok {
		return nil, fmt.Errorf("order: the ledger reads no stock per location: %w", stock.ErrInvalidRequest)
	}
	return r.SellableByLocation(ctx, sku, date)
}

// stepLedger is the ledger a step runs on: a durableLedger where it is needed, one per
// step (it remembers the step's last operation).
func (p *Processor) stepLedger() domain.Ledger {
	if _, ok := p.rc.(*redis.ClusterClient); !ok || !p.cfg.Replication.On() {
		return p.ledger
	}
	return &durableLedger{Ledger: p.ledger, p: p}
}

// Apply runs op once the last applied operation is replicated where it has to be; a
// refusal is returned once replicated, and a wait that falls short is a transient error:
// the step fails and runs again.
func (l *durableLedger) Apply(ctx context.Context, op stock.Op) (stock.Result, error) {
	if l.pending != "" && !l.samePrimary(ctx, l.pending, skuOf(op)) {
		if err := l.replicate(ctx, l.pending); err != nil {
			return stock.Result{}, fmt.Errorf("order: operation on sku %s not replicated before the next one: %w", l.pending, err)
		}
		l.pending = ""
	}
	r, err := l.Ledger.Apply(ctx, op)
	if err == nil {
		if r.SKU != "" {
			l.pending = r.SKU
		}
		return r, nil
	}
	if _, refused := stock.Rejection(err); !refused || r.SKU == "" {
		return r, err
	}
	if acked := l.replicate(ctx, r.SKU); acked != nil {
		return r, fmt.Errorf("order: refusal %s on sku %s not replicated: %w", r.OpID, r.SKU, acked)
	}
	if l.samePrimary(ctx, l.pending, r.SKU) {
		l.pending = "" // the refusal's wait covered it
	}
	return r, err
}

// replicate returns nil once replicas acknowledged every write of the SKU's primary so
// far: WAIT covers its connection's writes, so it follows a write of its own (a marker in
// the SKU's slot), which comes after them in the primary's replication stream.
func (l *durableLedger) replicate(ctx context.Context, sku string) error {
	key := ledger.Key(l.p.cfg.Prefix, sku)
	marker := key + ":replicated"
	return l.p.cfg.Replication.Pipelined(ctx, l.p.rc, key, "ledger", func(pp redis.Pipeliner) {
		pp.Set(ctx, marker, 1, time.Minute)
	})
}

// samePrimary says whether SKUs a and b are on one primary now (false when either is ""
// or a primary is not known).
func (l *durableLedger) samePrimary(ctx context.Context, a, b string) bool {
	if a == "" || b == "" {
		return false
	}
	if a == b {
		return true
	}
	cc, ok := l.p.rc.(*redis.ClusterClient)
	if !ok {
		return false
	}
	na, err := cc.MasterForKey(ctx, ledger.Key(l.p.cfg.Prefix, a))
	if err != nil {
		return false
	}
	nb, err := cc.MasterForKey(ctx, ledger.Key(l.p.cfg.Prefix, b))
	if err != nil {
		return false
	}
	return na.Options().Addr == nb.Options().Addr
}

// skuOf is the SKU an order's operation acts on ("" for an operation an order's step
// does not make: the wait before it is then never skipped).
func skuOf(op stock.Op) string {
	op, _ = stock.Unfenced(op)
	switch r := op.(type) {
	case stock.AllocateRequest:
		return r.SKU
	case stock.ReleaseRequest:
		return r.SKU
	case stock.ConfirmRequest:
		return r.SKU
	case stock.ShipRequest:
		return r.SKU
	case stock.UndoRequest:
		return r.SKU
	case stock.ChangeRequest:
		return r.SKU
	case stock.MoveAllocationRequest:
		return r.SKU
	case stock.ReturnRequest:
		return r.SKU
	}
	return ""
}
