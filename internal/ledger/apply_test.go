package ledger

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/testenv"
)

// Every operation stock declares (a request type with a model) has a Redis run in
// Apply's type switch: a zero request of each type reaches its run, whose validation
// refuses it, instead of Apply's "no Redis run". The types are read from stock's source,
// so an operation added there without its case here fails.
func TestApplyRunsEveryOp(t *testing.T) {
	ops := []stock.Op{
		stock.AllocateRequest{}, stock.ReleaseRequest{}, stock.ConfirmRequest{}, stock.ShipRequest{},
		stock.UndoRequest{}, stock.ChangeRequest{}, stock.MoveAllocationRequest{}, stock.ReceiveRequest{}, stock.AdjustRequest{},
		stock.HoldRequest{}, stock.ReleaseHoldRequest{}, stock.DamageRequest{}, stock.RecallRequest{},
		stock.ReturnRequest{}, stock.RegisterSKURequest{}, stock.RegisterLotRequest{}, stock.SafetyStockRequest{},
		stock.TransferRequest{}, stock.TransferReceiveRequest{}, stock.TransferCancelRequest{},
		stock.BackorderRequest{}, stock.DequeueRequest{}, stock.FillRequest{},
		stock.Fenced{},
	}
	var listed []string
	for _, op := range ops {
		listed = append(listed, reflect.TypeOf(op).Name())
	}
	sort.Strings(listed)
	if declared := modelledOps(t); !reflect.DeepEqual(listed, declared) {
		t.Fatalf("stock declares the operations %v, this test lists %v", declared, listed)
	}

	rc, prefix := testenv.Redis(t)
	l, err := New(Config{Redis: rc, Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range ops {
		_, err := l.Apply(ctx, op)
		if errors.Is(err, errNoRedisRun) || !errors.Is(err, stock.ErrInvalidRequest) && !errors.Is(err, stock.ErrInvalidQuantity) {
			t.Errorf("%T: Apply of a zero request: %v, want its validation's refusal", op, err)
		}
	}
}

// modelledOps returns the names of stock's types with a model method, sorted.
func modelledOps(t *testing.T) []string {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join("stock", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, fn := range files {
		if strings.HasSuffix(fn, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, fn, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv == nil || fd.Name.Name != "model" {
				continue
			}
			if id, ok := fd.Recv.List[0].Type.(*ast.Ident); ok {
				names = append(names, id.Name)
			}
		}
	}
	sort.Strings(names)
	return names
}
