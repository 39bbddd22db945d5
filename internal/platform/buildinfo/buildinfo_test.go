package buildinfo

import (
	"runtime/debug"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// The linker's values win; without them the binary's own stamp is read, and without
// that the version is Devel.
func TestReadPrefersTheLinkerThenTheBinary(t *testing.T) {
	stamped := func() (*debug.BuildInfo, bool) {
		return &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v0.7.0"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.modified", Value: "true"},
		}}, true
	}
	devel := func() (*debug.BuildInfo, bool) {
		return &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}}, true
	}
	none := func() (*debug.BuildInfo, bool) { return nil, false }
	cases := []struct {
		name              string
		version, revision string
		from              func() (*debug.BuildInfo, bool)
		want              Info
	}{
		{"linker", "v0.8.0-2-gdeadbee", "deadbeef", stamped, Info{"v0.8.0-2-gdeadbee", "deadbeef", "go1.26.0"}},
		{"module and vcs stamp", "", "", stamped, Info{"v0.7.0", "abc123-dirty", "go1.26.0"}},
		{"go build in a checkout", "", "", devel, Info{Devel, "", "go1.26.0"}},
		{"nothing", "", "", none, Info{Devel, "", ""}},
	}
	for _, tc := range cases {
		got := read(tc.version, tc.revision, tc.from)
		if tc.name == "nothing" {
			tc.want.GoVersion = got.GoVersion // runtime.Version()
		}
		if got != tc.want {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestLineAndCollector(t *testing.T) {
	i := Info{Version: "v0.8.0", Revision: "abc", GoVersion: "go1.26.0"}
	if got, want := i.Line("order-worker"), "order-worker v0.8.0 (revision abc, go1.26.0)"; got != want {
		t.Errorf("Line: %q, want %q", got, want)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(i.Collector())
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(mfs) != 1 || mfs[0].GetName() != MetricName || len(mfs[0].GetMetric()) != 1 {
		t.Fatalf("gathered %v, want one %s", mfs, MetricName)
	}
	m := mfs[0].GetMetric()[0]
	labels := map[string]string{}
	for _, l := range m.GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	if m.GetGauge().GetValue() != 1 || labels["version"] != "v0.8.0" || labels["revision"] != "abc" || labels["goversion"] != "go1.26.0" || len(labels) != 3 {
		t.Errorf("%s: %v", MetricName, m)
	}
}
