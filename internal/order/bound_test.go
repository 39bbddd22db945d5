package order_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/junban/junban/internal/domain"
	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/queue"
)

// padded is prefix padded with c to n bytes: ids at their maximum length, each distinct.
func padded(prefix string, n int, c string) string {
	return prefix + strings.Repeat(c, n-len(prefix))
}

// TestLargestAcceptedEventsResultFits runs the largest events Decode accepts with the
// default bound through the real turn, processor, ledger and results queue (whose
// publisher refuses a message over SQS's classic 256 KiB): an order.placed of
// MaxLinesDefault lines, every id at its maximum length, each line spread over
// ResultLotsPerLine lots; then an order.lines_changed that replaces every line and is
// refused at its last release, the largest result the model knows (WorstCaseResult).
// Each result must arrive, be no larger than the model says, and fit in the results
// queue's message with CheckResultBound's margin.
func TestLargestAcceptedEventsResultFits(t *testing.T) {
	t.Parallel()
	const n, lots = domain.MaxLinesDefault, domain.ResultLotsPerLine
	var skus []stock.SKU
	sku := func(i int) string { return padded(fmt.Sprintf("S%03d-", i), stock.MaxIDLen, "s") }
	for i := range 2 * n {
		s := stock.SKU{SKU: sku(i)}
		for j := range lots {
			// One unit a lot: a line of `lots` units takes every lot of its SKU.
			s.Lots = append(s.Lots, onHand(padded(fmt.Sprintf("L%03d-%d-", i, j), stock.MaxIDLen, "l"), int64(j+1), 1, fmt.Sprintf("2027-01-%02d", j+1)))
		}
		skus = append(skus, s)
	}
	h := newHarness(t, skus)
	lcid := padded("LC-", event.MaxIDLength, "c")
	lines := func(first int, tag string) []event.Line {
		var ls []event.Line
		for i := first; i < first+n; i++ {
			ls = append(ls, event.Line{LineID: padded(fmt.Sprintf("%s%03d-", tag, i), event.MaxIDLength, "i"), SKU: sku(i), Qty: lots})
		}
		return ls
	}
	placedEv := ev(lcid, event.OrderPlaced, event.OrderData{Mode: stock.ModeReserve, TargetDate: "2026-12-01", Lines: lines(0, "old")})
	placedEv.EventID = padded("placed-", event.MaxIDLength, "e")
	h.submit(placedEv)
	h.collect(1)
	placedRes := h.result(placedEv.EventID)
	if placedRes.Outcome != event.Applied {
		t.Fatalf("placement %s/%s: %s", placedRes.Outcome, placedRes.Reason, placedRes.Detail)
	}
	for _, ln := range placedRes.Order.Lines {
		if len(ln.Lots) != lots {
			t.Fatalf("line %.12s holds %d lots, want %d: the test does not reach the bound", ln.LineID, len(ln.Lots), lots)
		}
	}

	// The last old line's stock leaves its bucket behind the order's back, so that the
	// order's release of it is refused after every other line was changed.
	last := placedRes.Order.Lines[n-1]
	if _, err := h.led.Apply(context.Background(), stock.ReleaseRequest{OpID: "drift", SKU: last.SKU, From: stock.Reserved, Lots: last.Lots}); err != nil {
		t.Fatal(err)
	}
	changed := ev(lcid, event.OrderLinesChanged, event.OrderData{Lines: lines(n, "new")})
	changed.EventID = padded("changed-", event.MaxIDLength, "e")
	h.submit(changed)
	h.collect(2)
	changedRes := h.result(changed.EventID)
	if changedRes.Outcome != event.Rejected || changedRes.Reason != "ERR_INSUFFICIENT" {
		t.Fatalf("lines change %s/%s, want rejected/ERR_INSUFFICIENT: %s", changedRes.Outcome, changedRes.Reason, changedRes.Detail)
	}
	// Every new line allocated and every old line but the last released, then all undone.
	if got, want := len(changedRes.Moves), 2*(2*n-1)*lots; got != want {
		t.Fatalf("%d moves, want %d: the test does not reach the model's worst case", got, want)
	}

	model := domain.WorstCaseResultBytes(n, lots)
	room := queue.MaxMessageSizeDefault - queue.MaxMessageSizeDefault/domain.ResultMarginDivisor
	for name, r := range map[string]event.Result{"placed": placedRes, "changed": changedRes} {
		body, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %d bytes; the model's worst case %d, room %d", name, len(body), model, room)
		if len(body) > model {
			t.Errorf("%s: result of %d bytes, more than the model's worst case %d", name, len(body), model)
		}
		if len(body) > room {
			t.Errorf("%s: result of %d bytes, more than %d", name, len(body), room)
		}
	}
	if err := domain.CheckResultBound(n, queue.MaxMessageSizeDefault); err != nil {
		t.Errorf("the default bound does not pass the start-up check: %v", err)
	}
}

// CheckResultBound refuses a lines bound whose worst case exceeds the queue's messages,
// and names the setting and the bound that would fit.
func TestCheckResultBoundRefusesWhatCannotFit(t *testing.T) {
	fit := domain.MaxLinesFitting(queue.MaxMessageSizeDefault)
	if fit < domain.MaxLinesDefault {
		t.Fatalf("%d lines fit, below the default %d", fit, domain.MaxLinesDefault)
	}
	if err := domain.CheckResultBound(fit, queue.MaxMessageSizeDefault); err != nil {
		t.Errorf("%d lines: %v", fit, err)
	}
	err := domain.CheckResultBound(fit+1, queue.MaxMessageSizeDefault)
	if err == nil || !strings.Contains(err.Error(), "JUNBAN_MAX_LINES") || !strings.Contains(err.Error(), fmt.Sprintf("at most %d fits", fit)) {
		t.Errorf("%d lines: %v, want a refusal naming JUNBAN_MAX_LINES and %d", fit+1, err, fit)
	}
	if big := domain.MaxLinesFitting(1 << 20); big <= fit {
		t.Errorf("a 1 MiB queue fits %d lines, no more than a 256 KiB one (%d)", big, fit)
	}
}
