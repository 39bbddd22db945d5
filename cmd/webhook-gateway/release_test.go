package main_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/junban/junban/internal/testenv"
	"github.com/junban/junban/internal/testenv/fleet"
)

// A release build: the version and the revision set with -ldflags -X, as `make release`
// and the Dockerfile do, are what --version prints and what junban_build_info carries on
// the running binary's /metrics; `webhook-gateway healthcheck` answers 0 while the
// binary serves and 1 once it stopped, asking the admin listener, not the public one.
// (Fails with the gateway's HealthAddr removed, so that healthcheck asks JUNBAN_HTTP_ADDR:
// the public listener has no /readyz, 404; tried. Fails with healthcheck answering nil
// without asking: exit 0 after the stop; tried.)
func TestReleaseBuildVersionMetricAndHealthcheck(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the gateway; not in -short")
	}
	const version, revision = "v9.9.9-1-gfeedbee", "feedbeefeedbeefeedbeefeedbeefeedbeefeed"
	bin := filepath.Join(t.TempDir(), "webhook-gateway")
	ldflags := fmt.Sprintf("-X github.com/junban/junban/internal/platform/buildinfo.version=%s -X github.com/junban/junban/internal/platform/buildinfo.revision=%s", version, revision)
	build := exec.Command("go", "build", "-trimpath", "-ldflags", ldflags, "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	code, out, errOut := testenv.Exec(t, bin, nil, "--version")
	if want := "webhook-gateway " + version + " (revision " + revision + ", go"; code != 0 || !strings.HasPrefix(out, want) {
		t.Fatalf("--version: exit %d, %q (stderr %q), want %q...", code, out, errOut, want)
	}

	c := testenv.SQS(t)
	q := testenv.NewQueues(t, c, 30)
	_, prefix := testenv.Redis(t)
	public, err := fleet.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	admin, err := fleet.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	env := append(testenv.Env(t),
		"JUNBAN_STACK_ENV="+filepath.Join(t.TempDir(), "absent.env"),
		"JUNBAN_ORDERS_QUEUE="+q.OrdersName,
		"JUNBAN_KEY_PREFIX="+prefix,
		"JUNBAN_HTTP_ADDR="+public,
		"JUNBAN_WEBHOOK_ADMIN_ADDR="+admin,
		"JUNBAN_SHUTDOWN_BUDGET=10s",
		"JUNBAN_WEBHOOK_PROVIDERS=stripe:stripe:whsec_release_test_secret_0123456789",
	)
	healthcheck := func(args ...string) (int, string) {
		code, out, errOut := testenv.Exec(t, bin, env, append([]string{"healthcheck"}, args...)...)
		return code, out + errOut
	}
	if code, out := healthcheck(); code != 1 {
		t.Fatalf("healthcheck before the gateway runs: exit %d, want 1\n%s", code, out)
	}

	p := testenv.Start(t, "webhook-gateway", bin, env)
	testenv.WaitFor(t, time.Minute, "healthcheck to pass", func() bool {
		if p.Exited() {
			t.Fatalf("the gateway exited:\n%s", p.Output())
		}
		code, _ := healthcheck()
		return code == 0
	})
	if code, out := healthcheck("--ready"); code != 0 || !strings.Contains(out, admin+"/readyz") {
		t.Fatalf("healthcheck --ready: exit %d, want 0 from %s/readyz\n%s", code, admin, out)
	}
	status, metrics := testenv.Get(t, "http://"+admin+"/metrics")
	want := `junban_build_info{goversion="go`
	line := ""
	for l := range strings.Lines(metrics) {
		if strings.HasPrefix(l, want) {
			line = strings.TrimSpace(l)
		}
	}
	if status != 200 || !strings.Contains(line, `revision="`+revision+`",version="`+version+`"} 1`) {
		t.Fatalf("/metrics: status %d, junban_build_info line %q, want revision %s and version %s, value 1", status, line, revision, version)
	}

	if err, ok := p.Stop(30 * time.Second); !ok || err != nil {
		t.Fatalf("stop: exited %v, %v\n%s", ok, err, p.Output())
	}
	if code, out := healthcheck(); code != 1 || !strings.Contains(out, "healthcheck:") {
		t.Fatalf("healthcheck after the stop: exit %d, want 1 with the reason\n%s", code, out)
	}
}
