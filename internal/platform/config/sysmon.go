package config

import (
	"os"
	"runtime"
	"strings"
	"syscall"

	"go.uber.org/zap"
)

// SysmonSetting is the GODEBUG setting the workers run with unless GODEBUG names
// schedtrace itself: a scheduler trace every 2^31-1 ms (24.8 days), which keeps the Go
// runtime's monitor thread (sysmon) awake instead of parking at every wait and waking at
// the next system call; an idle worker pays a check every 10 ms. On a host up longer than
// 24.8 days the runtime prints one "SCHED ..." line to standard error at start. Measured
// in docs/performance.md ("Decisions kept").
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
