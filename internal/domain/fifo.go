package domain

import (
	"encoding/json"
	"errors"
	"fmt"
)

// OrderKeys are an order event's ids on a FIFO orders queue (a queue.Keyer): the group is
// the event's entity (its lcid, "sku:<sku>" for a SKU's event, the entity a drain names),
// so that SQS keeps each entity's events in the order they were sent; the deduplication
// id is the event's identity, its entity and event id ("{<entity>}<event_id>", unambiguous
// as no id holds a brace). Event ids are not trusted to be unique across entities: by its
// id alone, one order's event would make SQS drop another's sent within five minutes. A
// drain's event id is new for every nudge, so a second nudge is never dropped. A body
// that does not decode (within the widest limits) has no ids.
func OrderKeys(body []byte) (group, dedup string, err error) {
	ev, err := DecodeLimits(body, Limits{MaxBytes: max(len(body), MaxEventBytes)})
	if err != nil {
		return "", "", fmt.Errorf("domain: ids of an order event: %w", err)
	}
	return ev.Entity(), identity(ev.Entity(), ev.EventID), nil
}

// ResultKeys are a result's ids on a FIFO results queue (a queue.Keyer): the group is the
// result's entity, the deduplication id its identity, entity and event id, as the
// persist-worker keys it ("{<entity>}<event_id>"). An event has one result, and a
// re-run republishes the same one: SQS drops the copy sent within five minutes.
func ResultKeys(body []byte) (group, dedup string, err error) {
	var r struct {
		EventID string `json:"event_id"`
		Entity  string `json:"entity"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return "", "", fmt.Errorf("domain: ids of a result: %w", err)
	}
	if r.Entity == "" || r.EventID == "" {
		return "", "", errors.New("domain: ids of a result: no entity or no event_id")
	}
	return r.Entity, identity(r.Entity, r.EventID), nil
}

// identity names an event by its entity and event id.
func identity(entity, eventID string) string { return "{" + entity + "}" + eventID }
