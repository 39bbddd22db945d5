package lockhandoff

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// Prefetch names the keys a handler reads first, so that the script that gives an
// envelope its turn reads them too (prefetch.lua) and the handler's first run finds them
// in Turn.Prefetched instead of paying a round trip for them.
//
// The reads are made in the script that moves the envelope into proc, under the turn's
// lock, and the handler runs next under the same lock: what it finds is what a read of its
// own would have found, as long as nothing writes these keys outside the entity's turn.
type Prefetch struct {
	// Suffixes name keys of the entity, Key(prefix, entity, suffix), read with every
	// envelope.
	Suffixes []string
	// IDField names a top-level string field of the envelope's JSON (letters, digits and
	// underscores); "" reads no key by it. Its value v names one more key to read:
	// Key(prefix, entity, IDSuffix+v).
	IDField string
	// IDSuffix starts the suffix of the key IDField's value names.
	IDSuffix string
}

// Prefetched is what Config.Prefetch named, as read in the script that gave an envelope
// its turn. A value is a string, or nil when its key did not exist (MGET's values).
type Prefetched struct {
	// ID is the value of Prefetch.IDField the script found, "" when it found none. The
	// script finds it by a pattern, not by a JSON parse (it may find a nested field of the
	// same name): ByID is the value for this ID, to be used only when it is the value the
	// handler decoded itself.
	ID string
	// ByID is the value of Key(prefix, entity, Prefetch.IDSuffix+ID).
	ByID any
	// Values are the values of Prefetch.Suffixes' keys, in order.
	Values []any
}

var fieldName = regexp.MustCompile(`^[A-Za-z0-9_]+$`)

func (p *Prefetch) validate() error {
	if p == nil {
		return nil
	}
	var errs []error
	if p.IDField != "" && !fieldName.MatchString(p.IDField) {
		errs = append(errs, fmt.Errorf("Prefetch.IDField %q is not letters, digits and underscores", p.IDField))
	}
	if p.IDField == "" && p.IDSuffix != "" {
		errs = append(errs, errors.New("Prefetch.IDSuffix is set without an IDField"))
	}
	for _, s := range p.Suffixes {
		if s == "" || strings.ContainsAny(s, "{}") {
			errs = append(errs, fmt.Errorf("Prefetch.Suffixes: %q is empty or holds a brace", s))
		}
	}
	return errors.Join(errs...)
}

// prefetchArgs appends what prefetch.lua reads to a script's keys and arguments.
func (h *Handoff) prefetchArgs(k keys, ks []string, args []any) ([]string, []any) {
	p := h.cfg.Prefetch
	if p == nil {
		return ks, append(args, 0, "", "")
	}
	for _, s := range p.Suffixes {
		ks = append(ks, Key(k.prefix, k.entity, s))
	}
	return ks, append(args, len(p.Suffixes), p.IDField, Key(k.prefix, k.entity, p.IDSuffix))
}

// parsePrefetched reads prefetch.lua's reply; nil (and no error) when the script read
// nothing.
func parsePrefetched(v any) (*Prefetched, error) {
	if v == nil {
		return nil, nil
	}
	r, ok := v.([]any)
	if !ok || len(r) < 2 {
		return nil, fmt.Errorf("prefetched: unexpected reply %v", v)
	}
	id, _ := r[0].(string)
	return &Prefetched{ID: id, ByID: r[1], Values: r[2:]}, nil
}
