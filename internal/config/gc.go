package config

import (
	"os"
	"runtime/debug"
)

// GCPercentDefault is the garbage collector's target of the workers when GOGC is not set.
// Their live heap is small (tens of MB) and their work allocates a lot (JSON, SQS SDK
// calls), so collecting when the heap has grown by 4x its live size instead of 1x spends
// less CPU on marking for a few tens of MB more memory: in `junbanlab bench persist` the
// batched path gained about 20 % throughput (docs/benchmarks.md, "GC target of the workers").
const GCPercentDefault = 400

// TuneGC sets the garbage collector's target to GCPercentDefault unless the GOGC
// environment variable is set (the runtime reads that one itself). It returns the target
// in force.
func TuneGC() int {
	if _, set := os.LookupEnv("GOGC"); set {
		cur := debug.SetGCPercent(100)
		debug.SetGCPercent(cur)
		return cur
	}
	debug.SetGCPercent(GCPercentDefault)
	return GCPercentDefault
}
