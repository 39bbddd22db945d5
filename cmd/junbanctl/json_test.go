package main

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/junban/junban/internal/ledger"
	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/testenv"
)

// decode runs the command with args and --json and decodes its standard output, which
// must be one JSON document, into v (unknown fields are an error: the names are the
// documented ones). It returns the command's error.
func decode(t *testing.T, v any, words string, args ...string) error {
	t.Helper()
	var out bytes.Buffer
	err := ctl(context.Background(), &out, words, append(args, "--json"))
	testenv.DecodeJSON(t, fmt.Sprintf("junbanctl %s %q --json (command: %v)", words, args, err), out.Bytes(), v)
	return err
}

// send, dlq list, dlq redrive and queues create print one JSON document each with --json.
func TestJSONOfTheQueueCommands(t *testing.T) {
	testenv.EachQueueKind(t, func(t *testing.T, newQueues testenv.NewQueuesFunc) {
		c, q := dlqTestEnv(t, newQueues)
		var sent sendReport
		if err := decode(t, &sent, "send", "--type", "order.cancelled", "--lcid", "LC-JSON"); err != nil || sent.Sent != 1 {
			t.Fatalf("send: %+v, %v", sent, err)
		}
		take(t, c, q.Orders.URL)

		deadLetter(t, c, q.Orders.DLQURL, `{"event_id":"dead-1"}`, nil)
		var list dlqListReport
		if err := decode(t, &list, "dlq list", "--queue", q.OrdersDLQName); err != nil {
			t.Fatal(err)
		}
		if list.DLQ != q.OrdersDLQName || len(list.Messages) != 1 || list.Messages[0].Body != `{"event_id":"dead-1"}` ||
			list.Messages[0].Reason == "" || list.Messages[0].ID == "" {
			t.Fatalf("dlq list: %+v", list)
		}

		var empty dlqListReport
		if err := decode(t, &empty, "dlq list", "--queue", q.ResultsDLQName); err != nil || empty.Messages == nil || len(empty.Messages) != 0 {
			t.Fatalf("dlq list of an empty DLQ: %+v, %v (want messages: [])", empty, err)
		}

		var moved redriveReport
		if err := decode(t, &moved.Report, "dlq redrive", "--queue", q.OrdersDLQName); err != nil || moved.Moved[q.OrdersName] != 1 || moved.DLQ != q.OrdersDLQName {
			t.Fatalf("dlq redrive: %+v, %v", moved, err)
		}

		var qs queuesReport
		if err := decode(t, &qs, "queues create", "--max-receive-count", "5", "--quiet"); err != nil {
			t.Fatal(err)
		}
		if len(qs.Queues) != 4 {
			t.Fatalf("queues create: %+v", qs)
		}
		for _, s := range qs.Queues {
			if s.State != "exists" || s.URL == "" {
				t.Errorf("queues create: %+v, want every queue in place", s)
			}
		}
	})
}

// migrate, inventory import and reconcile print one JSON document each with --json;
// reconcile's drift carries its kind and key, and the exit status is still the check's.
func TestJSONOfTheDatabaseCommands(t *testing.T) {
	d := readerEnv(t)
	var m migrateReport
	if err := decode(t, &m, "migrate"); err != nil || m.Applied != 0 {
		t.Fatalf("migrate on a migrated schema: %+v, %v", m, err)
	}

	file := filepath.Join(t.TempDir(), "inv.csv")
	csv := "sku,safety_stock,lot_id,kind,sellable\nJS-1,1,,,\nJS-1,,L1,onhand,5\nJS-1,,L2,onhand,3\n"
	if err := os.WriteFile(file, []byte(csv), 0o644); err != nil {
		t.Fatal(err)
	}
	var dry inventoryReport
	if err := decode(t, &dry, "inventory import", "--dry-run", file); err != nil || dry != (inventoryReport{File: file, DryRun: true, SKUs: 1, Lots: 2}) {
		t.Fatalf("inventory import --dry-run: %+v, %v", dry, err)
	}
	var wrote inventoryReport
	if err := decode(t, &wrote, "inventory import", file); err != nil || wrote != (inventoryReport{File: file, SKUs: 1, Lots: 2}) {
		t.Fatalf("inventory import: %+v, %v", wrote, err)
	}

	var clean reconcileJSON
	if err := decode(t, &clean, "reconcile", "--skus-only"); err != nil || clean.Remaining != 0 || len(clean.Drifts) != 0 || clean.OrdersCompared {
		t.Fatalf("reconcile with nothing in Redis: %+v, %v", clean, err)
	}
	// A SKU that PostgreSQL holds at a version Redis has not got: ahead.
	ctx := context.Background()
	if _, err := d.Ledger.Availability(ctx, ledger.AvailabilityRequest{SKU: "JS-1", TargetDate: "2026-12-01", Mode: stock.ModeShip}); err != nil {
		t.Fatal(err)
	}
	if err := d.DB.Exec(`UPDATE skus SET version = version + 5 WHERE sku = 'JS-1'`).Error; err != nil {
		t.Fatal(err)
	}
	// And a lot row at store-1 that Redis does not hold: the drift names its location.
	if err := d.DB.Exec(`INSERT INTO lots (sku, lot_id, kind, best_before, reg_seq, valid_from, valid_to, sellable, location)
VALUES ('JS-1', 'X9', 'onhand', '2027-01-01', 9, '0001-01-01', '9999-12-31', 1, 'store-1')`).Error; err != nil {
		t.Fatal(err)
	}
	var drift reconcileJSON
	err := decode(t, &drift, "reconcile")
	if err == nil || drift.Remaining != 1 || len(drift.Drifts) != 1 || drift.Drifts[0].Key != "JS-1" ||
		drift.Drifts[0].Entity != "sku" || drift.Drifts[0].Kind == "" || len(drift.Hints) == 0 || !drift.OrdersCompared ||
		!slices.Equal(drift.Drifts[0].Locations, []string{"store-1"}) || !maps.Equal(drift.ByLocation, map[string]int{"store-1": 1}) {
		t.Fatalf("reconcile with a drift: %+v, %v (want an error: the exit status is the check's)", drift, err)
	}
	var out bytes.Buffer
	if err := ctl(ctx, &out, "reconcile", nil); err == nil || !strings.Contains(out.String(), "SKUs drifting by location (of their differing lots): store-1 1\n") {
		t.Fatalf("reconcile's text: %v\n%s", err, out.String())
	}
}
