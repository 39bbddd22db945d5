package chaos_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/junban/junban/internal/testenv"
	"github.com/junban/junban/tools/chaos"
)

// TestChaosRedisFailover is the CI version of `junbanlab chaos --redis-cluster`: 2,000
// events with 20% duplicates and 5% abandoned checkouts (holds of 3 s, each to expire
// once, the victim the master with the most due entries) over 15 s on a Redis Cluster of three masters with a
// replica each, an order-worker SIGKILLed once and, at half time, one master SIGKILLed
// a second after its replica was stopped and its replication link cut (the replica
// lacks what the master acknowledged last), then promoted by the cluster. With
// JUNBAN_REDIS_MIN_REPLICAS=1 nothing acknowledged may be lost: every check must hold.
//
// An order-worker that does not read JUNBAN_REDIS_MIN_REPLICAS acknowledges without
// waiting for the replica, and the checks find what the failover lost: the test then
// asserts the failover only, logs the findings and skips the rest.
//
// It also holds the order of each order's events across the failover: a step moves no
// stock before its order's primary had its place in the turn acknowledged, nor acts on a
// refusal its SKU's primary had not. Without that, about one run in three broke a lot's
// holdings (an event whose take the killed master never replicated came back from SQS
// behind its order's later events, and its remembered ledger operations answered as done
// against an order that had moved on), and an order.shipped was left parked.
func TestChaosRedisFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("the failover scenario takes about a minute")
	}
	needServers(t)
	for _, b := range []string{"redis-cli", "python3"} {
		if _, err := exec.LookPath(b); err != nil {
			skip := t.Skipf
			if os.Getenv("CI") != "" {
				skip = t.Fatalf
			}
			skip("the Redis Cluster scenario needs %s: %v", b, err)
		}
	}
	sqsCfg := testenv.SQSConfig(t)
	var childEnv []string
	for _, kv := range testenv.Env(t) {
		if strings.HasPrefix(kv, "AWS_ACCESS_KEY_ID=") || strings.HasPrefix(kv, "AWS_SECRET_ACCESS_KEY=") {
			childEnv = append(childEnv, kv)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	rep, err := chaos.Run(ctx, chaos.Config{
		Events:           2000,
		AbandonedShare:   0.05,
		SendDuration:     15 * time.Second,
		OrderWorkerKills: 1,
		RedisCluster:     true,
		MasterKills:      1,
		MinRedisReplicas: 1,
		QuiesceTimeout:   90 * time.Second,
		SQS:              sqsCfg,
		ChildEnv:         childEnv,
		Progress:         logWriter{t},
	})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	rep.Print(&buf)
	t.Log("\n" + buf.String())
	if rep.Events < 2000 || rep.Kills != 1 || rep.RedisMasterKills != 1 || rep.RedisFailovers != 1 || rep.ReplicaLagS != 1 || rep.Abandoned == 0 {
		t.Errorf("faults: events %d, worker kills %d, master kills %d, failovers %d, replica lag %.1fs, abandoned orders %d; want >=2000, 1, 1, 1, 1s, some",
			rep.Events, rep.Kills, rep.RedisMasterKills, rep.RedisFailovers, rep.ReplicaLagS, rep.Abandoned)
	}
	js, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(js, []byte(`{"events":`)) || !bytes.Contains(js, []byte(`,"conserved":`)) || !bytes.Contains(js, []byte(`,"redis_failovers":1,`)) {
		t.Errorf("--json lacks the contract's keys: %.300s", js)
	}
	if !rep.MinRedisReplicasKnown {
		t.Skipf("order-worker does not read JUNBAN_REDIS_MIN_REPLICAS: the findings above are reported, not asserted (%s)",
			strings.Join(rep.Problems(), "; "))
	}
	if !rep.OK() {
		t.Fatalf("a failover with JUNBAN_REDIS_MIN_REPLICAS=1 broke invariants: %s", strings.Join(rep.Problems(), "; "))
	}
}

// TestChaosFailoverCutsAndAOFRestart is the CI version of `junbanlab chaos --redis-cluster
// --cut-connections --replica-restart`: the workers reach every node through a proxy that
// resets all their connections every 3 s, and before the master kill the victim's replica
// is SIGKILLed, its master SIGSTOPped and the replica started again from its AOF, which the
// cluster then promotes. With JUNBAN_REDIS_MIN_REPLICAS=1 every check must hold. The same
// scenario at JUNBAN_REDIS_MIN_REPLICAS=0 (seed 1, 1,513 events) broke them: 19 double
// applications, 2 drifts, 16 lot findings.
func TestChaosFailoverCutsAndAOFRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("the failover scenario takes about a minute")
	}
	needServers(t)
	for _, b := range []string{"redis-cli", "python3"} {
		if _, err := exec.LookPath(b); err != nil {
			t.Skipf("the Redis Cluster scenario needs %s: %v", b, err)
		}
	}
	var childEnv []string
	for _, kv := range testenv.Env(t) {
		if strings.HasPrefix(kv, "AWS_ACCESS_KEY_ID=") || strings.HasPrefix(kv, "AWS_SECRET_ACCESS_KEY=") {
			childEnv = append(childEnv, kv)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	rep, err := chaos.Run(ctx, chaos.Config{
		Events:           1500,
		AbandonedShare:   0.05,
		SendDuration:     15 * time.Second,
		OrderWorkerKills: 1,
		RedisCluster:     true,
		MinRedisReplicas: 1,
		ReplicaRestart:   true,
		CutConnections:   true,
		QuiesceTimeout:   90 * time.Second,
		SQS:              testenv.SQSConfig(t),
		ChildEnv:         childEnv,
		Progress:         logWriter{t},
	})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	rep.Print(&buf)
	t.Log("\n" + buf.String())
	if rep.ReplicaRestarts != 1 || rep.RedisFailovers != 1 || rep.ConnectionCuts == 0 || rep.ConnectionsCut == 0 || rep.Abandoned == 0 {
		t.Errorf("faults: replica restarts %d, failovers %d, cuts %d (%d connections), abandoned orders %d; want 1, 1, some, some, some",
			rep.ReplicaRestarts, rep.RedisFailovers, rep.ConnectionCuts, rep.ConnectionsCut, rep.Abandoned)
	}
	if !rep.MinRedisReplicasKnown {
		t.Skip("order-worker does not read JUNBAN_REDIS_MIN_REPLICAS")
	}
	if !rep.OK() {
		t.Fatalf("seed %d: %s", rep.Seed, strings.Join(rep.Problems(), "; "))
	}
}
