package domain_test

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/junban/junban/internal/domain"
	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/ledger/stock"
)

// wireTypes returns the event types internal/event declares (its constants of type
// Type), read from its source: a type named there and not registered here fails below.
func wireTypes(t *testing.T) []event.Type {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "../event/event.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []event.Type
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			v := s.(*ast.ValueSpec)
			if id, ok := v.Type.(*ast.Ident); !ok || id.Name != "Type" {
				continue
			}
			for _, val := range v.Values {
				if lit, ok := val.(*ast.BasicLit); ok {
					out = append(out, event.Type(strings.Trim(lit.Value, `"`)))
				}
			}
		}
	}
	if len(out) < 10 {
		t.Fatalf("read %d event types from internal/event: the parse is wrong", len(out))
	}
	return out
}

// Every type of the wire contract is a registered kind, and every kind is complete: a
// line of doc, an example that decodes as the kind into the entity it names, data refused
// when it is malformed. Fails for a type added to internal/event without its kind, and
// for a kind registered without an example or a doc.
func TestKindsAreComplete(t *testing.T) {
	for _, typ := range wireTypes(t) {
		if domain.KindOf(typ) == nil {
			t.Errorf("%s is a wire type with no registered kind (internal/domain/kinds.go)", typ)
		}
	}
	if n, m := len(domain.Kinds()), len(wireTypes(t)); n != m {
		t.Errorf("%d kinds registered, %d wire types", n, m)
	}
	for _, k := range domain.Kinds() {
		if k.Doc == "" {
			t.Errorf("%s: no Doc", k.Type)
		}
		body, err := json.Marshal(event.Order{EventID: "e-1", Type: k.Type, LCID: "LC-1", Data: k.Example})
		if err != nil {
			t.Fatal(err)
		}
		ev, err := domain.Decode(body, 0)
		if err != nil {
			t.Errorf("%s: its example does not decode: %v", k.Type, err)
			continue
		}
		if ev.Kind() != k {
			t.Errorf("%s: decoded as %v", k.Type, ev.Kind().Type)
		}
		sku, onSKU := ev.InventorySKU()
		switch k.Entity {
		case domain.OnSKU:
			if !onSKU || ev.Entity() != domain.SKUEntity(sku) || sku == "" {
				t.Errorf("%s: a SKU's event in the turn %q", k.Type, ev.Entity())
			}
		case domain.OnOrder, domain.OnNamed:
			if onSKU || ev.Entity() != "LC-1" {
				t.Errorf("%s: an order's event in the turn %q", k.Type, ev.Entity())
			}
		default:
			t.Errorf("%s: no entity", k.Type)
		}
		if k.Example != nil {
			bad, _ := json.Marshal(event.Order{EventID: "e-1", Type: k.Type, LCID: "LC-1", Data: json.RawMessage(`{"no_such_field":1}`)})
			if _, err := domain.Decode(bad, 0); err == nil {
				t.Errorf("%s: data with an unknown field decoded", k.Type)
			}
		}
	}
}

// docs/events.md documents every kind: a heading names it, and its data's fields appear
// in the page. Fails for a kind registered without its section.
func TestEventsDocNamesEveryKind(t *testing.T) {
	doc, err := os.ReadFile("../../docs/events.md")
	if err != nil {
		t.Fatal(err)
	}
	headings := regexp.MustCompile("(?m)^#+ .*$").FindAllString(string(doc), -1)
	for _, k := range domain.Kinds() {
		named := false
		for _, h := range headings {
			if strings.Contains(h, "`"+string(k.Type)+"`") {
				named = true
			}
		}
		if !named {
			t.Errorf("docs/events.md: no heading names `%s`", k.Type)
		}
		var fields map[string]any
		if k.Example != nil {
			if err := json.Unmarshal(k.Example, &fields); err != nil {
				t.Fatal(err)
			}
		}
		for f := range fields {
			if !strings.Contains(string(doc), `"`+f+`"`) && !strings.Contains(string(doc), "`"+f+"`") {
				t.Errorf("docs/events.md: %s's field %q is not in the page", k.Type, f)
			}
		}
	}
}

// The result-size bound counts every kind that makes a result, each by its shape, and the
// largest of them: a recall's result with its most holders is counted (the bound counted
// only an order's event's before the registry; a recall's is larger than a one-line
// order's), and a kind registered without a shape has none.
func TestResultBoundCountsEveryKind(t *testing.T) {
	const lines, lots = 1, domain.ResultLotsPerLine
	all := domain.WorstCaseResultBytes(lines, lots)
	for _, k := range domain.Kinds() {
		r, ok := domain.WorstCaseResultOf(k, lines, lots)
		if ok != (k.Origin != domain.Nudge) {
			t.Errorf("%s: a worst case %v", k.Type, ok)
			continue
		}
		if !ok {
			continue
		}
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if r.Type != k.Type || len(b) > all {
			t.Errorf("%s: worst case of type %s, %d bytes, beyond the bound's %d", k.Type, r.Type, len(b), all)
		}
		if k.Type == event.InventoryLotRecalled && len(r.Holders) != stock.MaxResultHolders {
			t.Errorf("a recall's worst case lists %d holders, want %d", len(r.Holders), stock.MaxResultHolders)
		}
	}
	recall, _ := domain.WorstCaseResultOf(domain.KindOf(event.InventoryLotRecalled), lines, lots)
	placed, _ := domain.WorstCaseResultOf(domain.KindOf(event.OrderPlaced), lines, lots)
	rb, _ := json.Marshal(recall)
	pb, _ := json.Marshal(placed)
	if len(rb) <= len(pb) || all != len(rb) {
		t.Errorf("one line: a recall's worst case %d bytes, an order's %d, the bound %d: want the recall's, the larger", len(rb), len(pb), all)
	}
}

// Every kind says who makes its events, and what that implies holds: an Own kind's event
// id may be in junban's namespace (its expiry id), a sender's may not; a Nudge names the
// entity it drains; only a sender's order event opens its order; the Doc of junban's own
// kinds says so. Fails for a kind registered without its Origin (the worker would not know whether to refuse it from the
// queue, nor whether to step it), and for an Origin that does not match the kind.
func TestKindsDeclareTheirOrigin(t *testing.T) {
	opens := 0
	for _, k := range domain.Kinds() {
		switch k.Origin {
		case domain.FromSender, domain.Own, domain.Nudge:
		default:
			t.Errorf("%s: no Origin (FromSender, Own or Nudge) in its registration", k.Type)
			continue
		}
		// The doc a reader sees in the kinds index says whose the events are.
		if strings.HasPrefix(k.Doc, "junban's own") != (k.Origin != domain.FromSender) {
			t.Errorf("%s (origin %d): its Doc %q and its Origin disagree on whether it is junban's own", k.Type, k.Origin, k.Doc)
		}
		own, err := json.Marshal(event.Order{EventID: event.OwnMark + "expiry:LC-1", Type: k.Type, LCID: "LC-1", Data: k.Example})
		if err != nil {
			t.Fatal(err)
		}
		_, err = domain.Decode(own, 0)
		if (err == nil) != (k.Origin == domain.Own) {
			t.Errorf("%s (origin %d): an event id in junban's namespace decodes: %v", k.Type, k.Origin, err)
		}
		body, _ := json.Marshal(event.Order{EventID: "e-1", Type: k.Type, LCID: "sku:SKU-1", Data: k.Example})
		ev, err := domain.Decode(body, 0)
		if k.Origin == domain.Nudge && (err != nil || ev.DrainOf() != "sku:SKU-1" || k.Entity != domain.OnNamed) {
			t.Errorf("%s: a nudge names the entity it drains: %q, %v", k.Type, ev.DrainOf(), err)
		}
		if k.Origin != domain.Nudge && err == nil && ev.DrainOf() != "" {
			t.Errorf("%s: not a nudge, but drains %q", k.Type, ev.DrainOf())
		}
		if k.Opens {
			opens++
			if k.Entity != domain.OnOrder || k.Origin != domain.FromSender {
				t.Errorf("%s: opens its order, but is not a sender's order event", k.Type)
			}
		}
	}
	if opens == 0 {
		t.Error("no kind opens its order")
	}
}
