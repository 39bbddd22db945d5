package docs_test

import (
	"os/exec"
	"strings"
	"testing"
)

// corePackages are the pure core: the order's domain and the ledger's operations and
// model. They decide; the adapters around them talk to Redis, PostgreSQL, SQS and the
// telemetry backends.
var corePackages = []string{"./internal/domain", "./internal/ledger/stock"}

// coreAllowed are the repository's own packages the core may depend on: the core itself
// and the wire contract.
var coreAllowed = map[string]bool{
	"github.com/junban/junban/internal/event":        true,
	"github.com/junban/junban/internal/domain":       true,
	"github.com/junban/junban/internal/ledger/stock": true,
}

// forbiddenInCore are import path prefixes of stores, transports and telemetry. zap is
// among them: the core logs nothing, it returns what it decided and its caller logs.
var forbiddenInCore = []string{
	"github.com/redis/", "github.com/valkey-io/", // Redis
	"database/sql", "gorm.io/", "github.com/jackc/", "github.com/lib/pq", // SQL
	"github.com/aws/",                                                   // SQS, SNS
	"net/http",                                                          // HTTP
	"go.opentelemetry.io/", "github.com/prometheus/", "go.uber.org/zap", // telemetry, logging
}

// The core's transitive imports (go list -deps, tests excluded) hold no Redis, SQL, SQS,
// HTTP or telemetry package, and of the repository's own packages only the core's.
func TestCoreImportsNoAdapter(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command:", err)
	}
	for _, pkg := range corePackages {
		cmd := exec.Command(gobin, "list", "-deps", pkg)
		cmd.Dir = repoRoot(t)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			if strings.HasPrefix(dep, "github.com/junban/junban/") && !coreAllowed[dep] {
				t.Errorf("%s depends on %s, which is not part of the core", pkg, dep)
			}
			for _, bad := range forbiddenInCore {
				if root := strings.TrimSuffix(bad, "/"); dep == root || strings.HasPrefix(dep, root+"/") {
					t.Errorf("%s depends on %s (%s)", pkg, dep, bad)
				}
			}
		}
	}
}
