package config

import (
	"os"
	"runtime"
	"runtime/debug"
	"testing"
)

func TestTuneGC(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))

	t.Run("GOGC unset: the workers' default", func(t *testing.T) {
		unsetenv(t, "GOGC")
		debug.SetGCPercent(100)
		if got := TuneGC(); got != GCPercentDefault {
			t.Fatalf("TuneGC() = %d, want %d", got, GCPercentDefault)
		}
		if got := debug.SetGCPercent(GCPercentDefault); got != GCPercentDefault {
			t.Fatalf("GC percent %d after TuneGC, want %d", got, GCPercentDefault)
		}
	})
	t.Run("GOGC set: left to the runtime", func(t *testing.T) {
		t.Setenv("GOGC", "150")
		debug.SetGCPercent(150) // what the runtime read at start
		if got := TuneGC(); got != 150 {
			t.Fatalf("TuneGC() = %d, want the operator's 150", got)
		}
		if got := debug.SetGCPercent(150); got != 150 {
			t.Fatalf("GC percent %d after TuneGC, want 150", got)
		}
	})
}

// unsetenv removes key for the test and restores it afterwards.
func unsetenv(t *testing.T, key string) {
	t.Helper()
	t.Setenv(key, "") // registers the restore
	if err := os.Unsetenv(key); err != nil {
		t.Fatal(err)
	}
}

func TestTuneProcs(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))

	t.Run("GOMAXPROCS unset: the workers' default", func(t *testing.T) {
		unsetenv(t, "GOMAXPROCS")
		runtime.GOMAXPROCS(4)
		if got := TuneProcs(); got != ProcsDefault {
			t.Fatalf("TuneProcs() = %d, want %d", got, ProcsDefault)
		}
		if got := runtime.GOMAXPROCS(0); got != ProcsDefault {
			t.Fatalf("GOMAXPROCS %d after TuneProcs, want %d", got, ProcsDefault)
		}
	})
	t.Run("GOMAXPROCS set: left to the runtime", func(t *testing.T) {
		t.Setenv("GOMAXPROCS", "3")
		runtime.GOMAXPROCS(3) // what the runtime read at start
		if got := TuneProcs(); got != 3 {
			t.Fatalf("TuneProcs() = %d, want the operator's 3", got)
		}
		if got := runtime.GOMAXPROCS(0); got != 3 {
			t.Fatalf("GOMAXPROCS %d after TuneProcs, want 3", got)
		}
	})
}
