package outboundcheck

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/junban/junban/internal/postgres/outbound"
)

// SampleMax is how many examples a Finding keeps.
const SampleMax = 20

// Finding counts one kind of problem (or of copies), with a few examples.
type Finding struct {
	// Count is how many there are.
	Count int `json:"count"`
	// Sample names up to SampleMax of them.
	Sample []string `json:"sample,omitempty"`
}

func (f *Finding) add(format string, a ...any) {
	f.Count++
	if len(f.Sample) < SampleMax {
		f.Sample = append(f.Sample, fmt.Sprintf(format, a...))
	}
}

// Report is what Check found.
type Report struct {
	// Received counts the messages received, copies included; Distinct the ids among them.
	Received int `json:"received"`
	Distinct int `json:"distinct"`
	// Rows counts the outbox's rows (since CheckOptions.Since); Unpublished those the relay
	// has not marked published.
	Rows        int `json:"rows"`
	Unpublished int `json:"unpublished"`
	// Earlier counts the distinct messages received of rows written before
	// CheckOptions.Since (an earlier run's, published late): neither checked nor counted in
	// Kinds.
	Earlier int `json:"earlier,omitempty"`
	// Kinds counts the distinct messages received of each kind; RowKinds the rows.
	Kinds    map[outbound.Kind]int `json:"kinds"`
	RowKinds map[outbound.Kind]int `json:"row_kinds"`
	// Missing are committed rows (published or not) never received: "entity#seq id".
	Missing Finding `json:"missing"`
	// Unknown are ids received that no row holds: published but never committed.
	Unknown Finding `json:"unknown"`
	// Duplicates counts the copies received beyond each id's first: "id xN".
	Duplicates Finding `json:"duplicates"`
	// Invalid are bodies that break their kind's JSON Schema: "id: why".
	Invalid Finding `json:"invalid"`
	// Gaps are entities whose seqs received are not 1..their max: "entity: seq N not received".
	Gaps Finding `json:"gaps"`
}

// CheckOptions say which rows Check holds to account.
type CheckOptions struct {
	// Since, when set, limits the check to rows written at or after it (a run's, in a
	// database earlier runs wrote to); a message of an earlier row is counted in
	// Report.Earlier, and an earlier row is no gap. Zero: every row.
	Since time.Time
}

// row is an outbox row as Check reads it.
type row struct {
	MessageID string
	Kind      outbound.Kind
	Entity    string
	Seq       int64
	Published bool
	// Earlier is true for a row written before CheckOptions.Since.
	Earlier bool
}

// Check compares the messages received (Drain) with the outbox table of db.
func Check(ctx context.Context, db *gorm.DB, received []Message, o CheckOptions) (Report, error) {
	var rows []row
	if err := db.WithContext(ctx).Raw(`SELECT message_id::text AS message_id, kind, entity, seq,
	published_at IS NOT NULL AS published, created_at < ? AS earlier FROM outbox ORDER BY entity, seq`, o.Since).Scan(&rows).Error; err != nil {
		return Report{}, fmt.Errorf("outboundcheck: read the outbox: %w", err)
	}
	return compare(rows, received), nil
}

// compare is Check on the rows read.
func compare(rows []row, received []Message) Report {
	r := Report{Received: len(received), Kinds: map[outbound.Kind]int{}, RowKinds: map[outbound.Kind]int{}}
	inTable := make(map[string]bool, len(rows))
	earlier := map[string]bool{}
	earlierSeq := map[string]map[int64]bool{}
	for _, w := range rows {
		inTable[w.MessageID] = true
		if w.Earlier {
			earlier[w.MessageID] = true
			if earlierSeq[w.Entity] == nil {
				earlierSeq[w.Entity] = map[int64]bool{}
			}
			earlierSeq[w.Entity][w.Seq] = true
			continue
		}
		r.Rows++
		r.RowKinds[w.Kind]++
		if !w.Published {
			r.Unpublished++
		}
	}
	copies := map[string]int{}
	seqs := map[string][]int64{}
	for _, m := range received {
		if m.Invalid != "" {
			r.Invalid.add("%s: %s", cmp.Or(m.ID, "(no id)"), m.Invalid)
		}
		if m.ID == "" {
			continue
		}
		copies[m.ID]++
		if copies[m.ID] > 1 {
			continue
		}
		r.Distinct++
		if earlier[m.ID] {
			r.Earlier++
			continue
		}
		r.Kinds[m.Kind]++
		if !inTable[m.ID] {
			r.Unknown.add("%s#%d %s", m.Entity, m.Seq, m.ID)
		}
		seqs[m.Entity] = append(seqs[m.Entity], m.Seq)
	}
	for _, w := range rows {
		if copies[w.MessageID] == 0 && !w.Earlier {
			r.Missing.add("%s#%d %s (%s)", w.Entity, w.Seq, w.MessageID, map[bool]string{true: "published", false: "unpublished"}[w.Published])
		}
	}
	ids := make([]string, 0, len(copies))
	for id, n := range copies {
		if n > 1 {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		r.Duplicates.Count += copies[id] - 1
		if len(r.Duplicates.Sample) < SampleMax {
			r.Duplicates.Sample = append(r.Duplicates.Sample, fmt.Sprintf("%s x%d", id, copies[id]))
		}
	}
	entities := make([]string, 0, len(seqs))
	for e := range seqs {
		entities = append(entities, e)
	}
	slices.Sort(entities)
	for _, e := range entities {
		s := seqs[e]
		slices.Sort(s)
		s = slices.Compact(s)
		next := int64(1)
		for _, q := range s {
			for ; next < q; next++ {
				if !earlierSeq[e][next] {
					r.Gaps.add("%s: seq %d not received", e, next)
				}
			}
			next = q + 1
		}
	}
	return r
}

// OK tells whether nothing is missing, unknown, out of sequence or invalid (copies are
// allowed: the relay publishes at least once).
func (r Report) OK() bool { return len(r.Problems()) == 0 }

// Problems says what is wrong, one line per kind of problem.
func (r Report) Problems() []string {
	var p []string
	for _, f := range []struct {
		what string
		f    Finding
	}{{"missing", r.Missing}, {"unknown", r.Unknown}, {"gaps", r.Gaps}, {"invalid", r.Invalid}} {
		if f.f.Count > 0 {
			p = append(p, fmt.Sprintf("%d %s (e.g. %s)", f.f.Count, f.what, f.f.Sample[0]))
		}
	}
	return p
}

// Print writes the report as text.
func (r Report) Print(w io.Writer) {
	fmt.Fprintf(w, "outbound: %d messages received, %d distinct; %d rows in the outbox, %d unpublished\n",
		r.Received, r.Distinct, r.Rows, r.Unpublished)
	if r.Earlier > 0 {
		fmt.Fprintf(w, "  %d received of rows written before the run, not checked\n", r.Earlier)
	}
	for _, k := range outbound.Kinds {
		fmt.Fprintf(w, "  %-22s %8d received %8d rows\n", k, r.Kinds[k], r.RowKinds[k])
	}
	for _, f := range []struct {
		what string
		f    Finding
	}{{"missing", r.Missing}, {"unknown", r.Unknown}, {"gaps", r.Gaps}, {"invalid", r.Invalid}, {"duplicates", r.Duplicates}} {
		fmt.Fprintf(w, "  %-10s %d", f.what, f.f.Count)
		if len(f.f.Sample) > 0 {
			fmt.Fprintf(w, " (e.g. %s)", strings.Join(f.f.Sample[:min(3, len(f.f.Sample))], "; "))
		}
		fmt.Fprintln(w)
	}
	if p := r.Problems(); len(p) > 0 {
		fmt.Fprintf(w, "FAIL: %s\n", strings.Join(p, "; "))
		return
	}
	fmt.Fprintln(w, "OK: every committed message received, none unknown, no gap, every body valid (copies allowed)")
}

// Published is a DrainOptions.Settled that says true once the relay has published every
// outbox row of db.
func Published(db *gorm.DB) func(ctx context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		s, err := outbound.ReadStats(ctx, db)
		return s.Unpublished == 0, err
	}
}
