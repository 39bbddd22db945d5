package config

import (
	"os"
	"runtime/debug"
)

// GCPercentDefault is the garbage collector's target of the workers when GOGC is not set.
// Their live heap is small and their work allocates a lot (JSON, SQS SDK calls), so
// collecting less often spends less CPU for a few tens of MB more memory
// (docs/performance.md, "Decisions kept").
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
