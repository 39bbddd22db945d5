package chaos

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/junban/junban/internal/ledger"
	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/lockhandoff"
	"github.com/junban/junban/internal/postgres/inventorydb"
	"github.com/junban/junban/internal/queue"
	"github.com/junban/junban/internal/redis/keyscan"
	"github.com/junban/junban/internal/testenv/loadgen"
)

// eventsPerOrder is a first guess of the events (with duplicates) one order of the
// default workload sends; Workload corrects it.
const eventsPerOrder = 4.4

// Workload makes the loadgen workload of at least cfg.Events events (duplicates
// included): the default loadgen spec, more SKUs as orders grow so that some SKUs run
// short (oversell attempts) and others do not, and the warehouse feed beside the orders
// (cfg.WarehouseShare). Drive sends it at an even rate without holding at the workload's
// gates: an order that reaches a SKU registered during the run before the registration
// is refused (ERR_UNKNOWN_SKU), as it would be in a shop that listed the SKU too early.
func Workload(cfg Config) loadgen.Workload {
	cfg.setDefaults()
	orders := int(math.Ceil(float64(cfg.Events) / eventsPerOrder))
	for {
		s := loadgen.DefaultSpec("chaos" + strconv.FormatUint(cfg.Seed, 36))
		s.Seed = cfg.Seed
		s.Orders = orders
		s.SKUs = max(20, orders/40)
		s.StockPerLot = 100
		s.DuplicateShare = cfg.DuplicateShare
		s.WarehouseShare = max(cfg.WarehouseShare, 0)
		if cfg.Locations {
			s.Locations, s.PickupShare = Locations(), PickupShareDefault
		}
		if cfg.AbandonedShare > 0 && s.ReserveShare > 0 {
			// loadgen's share is of the reserve orders.
			s.AbandonedShare, s.HoldFor, s.ExtendShare = min(cfg.AbandonedShare/s.ReserveShare, 1), cfg.HoldFor, 0.3
		}
		w := loadgen.Generate(s)
		if len(w.Events) >= cfg.Events {
			return w
		}
		orders += max(1, int(float64(cfg.Events-len(w.Events))/eventsPerOrder))
	}
}

// Drive sends the workload over cfg.SendDuration while the fault schedule runs, then
// waits for quiescence. Faults and phases are logged to cfg.Progress.
func (e *Env) Drive(ctx context.Context) error {
	e.workload = Workload(e.cfg)
	w := e.workload
	e.report.Events = len(w.Events)
	e.report.Seed = e.cfg.Seed
	e.report.Distinct = w.Distinct
	e.report.Orders = len(w.Orders)
	e.report.SKUs = len(w.Inventory)
	e.report.NewSKUs = len(w.NewSKUs)
	if err := e.registerLocations(ctx, w.Locations); err != nil {
		return err
	}
	if err := loadgen.Import(ctx, e.db, w.Inventory); err != nil {
		return fmt.Errorf("chaos: import inventory: %w", err)
	}
	e.logf("workload: %d events (%d distinct, %d duplicate deliveries), %d orders, %d SKUs",
		len(w.Events), w.Distinct, len(w.Events)-w.Distinct, len(w.Orders), len(w.Inventory))

	e.start = time.Now()
	faultCtx, stopFaults := context.WithCancel(ctx)
	var faults sync.WaitGroup
	// On an early return no fault may still be running when Close removes the servers.
	defer faults.Wait()
	defer stopFaults()
	var faultMu sync.Mutex
	var faultErr error
	for _, f := range e.schedule() {
		faults.Go(func() {
			select {
			case <-faultCtx.Done():
				return
			case <-time.After(time.Until(e.start.Add(f.at))):
			}
			if err := f.do(faultCtx); err != nil && !errors.Is(err, context.Canceled) {
				faultMu.Lock()
				faultErr = cmp.Or(faultErr, err)
				faultMu.Unlock()
			}
		})
	}
	progressDone := make(chan struct{})
	go e.progress(ctx, progressDone)
	defer close(progressDone)
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go e.watch(watchCtx)

	if err := e.send(ctx); err != nil {
		return err
	}
	e.report.SendS = round1(time.Since(e.start).Seconds())
	e.logf("all %d events sent", len(w.Events))
	faults.Wait()
	if faultErr != nil {
		return faultErr
	}
	if e.cluster != nil {
		e.logf("fault schedule done: %d worker kills, %d Redis master kill(s), %d failover(s)",
			e.report.Kills, e.report.RedisMasterKills, e.report.RedisFailovers)
	} else {
		e.logf("fault schedule done: %d worker kills, %d Redis restart(s), PostgreSQL down %s",
			e.report.Kills, e.report.RedisRestarts, e.cfg.PGOutage)
	}
	q0 := time.Now()
	var idle time.Time
	e.report.Quiesced, idle = e.quiesce(ctx)
	if e.report.Quiesced && len(w.Abandoned) > 0 {
		e.awaitExpiries(ctx, w.Abandoned)
	}
	e.report.QuiesceS = round1(time.Since(q0).Seconds())
	e.report.ElapsedS = round1(time.Since(e.start).Seconds())
	if d := idle.Sub(e.start).Seconds(); !idle.IsZero() && d > 0 {
		e.report.EventsPerS = round1(float64(e.report.Events) / d)
	}
	if e.report.Quiesced {
		e.logf("quiescent after %.1fs: every event persisted, queues empty, no turn held", e.report.QuiesceS)
	} else {
		e.logf("NOT quiescent after %.1fs", e.report.QuiesceS)
	}
	return ctx.Err()
}

// send publishes the events at an even rate over cfg.SendDuration, ten per batch.
func (e *Env) send(ctx context.Context) error {
	pub, err := queue.NewPublisher(queue.PublisherConfig{Client: e.sqs, QueueURL: e.orders.URL})
	if err != nil {
		return err
	}
	defer pub.Stop(context.Background())
	evs := e.workload.Events
	batches := (len(evs) + 9) / 10
	per := e.cfg.SendDuration / time.Duration(batches)
	seen := map[string]time.Time{}
	for i := 0; i < len(evs); i += 10 {
		at := e.start.Add(per * time.Duration(i/10))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Until(at)):
		}
		var bodies [][]byte
		for _, ev := range evs[i:min(i+10, len(evs))] {
			first, ok := seen[ev.EventID]
			if !ok {
				first = time.Now()
				seen[ev.EventID] = first
				e.mu.Lock()
				e.sent = append(e.sent, ev.EventID)
				e.mu.Unlock()
			}
			if e.workload.AtSend[ev.EventID] {
				// An abandoned order's hold runs from its first sending; a copy is the same event.
				ev.OccurredAt = first.UTC().Truncate(time.Millisecond)
			}
			b, err := json.Marshal(ev)
			if err != nil {
				return err
			}
			bodies = append(bodies, b)
		}
		if err := pub.PublishBatch(ctx, bodies); err != nil {
			return fmt.Errorf("chaos: send: %w", err)
		}
	}
	return nil
}

// fault is one step of the schedule, at an offset from the start of sending.
type fault struct {
	at time.Duration
	do func(ctx context.Context) error
}

// schedule spreads the faults over the sending period (T): order-worker kills from
// 10% to 85% of T, the PostgreSQL outage from 15% of T (the persist-worker is killed
// while it lasts, so it restarts into an outage), the Redis restart at 65% of T.
// Faults that run into each other are fine: they do in production too.
//
// The Redis Cluster scenario keeps the order-worker kills and replaces the rest with
// the master kills, spread from 30% to 70% of T (one: at 50%), one after the other:
// each waits for the previous master to be back as a replica in sync.
func (e *Env) schedule() []fault {
	T := e.cfg.SendDuration
	frac := func(f float64) time.Duration { return time.Duration(f * float64(T)) }
	var fs []fault
	n := e.cfg.OrderWorkerKills
	for i := range n {
		f := 0.10
		if n > 1 {
			f = 0.10 + 0.75*float64(i)/float64(n-1)
		}
		replica := e.workers[i%len(e.workers)]
		fs = append(fs, fault{at: frac(f), do: func(ctx context.Context) error { return e.killAndRestart(ctx, replica) }})
	}
	if e.cfg.CutConnections {
		fs = append(fs, fault{at: frac(0.05), do: e.cutLoop})
	}
	if e.cluster != nil {
		m := e.cfg.MasterKills
		at := func(i int) time.Duration {
			if m == 1 {
				return frac(0.5)
			}
			return frac(0.3 + 0.4*float64(i)/float64(m-1))
		}
		fs = append(fs, fault{at: at(0), do: func(ctx context.Context) error {
			for i := range m {
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(time.Until(e.start.Add(at(i)))):
				}
				if err := e.masterFailover(ctx, i); err != nil {
					return err
				}
			}
			return nil
		}})
		return fs
	}
	pgAt := frac(0.15)
	if e.cfg.PGOutage > 0 {
		fs = append(fs, fault{at: pgAt, do: e.pgOutage})
	}
	pwAt := frac(0.35)
	if e.cfg.PGOutage > 0 {
		pwAt = pgAt + e.cfg.PGOutage/2
	}
	fs = append(fs, fault{at: pwAt, do: func(ctx context.Context) error { return e.killAndRestart(ctx, e.persist) }})
	fs = append(fs, fault{at: frac(0.65), do: e.redisRestart})
	return fs
}

// cutLoop cuts every worker's Redis connection every cfg.CutEvery until 95% of the
// sending period.
func (e *Env) cutLoop(ctx context.Context) error {
	end := e.start.Add(time.Duration(0.95 * float64(e.cfg.SendDuration)))
	for time.Now().Before(end) {
		n, mid := e.cutConnections()
		e.mu.Lock()
		e.report.ConnectionCuts++
		e.report.ConnectionsCut += n
		e.report.CutMidCall += mid
		e.mu.Unlock()
		e.fault(fmt.Sprintf("cut %d Redis connections, %d in the middle of a call", n, mid))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(e.cfg.CutEvery):
		}
	}
	return nil
}

func (e *Env) fault(what string) {
	e.mu.Lock()
	e.report.Faults = append(e.report.Faults, Fault{AtS: round1(time.Since(e.start).Seconds()), What: what})
	e.mu.Unlock()
	e.logf("%s", what)
}

func (e *Env) killAndRestart(ctx context.Context, p *proc) error {
	p.kill()
	e.mu.Lock()
	e.report.Kills++
	e.mu.Unlock()
	e.fault("SIGKILL " + p.name)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(restartDelay):
	}
	if err := p.start(); err != nil {
		return err
	}
	e.fault("restarted " + p.name)
	return nil
}

func (e *Env) pgOutage(ctx context.Context) error {
	if err := e.pg.stop(ctx); err != nil {
		return err
	}
	e.fault(fmt.Sprintf("PostgreSQL stopped (pg_ctl stop -m fast) for %s", e.cfg.PGOutage))
	select {
	case <-ctx.Done():
	case <-time.After(e.cfg.PGOutage):
	}
	// Start it again even when ctx ended: Close removes it either way.
	if err := e.pg.start(context.WithoutCancel(ctx)); err != nil {
		return err
	}
	e.mu.Lock()
	e.report.PGOutageS = round1(e.cfg.PGOutage.Seconds())
	e.mu.Unlock()
	e.fault("PostgreSQL started again")
	return nil
}

func (e *Env) redisRestart(ctx context.Context) error {
	e.fault("SIGKILL redis-server")
	if err := e.redis.restart(ctx, restartDelay); err != nil {
		return err
	}
	e.mu.Lock()
	e.report.RedisRestarts++
	e.mu.Unlock()
	e.fault("redis-server restarted from its AOF")
	return nil
}

// masterFailover SIGKILLs the i-th master (round robin over the masters with a replica
// in sync; with abandoned holds, the one holding the most due entries), waits until the
// cluster promoted one of its replicas and the dead master's slots answer again (a
// failover), then starts the killed node again and waits until it is a replica in sync.
// Before the kill, either a replica lags (cfg.ReplicaLag) or is restarted from its AOF
// (cfg.ReplicaRestart). A promotion that does not come is a finding (failovers short of
// master kills), not an error: the node is started again and the run goes on.
func (e *Env) masterFailover(ctx context.Context, i int) error {
	dead, replicas, due, err := e.cluster.victim(ctx, i, e.cfg.AbandonedShare > 0)
	if err != nil {
		return err
	}
	replica := replicas[0]
	probe, err := e.cluster.probeKey(ctx, dead)
	if err != nil {
		return err
	}
	var killErr error
	switch {
	case e.cfg.ReplicaRestart:
		killErr = e.restartReplicaThenKill(ctx, dead, replica)
	case e.cfg.ReplicaLag > 0:
		killErr = e.lagReplicaThenKill(ctx, dead, replica)
	default:
		killErr = e.cluster.kill(context.WithoutCancel(ctx), dead)
	}
	if killErr != nil {
		return killErr
	}
	t0 := time.Now()
	e.mu.Lock()
	e.report.RedisMasterKills++
	e.report.DueAtKill = append(e.report.DueAtKill, due)
	e.mu.Unlock()
	e.fault(fmt.Sprintf("SIGKILL Redis master %s (slots %s, %d due entries of holds)", dead.addr, dead.slotsString(), due))
	if promoted, err := e.cluster.waitPromoted(ctx, e.rc, dead, replicas, probe, failoverTimeout); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		e.fault("no failover: " + err.Error())
	} else {
		s := round1(time.Since(t0).Seconds())
		e.mu.Lock()
		e.report.RedisFailovers++
		e.report.FailoverS = append(e.report.FailoverS, s)
		e.mu.Unlock()
		e.fault(fmt.Sprintf("failover: replica %s is master of slots %s, answering %.1fs after the kill", promoted.addr, dead.slotsString(), s))
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(restartDelay):
	}
	role, err := e.cluster.restart(context.WithoutCancel(ctx), dead, rejoinTimeout)
	if err != nil {
		return err
	}
	e.fault(fmt.Sprintf("restarted %s: rejoined as a %s", dead.addr, role))
	return nil
}

// lagReplicaThenKill stops the replica (SIGSTOP) and cuts the master's replication links
// for cfg.ReplicaLag, then SIGKILLs the master and resumes the replica.
func (e *Env) lagReplicaThenKill(ctx context.Context, dead, replica clusterNode) error {
	// Stopped, the replica cannot reconnect; the cut link makes sure that nothing
	// written from now on waits in a socket buffer for it.
	if err := e.cluster.pause(ctx, replica); err != nil {
		return err
	}
	if err := e.cluster.cutReplicas(ctx, dead); err != nil {
		e.cluster.resume(context.WithoutCancel(ctx), replica)
		return err
	}
	e.fault(fmt.Sprintf("SIGSTOP Redis replica %s and cut its link for %s: its master %s acknowledges writes it does not have", replica.addr, e.cfg.ReplicaLag, dead.addr))
	select {
	case <-ctx.Done():
	case <-time.After(e.cfg.ReplicaLag):
	}
	killErr := e.cluster.kill(context.WithoutCancel(ctx), dead)
	// Resumed whatever happened: a replica left stopped would never be promoted.
	if err := e.cluster.resume(context.WithoutCancel(ctx), replica); err != nil {
		return err
	}
	if killErr == nil {
		e.fault("SIGCONT Redis replica " + replica.addr)
	}
	return cmp.Or(killErr, ctx.Err())
}

// restartReplicaThenKill SIGKILLs the replica, SIGSTOPs its master (which then neither
// acknowledges a write nor feeds the replica), starts the replica again from its AOF,
// and once it answers (its AOF loaded) SIGKILLs the stopped master: the replica goes into
// the election with what its AOF kept, without a resync.
func (e *Env) restartReplicaThenKill(ctx context.Context, dead, replica clusterNode) error {
	wctx := context.WithoutCancel(ctx)
	if err := e.cluster.kill(wctx, replica); err != nil {
		return err
	}
	e.fault("SIGKILL Redis replica " + replica.addr)
	if err := e.cluster.pause(wctx, dead); err != nil {
		return err
	}
	if _, err := e.cluster.run(wctx, "start", e.cluster.dir, port(replica.addr)); err != nil {
		e.cluster.resume(wctx, dead)
		return err
	}
	e.mu.Lock()
	e.report.ReplicaRestarts++
	e.mu.Unlock()
	e.fault(fmt.Sprintf("SIGSTOP Redis master %s; replica %s started again from its AOF and answers", dead.addr, replica.addr))
	// SIGKILL ends a stopped process too.
	return e.cluster.kill(wctx, dead)
}

// progress logs the persisted count every 5 s until done.
func (e *Env) progress(ctx context.Context, done <-chan struct{}) {
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-done:
			return
		case <-t.C:
		}
		var n int64
		err := e.db.WithContext(ctx).Raw(`SELECT count(*) FROM inbox`).Scan(&n).Error
		e.mu.Lock()
		sent := len(e.sent)
		e.mu.Unlock()
		if err != nil {
			e.logf("progress: %d of %d distinct events sent; PostgreSQL unreachable", sent, e.workload.Distinct)
			continue
		}
		e.logf("progress: %d of %d distinct events sent, %d persisted", sent, e.workload.Distinct, n)
	}
}

// quiesce waits until every sent event has its inbox row, both queues are empty
// (in flight and delayed messages included), and no entity holds a turn, a wait list,
// an event in proc or an unpublished outbox, three times in a row half a second apart
// (late duplicates are redelivered and republished in between). It reports whether
// that happened within cfg.QuiesceTimeout.
//
// When events are missing while nothing is in flight anywhere (queues empty, no turn,
// wait list, proc or outbox in Redis) for quiesceIdleGiveUp, it gives up early: those
// events are gone (a failover lost their envelopes) and waiting cannot bring them back.
//
// idle is when the fleet was last seen with nothing left to do (the first of the quiet
// checks, or the start of the idle stretch it gave up after); zero when neither came.
func (e *Env) quiesce(ctx context.Context) (ok bool, idle time.Time) {
	deadline := time.Now().Add(e.cfg.QuiesceTimeout)
	lastLog := time.Now()
	var idleSince, quietSince time.Time
	for quiet := 0; quiet < 3; {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false, time.Time{}
		}
		select {
		case <-ctx.Done():
			return false, time.Time{}
		case <-time.After(500 * time.Millisecond):
		}
		why, missing := e.busy(ctx)
		if why != "" {
			quiet = 0
			if !missing {
				idleSince = time.Time{}
			} else if idleSince.IsZero() {
				idleSince = time.Now()
			} else if time.Since(idleSince) > quiesceIdleGiveUp {
				e.logf("giving up on quiescence: %s, and nothing in flight for %s", why, quiesceIdleGiveUp)
				return false, idleSince
			}
			if time.Since(lastLog) > 10*time.Second {
				e.logf("waiting for quiescence: %s", why)
				lastLog = time.Now()
			}
			continue
		}
		if quiet == 0 {
			quietSince = time.Now()
		}
		idleSince = time.Time{}
		quiet++
	}
	return true, quietSince
}

// busy says what keeps the run from quiescence ("" for nothing); missing is true when
// that is only events without an inbox row, with nothing in flight that could add one.
func (e *Env) busy(ctx context.Context) (why string, missing bool) {
	var n int64
	if err := e.db.WithContext(ctx).Raw(`SELECT count(*) FROM inbox`).Scan(&n).Error; err != nil {
		return "PostgreSQL: " + err.Error(), false
	}
	for _, q := range []string{e.orders.URL, e.results.URL} {
		d, err := e.queueDepth(ctx, q)
		if err != nil {
			return "SQS: " + err.Error(), false
		}
		if d > 0 {
			return fmt.Sprintf("%d messages in %s", d, q), false
		}
	}
	for _, suffix := range []string{"lock", "wait", "proc", "outbox"} {
		k, err := e.anyKey(ctx, suffix)
		if err != nil {
			return "Redis: " + err.Error(), false
		}
		if k != "" {
			return "Redis holds " + k, false
		}
	}
	if int(n) < e.workload.Distinct {
		return fmt.Sprintf("%d of %d events persisted", n, e.workload.Distinct), true
	}
	return "", false
}

// errFound ends a key scan at the first key found.
var errFound = errors.New("chaos: found")

// anyKey returns one key of an entity with the given suffix (a non-empty list for the
// list suffixes), or "". On a cluster it scans every master.
func (e *Env) anyKey(ctx context.Context, suffix string) (string, error) {
	var mu sync.Mutex
	found := ""
	err := keyscan.Each(ctx, e.rc, lockhandoff.Key(KeyPrefix, "*", suffix), "", func(k string) error {
		if suffix != "lock" {
			if n, err := e.rc.LLen(ctx, k).Result(); err != nil || n == 0 {
				return nil //nolint:nilerr // a key gone or unreadable is not the one sought
			}
		}
		mu.Lock()
		found = k
		mu.Unlock()
		return errFound
	})
	if errors.Is(err, errFound) {
		err = nil
	}
	return found, err
}

func round1(f float64) float64 { return math.Round(f*10) / 10 }

// Quiesce waits for quiescence again (after a test changed something on purpose).
func (e *Env) Quiesce(ctx context.Context) bool {
	ok, _ := e.quiesce(ctx)
	return ok
}

// awaitExpiries waits, up to cfg.QuiesceTimeout, until no abandoned order is placed with
// a hold in PostgreSQL any more: the last holds end after the last sending. The checks
// then tell an expiry lost from one still on its way.
func (e *Env) awaitExpiries(ctx context.Context, abandoned []string) {
	deadline := time.Now().Add(e.cfg.QuiesceTimeout)
	for {
		var left int64
		err := e.db.WithContext(ctx).Raw(`SELECT count(*) FROM orders WHERE lcid IN ? AND status = 'placed' AND hold_until IS NOT NULL`, abandoned).Scan(&left).Error
		if err == nil && left == 0 {
			e.logf("every abandoned hold ended")
			return
		}
		if !time.Now().Before(deadline) || ctx.Err() != nil {
			e.logf("%d abandoned holds still placed (%v)", left, err)
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// PickupShareDefault is the share of the orders picked up at the store (Config.Locations).
const PickupShareDefault = 0.15

// Locations are the shop's locations of a run with Config.Locations: two warehouses on
// either coast that ship, and a store that only hands orders over.
func Locations() []stock.Location {
	at := func(lat, lon float64) (*float64, *float64) { return &lat, &lon }
	east, west, store := stock.Location{ID: "wh-east", Kind: stock.LocationWarehouse, Rank: 1, Ships: true, Enabled: true},
		stock.Location{ID: "wh-west", Kind: stock.LocationWarehouse, Rank: 2, Ships: true, Enabled: true},
		stock.Location{ID: "store-sf", Kind: stock.LocationStore, Rank: 3, Pickup: true, Enabled: true}
	east.Lat, east.Lon = at(40.71, -74.01)
	west.Lat, west.Lon = at(34.05, -118.24)
	store.Lat, store.Lon = at(37.77, -122.42)
	return []stock.Location{east, west, store}
}

// registerLocations registers the run's locations as junbanctl locations set does:
// PostgreSQL's table, then the workers' Redis hash.
func (e *Env) registerLocations(ctx context.Context, locs []stock.Location) error {
	for _, l := range locs {
		if err := inventorydb.PutLocation(ctx, e.db, l); err != nil {
			return fmt.Errorf("chaos: register location %s: %w", l.ID, err)
		}
	}
	if len(locs) == 0 {
		return nil
	}
	if err := ledger.PublishLocations(ctx, e.rc, KeyPrefix, locs, false); err != nil {
		return fmt.Errorf("chaos: publish locations: %w", err)
	}
	return nil
}
