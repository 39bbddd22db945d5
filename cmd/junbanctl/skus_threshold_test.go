package main

import (
	"strings"
	"testing"

	"github.com/junban/junban/internal/platform/config"
	"github.com/junban/junban/internal/testenv"
)

// skus threshold sets and clears a SKU's low-stock threshold, on the built binary; a SKU
// that PostgreSQL does not hold is an error, a bad threshold a mistake in the command line.
func TestSkusThreshold(t *testing.T) {
	bin := testenv.Binary(t, "junbanctl")
	url := testenv.PostgresURL(t)
	db, err := config.Postgres{URL: url}.Open()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if sqlDB, err := db.DB(); err == nil {
			sqlDB.Close()
		}
	})
	if err := db.Exec(`INSERT INTO skus (sku, safety_stock, version) VALUES ('TH-1', 0, 1)`).Error; err != nil {
		t.Fatal(err)
	}
	env := []string{"DATABASE_URL=" + url}
	stored := func() *int64 {
		t.Helper()
		var n *int64
		if err := db.Raw(`SELECT low_stock_threshold FROM skus WHERE sku = 'TH-1'`).Row().Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	code, out, errOut := testenv.Exec(t, bin, env, "skus", "threshold", "TH-1", "25")
	if code != 0 || !strings.Contains(out, "TH-1 is low at 25") {
		t.Fatalf("threshold 25: exit %d\n%s%s", code, out, errOut)
	}
	if n := stored(); n == nil || *n != 25 {
		t.Fatalf("stored threshold %v, want 25", n)
	}
	code, out, errOut = testenv.Exec(t, bin, env, "skus", "threshold", "--json", "TH-1", "--default")
	if code != 0 {
		t.Fatalf("--default: exit %d\n%s%s", code, out, errOut)
	}
	var rep thresholdReport
	testenv.DecodeJSON(t, "skus threshold --default --json", []byte(out), &rep)
	if rep.SKU != "TH-1" || rep.Threshold != nil {
		t.Errorf("--default --json: %+v", rep)
	}
	if n := stored(); n != nil {
		t.Errorf("stored threshold %d after --default", *n)
	}
	code, out, _ = testenv.Exec(t, bin, env, "skus", "threshold", "--json", "TH-1", "0")
	testenv.DecodeJSON(t, "skus threshold --json", []byte(out), &rep)
	if code != 0 || rep.Threshold == nil || *rep.Threshold != 0 {
		t.Errorf("threshold 0 --json: exit %d, %+v", code, rep)
	}

	for _, c := range []struct {
		args   []string
		code   int
		stderr string
	}{
		{[]string{"NOPE", "5"}, 1, `no SKU "NOPE"`},
		{[]string{"NOPE", "--default"}, 1, `no SKU "NOPE"`},
		{[]string{"TH-1"}, 2, "takes a SKU and a threshold"},
		{[]string{"TH-1", "5", "--default"}, 2, "--default takes one SKU"},
		{[]string{"TH-1", "five"}, 2, "not a whole number"},
		{[]string{"TH-1", "-3"}, 2, "unknown shorthand flag"},
	} {
		code, out, errOut := testenv.Exec(t, bin, env, append([]string{"skus", "threshold"}, c.args...)...)
		if code != c.code || !strings.Contains(errOut, c.stderr) {
			t.Errorf("skus threshold %q: exit %d, want %d with %q\n%s%s", c.args, code, c.code, c.stderr, out, errOut)
		}
	}
}
