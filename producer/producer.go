// Package producer builds, checks and sends junban's order events, for a shop's Go
// service that feeds the orders queue: checkout, a payment gateway, a WMS. Its types are
// the services' own (aliases of junban's wire types), and Check is the order-worker's own
// decoder, so an event Check passes is one the order-worker accepts (but for what only
// the state decides: a rejection is a result, docs/events.md).
//
// An event reaches the orders queue three ways, each as the order-worker takes it:
// SendSQS sends it to the queue (a FIFO queue gets its group and deduplication ids),
// PublishSNS publishes it to a topic the queue subscribes (with the type attribute a
// filtered subscription matches), and EventBridgeEntry makes the PutEvents entry of a
// rule whose target is the queue.
package producer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/junban/junban/internal/aws/topics"
	"github.com/junban/junban/internal/domain"
	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/queue"
)

// The wire types, the services' own.
type (
	// Event is an order event: its envelope, and its data encoded (New encodes it).
	Event = event.Order
	// Type names an event's kind.
	Type = event.Type
	// Mode is an order's mode: ModeShip or ModeReserve.
	Mode = event.Mode
	// Line is one order line.
	Line = event.Line
	// Hold names the end of a reservation (at most one of its fields).
	Hold = event.Hold
	// OrderData is the data of order.placed and order.lines_changed.
	OrderData = event.OrderData
	// ReservationExtendedData is the data of order.reservation_extended.
	ReservationExtendedData = event.ReservationExtendedData
	// ReturnedData is the data of order.returned.
	ReturnedData = event.ReturnedData
	// ReturnLine is a quantity of one order line that came back.
	ReturnLine = event.ReturnLine
	// AllocationMovedData is the data of order.allocation_moved.
	AllocationMovedData = event.AllocationMovedData
	// InventoryReceivedData is the data of inventory.received.
	InventoryReceivedData = event.InventoryReceivedData
	// InventoryAdjustedData is the data of inventory.adjusted.
	InventoryAdjustedData = event.InventoryAdjustedData
	// SKURegisteredData is the data of inventory.sku_registered.
	SKURegisteredData = event.SKURegisteredData
	// SafetyStockChangedData is the data of inventory.safety_stock_changed.
	SafetyStockChangedData = event.SafetyStockChangedData
	// LotRegisteredData is the data of inventory.lot_registered.
	LotRegisteredData = event.LotRegisteredData
	// LotQtyData is the data of inventory.held, inventory.released_hold and
	// inventory.damaged.
	LotQtyData = event.LotQtyData
	// LotRecalledData is the data of inventory.lot_recalled.
	LotRecalledData = event.LotRecalledData
	// Result is what one event did, as junban writes it to the results queue.
	Result = event.Result
)

// The kinds a shop's system sends (docs/events.md has each one's rules).
const (
	OrderPlaced                 = event.OrderPlaced
	OrderLinesChanged           = event.OrderLinesChanged
	PaymentConfirmed            = event.PaymentConfirmed
	OrderAllocateForShipment    = event.OrderAllocateForShipment
	OrderCancelled              = event.OrderCancelled
	OrderShipped                = event.OrderShipped
	OrderReturned               = event.OrderReturned
	OrderAllocationMoved        = event.OrderAllocationMoved
	OrderReservationExtended    = event.OrderReservationExtended
	InventoryReceived           = event.InventoryReceived
	InventoryAdjusted           = event.InventoryAdjusted
	InventorySKURegistered      = event.InventorySKURegistered
	InventoryLotRegistered      = event.InventoryLotRegistered
	InventorySafetyStockChanged = event.InventorySafetyStockChanged
	InventoryHeld               = event.InventoryHeld
	InventoryReleasedHold       = event.InventoryReleasedHold
	InventoryDamaged            = event.InventoryDamaged
	InventoryLotRecalled        = event.InventoryLotRecalled

	ModeShip    = event.ModeShip
	ModeReserve = event.ModeReserve

	// Version is the contract's version New writes into every event.
	Version = event.Version
)

// ErrNotSendable: the event's kind is junban's own (order.reservation_expired,
// junban.drain): the orders queue refuses it from a sender, or only junban sends it.
var ErrNotSendable = errors.New("producer: junban makes this kind itself")

// InvalidError is the decoder's refusal: Reason is the code the order-worker would put on
// the message in orders-dlq (ERR_MISSING_FIELD, ERR_INVALID_QUANTITY, ...).
type InvalidError = domain.InvalidError

// New returns an event of type t about the order lcid ("" for the warehouse's events,
// whose SKU is in their data), with the data encoded and the contract's version, and
// checks it (Check). occurredAt is informative; the zero time is written as such.
func New(t Type, eventID, lcid string, occurredAt time.Time, data any) (Event, error) {
	ev := Event{EventID: eventID, Type: t, Version: Version, LCID: lcid, OccurredAt: occurredAt}
	if data != nil {
		raw, err := json.Marshal(data)
		if err != nil {
			return Event{}, fmt.Errorf("producer: data of %s: %w", t, err)
		}
		ev.Data = raw
	}
	if _, err := Encode(ev); err != nil {
		return Event{}, err
	}
	return ev, nil
}

// Encode returns ev's JSON body, checked.
func Encode(ev Event) ([]byte, error) {
	body, err := json.Marshal(ev)
	if err != nil {
		return nil, fmt.Errorf("producer: %w", err)
	}
	return body, Check(body)
}

// Check reports whether the order-worker accepts body: nil, an *InvalidError with the
// reason the worker would give, or ErrNotSendable. It runs the worker's own decoder with
// the worker's default limits (JUNBAN_MAX_LINES 16 lines, 256 KiB).
func Check(body []byte) error {
	ev, err := domain.DecodeLimits(body, domain.Limits{MaxBytes: domain.MaxEventBytes, MaxLines: domain.MaxLinesDefault})
	if err != nil {
		return fmt.Errorf("producer: %w", err)
	}
	if ev.Kind().Origin != domain.FromSender {
		return fmt.Errorf("%w: %s", ErrNotSendable, ev.Type)
	}
	return nil
}

// Reason is the refusal's code of an error of Check, New or Encode, or "".
func Reason(err error) string { return domain.InvalidReason(err) }

// Message is an event ready for a queue: its body and, for a FIFO queue, its ids.
type Message struct {
	// Body is the event's JSON.
	Body []byte
	// GroupID is a FIFO queue's message group: the event's turn (its lcid, or
	// "sku:<sku>" for the warehouse's events), so that SQS keeps an entity's order.
	GroupID string
	// DeduplicationID is "{<entity>}<event_id>": SQS drops a copy sent within five
	// minutes, and two orders' events that share an event id are both kept.
	DeduplicationID string
}

// Prepare encodes and checks ev and gives its FIFO ids (each as SQS takes it: an id
// SQS cannot take is hashed, as junban's own senders do).
func Prepare(ev Event) (Message, error) {
	body, err := Encode(ev)
	if err != nil {
		return Message{}, err
	}
	group, dedup, err := domain.OrderKeys(body)
	if err != nil {
		return Message{}, fmt.Errorf("producer: %w", err)
	}
	return Message{Body: body, GroupID: queue.FIFOID(group), DeduplicationID: queue.FIFOID(dedup)}, nil
}

// SendSQS sends ev to the orders queue at queueURL and returns SQS's message id. A FIFO
// queue (".fifo") gets the message's group and deduplication ids.
func SendSQS(ctx context.Context, client *sqs.Client, queueURL string, ev Event) (string, error) {
	m, err := Prepare(ev)
	if err != nil {
		return "", err
	}
	in := &sqs.SendMessageInput{QueueUrl: aws.String(queueURL), MessageBody: aws.String(string(m.Body))}
	if queue.IsFIFO(queueURL) {
		in.MessageGroupId, in.MessageDeduplicationId = aws.String(m.GroupID), aws.String(m.DeduplicationID)
	}
	out, err := client.SendMessage(ctx, in)
	if err != nil {
		return "", fmt.Errorf("producer: send %s %s: %w", ev.Type, ev.EventID, err)
	}
	return aws.ToString(out.MessageId), nil
}

// PublishSNS publishes events (at most 10) to the SNS topic topicARN that the orders
// queue subscribes, each with its type in the message attribute "type" (what a
// subscription's filter matches); a FIFO topic gets each one's group and deduplication
// ids. Each event is checked first, and none is published when one fails.
func PublishSNS(ctx context.Context, client *sns.Client, topicARN string, events ...Event) error {
	bodies := make([][]byte, len(events))
	for i, ev := range events {
		b, err := Encode(ev)
		if err != nil {
			return fmt.Errorf("event %d: %w", i, err)
		}
		bodies[i] = b
	}
	return topics.Publish(ctx, client, topicARN, bodies)
}

// TypeAttribute is the SNS message attribute PublishSNS sets to the event's type.
const TypeAttribute = topics.TypeAttribute

// EventBridgeEntry is a PutEvents entry of an event for a rule whose target is the
// orders queue: copy its fields into the SDK's types.PutEventsRequestEntry (with your
// EventBusName). The worker takes the delivered event's detail as the event, and
// refuses it when detail-type is not the event's type.
type EventBridgeEntry struct {
	// Source is the sender's name ("shop.checkout"); informative.
	Source string
	// DetailType is the event's type.
	DetailType string
	// Detail is the event's JSON.
	Detail string
}

// ForEventBridge encodes and checks ev, and returns its PutEvents entry from source.
func ForEventBridge(ev Event, source string) (EventBridgeEntry, error) {
	body, err := Encode(ev)
	if err != nil {
		return EventBridgeEntry{}, err
	}
	if source == "" {
		return EventBridgeEntry{}, errors.New("producer: an EventBridge entry needs a source")
	}
	return EventBridgeEntry{Source: source, DetailType: string(ev.Type), Detail: string(body)}, nil
}
