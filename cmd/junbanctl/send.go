package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/junban/junban/internal/config"
	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/order"
	"github.com/junban/junban/internal/queue"
)

// runSend puts order events on the orders queue: every line of a JSON-lines file (or
// standard input with -), or one event built from flags.
func runSend(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("send", flag.ContinueOnError)
	file := fs.String("file", "", "JSON-lines file of order events (- for standard input)")
	typ := fs.String("type", "", "event type, e.g. order.placed (without --file)")
	lcid := fs.String("lcid", "", "order id (without --file)")
	data := fs.String("data", "", "the event's data as JSON (without --file)")
	id := fs.String("event-id", "", "event id (default: a new UUID)")
	if err := parseFlags(fs, args, false); err != nil {
		return err
	}
	var bodies [][]byte
	switch {
	case *file != "":
		var r io.Reader = os.Stdin
		if *file != "-" {
			f, err := os.Open(*file)
			if err != nil {
				return err
			}
			defer f.Close()
			r = f
		}
		var err error
		if bodies, err = readEvents(r); err != nil {
			return err
		}
	case *typ != "":
		ev := event.Order{EventID: *id, Type: event.Type(*typ), LCID: *lcid, OccurredAt: time.Now().UTC()}
		if ev.EventID == "" {
			ev.EventID = "evt_" + uuid.NewString()
		}
		if *data != "" {
			ev.Data = json.RawMessage(*data)
		}
		body, err := json.Marshal(ev)
		if err != nil {
			return err
		}
		if _, err := order.Decode(body, 0); err != nil {
			return fmt.Errorf("invalid event: %w", err)
		}
		bodies = append(bodies, body)
	default:
		return fmt.Errorf("%w: junbanctl send --file FILE | --type TYPE --lcid LCID [--data JSON] [--event-id ID]", errUsage)
	}
	pub, err := ordersPublisher(ctx)
	if err != nil {
		return err
	}
	defer pub.Close()
	for i := 0; i < len(bodies); i += 10 {
		if err := pub.PublishBatch(ctx, bodies[i:min(i+10, len(bodies))]); err != nil {
			return fmt.Errorf("sent %d of %d: %w", i, len(bodies), err)
		}
	}
	fmt.Printf("send: %d event(s) on the orders queue\n", len(bodies))
	return nil
}

// readEvents reads and validates every line first, so a bad file sends nothing.
func readEvents(r io.Reader) ([][]byte, error) {
	var bodies [][]byte
	var problems []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), order.MaxEventBytes+1)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if _, err := order.Decode([]byte(line), 0); err != nil {
			problems = append(problems, fmt.Sprintf("line %d: %v", n, err))
			continue
		}
		bodies = append(bodies, []byte(line))
	}
	if err := sc.Err(); errors.Is(err, bufio.ErrTooLong) {
		return nil, fmt.Errorf("nothing sent: line %d is longer than an event may be (%d bytes)", n+1, order.MaxEventBytes)
	} else if err != nil {
		return nil, err
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("nothing sent, %d invalid line(s):\n  %s", len(problems), strings.Join(problems, "\n  "))
	}
	return bodies, nil
}

func ordersPublisher(ctx context.Context) (*queue.Publisher, error) {
	cfg, err := config.Load[config.SQS]()
	if err != nil {
		return nil, err
	}
	c, err := queue.NewClient(ctx, cfg)
	if err != nil {
		return nil, err
	}
	url, err := queue.ResolveURL(ctx, c, cfg.OrdersQueue)
	if err != nil {
		return nil, err
	}
	return queue.NewPublisher(c, queue.PublisherConfig{QueueURL: url})
}
