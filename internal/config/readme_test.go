package config_test

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/junban/junban/internal/testenv"
)

// binaries are the binaries with --env-vars; their README sections are named after them.
var binaries = []string{"order-worker", "persist-worker", "webhook-gateway", "junban-api"}

// readOutside are the README's "Every binary" variables that the configuration structs do
// not read (the Go runtime and config.LoadStackEnv read them), so --env-vars omits them.
var readOutside = map[string]bool{"GOGC": true, "JUNBAN_STACK_ENV": true}

// readmeVar is one variable of a README configuration table.
type readmeVar struct {
	def      string // the default, as --env-vars prints it; "" for empty or none
	required bool
}

// The README's configuration tables say what --env-vars prints: every variable a binary
// reads is in its own section or in "Every binary" / "Services", with the same default
// (or "required"), and every row of a binary's section is a variable it reads. (Fails
// with the README's JUNBAN_DRAIN_MAX_TIME row set back to 5s, or with a row added for a
// variable nobody reads; tried.)
func TestReadmeConfigurationMatchesEnvVars(t *testing.T) {
	sections := readmeConfiguration(t)
	shared := map[string]readmeVar{}
	for _, s := range []string{"Every binary", "Services"} {
		if len(sections[s]) == 0 {
			t.Fatalf("README: no %q configuration table", s)
		}
		for k, v := range sections[s] {
			shared[k] = v
		}
	}
	readBySome := map[string]bool{}
	for _, bin := range binaries {
		own, ok := sections[bin]
		if !ok {
			t.Errorf("README: no configuration section %q", bin)
			continue
		}
		printed := envVars(t, bin)
		for _, v := range printed {
			readBySome[v.name] = true
			doc, ok := own[v.name]
			if !ok {
				doc, ok = shared[v.name]
			}
			switch {
			case !ok:
				t.Errorf("%s reads %s: not in the README's %q, \"Every binary\" or \"Services\" table", bin, v.name, bin)
			case doc.required != v.required:
				t.Errorf("%s: %s required=%v, README says required=%v", bin, v.name, v.required, doc.required)
			case !v.required && doc.def != v.def:
				t.Errorf("%s: %s defaults to %q, README says %q", bin, v.name, v.def, doc.def)
			}
		}
		names := map[string]bool{}
		for _, v := range printed {
			names[v.name] = true
		}
		for k := range own {
			if !names[k] {
				t.Errorf("README's %q table lists %s, which %s does not read", bin, k, bin)
			}
		}
	}
	for k := range shared {
		if !readBySome[k] && !readOutside[k] {
			t.Errorf("README's shared tables list %s, which no binary reads", k)
		}
	}
}

type envVar struct {
	name, def string
	required  bool
}

// envVars runs bin --env-vars.
func envVars(t *testing.T, bin string) []envVar {
	t.Helper()
	cmd := exec.Command(testenv.Binary(t, bin), "--env-vars")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s --env-vars: %v", bin, err)
	}
	var vars []envVar
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		name, rest, ok := strings.Cut(line, "\t")
		if !ok {
			t.Fatalf("%s --env-vars: line %q", bin, line)
		}
		v := envVar{name: name, required: rest == "required"}
		if !v.required {
			def, ok := strings.CutPrefix(rest, "default=")
			if !ok {
				t.Fatalf("%s --env-vars: line %q", bin, line)
			}
			v.def = def
		}
		vars = append(vars, v)
	}
	if len(vars) == 0 {
		t.Fatalf("%s --env-vars printed nothing", bin)
	}
	return vars
}

var backticked = regexp.MustCompile("^`([^`]*)`")

// readmeConfiguration parses the tables under the README's "## Configuration" heading:
// section ("### name") -> variable -> its default. A row may name several variables,
// "`A` / `B`", with as many defaults, "`x` / `y`". A default is the cell's first
// backticked word ("`0` (off)" is 0), "required..." or anything else (empty, "(AWS)")
// for none.
func readmeConfiguration(t *testing.T) map[string]map[string]readmeVar {
	t.Helper()
	f, err := os.Open(filepath.Join(testenv.RepoRoot(), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sections := map[string]map[string]readmeVar{}
	var in bool
	var section string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "## "):
			in = line == "## Configuration"
			continue
		case !in:
			continue
		case strings.HasPrefix(line, "### "):
			section = strings.TrimPrefix(line, "### ")
			continue
		case !strings.HasPrefix(line, "| `"):
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), " | ")
		if len(cells) < 3 {
			t.Fatalf("README: row %q", line)
		}
		names := strings.Split(strings.TrimSpace(cells[0]), " / ")
		defs := strings.Split(strings.TrimSpace(cells[1]), " / ")
		if len(defs) != len(names) {
			defs = []string{strings.TrimSpace(cells[1])}
			if len(names) > 1 {
				t.Fatalf("README: row %q names %d variables and gives %d defaults", line, len(names), len(defs))
			}
		}
		if sections[section] == nil {
			sections[section] = map[string]readmeVar{}
		}
		for i, n := range names {
			m := backticked.FindStringSubmatch(n)
			if m == nil {
				t.Fatalf("README: row %q: variable %q is not in backticks", line, n)
			}
			var v readmeVar
			switch d := defs[i]; {
			case strings.HasPrefix(d, "required"):
				v.required = true
			case backticked.MatchString(d):
				v.def = backticked.FindStringSubmatch(d)[1]
			}
			sections[section][m[1]] = v
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return sections
}
