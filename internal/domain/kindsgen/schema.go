package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/junban/junban/internal/domain"
	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/ledger/stock"
)

// obj is a JSON object that keeps its keys in the order they were set, so that what is
// generated reads as written and diffs line by line.
type obj struct {
	keys []string
	vals map[string]any
}

func newObj(kv ...any) *obj {
	o := &obj{vals: map[string]any{}}
	for i := 0; i+1 < len(kv); i += 2 {
		o.set(kv[i].(string), kv[i+1])
	}
	return o
}

func (o *obj) set(k string, v any) *obj {
	if _, ok := o.vals[k]; !ok {
		o.keys = append(o.keys, k)
	}
	o.vals[k] = v
	return o
}

func (o *obj) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range o.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		vb, err := marshal(o.vals[k])
		if err != nil {
			return nil, err
		}
		b.Write(kb)
		b.WriteByte(':')
		b.Write(vb)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// marshal encodes v without escaping <, > and &, as a person writes a schema's patterns.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// indent is what every generated JSON file is written as: two spaces a level, a final
// newline.
func indent(v any) ([]byte, error) {
	raw, err := marshal(v)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return nil, err
	}
	b.WriteByte('\n')
	return b.Bytes(), nil
}

// The character classes the decoder refuses, as JSON Schema patterns (ECMA 262 and Go's
// regexp read them alike: the control characters escaped, U+FFFE and U+FFFF as they are,
// since the two write their escapes differently): an id (event.CheckID) has no brace, no
// junban mark, no control character and nothing SQS and SNS cannot carry; a reason
// (checkReason) no control character.
const (
	controls   = `\x00-\x1f\x7f-\x9f`
	uncarried  = "\ufffe\uffff"
	idPattern  = "^[^{}" + event.OwnMark + controls + uncarried + "]*$"
	txtPattern = "^[^" + controls + uncarried + "]*$"
)

// id is the schema of an id of at most limit bytes: JSON Schema counts characters, so a
// multi-byte id within limit characters may still be too long (the decoder's to refuse).
func id(limit int, doc string) *obj {
	o := newObj("type", "string", "minLength", 1, "maxLength", limit, "pattern", idPattern)
	if doc != "" {
		o.set("description", doc)
	}
	return o
}

func quantity(lo, hi int64) *obj {
	o := newObj("type", "integer", "minimum", lo)
	if hi > 0 {
		o.set("maximum", hi)
	}
	return o
}

func date() *obj { return newObj("type", "string", "format", "date") }

// optionalDate is a date the decoder also takes empty, as absent.
func optionalDate() *obj {
	return newObj("type", "string", "anyOf", []any{newObj("maxLength", 0), newObj("format", "date")})
}
func dateTime() *obj { return newObj("type", "string", "format", "date-time") }

// reasonText is a warehouse event's reason as checkReason holds it.
func reasonText() *obj {
	return newObj("type", "string", "minLength", 1, "maxLength", stock.MaxIDLen, "pattern", txtPattern)
}

// fieldRules are the decoder's rules of the data's fields, by the Go type and the JSON
// name of the field; a key "<type>@<kind>" holds for that kind alone (order.placed checks
// mode and target_date, order.lines_changed takes them as they come). A field without a
// rule gets its Go type's schema. TestSchemasAndTheDecodersRefusals, in internal/domain,
// holds these to the decoder's refusal cases.
var fieldRules = map[string]func() *obj{
	"Line.line_id":                       func() *obj { return id(event.MaxIDLength, "") },
	"Line.sku":                           func() *obj { return id(stock.MaxIDLen, "") },
	"Line.qty":                           func() *obj { return quantity(1, 0) },
	"OrderData.mode@order.placed":        func() *obj { return newObj("enum", []string{string(stock.ModeShip), string(stock.ModeReserve)}) },
	"OrderData.target_date@order.placed": date,
	"OrderData.lines@order.placed":       func() *obj { return newObj("minItems", 1, "maxItems", domain.MaxLinesLimit) },
	"OrderData.lines":                    func() *obj { return newObj("maxItems", domain.MaxLinesLimit) },
	"Hold.hold_until":                    dateTime,
	"Hold.hold_for": func() *obj {
		return newObj("type", "string", "description", "a duration after occurred_at, Go syntax (\"30m\", \"72h\")")
	},
	"ReturnedData.lines":                  func() *obj { return newObj("minItems", 1, "maxItems", domain.MaxLinesLimit) },
	"ReturnLine.line_id":                  func() *obj { return id(event.MaxIDLength, "") },
	"ReturnLine.qty":                      func() *obj { return quantity(1, stock.MaxQty) },
	"InventoryReceivedData.best_before":   date,
	"InventoryReceivedData.qty":           func() *obj { return quantity(0, 0) },
	"InventoryAdjustedData.delta":         func() *obj { return newObj("type", "integer", "not", newObj("const", 0)) },
	"InventoryAdjustedData.reason":        func() *obj { return newObj("type", "string", "minLength", 1) },
	"SKURegisteredData.safety_stock":      func() *obj { return quantity(0, stock.MaxQty) },
	"SafetyStockChangedData.safety_stock": func() *obj { return quantity(0, stock.MaxQty) },
	"LotRegisteredData.kind":              func() *obj { return newObj("enum", []string{stock.KindOnHand, stock.KindPlanned}) },
	"LotRegisteredData.best_before":       optionalDate,
	"LotRegisteredData.arrives_at":        optionalDate,
	"LotRegisteredData.valid_from":        optionalDate,
	"LotRegisteredData.valid_to":          optionalDate,
	"LotRegisteredData.sellable":          func() *obj { return quantity(1, stock.MaxQty) },
	"LotQtyData.qty":                      func() *obj { return quantity(1, stock.MaxQty) },
	"LotQtyData.reason":                   reasonText,
	"LotRecalledData.reason":              reasonText,
	"InventoryReceivedData.sku":           skuID,
	"InventoryReceivedData.lot_id":        skuID,
	"InventoryAdjustedData.sku":           skuID,
	"InventoryAdjustedData.lot_id":        skuID,
	"SKURegisteredData.sku":               skuID,
	"SafetyStockChangedData.sku":          skuID,
	"LotRegisteredData.sku":               skuID,
	"LotRegisteredData.lot_id":            skuID,
	"LotQtyData.sku":                      skuID,
	"LotQtyData.lot_id":                   skuID,
	"LotRecalledData.sku":                 skuID,
	"LotRecalledData.lot_id":              skuID,
	"OrderData.allocation@order.placed": func() *obj {
		return newObj("maxItems", stock.MaxStrategies, "uniqueItems", true, "items", newObj("enum",
			[]string{string(stock.StrategyRanked), string(stock.StrategyClosest), string(stock.StrategyPinned), string(stock.StrategyFEFONetwork),
				string(stock.StrategyFewestSplits)}))
	},
	"OrderData.pickup_location@order.placed": location,
	"Coordinates.lat":                        func() *obj { return newObj("type", "number", "minimum", -90, "maximum", 90) },
	"Coordinates.lon":                        func() *obj { return newObj("type", "number", "minimum", -180, "maximum", 180) },
	"InventoryReceivedData.location":         location,
	"InventoryAdjustedData.location":         location,
	"LotRegisteredData.location":             location,
	"LotQtyData.location":                    location,
	"LotRecalledData.location":               location,
	"SafetyStockChangedData.location": func() *obj {
		return location().set("description", "a location id: the location whose own safety stock this sets; absent: the SKU's network-wide one")
	},
	"LotRegisteredData.good":              func() *obj { return newObj("type", "boolean", "description", "default true") },
	"TransferRequestedData.sku":           skuID,
	"TransferRequestedData.transfer_id":   skuID,
	"TransferRequestedData.from_location": location,
	"TransferRequestedData.to_location":   location,
	"TransferRequestedData.qty":           func() *obj { return quantity(1, stock.MaxQty) },
	"TransferRequestedData.arrives_at":    date,
	"TransferReceivedData.sku":            skuID,
	"TransferReceivedData.transfer_id":    skuID,
	"TransferReceivedData.qty":            func() *obj { return quantity(1, stock.MaxQty) },
	"TransferCancelledData.sku":           skuID,
	"TransferCancelledData.transfer_id":   skuID,
	"InventoryAdjustedData.transfer_id":   transitOf,
	"LotQtyData.transfer_id":              transitOf,
	"LotRecalledData.transfer_id":         transitOf,
	"ReturnedData.defective":              func() *obj { return newObj("type", "boolean") },
	"OrderData.target_date@order.lines_changed": func() *obj {
		return newObj("type", "string", "description", "not read by order.lines_changed")
	},
}

func skuID() *obj { return id(stock.MaxIDLen, "") }

// transitOf is the transfer id an event naming a lot may give: the lot is then that
// transfer's transit lot of lot_id. Empty is taken as absent.
func transitOf() *obj {
	o := id(stock.MaxIDLen, "a transfer id: the lot meant is the transit lot this transfer made of lot_id; absent: lot_id itself")
	o.set("minLength", 0)
	return o
}

// location is a location id an inventory event may name (stock.CheckLocation); empty is
// taken as absent.
func location() *obj {
	return newObj("type", "string", "maxLength", stock.MaxLocationLen, "pattern", "^[A-Za-z0-9._-]*$",
		"description", "a location id; absent: the default location (lot_registered) or no check")
}

// objectRules are the rules across an object's fields, by the Go type and kind.
var objectRules = map[string]func(o *obj){
	// A planned lot's best-before comes with inventory.received.
	"LotRegisteredData": func(o *obj) {
		o.set("if", newObj("properties", newObj("kind", newObj("const", stock.KindPlanned)), "required", []string{"kind"}))
		o.set("then", newObj("properties", newObj("best_before", newObj("maxLength", 0))))
	},
}

// rule returns the rule of field name of Go type t for kind k, or nil.
func rule(k event.Type, t reflect.Type, name string) *obj {
	key := t.Name() + "." + name
	if f, ok := fieldRules[key+"@"+string(k)]; ok {
		return f()
	}
	if f, ok := fieldRules[key]; ok {
		return f()
	}
	return nil
}

var timeType = reflect.TypeFor[time.Time]()

// schemaOf is the JSON Schema of a value of Go type t as strict decoding takes it: every
// object refuses fields it has no Go field for, the decoder's rules (fieldRules) apply,
// and the fields named in req (by path, "" the data, "lines[]" each line) are required.
func schemaOf(k event.Type, t reflect.Type, path string, req map[string][]string) *obj {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == timeType:
		return dateTime()
	case t.Kind() == reflect.String:
		return newObj("type", "string")
	case t.Kind() == reflect.Bool:
		return newObj("type", "boolean")
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Int64:
		return newObj("type", "integer")
	case t.Kind() == reflect.Float64:
		return newObj("type", "number")
	case t.Kind() == reflect.Slice && req == nil:
		// A reader's: Go writes a nil slice as null.
		return newObj("type", []string{"array", "null"}, "items", schemaOf(k, t.Elem(), path+"[]", req))
	case t.Kind() == reflect.Slice:
		return newObj("type", "array", "items", schemaOf(k, t.Elem(), path+"[]", req))
	case t.Kind() == reflect.Map && t.Key().Kind() == reflect.String:
		return newObj("type", "object", "additionalProperties", schemaOf(k, t.Elem(), path+"{}", req))
	case t.Kind() == reflect.Struct:
		props := newObj()
		addFields(k, t, path, req, props)
		o := newObj("type", "object", "additionalProperties", false)
		r := req[path]
		if req == nil {
			r = written(t)
		}
		if len(r) > 0 {
			o.set("required", r)
		}
		o.set("properties", props)
		if f, ok := objectRules[t.Name()]; ok {
			f(o)
		}
		return o
	}
	panic(fmt.Sprintf("kindsgen: no schema for Go type %s", t))
}

// written lists the JSON fields of t that encoding/json always writes (no omitempty).
func written(t reflect.Type) []string {
	var out []string
	for f := range t.Fields() {
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.IsExported() && !f.Anonymous && name != "-" && name != "" && !strings.Contains(opts, "omitempty") {
			out = append(out, name)
		}
	}
	return out
}

// addFields sets the schema of each of t's JSON fields in props, those of embedded
// structs in place.
func addFields(k event.Type, t reflect.Type, path string, req map[string][]string, props *obj) {
	for f := range t.Fields() {
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous && name == "" {
			addFields(k, f.Type, path, req, props)
			continue
		}
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		s := schemaOf(k, f.Type, join(path, name), req)
		if r := rule(k, t, name); r != nil {
			for _, key := range r.keys {
				s.set(key, r.vals[key])
			}
		}
		props.set(name, s)
	}
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// required finds, by asking the decoder, which fields of kind k's example data it
// requires: a field whose removal from the example makes the decoder refuse the event.
// Objects in arrays are probed in the array's first element. The result maps a path
// ("" the data, "lines[]" each line) to its required fields, in the example's order.
func required(k *domain.Kind) (map[string][]string, error) {
	var data any
	dec := json.NewDecoder(bytes.NewReader(k.Example))
	dec.UseNumber()
	if err := dec.Decode(&data); err != nil {
		return nil, err
	}
	if _, err := decodeWith(k, data); err != nil {
		return nil, fmt.Errorf("%s: the example is refused: %w", k.Type, err)
	}
	out := map[string][]string{}
	var walk func(path string, v any, rebuild func(any) any) error
	walk = func(path string, v any, rebuild func(any) any) error {
		switch v := v.(type) {
		case map[string]any:
			for _, name := range orderedKeys(k.Example, v) {
				without := make(map[string]any, len(v))
				for n, x := range v {
					if n != name {
						without[n] = x
					}
				}
				if _, err := decodeWith(k, rebuild(without)); err != nil {
					out[path] = append(out[path], name)
				}
				field := v[name]
				if err := walk(join(path, name), field, func(nv any) any {
					c := make(map[string]any, len(v))
					for n, x := range v {
						c[n] = x
					}
					c[name] = nv
					return rebuild(c)
				}); err != nil {
					return err
				}
			}
		case []any:
			if len(v) > 0 {
				return walk(path+"[]", v[0], func(nv any) any {
					c := slices.Clone(v)
					c[0] = nv
					return rebuild(c)
				})
			}
		}
		return nil
	}
	return out, walk("", data, func(v any) any { return v })
}

// orderedKeys returns m's keys in the order the example writes them (the registry's
// example is encoded from a Go struct, so the order of its fields).
func orderedKeys(example json.RawMessage, m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for n := range m {
		keys = append(keys, n)
	}
	pos := func(n string) int { return bytes.Index(example, []byte(`"`+n+`":`)) }
	slices.SortFunc(keys, func(a, b string) int { return pos(a) - pos(b) })
	return keys
}

// decodeWith decodes an event of kind k with data, as a sender would send it.
func decodeWith(k *domain.Kind, data any) (domain.Event, error) {
	ev := map[string]any{"event_id": "e1", "type": k.Type, "data": data}
	if k.Entity != domain.OnSKU {
		ev["lcid"] = "LC-1"
	}
	body, err := json.Marshal(ev)
	if err != nil {
		return domain.Event{}, err
	}
	return domain.Decode(body, 0)
}

// SchemaBase is where the inbound schemas' $id names them.
const SchemaBase = "https://junban.dev/schemas/inbound/"

// envelopeDoc describes the envelope's fields, as docs/events.md does.
var envelopeDoc = map[string]string{
	"event_id":    "The sender's id: junban applies an event id once, whatever the number of deliveries.",
	"version":     "The contract's version the event follows; absent means " + event.Version + ".",
	"lcid":        "The order's id.",
	"occurred_at": "RFC 3339, informative.",
	"traceparent": "junban's own (the trace of the message that queued the event): what a sender writes is replaced.",
	"tracestate":  "junban's own, as traceparent.",
	"queued_at":   "junban's own, as traceparent.",
}

// inboundSchema is the JSON Schema (draft 2020-12) of the events of kind k as a sender
// sends them: the envelope, and the kind's data.
func inboundSchema(k *domain.Kind) (*obj, error) {
	lcid := newObj("allOf", []any{id(event.MaxIDLength, ""), newObj("not", newObj("pattern", "^"+event.SKUEntityPrefix))},
		"description", envelopeDoc["lcid"]+" It never begins with \""+event.SKUEntityPrefix+"\".")
	eventID := id(event.MaxIDLength, envelopeDoc["event_id"])
	req := []string{"event_id", "type"}
	switch k.Entity {
	case domain.OnOrder:
		req = append(req, "lcid")
	case domain.OnSKU:
		lcid.set("description", "Not read by a SKU's event; when present, an lcid's rules hold.")
	case domain.OnNamed:
		req = append(req, "lcid")
		lcid = id(event.MaxIDLength+len(event.SKUEntityPrefix), "The entity to drain: an order's lcid, or \""+event.SKUEntityPrefix+"\" and a SKU.")
	}
	if k.Origin == domain.Own {
		// junban names its own events in its namespace (event.ExpiryEventID).
		eventID.set("pattern", "^"+event.OwnMark+"?"+strings.TrimPrefix(idPattern, "^"))
	}
	props := newObj(
		"event_id", eventID,
		"type", newObj("const", string(k.Type)),
		"version", newObj("enum", event.Versions, "description", envelopeDoc["version"]),
		"lcid", lcid,
		"occurred_at", newObj("type", "string", "format", "date-time", "description", envelopeDoc["occurred_at"]),
		"traceparent", newObj("type", "string", "description", envelopeDoc["traceparent"]),
		"tracestate", newObj("type", "string", "description", envelopeDoc["tracestate"]),
		"queued_at", newObj("type", "string", "format", "date-time", "description", envelopeDoc["queued_at"]),
	)
	if k.HasData() {
		r, err := required(k)
		if err != nil {
			return nil, err
		}
		data := schemaOf(k.Type, reflect.TypeOf(k.NewData()), "", r)
		data.set("examples", []any{k.Example})
		props.set("data", data)
		if len(r[""]) > 0 {
			req = append(req, "data")
		}
	} else {
		props.set("data", newObj("description", "Not read: "+string(k.Type)+" carries no data."))
	}
	doc := k.Doc
	switch k.Origin {
	case domain.Own:
		doc += "; junban makes it and the orders queue refuses it (ERR_JUNBAN_EVENT)"
	case domain.Nudge:
		doc += "; junban sends it"
	}
	return newObj(
		"$schema", "https://json-schema.org/draft/2020-12/schema",
		"$id", SchemaBase+string(k.Type)+".schema.json",
		"title", string(k.Type),
		"description", doc+" (docs/events.md has the rules).",
		"type", "object",
		"required", req,
		"properties", props,
	), nil
}

// resultSchema is the JSON Schema (draft 2020-12) of a result event as a reader takes it:
// additional properties allowed, the fields Go always writes required.
func resultSchema() *obj {
	s := schemaOf("", reflect.TypeFor[event.Result](), "", nil)
	loosen(s)
	out := newObj(
		"$schema", "https://json-schema.org/draft/2020-12/schema",
		"$id", "https://junban.dev/schemas/result.schema.json",
		"title", "result",
		"description", "What one order event did (docs/events.md, \"The result event\"). Its fields grow only by addition within a version.")
	for _, k := range s.keys {
		out.set(k, s.vals[k])
	}
	return out
}

// queueKinds are the kinds a message on the orders queue may be: every kind but junban's
// own, which junban submits into the turn itself.
func queueKinds() []*domain.Kind {
	var out []*domain.Kind
	for _, k := range domain.Kinds() {
		if k.Origin != domain.Own {
			out = append(out, k)
		}
	}
	return out
}
