package config

import (
	"os"
	"runtime"
)

// ProcsDefault is how many processors (GOMAXPROCS) the workers run Go code on when
// GOMAXPROCS is not set: one. A worker waits on SQS, Redis and PostgreSQL nearly all the
// time and spends well under a millisecond of CPU an event, so a second processor adds
// little but wake-ups: each goroutine made ready wakes an idle thread to run it. With one,
// `junbanlab bench cost` counted a third fewer context switches an event and the workers'
// CPU an event fell by 14-15 % in a before-and-after, latency unchanged (docs/benchmarks.md,
// "One processor per worker"). A fleet grows by replicas, one core each (docs/operations.md, "Capacity"), as
// the Kubernetes manifests' 1-CPU limit has it; Go's own default there would be 2, as it
// never goes below 2 for a CPU limit.
const ProcsDefault = 1

// TuneProcs sets GOMAXPROCS to ProcsDefault unless the GOMAXPROCS environment variable is
// set (the runtime reads that one itself). It returns the value in force.
func TuneProcs() int {
	if _, set := os.LookupEnv("GOMAXPROCS"); set {
		return runtime.GOMAXPROCS(0)
	}
	runtime.GOMAXPROCS(ProcsDefault)
	return ProcsDefault
}
