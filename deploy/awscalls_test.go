package deploy_test

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// awsServices are the SDK packages whose calls a task role must allow, by IAM prefix.
var awsServices = map[string]string{
	"github.com/aws/aws-sdk-go-v2/service/sqs": "sqs",
	"github.com/aws/aws-sdk-go-v2/service/sns": "sns",
}

// awsActions returns the IAM actions (sqs:ReceiveMessage, sns:PublishBatch, ...) the
// binary cmd/<bin> can call: every <Action>Input of an SDK package above built (a
// composite literal) in a function the binary reaches from main, its init functions and its package variables.
// Reaching is syntactic and errs on the side of more: a call x.M() reaches every method
// named M of the module's packages, since an interface may stand between them; a
// function or method is reached only when something reached names it.
func awsActions(t *testing.T, root, bin string) []string {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-json=ImportPath,Dir,GoFiles,Module", "./cmd/"+bin)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s: %v", bin, err)
	}
	type pkg struct {
		ImportPath string
		Dir        string
		GoFiles    []string
		Module     *struct{ Main bool }
	}
	// nodes: "pkgpath.Func" for a function, "method:M" for every method named M.
	calls := map[string][]string{}   // node -> nodes it names
	actions := map[string][]string{} // node -> IAM actions it names
	var roots []string
	fset := token.NewFileSet()
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		if p.Module == nil || !p.Module.Main {
			continue
		}
		for _, name := range p.GoFiles {
			f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			imports := map[string]string{} // local name -> path
			for _, im := range f.Imports {
				path, _ := strconv.Unquote(im.Path.Value)
				local := filepath.Base(path)
				if strings.HasPrefix(local, "v") && len(local) <= 3 { // .../go-redis/v9
					local = filepath.Base(filepath.Dir(path))
				}
				if im.Name != nil {
					local = im.Name.Name
				}
				imports[local] = path
			}
			visit := func(node string, n ast.Node) {
				ast.Inspect(n, func(n ast.Node) bool {
					switch x := n.(type) {
					case *ast.CompositeLit:
						// A request is built as a composite literal; a type switch or
						// assertion that names an input type calls nothing.
						if sel, ok := x.Type.(*ast.SelectorExpr); ok {
							if id, ok := sel.X.(*ast.Ident); ok {
								if svc, ok := awsServices[imports[id.Name]]; ok && strings.HasSuffix(sel.Sel.Name, "Input") {
									actions[node] = append(actions[node], svc+":"+strings.TrimSuffix(sel.Sel.Name, "Input"))
								}
							}
						}
					case *ast.SelectorExpr:
						if id, ok := x.X.(*ast.Ident); ok {
							if path, ok := imports[id.Name]; ok {
								calls[node] = append(calls[node], path+"."+x.Sel.Name)
								return false
							}
						}
						calls[node] = append(calls[node], "method:"+x.Sel.Name)
					case *ast.Ident:
						calls[node] = append(calls[node], p.ImportPath+"."+x.Name)
					}
					return true
				})
			}
			for _, d := range f.Decls {
				switch d := d.(type) {
				case *ast.FuncDecl:
					node := p.ImportPath + "." + d.Name.Name
					if d.Recv != nil {
						node = "method:" + d.Name.Name
					} else if d.Name.Name == "init" || (p.ImportPath == "github.com/junban/junban/cmd/"+bin && d.Name.Name == "main") {
						node = p.ImportPath + ".init/main:" + name + ":" + strconv.Itoa(int(d.Pos()))
						roots = append(roots, node)
					}
					visit(node, d)
				case *ast.GenDecl:
					if d.Tok == token.VAR {
						node := p.ImportPath + ".var:" + name + ":" + strconv.Itoa(int(d.Pos()))
						roots = append(roots, node)
						visit(node, d)
					}
				}
			}
		}
	}
	seen := map[string]bool{}
	found := map[string]bool{}
	queue := roots
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		if seen[n] {
			continue
		}
		seen[n] = true
		for _, a := range actions[n] {
			found[a] = true
		}
		queue = append(queue, calls[n]...)
	}
	var list []string
	for a := range found {
		list = append(list, a)
	}
	slices.Sort(list)
	return list
}
