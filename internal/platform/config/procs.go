package config

import (
	"os"
	"runtime"
)

// ProcsDefault is how many processors (GOMAXPROCS) the workers run Go code on when
// GOMAXPROCS is not set: one. A worker waits on SQS, Redis and PostgreSQL nearly all the
// time, so a second processor adds little but wake-ups (docs/performance.md, "Decisions
// kept"). A fleet grows by replicas, one core each (docs/runbooks/scaling.md, "Capacity"), as the
// Kubernetes manifests' 1-CPU limit has it; Go's own default there would be 2.
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
