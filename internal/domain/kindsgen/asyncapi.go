package main

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/junban/junban/internal/domain"
	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/postgres/outbound"
	"github.com/junban/junban/internal/queue"
)

// The channels' default names (the queues junbanctl queues create makes, the topic
// docs/outbound.md creates).
const (
	ordersQueue   = "orders"
	ordersDLQ     = "orders-dlq"
	resultsQueue  = "results"
	resultsDLQ    = "results-dlq"
	outboundTopic = "junban-outbound"
)

// asyncAPI is the AsyncAPI 3.0 document of junban's channels from junban's side: it
// receives order events on the orders queue (each sender kind a message, its payload the
// kind's schema), sends a result per event on the results queue, and publishes outbound
// events to the outbound topic. Schemas are AsyncAPI's own (draft-07's keywords), the
// inbound ones the same as the published draft 2020-12 files less $schema and $id.
func asyncAPI() (*obj, error) {
	msgs, schemas := newObj(), newObj()
	orders, outs := newObj(), newObj()
	var orderRefs, outRefs []any
	for _, k := range queueKinds() {
		s, err := inboundSchema(k)
		if err != nil {
			return nil, err
		}
		name := string(k.Type)
		schemas.set(name, component(s))
		m := newObj("name", name, "title", name, "summary", k.Doc,
			"contentType", "application/json",
			"payload", newObj("$ref", "#/components/schemas/"+name))
		if k.Entity == domain.OnOrder {
			m.set("correlationId", newObj("description", "The order: the turn the event runs in.", "location", "$message.payload#/lcid"))
		}
		msgs.set(name, m)
		orders.set(name, newObj("$ref", "#/components/messages/"+name))
		orderRefs = append(orderRefs, newObj("$ref", "#/channels/orders/messages/"+name))
	}

	schemas.set("result", component(resultSchema()))
	msgs.set("result", newObj("name", "result", "title", "result",
		"summary", "what one order event did: applied or rejected, the order and the SKUs after it",
		"contentType", "application/json", "payload", newObj("$ref", "#/components/schemas/result")))

	for _, k := range outbound.Kinds {
		raw, err := outbound.Schema(k)
		if err != nil {
			return nil, err
		}
		var s map[string]any
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, fmt.Errorf("outbound schema of %s: %w", k, err)
		}
		delete(s, "$schema")
		delete(s, "$id")
		name := "outbound." + string(k)
		schemas.set(name, s)
		msgs.set(name, newObj("name", string(k), "title", string(k), "summary", s["description"],
			"contentType", "application/json",
			"payload", newObj("$ref", "#/components/schemas/"+name),
			"headers", newObj("type", "object",
				"description", "SNS message attributes (String): a subscription's filter policy matches on them.",
				"properties", newObj(
					outbound.KindAttribute, newObj("const", string(k)),
					"entity", newObj("type", "string")))))
		outs.set(string(k), newObj("$ref", "#/components/messages/"+name))
		outRefs = append(outRefs, newObj("$ref", "#/channels/outbound/messages/"+string(k)))
	}

	sqsQueue := func(name, dlq string) *obj {
		return newObj("queue", newObj(
			"name", name,
			"fifoQueue", false,
			"visibilityTimeout", queue.VisibilityTimeoutDefault,
			"redrivePolicy", newObj("deadLetterQueue", newObj("name", dlq), "maxReceiveCount", queue.MaxReceiveCountDefault)),
			"deadLetterQueue", newObj("name", dlq, "fifoQueue", false, "messageRetentionPeriod", queue.DLQRetentionDefault),
			"bindingVersion", "0.2.0")
	}
	var kinds []string
	for _, k := range outbound.Kinds {
		kinds = append(kinds, string(k))
	}
	return newObj(
		"asyncapi", "3.0.0",
		"info", newObj(
			"title", "junban",
			"version", event.Version,
			"description", "junban's queues and topic, from junban's side: it receives order events on the orders queue, "+
				"sends one result per event to the results queue, and publishes outbound events to the outbound topic. "+
				"Written by go generate ./internal/domain from the registry of event kinds; docs/events.md and docs/outbound.md have the rules. "+
				"A queue's or topic's name is its default: each is a setting (docs/configuration.md). "+
				"Any of the queues may be a FIFO queue (its name ending .fifo): the group is the event's entity, the deduplication id {<entity>}<event_id>. "+
				"The orders queue also takes each event inside an SNS notification or an EventBridge event (docs/events.md, \"Envelopes: SNS and EventBridge\")."),
		"defaultContentType", "application/json",
		"channels", newObj(
			"orders", newObj("address", ordersQueue, "title", "The orders queue",
				"description", "Order events from checkout, the payment gateway, the warehouse and customer service, one per message. "+
					"A message that can never apply goes to "+ordersDLQ+" with its reason in the message attribute junban-dlq-reason.",
				"messages", orders,
				"bindings", newObj("sqs", sqsQueue(ordersQueue, ordersDLQ))),
			"results", newObj("address", resultsQueue, "title", "The results queue",
				"description", "One result per order event, read by the persist-worker.",
				"messages", newObj("result", newObj("$ref", "#/components/messages/result")),
				"bindings", newObj("sqs", sqsQueue(resultsQueue, resultsDLQ))),
			"outbound", newObj("address", outboundTopic, "title", "The outbound topic",
				"description", "What junban decided, for the rest of the shop: each message names its kind in the attribute "+outbound.KindAttribute+
					"; a FIFO topic's group is the entity and its deduplication id the message's id (docs/outbound.md).",
				"messages", outs,
				"bindings", newObj("sns", newObj("name", outboundTopic, "ordering", newObj("type", "standard"), "bindingVersion", "0.1.0")))),
		"operations", newObj(
			"receiveOrderEvents", newObj("action", "receive", "channel", newObj("$ref", "#/channels/orders"),
				"summary", "The order-worker receives order events, applies each in its entity's turn and deletes it.",
				"messages", orderRefs,
				"bindings", newObj("sqs", newObj("queues", []any{newObj("name", ordersQueue, "fifoQueue", false)}, "bindingVersion", "0.2.0"))),
			"sendResults", newObj("action", "send", "channel", newObj("$ref", "#/channels/results"),
				"summary", "The order-worker sends what each event did.",
				"messages", []any{newObj("$ref", "#/channels/results/messages/result")},
				"bindings", newObj("sqs", newObj("queues", []any{newObj("name", resultsQueue, "fifoQueue", false)}, "bindingVersion", "0.2.0"))),
			"publishOutbound", newObj("action", "send", "channel", newObj("$ref", "#/channels/outbound"),
				"summary", "The persist-worker's relay publishes the outbox's events.",
				"messages", outRefs,
				"bindings", newObj("sns", newObj("consumers", []any{newObj(
					"protocol", "sqs",
					"endpoint", newObj("name", "storefront-stock"),
					"filterPolicy", newObj(outbound.KindAttribute, kinds),
					"rawMessageDelivery", true)},
					"bindingVersion", "0.1.0")))),
		"components", newObj("messages", msgs, "schemas", schemas),
	), nil
}

// component is an inbound schema as an AsyncAPI component: without $schema and $id.
func component(s *obj) *obj {
	out := newObj()
	for _, k := range s.keys {
		if !strings.HasPrefix(k, "$") {
			out.set(k, s.vals[k])
		}
	}
	return out
}

// loosen makes a schema of a Go type a reader's: additional properties allowed (a
// consumer survives a field added within the version), and each field required that Go
// always writes.
func loosen(s *obj) {
	if s == nil {
		return
	}
	if _, ok := s.vals["additionalProperties"]; ok {
		delete(s.vals, "additionalProperties")
		s.keys = deleteKey(s.keys, "additionalProperties")
	}
	if p, ok := s.vals["properties"].(*obj); ok {
		for _, k := range p.keys {
			loosen(p.vals[k].(*obj))
		}
	}
	if it, ok := s.vals["items"].(*obj); ok {
		loosen(it)
	}
}

func deleteKey(keys []string, k string) []string {
	out := keys[:0]
	for _, x := range keys {
		if x != k {
			out = append(out, x)
		}
	}
	return out
}
