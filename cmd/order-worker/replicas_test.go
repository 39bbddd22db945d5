package main_test

import (
	"strings"
	"testing"

	"github.com/junban/junban/internal/testenv"
)

// An order-worker whose JUNBAN_REDIS_MIN_REPLICAS its primary can never meet (a primary
// without replicas) exits non-zero at start, before it consumes anything, naming the
// primary and the counts. (Fails without the Monitor wired into openDeps: the worker went
// on to PostgreSQL and SQS; tried.)
func TestWorkerRefusesAReplicaCountItsPrimaryCannotMeet(t *testing.T) {
	t.Parallel()
	primary := testenv.StartRedisServer(t)
	bin := testenv.Binary(t, "order-worker")
	code, stdout, stderr := testenv.Exec(t, bin, []string{
		"REDIS_URL=redis://" + primary.Addr,
		"JUNBAN_REDIS_MIN_REPLICAS=1",
		"DATABASE_URL=postgres://junban@127.0.0.1:1/none?sslmode=disable&connect_timeout=1",
		"AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test", "AWS_EC2_METADATA_DISABLED=true",
		"AWS_ENDPOINT_URL_SQS=http://127.0.0.1:1",
		"JUNBAN_STARTUP_TIMEOUT=1s",
		"JUNBAN_HTTP_ADDR=127.0.0.1:0",
	})
	out := stdout + stderr
	if code == 0 || !strings.Contains(out, "primary "+primary.Addr+" has 0 replicas (0 online), JUNBAN_REDIS_MIN_REPLICAS is 1") {
		t.Fatalf("exit %d, want non-zero naming the primary and the counts:\n%s", code, out)
	}
}
