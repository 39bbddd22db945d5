package chaos

import (
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/testenv/outboundcheck"
)

// consistent is the state after two events of one order, each applied once: LC-1 placed
// in reserve mode with 3 units of SKU-A lot L1 (of 10), then paid.
func consistent() snapshot {
	k := lotKey{"SKU-A", "L1"}
	o := &event.OrderSnapshot{LCID: "LC-1", Status: event.StatusPlaced, Allocation: "reserved", Paid: true,
		Lines: []event.SnapshotLine{{LineID: "1", SKU: "SKU-A", Qty: 3, Lots: []stock.LotQty{{LotID: "L1", Qty: 3}}}}}
	return snapshot{
		imported:    map[lotKey]buckets{k: {10, 0, 0, 0, 0}},
		redisLots:   map[lotKey]buckets{k: {7, 3, 0, 0, 0}},
		pgLots:      map[lotKey]buckets{k: {7, 3, 0, 0, 0}},
		moved:       map[lotKey]buckets{k: {-3, 3, 0, 0, 0}},
		redisOrders: map[string]orderState{"LC-1": {Seq: 2, Order: o}},
		pgOrders:    map[string]orderState{"LC-1": {Seq: 2, Order: o}},
		inbox:       map[string][]int64{"LC-1": {2, 1}},
		sent:        []string{"e1", "e2"},
		persisted:   map[string]bool{"e1": true, "e2": true},
	}
}

func clone(s snapshot) snapshot {
	s.imported, s.redisLots, s.pgLots, s.moved = maps.Clone(s.imported), maps.Clone(s.redisLots), maps.Clone(s.pgLots), maps.Clone(s.moved)
	s.external, s.transit, s.location = maps.Clone(s.external), maps.Clone(s.transit), maps.Clone(s.location)
	s.redisOrders, s.pgOrders, s.persisted = maps.Clone(s.redisOrders), maps.Clone(s.pgOrders), maps.Clone(s.persisted)
	s.inbox = maps.Clone(s.inbox)
	return s
}

func TestCheckConsistent(t *testing.T) {
	f := check(consistent())
	if n := len(f.Lost) + f.doubleApplied() + len(f.Unconserved) + len(f.Oversold); n != 0 {
		t.Fatalf("findings on a consistent state: %+v", f)
	}
}

// warehouse is consistent() after the warehouse's events and a return, each applied
// once: lot L2 registered with 5 units (external -> sellable), 1 unit of L1 found
// damaged (sellable -> defective), and LC-2, which shipped 2 units of L1, had 1 back
// broken (shipped -> defective).
func warehouse() snapshot {
	s := clone(consistent())
	k1, k2 := lotKey{"SKU-A", "L1"}, lotKey{"SKU-A", "L2"}
	s.imported[k1] = buckets{12, 0, 0, 0, 0, 0}
	for _, lots := range []map[lotKey]buckets{s.redisLots, s.pgLots} {
		lots[k1] = buckets{6, 3, 0, 0, 1, 2}
		lots[k2] = buckets{5, 0, 0, 0, 0, 0}
	}
	s.moved[k1] = buckets{-6, 3, 0, 0, 1, 2}
	s.moved[k2] = buckets{5, 0, 0, 0, 0, 0}
	s.external = map[lotKey]int64{k2: 5}
	o := &event.OrderSnapshot{LCID: "LC-2", Status: event.StatusShipped, Allocation: "allocated", Paid: true,
		Lines: []event.SnapshotLine{{LineID: "1", SKU: "SKU-A", Qty: 2, Lots: []stock.LotQty{{LotID: "L1", Qty: 2}},
			Returned: []stock.LotQty{{LotID: "L1", Qty: 1}}}}}
	s.redisOrders["LC-2"] = orderState{Seq: 4, Order: o}
	s.pgOrders["LC-2"] = orderState{Seq: 4, Order: o}
	s.inbox["LC-2"] = []int64{1, 2, 3, 4}
	return s
}

func TestCheckConsistentWithTheWarehouse(t *testing.T) {
	f := check(warehouse())
	if n := len(f.Lost) + f.doubleApplied() + len(f.Unconserved) + len(f.Oversold); n != 0 {
		t.Fatalf("findings on a consistent state: %+v", f)
	}
	// The registered lot without its move from outside: stock from nowhere.
	s := warehouse()
	delete(s.external, lotKey{"SKU-A", "L2"})
	if f := check(s); len(f.Unconserved) != 2 { // one per store
		t.Errorf("a lot that grew from nowhere went unnoticed: %+v", f)
	}
	// A defective unit that vanished from one store.
	s = warehouse()
	s.pgLots[lotKey{"SKU-A", "L1"}] = buckets{6, 3, 0, 0, 1, 1}
	if f := check(s); len(f.Unconserved) == 0 || !strings.HasPrefix(f.Unconserved[0], "postgres ") {
		t.Errorf("a lost defective unit went unnoticed: %+v", f)
	}
	// A return applied twice: one more unit left shipped than the order records.
	s = warehouse()
	for _, lots := range []map[lotKey]buckets{s.redisLots, s.pgLots} {
		lots[lotKey{"SKU-A", "L1"}] = buckets{6, 3, 0, 0, 0, 3}
	}
	s.moved[lotKey{"SKU-A", "L1"}] = buckets{-6, 3, 0, 0, 0, 3}
	if f := check(s); len(f.HoldingMismatch) != 2 {
		t.Errorf("a return applied twice went unnoticed: %+v", f)
	}
}

// Each broken variant is what one kind of failure leaves behind; the checks must name it.
func TestCheckBrokenVariants(t *testing.T) {
	k := lotKey{"SKU-A", "L1"}
	for _, tc := range []struct {
		name   string
		break_ func(*snapshot)
		want   func(findings) bool
	}{
		{
			// A zombie re-ran order.placed with a fresh op id: the ledger moved 3 more units
			// and the result reached PostgreSQL, so every store and the moves agree with
			// each other; only the orders' holdings show it.
			name: "allocation applied twice under a new op id",
			break_: func(s *snapshot) {
				s.redisLots[k] = buckets{4, 6, 0, 0, 0}
				s.pgLots[k] = buckets{4, 6, 0, 0, 0}
				s.moved[k] = buckets{-6, 6, 0, 0, 0}
			},
			want: func(f findings) bool {
				return len(f.HoldingMismatch) == 2 && len(f.Unconserved) == 0 && f.doubleApplied() > 0
			},
		},
		{
			// The event's done marker was gone: it was processed again in a later turn and
			// took seq 3, while the inbox kept its first result.
			name:   "event processed twice in the turn",
			break_: func(s *snapshot) { s.redisOrders["LC-1"] = orderState{Seq: 3, Order: s.redisOrders["LC-1"].Order} },
			want:   func(f findings) bool { return len(f.SeqBroken) == 1 && f.doubleApplied() == 1 },
		},
		{
			// The ledger moved twice under the same op id (its op-id memory lost); the
			// moves table kept one of them by its primary key.
			name: "ledger move repeated under the same op id",
			break_: func(s *snapshot) {
				s.redisLots[k] = buckets{4, 6, 0, 0, 0}
			},
			want: func(f findings) bool {
				return len(f.Unconserved) > 0 && len(f.HoldingMismatch) == 1 && strings.HasPrefix(f.HoldingMismatch[0], "redis ")
			},
		},
		{
			name: "result lost on the way to PostgreSQL",
			break_: func(s *snapshot) {
				delete(s.persisted, "e2")
				s.inbox["LC-1"] = []int64{1}
			},
			want: func(f findings) bool { return len(f.Lost) == 1 && len(f.SeqBroken) == 1 },
		},
		{
			name: "oversold",
			break_: func(s *snapshot) {
				s.redisLots[k] = buckets{-1, 11, 0, 0, 0}
			},
			want: func(f findings) bool { return len(f.Oversold) == 1 && len(f.Unconserved) > 0 },
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := clone(consistent())
			tc.break_(&s)
			if f := check(s); !tc.want(f) {
				t.Fatalf("the checks missed it: %+v", f)
			}
		})
	}
}

func TestParseClusterNodes(t *testing.T) {
	// A failover seen from a surviving node: b (a replica of a) now master of a's slots,
	// a failed, and one slot being migrated on c.
	const s = `aaa 127.0.0.1:7000@17000 master,fail - 1 2 1 disconnected
bbb 127.0.0.1:7003@17003 myself,master - 0 0 7 connected 0-5460
ccc 127.0.0.1:7001@17001 master - 0 3 2 connected 5461-10922 16000 [10923->-ddd]
ddd 127.0.0.1:7002@17002 slave ccc 0 4 2 connected
`
	nodes, err := parseClusterNodes(s)
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 4 {
		t.Fatalf("%d nodes, want 4", len(nodes))
	}
	a, b, c, d := nodes[0], nodes[1], nodes[2], nodes[3]
	if !a.master || !a.failing || a.linked || len(a.slots) != 0 {
		t.Errorf("a: %+v", a)
	}
	if !b.master || b.failing || !b.linked || b.slotsString() != "0-5460" || b.addr != "127.0.0.1:7003" || !b.owns(0) || b.owns(5461) {
		t.Errorf("b: %+v", b)
	}
	if c.slotsString() != "5461-10922,16000" || !c.owns(16000) {
		t.Errorf("c: %+v", c)
	}
	if d.master || d.masterID != "ccc" {
		t.Errorf("d: %+v", d)
	}
	if _, err := parseClusterNodes("aaa 127.0.0.1:7000@17000 master - 0 0 1 connected x-y\n"); err == nil {
		t.Error("bad slots accepted")
	}
}

// The asserted run and its baseline, side by side: a column each, in order.
func TestPrintSideBySide(t *testing.T) {
	base := Report{RedisCluster: true, Events: 100, Lost: 3, DoubleApplied: 5, Drift: 2, RedisMasterKills: 1, RedisFailovers: 1, FailoverS: []float64{3.4}, Quiesced: false}
	asserted := Report{RedisCluster: true, Events: 100, MinRedisReplicas: 1, MinRedisReplicasKnown: true, RedisMasterKills: 1, RedisFailovers: 1, Conserved: true, Quiesced: true}
	asserted.Baseline = &base
	var b strings.Builder
	asserted.Print(&b)
	out := b.String()
	for _, want := range []string{
		"run 1 of 2", "run 2 of 2",
		"JUNBAN_REDIS_MIN_REPLICAS      0",
		"events lost                    3", "events applied twice           5", "Redis-PostgreSQL drift         2",
		"failover time                  3.4 s",
		"verdict                        FAILED",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	if !asserted.OK() || base.OK() {
		t.Errorf("OK: asserted %v, baseline %v", asserted.OK(), base.OK())
	}
	// A cluster run without its failover proves nothing.
	asserted.RedisFailovers = 0
	if asserted.OK() {
		t.Error("a master kill without a failover passed")
	}
}

// The outbound check is part of the verdict: a run whose subscriber missed a message fails
// and says so; copies alone do not fail it; a run without SNS has none and prints it off.
func TestReportOutbound(t *testing.T) {
	r := Report{Conserved: true, Quiesced: true, Outbound: &outboundcheck.Report{Received: 12, Distinct: 10, Rows: 10,
		Duplicates: outboundcheck.Finding{Count: 2, Sample: []string{"a x3"}}}}
	if !r.OK() {
		t.Fatalf("copies alone failed the run: %q", r.Problems())
	}
	r.Outbound.Missing = outboundcheck.Finding{Count: 1, Sample: []string{"LC-1#2 id (published)"}}
	var b strings.Builder
	r.Print(&b)
	if r.OK() || len(r.Problems()) != 1 || !strings.HasPrefix(r.Problems()[0], "outbound: 1 missing") ||
		!regexp.MustCompile(`outbound: missing / unknown / gaps / invalid\s+1 / 0 / 0 / 0\s+FAIL`).MatchString(b.String()) {
		t.Fatalf("a missing message: OK %v, problems %q\n%s", r.OK(), r.Problems(), b.String())
	}
	r.Outbound = nil
	b.Reset()
	r.Print(&b)
	if !r.OK() || !regexp.MustCompile(`outbound\s+off \(no SNS\)`).MatchString(b.String()) {
		t.Fatalf("without SNS: OK %v\n%s", r.OK(), b.String())
	}
}

// expiring is consistent() with two abandoned orders: LC-A expired once (its expiry
// applied, the units released), LC-B placed with a hold that ends after the check.
func expiring() snapshot {
	s := clone(consistent())
	s.at = time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	later := s.at.Add(time.Minute)
	s.abandoned = []string{"LC-A", "LC-B"}
	s.pgOrders["LC-A"] = orderState{Seq: 2, Order: &event.OrderSnapshot{LCID: "LC-A", Status: event.StatusExpired}}
	s.pgOrders["LC-B"] = orderState{Seq: 1, Order: &event.OrderSnapshot{LCID: "LC-B", Status: event.StatusPlaced, HoldUntil: &later}}
	s.expiries = map[string]int{"LC-A": 1}
	return s
}

// No order expires twice, none is lost: an abandoned order still placed past its hold
// and the grace, or placed without its hold, is an expiry lost; one whose hold ended
// within the grace is on its way; an order with two applied expiries expired twice; a
// refused abandoned order (a shortage) needs no expiry.
func TestCheckExpiries(t *testing.T) {
	if f := check(expiring()); len(f.ExpiredTwice)+len(f.Unexpired) != 0 {
		t.Fatalf("findings on a consistent state: %+v", f)
	}
	cases := []struct {
		name          string
		edit          func(s *snapshot)
		twice, unexp  int
		detailPattern string
	}{
		{"expired twice", func(s *snapshot) { s.expiries["LC-A"] = 2 }, 1, 0, `^LC-A: expired 2 times$`},
		{"hold passed long ago", func(s *snapshot) {
			h := s.at.Add(-expiryGrace - time.Second)
			s.pgOrders["LC-B"].Order.HoldUntil = &h
		}, 0, 1, `^LC-B: placed, its hold ended 16s before the check$`},
		{"hold passed within the grace", func(s *snapshot) {
			h := s.at.Add(-time.Second)
			s.pgOrders["LC-B"].Order.HoldUntil = &h
		}, 0, 0, ""},
		{"hold missing", func(s *snapshot) { s.pgOrders["LC-B"].Order.HoldUntil = nil }, 0, 1, `^LC-B: placed without its hold$`},
		{"refused", func(s *snapshot) {
			s.pgOrders["LC-B"] = orderState{Seq: 1, Order: &event.OrderSnapshot{LCID: "LC-B", Status: event.StatusRejected}}
		}, 0, 0, ""},
		{"never persisted", func(s *snapshot) { delete(s.pgOrders, "LC-B") }, 0, 0, ""},
	}
	for _, c := range cases {
		s := expiring()
		// The orders are shared with expiring()'s maps: give LC-B a snapshot of its own.
		b := *s.pgOrders["LC-B"].Order
		s.pgOrders["LC-B"] = orderState{Seq: 1, Order: &b}
		c.edit(&s)
		f := check(s)
		if len(f.ExpiredTwice) != c.twice || len(f.Unexpired) != c.unexp {
			t.Errorf("%s: twice %q, unexpired %q; want %d and %d", c.name, f.ExpiredTwice, f.Unexpired, c.twice, c.unexp)
			continue
		}
		if c.detailPattern != "" {
			got := strings.Join(append(f.ExpiredTwice, f.Unexpired...), "\n")
			if !regexp.MustCompile(c.detailPattern).MatchString(got) {
				t.Errorf("%s: %q does not match %s", c.name, got, c.detailPattern)
			}
		}
	}
	r := Report{Conserved: true, Quiesced: true, ExpiredTwice: 1}
	if r.OK() || !strings.Contains(strings.Join(r.Problems(), ";"), "1 orders expired twice") {
		t.Errorf("a report with an order expired twice: OK %v, %q", r.OK(), r.Problems())
	}
	r = Report{Conserved: true, Quiesced: true, ExpiriesLost: 2}
	if r.OK() || !strings.Contains(strings.Join(r.Problems(), ";"), "2 abandoned orders not expired") {
		t.Errorf("a report with lost expiries: OK %v, %q", r.OK(), r.Problems())
	}
}

// transferred is consistent() after a transfer of 2 units of L1 (at wh-east) to wh-west
// (transit lot TR1~L1, received there), from which LC-3 then reserved 1.
func transferred() snapshot {
	s := clone(consistent())
	k1, kt := lotKey{"SKU-A", "L1"}, lotKey{"SKU-A", "TR1~L1"}
	s.location = map[lotKey]string{k1: "wh-east", kt: "wh-west"}
	for _, lots := range []map[lotKey]buckets{s.redisLots, s.pgLots} {
		lots[k1] = buckets{5, 3, 0, 0, 0, 0}
		lots[kt] = buckets{1, 1, 0, 0, 0, 0}
	}
	s.moved[k1] = buckets{-5, 3, 0, 0, 0, 0}
	s.moved[kt] = buckets{1, 1, 0, 0, 0, 0}
	s.transit = map[lotKey]int64{k1: -2, kt: 2}
	o := &event.OrderSnapshot{LCID: "LC-3", Status: event.StatusPlaced, Allocation: "reserved",
		Lines: []event.SnapshotLine{{LineID: "1", SKU: "SKU-A", Qty: 1, Lots: []stock.LotQty{{LotID: "TR1~L1", Qty: 1}}}}}
	s.redisOrders["LC-3"] = orderState{Seq: 1, Order: o}
	s.pgOrders["LC-3"] = orderState{Seq: 1, Order: o}
	s.inbox["LC-3"] = []int64{1}
	return s
}

// TestCheckTransfers: a transfer moves units between lots of one SKU, so each lot is
// conserved with its transfer moves and the SKU's transfer moves net to zero; and no
// location holds more than came in there.
func TestCheckTransfers(t *testing.T) {
	f := check(transferred())
	if n := len(f.Lost) + f.doubleApplied() + len(f.Unconserved) + len(f.Oversold) + len(f.OversoldLocations); n != 0 {
		t.Fatalf("findings on a consistent state: %+v", f)
	}
	if len(f.Locations) != 2 || f.Locations[0].Location != "wh-east" || f.Locations[0].TransferredOut != 2 ||
		f.Locations[1].TransferredIn != 2 || f.Locations[1].In != 2 || f.Locations[1].Held != 1 {
		t.Errorf("figures per location %+v", f.Locations)
	}
	// The transit lot's side of the transfer without the source's: units from nowhere.
	s := transferred()
	s.transit[lotKey{"SKU-A", "L1"}] = 0
	for _, lots := range []map[lotKey]buckets{s.redisLots, s.pgLots} {
		lots[lotKey{"SKU-A", "L1"}] = buckets{7, 3, 0, 0, 0, 0}
	}
	s.moved[lotKey{"SKU-A", "L1"}] = buckets{-3, 3, 0, 0, 0, 0}
	if f := check(s); !slices.ContainsFunc(f.Unconserved, func(u string) bool { return strings.Contains(u, "transfer moves net +2") }) {
		t.Errorf("a transfer that made units went unnoticed: %+v", f.Unconserved)
	}
	// An allocation past wh-west's sellable (a bucket below zero): LC-3 holds 3 of the 2
	// that came in there.
	s = transferred()
	for _, lots := range []map[lotKey]buckets{s.redisLots, s.pgLots} {
		lots[lotKey{"SKU-A", "TR1~L1"}] = buckets{-1, 3, 0, 0, 0, 0}
	}
	s.moved[lotKey{"SKU-A", "TR1~L1"}] = buckets{-1, 3, 0, 0, 0, 0}
	o := *s.pgOrders["LC-3"].Order
	o.Lines = []event.SnapshotLine{{LineID: "1", SKU: "SKU-A", Qty: 3, Lots: []stock.LotQty{{LotID: "TR1~L1", Qty: 3}}}}
	s.redisOrders["LC-3"] = orderState{Seq: 1, Order: &o}
	s.pgOrders["LC-3"] = orderState{Seq: 1, Order: &o}
	f = check(s)
	if len(f.OversoldLocations) != 2 || !strings.Contains(f.OversoldLocations[0], "wh-west: 3 held or shipped of 2") {
		t.Errorf("an oversold location went unnoticed: %+v", f)
	}
}
