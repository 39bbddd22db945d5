package config

import (
	"os"
	"runtime"
	"strings"
	"syscall"

	"go.uber.org/zap"
)

// SysmonSetting is the GODEBUG setting the workers run with unless GODEBUG names
// schedtrace itself: a scheduler trace every 2^31-1 ms (24.8 days), which in practice
// never prints, and which keeps the Go runtime's monitor thread (sysmon) out of its deep
// sleep.
//
// Without it, every time a worker has nothing to run (after each event's round trip to
// SQS, Redis or PostgreSQL, at the fleet's usual load) sysmon parks; the next system call
// wakes it, and it then checks the process every 20 us while it runs. In `junbanlab bench
// cost` that monitor thread made most of each worker's context switches and about a sixth
// of its CPU. With the setting it stays awake and slows its checks down to one every 10 ms
// when there is nothing for it to do: the order-workers' context switches an event fell
// from 11-12 to 4.7, the persist-worker's from 4.1 to 1.3, and both workers' CPU an event
// by a fifth (docs/benchmarks.md, "The runtime's monitor thread"). An idle worker pays for
// it with that check every 10 ms.
//
// The trace is measured from the host's boot: on a host up longer than 24.8 days, the
// runtime prints one line of it ("SCHED ...") to standard error when the worker starts,
// and another every 24.8 days. A fatal runtime error also prints the scheduler's state.
const SysmonSetting = "schedtrace=2147483647"

// TuneSysmon makes a worker run with SysmonSetting. The runtime reads GODEBUG's
// schedtrace only when a program starts, so when GODEBUG does not name schedtrace,
// TuneSysmon starts the program again, in place (exec: the same process id, arguments
// and environment, with the setting added to GODEBUG), and does not return. It returns
// nil when no restart is needed (the setting is in force, or GODEBUG names schedtrace
// otherwise: schedtrace=0 turns it off) or on a system other than Linux, and the exec's
// error when it failed (the worker then runs without the setting).
//
// Call it before anything the restart would lose: before a goroutine, a file or a
// connection is opened.
func TuneSysmon() error {
	if runtime.GOOS != "linux" {
		return nil
	}
	env, restart := sysmonEnv(os.Environ())
	if !restart {
		return nil
	}
	// /proc/self/exe is the running binary even when its file was replaced or removed
	// since it started (a deploy); os.Args[0] stays the name it was started by.
	return syscall.Exec("/proc/self/exe", os.Args, env)
}

// sysmonEnv returns environ with SysmonSetting added to GODEBUG, and whether it added
// it: not when GODEBUG names schedtrace already.
func sysmonEnv(environ []string) ([]string, bool) {
	out := make([]string, 0, len(environ)+1)
	godebug, seen := "", false
	for _, kv := range environ {
		if v, ok := strings.CutPrefix(kv, "GODEBUG="); ok {
			if !seen { // the first one, as os.Getenv reads it
				godebug, seen = v, true
			}
			continue
		}
		out = append(out, kv)
	}
	for field := range strings.SplitSeq(godebug, ",") {
		if key, _, _ := strings.Cut(field, "="); strings.TrimSpace(key) == "schedtrace" {
			return environ, false
		}
	}
	if godebug == "" {
		return append(out, "GODEBUG="+SysmonSetting), true
	}
	return append(out, "GODEBUG="+SysmonSetting+","+godebug), true
}

// TuneRuntime applies the workers' settings of the Go runtime, first thing in their run:
// TuneSysmon (which may start the program again in place, and then does not return),
// TuneGC and TuneProcs. It returns TuneSysmon's error, for WarnUntuned once there is a
// logger.
func TuneRuntime() error {
	err := TuneSysmon()
	TuneGC()
	TuneProcs()
	return err
}

// WarnUntuned logs TuneRuntime's error, when there was one: the worker runs on without
// SysmonSetting.
func WarnUntuned(log *zap.Logger, err error) {
	if err != nil {
		log.Warn("running without "+SysmonSetting+" in GODEBUG: the restart failed", zap.Error(err))
	}
}
