package config

import (
	"errors"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

func TestSysmonEnv(t *testing.T) {
	for _, tc := range []struct {
		name    string
		environ []string
		want    []string // nil: left as it is
	}{
		{"no GODEBUG", []string{"A=1", "B=2"}, []string{"A=1", "B=2", "GODEBUG=" + SysmonSetting}},
		{"other settings kept after it", []string{"GODEBUG=madvdontneed=1,gctrace=0", "A=1"},
			[]string{"A=1", "GODEBUG=" + SysmonSetting + ",madvdontneed=1,gctrace=0"}},
		{"empty GODEBUG", []string{"GODEBUG="}, []string{"GODEBUG=" + SysmonSetting}},
		{"the first of two GODEBUGs, as os.Getenv reads it", []string{"GODEBUG=gctrace=0", "GODEBUG=schedtrace=5"},
			[]string{"GODEBUG=" + SysmonSetting + ",gctrace=0"}},
		{"schedtrace named: the operator's", []string{"GODEBUG=gctrace=0,schedtrace=0", "A=1"}, nil},
		{"schedtrace named alone", []string{"GODEBUG=schedtrace=1000"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, restart := sysmonEnv(tc.environ)
			if tc.want == nil {
				if restart || !slices.Equal(got, tc.environ) {
					t.Fatalf("sysmonEnv(%q) = %q, %v; want it unchanged, no restart", tc.environ, got, restart)
				}
				return
			}
			if !restart || !slices.Equal(got, tc.want) {
				t.Fatalf("sysmonEnv(%q) = %q, %v; want %q, restart", tc.environ, got, restart, tc.want)
			}
		})
	}
}

// sysmonChild is set in the environment of the test binary started by
// TestTuneSysmonRestartsInPlace: that process runs TuneSysmon and prints what it runs with.
const sysmonChild = "JUNBAN_TEST_SYSMON_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(sysmonChild) != "" {
		// Each start of the program counts itself in the environment a restart keeps.
		runs, _ := strconv.Atoi(os.Getenv("JUNBAN_TEST_SYSMON_RUNS"))
		os.Setenv("JUNBAN_TEST_SYSMON_RUNS", strconv.Itoa(runs+1))
		if runs == 0 {
			os.Setenv("JUNBAN_TEST_SYSMON_PID", strconv.Itoa(os.Getpid()))
		}
		if err := TuneSysmon(); err != nil {
			os.Stdout.WriteString("error " + err.Error() + "\n")
			os.Exit(1)
		}
		os.Stdout.WriteString("runs " + strconv.Itoa(runs+1) + "\n")
		os.Stdout.WriteString("pid " + os.Getenv("JUNBAN_TEST_SYSMON_PID") + " " + strconv.Itoa(os.Getpid()) + "\n")
		os.Stdout.WriteString("GODEBUG " + os.Getenv("GODEBUG") + "\n")
		os.Stdout.WriteString("args " + strings.Join(os.Args[1:], " ") + "\n")
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// A program that calls TuneSysmon without the setting starts again in place (the same
// process id and arguments) with it in GODEBUG, the operator's settings kept; one whose
// GODEBUG names schedtrace runs on as it is. Fails against a TuneSysmon that only sets
// the variable (the runtime reads it at start: one run, not two) or that restarts without
// it (it would restart for ever).
func TestTuneSysmonRestartsInPlace(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("TuneSysmon restarts on Linux only")
	}
	child := func(godebug string) map[string]string {
		t.Helper()
		cmd := exec.Command(os.Args[0], "-test.run=^$", "extra-arg")
		cmd.Env = append(slices.DeleteFunc(os.Environ(), func(kv string) bool {
			return strings.HasPrefix(kv, "GODEBUG=") || strings.HasPrefix(kv, "JUNBAN_TEST_SYSMON_")
		}), sysmonChild+"=1")
		if godebug != "" {
			cmd.Env = append(cmd.Env, "GODEBUG="+godebug)
		}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("child: %v\n%s", err, out)
		}
		got := map[string]string{}
		for line := range strings.Lines(string(out)) {
			k, v, _ := strings.Cut(strings.TrimSpace(line), " ")
			got[k] = v
		}
		return got
	}

	got := child("gctrace=0")
	if got["runs"] != "2" {
		t.Fatalf("the program ran %s times, want 2: started, then once more in place", got["runs"])
	}
	if want := SysmonSetting + ",gctrace=0"; got["GODEBUG"] != want {
		t.Fatalf("GODEBUG after TuneSysmon %q, want %q", got["GODEBUG"], want)
	}
	before, after, _ := strings.Cut(got["pid"], " ")
	if before == "" || before != after {
		t.Fatalf("process id before and after the restart: %q, want one and the same", got["pid"])
	}
	if got["args"] != "-test.run=^$ extra-arg" {
		t.Fatalf("arguments after the restart %q, want the first run's", got["args"])
	}

	if got := child("schedtrace=0"); got["GODEBUG"] != "schedtrace=0" || got["runs"] != "1" {
		t.Fatalf("GODEBUG %q after %s runs, want the operator's schedtrace=0 left as it is, no restart", got["GODEBUG"], got["runs"])
	}
}

// WarnUntuned warns about a failed restart, naming the setting and the error, and says
// nothing when there was none.
func TestWarnUntuned(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	WarnUntuned(zap.New(core), nil)
	if logs.Len() != 0 {
		t.Fatalf("logged %v for no error", logs.All())
	}
	WarnUntuned(zap.New(core), errors.New("exec: permission denied"))
	all := logs.All()
	if len(all) != 1 || all[0].Level != zap.WarnLevel || !strings.Contains(all[0].Message, SysmonSetting) ||
		all[0].ContextMap()["error"] != "exec: permission denied" {
		t.Fatalf("logged %+v, want one warning naming %s and the error", all, SysmonSetting)
	}
}
