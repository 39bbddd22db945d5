package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/junban/junban/internal/platform/cli"
	"github.com/junban/junban/internal/testenv"
)

// ctl runs the junbanctl command named by words (e.g. "dlq list") with args in this
// process, its standard output to w (nil: discarded), and returns the command's error.
func ctl(ctx context.Context, w io.Writer, words string, args []string) error {
	if w == nil {
		w = io.Discard
	}
	_, err := cli.Execute(ctx, newRootCmd(), w, io.Discard, append(strings.Fields(words), args...))
	return err
}

// ctlRedrive runs dlq redrive with args and --json, and returns the report it printed.
func ctlRedrive(ctx context.Context, args []string) (redriveReport, error) {
	var out bytes.Buffer
	err := ctl(ctx, &out, "dlq redrive", append(args, "--json"))
	var rep redriveReport
	if out.Len() > 0 {
		if jerr := json.Unmarshal(out.Bytes(), &rep.Report); jerr != nil {
			return rep, errors.Join(err, jerr)
		}
	}
	return rep, err
}

// The command-line conventions, on the built binary: help exits 0 with the usage on
// standard output; a mistake in the command line exits 2 with the usage on standard
// error; a failure exits 1; one-dash long flags keep working. No case needs a service.
func TestCommandLineExitCodes(t *testing.T) {
	bin := testenv.Binary(t, "junbanctl")
	cases := []struct {
		args           []string
		code           int
		stdout, stderr string
	}{
		{[]string{"--help"}, 0, "Available Commands:", ""},
		{[]string{"-h"}, 0, "reconcile", ""},
		{[]string{"help"}, 0, "Available Commands:", ""},
		{[]string{"help", "dlq", "list"}, 0, "--queue", ""},
		{[]string{"reconcile", "--help"}, 0, "--repair", ""},
		{[]string{"dlq", "redrive", "-h"}, 0, "--queue", ""},
		{[]string{"inventory", "import", "-help"}, 0, "lot_id", ""},
		{[]string{"completion", "bash"}, 0, "junbanctl", ""},
		{[]string{"completion", "zsh"}, 0, "compdef", ""},
		{[]string{"completion", "fish"}, 0, "complete -c junbanctl", ""},
		{[]string{"version"}, 0, "junbanctl ", ""},
		{[]string{"--version"}, 0, "(revision ", ""},
		{[]string{"version", "now"}, 2, "", "takes no arguments"},
		{nil, 2, "", "needs a command"},
		{[]string{"bogus"}, 2, "", `unknown command "bogus"`},
		{[]string{"dlq"}, 2, "", "Available Commands:"},
		{[]string{"dlq", "lst"}, 2, "", "did you mean list?"},
		{[]string{"bench", "lock"}, 2, "", "junbanlab bench lock"},
		{[]string{"chaos", "--events", "10"}, 2, "", "junbanlab chaos"},
		{[]string{"loadgen", "-h"}, 2, "", "junbanlab loadgen"},
		{[]string{"reconcile", "--bogus"}, 2, "", "unknown flag: --bogus"},
		{[]string{"reconcile", "-bogus"}, 2, "", "Usage:"},
		{[]string{"migrate", "down"}, 2, "", "takes no arguments"},
		{[]string{"queues", "create", "extra"}, 2, "", "takes no arguments"},
		{[]string{"send", "-file"}, 2, "", "flag needs an argument"},
		{[]string{"send"}, 2, "", "--file FILE | --type TYPE"},
		{[]string{"webhook", "storm", "--n", "x"}, 2, "", "invalid argument"},
		{[]string{"webhook", "storm", "-n", "0"}, 2, "", "-n must be positive"},
		{[]string{"inventory", "import"}, 2, "", "takes one FILE"},
		{[]string{"turn", "show"}, 2, "", "takes one LCID"},
		{[]string{"stock", "A", "B"}, 2, "", "takes one SKU"},
		{[]string{"stock", "--qty", "3", "A"}, 2, "", "--mode and --qty need --date"},
		{[]string{"dlq", "list", "-max", "0"}, 2, "", "--max 0 is below 1"},
		{[]string{"dlq", "list", "-max=0"}, 2, "", "--max 0 is below 1"},
		{[]string{"stack"}, 2, "", "stack up|down|status"},
		{[]string{"inventory", "import", "/nonexistent/inventory.csv"}, 1, "", "no such file"},
		{[]string{"inventory", "import", "--dry-run", "--json", "/nonexistent/inventory.csv"}, 1, "", "no such file"},
	}
	for _, tc := range cases {
		testenv.CheckCommandLine(t, bin, tc.args, tc.code, tc.stdout, tc.stderr)
	}
}

// Every flag keeps its name through the one-dash rewrite, and a one-dash word that is no
// flag of the command is left for the flag parser to refuse.
func TestDoubleDashLongFlags(t *testing.T) {
	root := newRootCmd()
	for _, tc := range []struct{ in, want []string }{
		{[]string{"dlq", "list", "-queue", "q", "-max=3"}, []string{"dlq", "list", "--queue", "q", "--max=3"}},
		{[]string{"reconcile", "-v", "-repair"}, []string{"reconcile", "-v", "--repair"}},
		{[]string{"webhook", "storm", "-n", "5", "-skew", "-10m"}, []string{"webhook", "storm", "-n", "5", "--skew", "-10m"}},
		{[]string{"send", "-nope", "--", "-file"}, []string{"send", "-nope", "--", "-file"}},
		{[]string{"migrate", "-help"}, []string{"migrate", "--help"}},
	} {
		if got := cli.DoubleDashLongFlags(root, tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("%q: %q, want %q", tc.in, got, tc.want)
		}
	}
}

// cmd/ and tools/cmd/ are wiring: no function in any of their packages (a function
// literal counts on its own) is longer than 60 lines; a longer body belongs in the
// internal (or tools/) package that owns it.
func TestNoLongFunctions(t *testing.T) {
	fset := token.NewFileSet()
	// Every package under cmd/: the binaries' main.go is wiring too; and junbanlab's.
	var files []string
	for _, dir := range []string{"..", filepath.Join("..", "..", "tools", "cmd")} {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
				files = append(files, path)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(files) < 5 || !slices.ContainsFunc(files, func(f string) bool { return strings.Contains(f, "junbanlab") }) {
		t.Fatalf("found %d Go files under cmd/ and tools/cmd/: %v", len(files), files)
	}
	for _, name := range files {
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			var body *ast.BlockStmt
			switch x := n.(type) {
			case *ast.FuncDecl:
				body = x.Body
			case *ast.FuncLit:
				body = x.Body
			}
			if body != nil {
				if lines := fset.Position(body.End()).Line - fset.Position(n.Pos()).Line + 1; lines > 60 {
					t.Errorf("%s: a function of %d lines", fset.Position(n.Pos()), lines)
				}
			}
			return true
		})
	}
}
