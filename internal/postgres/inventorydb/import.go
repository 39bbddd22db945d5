package inventorydb

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/junban/junban/internal/ledger"
	"github.com/junban/junban/internal/ledger/stock"
)

// ImportColumns are the columns of an import file (CSV header names, JSON-lines keys).
// A row without lot_id is a SKU row and carries safety_stock, the SKU's network-wide one,
// or with a location (other than the default) that location's own; a row with lot_id is
// a lot row and carries the lot's fields.
var ImportColumns = []string{"sku", "safety_stock", "lot_id", "kind", "good", "best_before", "reg_seq",
	"arrives_at", "valid_from", "valid_to", "sellable", "reserved", "allocated", "hidden", "shipped", "defective", "location"}

// LineError is one problem of an import file.
type LineError struct {
	Line  int    // 1-based line number in the file
	Field string // column, or "" for the whole line
	Msg   string
}

func (e LineError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("line %d: %s", e.Line, e.Msg)
	}
	return fmt.Sprintf("line %d: %s: %s", e.Line, e.Field, e.Msg)
}

// ImportErrors lists every problem found in an import file.
type ImportErrors []LineError

func (e ImportErrors) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d problem(s) in the import file:", len(e))
	for i, le := range e {
		if i == 50 {
			fmt.Fprintf(&b, "\n  ... and %d more", len(e)-50)
			break
		}
		b.WriteString("\n  ")
		b.WriteString(le.Error())
	}
	return b.String()
}

// ImportSKU is a SKU of an import file: its settings if the file has a SKU row, and its lots.
type ImportSKU struct {
	SKU string
	// SafetyStock is set when the file has a SKU row for it.
	SafetyStock *int64
	// LocationSafety are the locations' own safety stocks that the file's SKU rows naming
	// a location (other than the default) set, 0 for none; nil when there are none.
	LocationSafety map[string]int64
	Lots           []ImportLot
}

// ImportLot is a lot row; RegSeq nil keeps an existing lot's registration number or
// gives a new lot the next free one, in file order.
type ImportLot struct {
	Line   int
	Lot    stock.Lot
	RegSeq *int64
}

// ParseImport reads a CSV file with a header, or JSON lines (detected by a leading
// '{'), and validates every line. It returns all problems at once.
func ParseImport(r io.Reader) ([]ImportSKU, error) {
	br := bufio.NewReader(r)
	head, _ := br.Peek(512)
	var rows []map[string]string
	var lines []int
	var errs ImportErrors
	if t := bytes.TrimLeft(head, " \t\r\n\ufeff"); len(t) > 0 && t[0] == '{' {
		rows, lines, errs = readJSONLines(br)
	} else {
		rows, lines, errs = readCSV(br)
	}
	out, more := validateRows(rows, lines)
	errs = append(errs, more...)
	if len(errs) > 0 {
		sort.SliceStable(errs, func(i, j int) bool { return errs[i].Line < errs[j].Line })
		return nil, errs
	}
	return out, nil
}

func readCSV(r io.Reader) ([]map[string]string, []int, ImportErrors) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.TrimLeadingSpace = true
	header, err := cr.Read()
	if err != nil {
		return nil, nil, ImportErrors{{Line: 1, Msg: "no CSV header: " + err.Error()}}
	}
	known := map[string]bool{}
	for _, c := range ImportColumns {
		known[c] = true
	}
	var errs ImportErrors
	seen := map[string]bool{}
	for i, h := range header {
		header[i] = strings.TrimPrefix(strings.TrimSpace(strings.ToLower(h)), "\ufeff")
		switch {
		case !known[header[i]]:
			errs = append(errs, LineError{1, h, "unknown column (known: " + strings.Join(ImportColumns, ", ") + ")"})
		case seen[header[i]]:
			errs = append(errs, LineError{1, h, "column named twice"})
		}
		seen[header[i]] = true
	}
	var rows []map[string]string
	var lines []int
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				errs = append(errs, LineError{Line: pe.Line, Msg: pe.Err.Error()})
				continue
			}
			errs = append(errs, LineError{Msg: "read: " + err.Error()})
			break
		}
		line, _ := cr.FieldPos(0)
		if len(rec) == 1 && strings.TrimSpace(rec[0]) == "" {
			continue
		}
		if len(rec) != len(header) {
			errs = append(errs, LineError{Line: line, Msg: fmt.Sprintf("%d fields, the header has %d", len(rec), len(header))})
			continue
		}
		row := map[string]string{}
		for i, v := range rec {
			row[header[i]] = strings.TrimSpace(v)
		}
		rows, lines = append(rows, row), append(lines, line)
	}
	return rows, lines, errs
}

func readJSONLines(r *bufio.Reader) ([]map[string]string, []int, ImportErrors) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	known := map[string]bool{}
	for _, c := range ImportColumns {
		known[c] = true
	}
	var rows []map[string]string
	var lines []int
	var errs ImportErrors
	for n := 1; sc.Scan(); n++ {
		text := bytes.TrimSpace(sc.Bytes())
		if n == 1 {
			text = bytes.TrimPrefix(text, []byte("\ufeff")) // a byte order mark, as ParseImport allows
		}
		if len(text) == 0 {
			continue
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(text, &obj); err != nil {
			errs = append(errs, LineError{Line: n, Msg: "not a JSON object: " + err.Error()})
			continue
		}
		for _, k := range duplicateKeys(text) {
			errs = append(errs, LineError{n, k, "key given twice"})
		}
		row := map[string]string{}
		for k, raw := range obj {
			if !known[k] {
				errs = append(errs, LineError{n, k, "unknown field"})
				continue
			}
			var s string
			if err := json.Unmarshal(raw, &s); err == nil {
				row[k] = s
				continue
			}
			if string(raw) == "null" {
				continue
			}
			row[k] = string(raw) // numbers and booleans, parsed like CSV cells
		}
		rows, lines = append(rows, row), append(lines, n)
	}
	if err := sc.Err(); err != nil {
		errs = append(errs, LineError{Msg: "read: " + err.Error()})
	}
	return rows, lines, errs
}

// validateRows checks every row and groups them by SKU, in file order.
func validateRows(rows []map[string]string, lines []int) ([]ImportSKU, ImportErrors) {
	var errs ImportErrors
	bySKU := map[string]*ImportSKU{}
	var order []string
	skuLine := map[[2]string]int{}
	lotLine := map[[2]string]int{}
	regLine := map[string]map[int64]int{}
	for i, row := range rows {
		n := lines[i]
		bad := func(field, format string, a ...any) {
			errs = append(errs, LineError{n, field, fmt.Sprintf(format, a...)})
		}
		num := func(field string, max int64) (int64, bool) {
			v, ok := row[field]
			if !ok || v == "" {
				return 0, false
			}
			q, err := strconv.ParseInt(v, 10, 64)
			if err != nil || q < 0 || q > max {
				bad(field, "%q is not an integer in 0..%d", v, max)
				return 0, false
			}
			return q, true
		}
		date := func(field string, required bool, def string) string {
			v := row[field]
			if v == "" {
				if required {
					bad(field, "required")
				}
				return def
			}
			if stock.CheckDate(field, v) != nil {
				bad(field, "%q is not a date (YYYY-MM-DD)", v)
			}
			return v
		}
		sku := row["sku"]
		if sku == "" {
			bad("sku", "required")
			continue
		}
		if err := stock.CheckSKU(sku); err != nil {
			bad("sku", "%s", cleanMsg(err))
			continue
		}
		s, ok := bySKU[sku]
		if !ok {
			s = &ImportSKU{SKU: sku}
			bySKU[sku] = s
			order = append(order, sku)
		}
		lotID := row["lot_id"]
		if lotID == "" {
			skuRow(s, row, n, skuLine, bad, num)
			continue
		}
		if row["safety_stock"] != "" {
			bad("safety_stock", "belongs on the SKU row (a row without lot_id)")
		}
		if err := stock.CheckLotID(lotID); err != nil {
			bad("lot_id", "%s", cleanMsg(err))
			continue
		}
		if first, dup := lotLine[[2]string{sku, lotID}]; dup {
			bad("lot_id", "lot %s of %s repeats line %d", lotID, sku, first)
			continue
		}
		lotLine[[2]string{sku, lotID}] = n
		l := stock.Lot{LotID: lotID, Kind: row["kind"], Good: true}
		if l.Kind != stock.KindOnHand && l.Kind != stock.KindPlanned {
			bad("kind", "%q is neither %q nor %q", l.Kind, stock.KindOnHand, stock.KindPlanned)
		}
		if g := row["good"]; g != "" {
			b, err := strconv.ParseBool(g)
			if err != nil {
				bad("good", "%q is not a boolean (true/false)", g)
			}
			l.Good = b
		}
		l.BestBefore = date("best_before", false, "")
		l.ArrivesAt = date("arrives_at", false, "")
		l.ValidFrom = date("valid_from", false, stock.MinDate)
		l.ValidTo = date("valid_to", false, stock.MaxDate)
		if l.ValidFrom > l.ValidTo {
			bad("valid_to", "%s is before valid_from %s", l.ValidTo, l.ValidFrom)
		}
		l.Sellable, _ = num("sellable", stock.MaxQty)
		l.Reserved, _ = num("reserved", stock.MaxQty)
		l.Allocated, _ = num("allocated", stock.MaxQty)
		l.Hidden, _ = num("hidden", stock.MaxQty)
		l.Shipped, _ = num("shipped", stock.MaxQty)
		l.Defective, _ = num("defective", stock.MaxQty)
		if loc := row["location"]; loc != "" && loc != stock.DefaultLocation {
			if err := stock.CheckLocation(loc); err != nil {
				bad("location", "%q is not a location id (1..%d letters, digits, '.', '_' and '-')", loc, stock.MaxLocationLen)
			}
			l.Location = loc
		}
		il := ImportLot{Line: n, Lot: l}
		if reg, ok := num("reg_seq", stock.MaxRegSeq); ok {
			if regLine[sku] == nil {
				regLine[sku] = map[int64]int{}
			}
			if first, dup := regLine[sku][reg]; dup {
				bad("reg_seq", "%d is taken by line %d of the same SKU", reg, first)
			}
			regLine[sku][reg] = n
			il.RegSeq = &reg
			il.Lot.RegSeq = reg
		}
		s.Lots = append(s.Lots, il)
	}
	out := make([]ImportSKU, 0, len(order))
	for _, sku := range order {
		out = append(out, *bySKU[sku])
	}
	return out, errs
}

// skuRow takes the SKU row (no lot_id) row, line n, into s: the SKU's network-wide safety
// stock, or with a location other than the default that location's own. skuLine holds the
// line of each SKU's row per location ("" for the network-wide one), to refuse one twice.
func skuRow(s *ImportSKU, row map[string]string, n int, skuLine map[[2]string]int,
	bad func(field, format string, a ...any), num func(field string, max int64) (int64, bool)) {
	for _, c := range ImportColumns[3:] {
		if row[c] != "" && c != "location" {
			bad(c, "only lot rows (with a lot_id) carry lot fields")
		}
	}
	loc := row["location"]
	if loc == stock.DefaultLocation {
		loc = ""
	}
	if loc != "" && stock.CheckLocation(loc) != nil {
		bad("location", "%q is not a location id (1..%d letters, digits, '.', '_' and '-')", loc, stock.MaxLocationLen)
		return
	}
	key := [2]string{s.SKU, loc}
	if first, dup := skuLine[key]; dup {
		if loc == "" {
			bad("sku", "SKU row for %s repeats line %d", s.SKU, first)
		} else {
			bad("location", "SKU row for %s at %s repeats line %d", s.SKU, loc, first)
		}
		return
	}
	skuLine[key] = n
	ss, _ := num("safety_stock", stock.MaxQty)
	if loc == "" {
		s.SafetyStock = &ss
		return
	}
	if s.LocationSafety == nil {
		s.LocationSafety = map[string]int64{}
	}
	s.LocationSafety[loc] = ss
}

// duplicateKeys returns the keys that the JSON object text (valid, as Unmarshal found)
// names more than once: Unmarshal keeps the last value of each, silently.
func duplicateKeys(text []byte) []string {
	dec := json.NewDecoder(bytes.NewReader(text))
	if _, err := dec.Token(); err != nil { // {
		return nil
	}
	seen := map[string]bool{}
	var dups []string
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return dups
		}
		k, _ := t.(string)
		if seen[k] && !slices.Contains(dups, k) {
			dups = append(dups, k)
		}
		seen[k] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return dups
		}
	}
	return dups
}

// mergeSorted returns the union of a and b, sorted, each once.
func mergeSorted(a, b []string) []string {
	all := slices.Concat(a, b)
	slices.Sort(all)
	return slices.Compact(all)
}

func liveError(skus []string) error {
	const shown = 20
	list := strings.Join(skus[:min(len(skus), shown)], ", ")
	if len(skus) > shown {
		list += fmt.Sprintf(" and %d more", len(skus)-shown)
	}
	return fmt.Errorf("%w: %d SKU(s) of the file are live (loaded into Redis, or with operations persisted), and Redis is their source of truth: %s; "+
		"change their stock with inventory.received / inventory.adjusted events, or leave them out of the file (nothing was written)",
		ErrLiveSKU, len(skus), list)
}

func cleanMsg(err error) string {
	return strings.TrimPrefix(err.Error(), "ledger: "+stock.ErrInvalidRequest.Error()+": ")
}

// ImportStats counts what WriteImport wrote.
type ImportStats struct{ SKUs, Lots int }

// ErrLiveSKU: an import named SKUs that are live, that is loaded into the ledger (Redis
// holds them) or with operations already persisted (their PostgreSQL version is above 0).
// Redis is their source of truth: an import would overwrite PostgreSQL's copy with the
// file's buckets, losing the reserved and allocated stock that Redis and the persisted
// moves account for, and a lot added that way would never reach Redis.
var ErrLiveSKU = errors.New("ledger: SKU is live")

// LiveCheck answers which of the SKUs are loaded into the ledger's Redis.
type LiveCheck func(ctx context.Context, skus []string) ([]string, error)

// Loaded is the LiveCheck of a ledger in rc under prefix: the SKUs whose hash exists.
func Loaded(rc redis.UniversalClient, prefix string) LiveCheck {
	return func(ctx context.Context, skus []string) ([]string, error) {
		var live []string
		for chunk := range slices.Chunk(skus, 1000) {
			cmds := make([]*redis.IntCmd, len(chunk))
			_, err := rc.Pipelined(ctx, func(p redis.Pipeliner) error {
				for i, sku := range chunk {
					cmds[i] = p.Exists(ctx, ledger.Key(prefix, sku))
				}
				return nil
			})
			if err != nil {
				return nil, fmt.Errorf("ledger: import: which SKUs are loaded: %w", err)
			}
			for i, c := range cmds {
				if c.Val() > 0 {
					live = append(live, chunk[i])
				}
			}
		}
		return live, nil
	}
}

// importLocationSafety upserts the locations' own safety stocks of s at its SKU's version
// (0: an import writes only SKUs that are not live).
func importLocationSafety(tx *gorm.DB, s ImportSKU) error {
	for _, loc := range slices.Sorted(maps.Keys(s.LocationSafety)) {
		err := tx.Exec(`INSERT INTO sku_location_safety (sku, location, safety_stock, version)
			SELECT sku, ?, ?, version FROM skus WHERE sku = ?
			ON CONFLICT (sku, location) DO UPDATE SET safety_stock = EXCLUDED.safety_stock, version = EXCLUDED.version,
				updated_at = now()`, loc, s.LocationSafety[loc], s.SKU).Error
		if err != nil {
			return fmt.Errorf("%s: %w", loc, err)
		}
	}
	return nil
}

// WriteImport upserts the SKUs and lots in one transaction: all or nothing. SKU rows
// set safety_stock, or a location's own (sku_location_safety); SKUs with only lot rows are created with safety stock 0 if absent.
// Lots without reg_seq keep their stored one, or get the next free one in file order.
//
// Live SKUs are refused (ErrLiveSKU, nothing written): those with a PostgreSQL version
// above 0, and those that loaded reports (nil: PostgreSQL's version alone decides, which
// misses a SKU loaded but not yet changed). Their stock changes through the ledger
// (inventory.received and inventory.adjusted events). loaded is asked again just before
// the commit, so only a SKU loaded by a worker in that instant keeps what it loaded over
// the import; reconcile reports it.
func WriteImport(ctx context.Context, db *gorm.DB, skus []ImportSKU, loaded LiveCheck) (ImportStats, error) {
	var st ImportStats
	names := make([]string, len(skus))
	for i, s := range skus {
		names[i] = s.SKU
	}
	var live []string
	if loaded != nil {
		var err error
		if live, err = loaded(ctx, names); err != nil {
			return st, err
		}
	}
	err := db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var persisted []string
		for chunk := range slices.Chunk(names, 1000) {
			var rows []struct {
				SKU     string
				Version int64
			}
			// FOR UPDATE locks the file's existing SKU rows: a result persisted meanwhile
			// for one of them waits until this transaction ends.
			if err := tx.Raw(`SELECT sku, version FROM skus WHERE sku IN ? ORDER BY sku FOR UPDATE`, chunk).
				Scan(&rows).Error; err != nil {
				return err
			}
			for _, r := range rows {
				if r.Version > 0 {
					persisted = append(persisted, r.SKU)
				}
			}
		}
		if all := mergeSorted(live, persisted); len(all) > 0 {
			return liveError(all)
		}
		for _, s := range skus {
			var err error
			if s.SafetyStock != nil {
				err = tx.Exec(`INSERT INTO skus (sku, safety_stock) VALUES (?, ?)
					ON CONFLICT (sku) DO UPDATE SET safety_stock = EXCLUDED.safety_stock, updated_at = now()`,
					s.SKU, *s.SafetyStock).Error
			} else {
				err = tx.Exec(`INSERT INTO skus (sku) VALUES (?) ON CONFLICT (sku) DO NOTHING`, s.SKU).Error
			}
			if err != nil {
				return fmt.Errorf("sku %s: %w", s.SKU, err)
			}
			if err := importLocationSafety(tx, s); err != nil {
				return fmt.Errorf("sku %s: location safety stock: %w", s.SKU, err)
			}
			st.SKUs++
			if len(s.Lots) == 0 {
				continue
			}
			var stored []struct {
				LotID  string
				RegSeq int64
			}
			if err := tx.Raw(`SELECT lot_id, reg_seq FROM lots WHERE sku = ? FOR UPDATE`, s.SKU).Scan(&stored).Error; err != nil {
				return err
			}
			next := int64(0)
			have := map[string]int64{}
			for _, r := range stored {
				have[r.LotID] = r.RegSeq
				next = max(next, r.RegSeq+1)
			}
			for _, l := range s.Lots {
				if l.RegSeq != nil {
					next = max(next, *l.RegSeq+1)
				}
			}
			for _, il := range s.Lots {
				l := il.Lot
				if il.RegSeq == nil {
					if reg, ok := have[l.LotID]; ok {
						l.RegSeq = reg
					} else {
						l.RegSeq = next
						next++
					}
					if l.RegSeq > stock.MaxRegSeq {
						// A later load would refuse the SKU, and every operation on it with it.
						return fmt.Errorf("%w: sku %s lot %s: no registration sequence left after reg_seq %d; give the lot a reg_seq",
							stock.ErrInvalidRequest, s.SKU, l.LotID, stock.MaxRegSeq)
					}
				}
				err := tx.Exec(`INSERT INTO lots (sku, lot_id, kind, good, best_before, reg_seq, arrives_at,
						valid_from, valid_to, sellable, reserved, allocated, hidden, shipped, defective, location)
					VALUES (?, ?, ?, ?, NULLIF(?, '')::date, ?, NULLIF(?, '')::date, ?::date, ?::date, ?, ?, ?, ?, ?, ?, ?)
					ON CONFLICT (sku, lot_id) DO UPDATE SET kind = EXCLUDED.kind, good = EXCLUDED.good, location = EXCLUDED.location,
						best_before = EXCLUDED.best_before, reg_seq = EXCLUDED.reg_seq, arrives_at = EXCLUDED.arrives_at,
						valid_from = EXCLUDED.valid_from, valid_to = EXCLUDED.valid_to, sellable = EXCLUDED.sellable,
						reserved = EXCLUDED.reserved, allocated = EXCLUDED.allocated, hidden = EXCLUDED.hidden,
						shipped = EXCLUDED.shipped, defective = EXCLUDED.defective, updated_at = now()`,
					s.SKU, l.LotID, l.Kind, l.Good, l.BestBefore, l.RegSeq, l.ArrivesAt, l.ValidFrom, l.ValidTo,
					l.Sellable, l.Reserved, l.Allocated, l.Hidden, l.Shipped, l.Defective, stock.LocationOf(l)).Error
				if err != nil {
					return fmt.Errorf("line %d: lot %s of %s: %w", il.Line, l.LotID, s.SKU, err)
				}
				st.Lots++
			}
			// An explicit reg_seq may collide with a stored lot that the file does not name.
			var clash []struct {
				RegSeq int64
				Lots   string
			}
			if err := tx.Raw(`SELECT reg_seq, string_agg(lot_id, ', ' ORDER BY lot_id) AS lots FROM lots
					WHERE sku = ? GROUP BY reg_seq HAVING count(*) > 1`, s.SKU).Scan(&clash).Error; err != nil {
				return err
			}
			if len(clash) > 0 {
				return fmt.Errorf("sku %s: lots %s would share reg_seq %d", s.SKU, clash[0].Lots, clash[0].RegSeq)
			}
		}
		// A worker may have loaded one of the SKUs meanwhile, from the rows before this
		// transaction: then Redis holds what the import is about to replace. Look again
		// just before the commit, which leaves only the commit's own instant.
		if loaded != nil {
			late, err := loaded(ctx, names)
			if err != nil {
				return err
			}
			if len(late) > 0 {
				return liveError(late)
			}
		}
		return nil
	})
	if err != nil {
		return ImportStats{}, fmt.Errorf("import: nothing written: %w", err)
	}
	return st, nil
}
