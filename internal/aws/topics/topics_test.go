package topics

import (
	"encoding/json"
	"strings"
	"testing"
)

const (
	queueARN = "arn:aws:sqs:us-east-1:123456789012:orders"
	topicA   = "arn:aws:sns:us-east-1:123456789012:shop-orders"
	topicB   = "arn:aws:sns:us-east-1:123456789012:returns"
)

func statementsOf(t *testing.T, policy string) []map[string]any {
	t.Helper()
	var doc struct{ Statement []map[string]any }
	if err := json.Unmarshal([]byte(policy), &doc); err != nil {
		t.Fatal(err)
	}
	return doc.Statement
}

// MergePolicy adds one statement per topic, keeps the others (a lone Statement object
// too), replaces its own when it differs, and changes nothing the second time.
func TestMergePolicy(t *testing.T) {
	p, changed, err := MergePolicy("", queueARN, topicA)
	if err != nil || !changed || len(statementsOf(t, p)) != 1 {
		t.Fatalf("from none: %s %v %v", p, changed, err)
	}
	if again, changed, _ := MergePolicy(p, queueARN, topicA); changed || again != p {
		t.Fatalf("a second merge changed %s into %s", p, again)
	}
	p, _, _ = MergePolicy(p, queueARN, topicB)
	if sts := statementsOf(t, p); len(sts) != 2 || sts[0]["Sid"] == sts[1]["Sid"] {
		t.Fatalf("two topics: %s", p)
	}

	lone := `{"Version":"2012-10-17","Id":"q","Statement":{"Sid":"Mine","Effect":"Deny","Principal":"*","Action":"sqs:*","Resource":"*"}}`
	p, changed, _ = MergePolicy(lone, queueARN, topicA)
	if sts := statementsOf(t, p); !changed || len(sts) != 2 || sts[0]["Sid"] != "Mine" || !strings.Contains(p, `"Id":"q"`) {
		t.Fatalf("beside a lone statement: %s", p)
	}

	stale := strings.Replace(p, queueARN, queueARN+"-old", 1)
	stale = strings.Replace(stale, `"Resource":"*"`, `"Resource":"*"`, 1)
	p2, changed, _ := MergePolicy(stale, queueARN, topicA)
	if !changed || p2 != p {
		t.Fatalf("a stale statement was not replaced:\n%s\nwant\n%s", p2, p)
	}
	if _, _, err := MergePolicy("{", queueARN, topicA); err == nil {
		t.Error("a policy that is not JSON was taken")
	}
}

func TestPolicySidIsAlphanumericAndPerTopic(t *testing.T) {
	a, b := PolicySid(topicA), PolicySid(topicB)
	if a == b || a != PolicySid(topicA) {
		t.Fatalf("%s %s", a, b)
	}
	for _, r := range a {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			t.Fatalf("%s: %q", a, r)
		}
	}
}

func TestFilterPolicy(t *testing.T) {
	p, err := FilterPolicy([]string{"payment.confirmed", "order.placed", "order.placed"})
	if err != nil || p != `{"type":["order.placed","payment.confirmed"]}` {
		t.Fatalf("%s %v", p, err)
	}
	if _, err := FilterPolicy([]string{""}); err == nil {
		t.Error("an empty type was taken")
	}
}
