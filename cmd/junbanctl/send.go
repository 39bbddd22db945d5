package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/junban/junban/internal/domain"
	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/platform/cli"
	"github.com/junban/junban/internal/platform/config"
	"github.com/junban/junban/internal/queue"
)

// sendOptions are the flags of send.
type sendOptions struct {
	file, typ, lcid, data, id string
	asJSON                    bool
}

// sendReport is what send prints with --json.
type sendReport struct {
	// Sent is the number of events put on the orders queue.
	Sent int `json:"sent"`
}

func sendCmd() *cobra.Command {
	var o sendOptions
	c := &cobra.Command{
		Use:   "send --file FILE | --type TYPE --lcid LCID [--data JSON] [--event-id ID]",
		Short: "put order events on the orders queue (JSON lines or flags)",
		Args:  cli.NoArgs,
		RunE:  func(c *cobra.Command, _ []string) error { return runSend(c.Context(), c.OutOrStdout(), o) },
	}
	fs := c.Flags()
	fs.StringVar(&o.file, "file", "", "JSON-lines file of order events (- for standard input)")
	fs.StringVar(&o.typ, "type", "", "event type, e.g. order.placed (without --file)")
	fs.StringVar(&o.lcid, "lcid", "", "order id (without --file)")
	fs.StringVar(&o.data, "data", "", "the event's data as JSON (without --file)")
	fs.StringVar(&o.id, "event-id", "", "event id (default: a new UUID)")
	fs.BoolVar(&o.asJSON, "json", false, "print the report as JSON")
	return c
}

// runSend puts order events on the orders queue: every line of a JSON-lines file (or
// standard input with -), or one event built from flags.
func runSend(ctx context.Context, w io.Writer, o sendOptions) error {
	bodies, err := sendBodies(o)
	if err != nil {
		return err
	}
	pub, err := ordersPublisher(ctx)
	if err != nil {
		return err
	}
	defer pub.Stop(context.Background()) //nolint:errcheck // every Publish waited for its answer: nothing is left to flush
	for i := 0; i < len(bodies); i += 10 {
		if err := pub.PublishBatch(ctx, bodies[i:min(i+10, len(bodies))]); err != nil {
			return fmt.Errorf("sent %d of %d: %w", i, len(bodies), err)
		}
	}
	if o.asJSON {
		return cli.WriteJSON(w, sendReport{Sent: len(bodies)})
	}
	fmt.Fprintf(w, "send: %d event(s) on the orders queue\n", len(bodies))
	return nil
}

// sendBodies are the events send puts on the queue, every one of them valid.
func sendBodies(o sendOptions) ([][]byte, error) {
	switch {
	case o.file != "":
		var r io.Reader = os.Stdin
		if o.file != "-" {
			f, err := os.Open(o.file)
			if err != nil {
				return nil, err
			}
			defer f.Close()
			r = f
		}
		return readEvents(r)
	case o.typ != "":
		ev := event.Order{EventID: o.id, Type: event.Type(o.typ), LCID: o.lcid, OccurredAt: time.Now().UTC()}
		if ev.EventID == "" {
			ev.EventID = "evt_" + uuid.NewString()
		}
		if o.data != "" {
			ev.Data = json.RawMessage(o.data)
		}
		body, err := json.Marshal(ev)
		if err != nil {
			return nil, err
		}
		if _, err := domain.Decode(body, 0); err != nil {
			return nil, fmt.Errorf("invalid event: %w", err)
		}
		return [][]byte{body}, nil
	}
	return nil, cli.Usagef("junbanctl send --file FILE | --type TYPE --lcid LCID [--data JSON] [--event-id ID]")
}

// readEvents reads and validates every line first, so a bad file sends nothing.
func readEvents(r io.Reader) ([][]byte, error) {
	var bodies [][]byte
	var problems []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), domain.MaxEventBytes+1)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if _, err := domain.Decode([]byte(line), 0); err != nil {
			problems = append(problems, fmt.Sprintf("line %d: %v", n, err))
			continue
		}
		bodies = append(bodies, []byte(line))
	}
	if err := sc.Err(); errors.Is(err, bufio.ErrTooLong) {
		return nil, fmt.Errorf("nothing sent: line %d is longer than an event may be (%d bytes)", n+1, domain.MaxEventBytes)
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
	return queue.NewPublisher(queue.PublisherConfig{Client: c, QueueURL: url, Keys: domain.OrderKeys})
}
