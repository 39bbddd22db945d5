package queue

import (
	"strconv"
	"testing"
)

func TestLimitAttributesKeepsJunbanOnes(t *testing.T) {
	attrs := map[string]string{AttrDLQReason: "r", AttrSourceQueue: "q", AttrTraceParent: "tp"}
	for i := range 12 {
		attrs["a"+strconv.Itoa(i)] = "v"
	}
	got, dropped := limitAttributes(attrs, AttrDLQReason, AttrSourceQueue, AttrTraceParent)
	if len(got) != MaxAttributes || len(dropped) != len(attrs)-MaxAttributes {
		t.Fatalf("kept %d, dropped %d of %d", len(got), len(dropped), len(attrs))
	}
	for _, k := range []string{AttrDLQReason, AttrSourceQueue, AttrTraceParent} {
		if got[k] == "" {
			t.Fatalf("%s dropped", k)
		}
	}
	few := map[string]string{"a": "b"}
	if got, dropped := limitAttributes(few); len(got) != 1 || dropped != nil {
		t.Fatal("a small set changed")
	}
}
