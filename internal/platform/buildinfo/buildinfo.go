// Package buildinfo says which build of junban is running: the version `git describe`
// gave at link time, the commit, and the Go toolchain. Every binary prints it for
// --version and serves it as the gauge junban_build_info.
//
// A release build sets the version and the revision with the linker:
//
//	go build -ldflags "-X github.com/junban/junban/internal/platform/buildinfo.version=$(git describe --tags --always --dirty) \
//	  -X github.com/junban/junban/internal/platform/buildinfo.revision=$(git rev-parse HEAD)" ./cmd/order-worker
//
// Without them (go build, go run, go install) Read falls back to what the Go toolchain
// stamped in the binary (debug.ReadBuildInfo): the module's version, or "devel", and the
// VCS revision when the build ran in a git checkout.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

// Set by the linker (-ldflags -X); empty in a plain go build.
var (
	version  string
	revision string
)

// Devel is the version of a build that neither the linker nor the module system named.
const Devel = "devel"

// Info is what identifies a build.
type Info struct {
	// Version is a semantic version with a leading v (v0.8.0), a `git describe` past a
	// tag (v0.8.0-3-g1a2b3c4, -dirty for uncommitted changes), or Devel.
	Version string
	// Revision is the commit the binary was built from; empty when unknown.
	Revision string
	// GoVersion is the toolchain that built it (go1.26.0).
	GoVersion string
}

// Read returns the running binary's build information.
func Read() Info {
	return read(version, revision, debug.ReadBuildInfo)
}

func read(version, revision string, fromBinary func() (*debug.BuildInfo, bool)) Info {
	i := Info{Version: version, Revision: revision, GoVersion: runtime.Version()}
	bi, ok := fromBinary()
	if !ok {
		if i.Version == "" {
			i.Version = Devel
		}
		return i
	}
	if bi.GoVersion != "" {
		i.GoVersion = bi.GoVersion
	}
	if i.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		i.Version = bi.Main.Version
	}
	if i.Version == "" {
		i.Version = Devel
	}
	if i.Revision == "" {
		var modified bool
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				i.Revision = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
		if modified && i.Revision != "" {
			i.Revision += "-dirty"
		}
	}
	return i
}

// Line is what `<binary> --version` prints: the name, the version, the revision and the
// toolchain on one line.
func (i Info) Line(binary string) string {
	rev := i.Revision
	if rev == "" {
		rev = "unknown"
	}
	return fmt.Sprintf("%s %s (revision %s, %s)", binary, i.Version, rev, i.GoVersion)
}

// MetricName is the gauge every binary serves on /metrics.
const MetricName = "junban_build_info"

// Collector is the gauge junban_build_info{version,revision,goversion}, always 1: a
// dashboard joins it to any other series of the same instance to show which build runs.
func (i Info) Collector() prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: MetricName,
		Help: "Always 1; its labels name the running build: version (git describe), revision (commit), goversion.",
		ConstLabels: prometheus.Labels{
			"version":   i.Version,
			"revision":  i.Revision,
			"goversion": i.GoVersion,
		},
	})
	g.Set(1)
	return g
}
