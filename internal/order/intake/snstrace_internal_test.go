package intake

import (
	"testing"

	"github.com/junban/junban/internal/domain"
	"github.com/junban/junban/internal/platform/tracing"
)

// FuzzSNSTraceContext: whatever a body holds, its unwrapped envelope gives a context
// without panicking, and only from an SNS notification, of its traceparent and tracestate
// alone.
func FuzzSNSTraceContext(f *testing.F) {
	f.Add([]byte(`{"Type":"Notification","TopicArn":"arn:aws:sns:us-east-1:1:t","Message":"{\"event_id\":\"e\",\"type\":\"order.cancelled\",\"lcid\":\"O\"}",` +
		`"MessageAttributes":{"traceparent":{"Type":"String","Value":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}}`))
	f.Add([]byte(`{"event_id":"e","type":"order.cancelled","lcid":"O","traceparent":"x"}`))
	f.Add([]byte(`{"Type":"Notification","TopicArn":"a","MessageAttributes":{"traceparent":{"Type":"Binary","Value":"AA=="}}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		_, env, err := domain.Unwrap(body, domain.MaxEventBytes)
		got := snsTraceContext(env, err)
		if got == nil {
			return
		}
		if err != nil || env.Kind != domain.EnvelopeSNS {
			t.Fatalf("a context %v from a body that is no SNS notification (%v)", got, err)
		}
		for k := range got {
			if k != tracing.AttrTraceParent && k != tracing.AttrTraceState {
				t.Fatalf("carrier returned %q", k)
			}
		}
	})
}
