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

// binaries are the binaries with --env-vars; their sections of docs/configuration.md are
// named after them.
var binaries = []string{"order-worker", "persist-worker", "webhook-gateway", "junban-api"}

// readOutside are the "Every binary" variables of docs/configuration.md that the
// configuration structs do not read (the Go runtime and config.LoadStackEnv read them), so --env-vars omits them.
var readOutside = map[string]bool{"GOGC": true, "GOMAXPROCS": true, "GODEBUG": true, "JUNBAN_STACK_ENV": true}

// docVar is one variable of a configuration table of docs/configuration.md.
type docVar struct {
	def      string // the default, as --env-vars prints it; "" for empty or none
	required bool
}

// The configuration tables of docs/configuration.md say what --env-vars prints: every
// variable a binary reads is in its own section or in "Every binary" / "Services", with the
// same default (or "required"), and every row of a binary's section is a variable it reads.
// (Fails with the doc's JUNBAN_DRAIN_MAX_TIME row set back to 5s, or with a row added for a
// variable nobody reads; tried.)
func TestConfigurationDocMatchesEnvVars(t *testing.T) {
	sections := docConfiguration(t)
	shared := map[string]docVar{}
	for _, s := range []string{"Every binary", "Services"} {
		if len(sections[s]) == 0 {
			t.Fatalf("%s: no %q configuration table", configurationDoc, s)
		}
		for k, v := range sections[s] {
			shared[k] = v
		}
	}
	readBySome := map[string]bool{}
	for _, bin := range binaries {
		own, ok := sections[bin]
		if !ok {
			t.Errorf("%s: no configuration section %q", configurationDoc, bin)
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
				t.Errorf("%s reads %s: not in the %q, \"Every binary\" or \"Services\" table of %s", bin, v.name, bin, configurationDoc)
			case doc.required != v.required:
				t.Errorf("%s: %s required=%v, %s says required=%v", bin, v.name, v.required, configurationDoc, doc.required)
			case !v.required && doc.def != v.def:
				t.Errorf("%s: %s defaults to %q, %s says %q", bin, v.name, v.def, configurationDoc, doc.def)
			}
		}
		names := map[string]bool{}
		for _, v := range printed {
			names[v.name] = true
		}
		for k := range own {
			if !names[k] {
				t.Errorf("%s: the %q table lists %s, which %s does not read", configurationDoc, bin, k, bin)
			}
		}
	}
	for k := range shared {
		if !readBySome[k] && !readOutside[k] {
			t.Errorf("%s: the shared tables list %s, which no binary reads", configurationDoc, k)
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

// configurationDoc is the page whose tables list every binary's variables.
const configurationDoc = "docs/configuration.md"

// docConfiguration parses the tables of docs/configuration.md: section ("## name") ->
// variable -> its default. A row may name several variables, "`A` / `B`", with as many
// defaults, "`x` / `y`". A default is the cell's first backticked word ("`0` (off)" is 0),
// "required..." or anything else (empty, "(AWS)") for none. Rows outside a table of
// variables (a section's prose, a fenced block) are not rows: only lines that start with
// "| `" are read.
func docConfiguration(t *testing.T) map[string]map[string]docVar {
	t.Helper()
	f, err := os.Open(filepath.Join(testenv.RepoRoot(), filepath.FromSlash(configurationDoc)))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sections := map[string]map[string]docVar{}
	var section string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "## "):
			section = strings.TrimPrefix(line, "## ")
			continue
		case section == "" || !strings.HasPrefix(line, "| `"):
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), " | ")
		if len(cells) < 3 {
			t.Fatalf("%s: row %q", configurationDoc, line)
		}
		names := strings.Split(strings.TrimSpace(cells[0]), " / ")
		defs := strings.Split(strings.TrimSpace(cells[1]), " / ")
		if len(defs) != len(names) {
			defs = []string{strings.TrimSpace(cells[1])}
			if len(names) > 1 {
				t.Fatalf("%s: row %q names %d variables and gives %d defaults", configurationDoc, line, len(names), len(defs))
			}
		}
		if sections[section] == nil {
			sections[section] = map[string]docVar{}
		}
		for i, n := range names {
			m := backticked.FindStringSubmatch(n)
			if m == nil {
				t.Fatalf("%s: row %q: variable %q is not in backticks", configurationDoc, line, n)
			}
			var v docVar
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
