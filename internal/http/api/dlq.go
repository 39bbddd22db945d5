package api

import (
	"errors"
	"io"
	"net/http"

	"github.com/junban/junban/internal/platform/tracing"

	"go.uber.org/zap"

	"github.com/junban/junban/internal/aws/dlq"
	"github.com/junban/junban/internal/queue"
)

// DLQList is GET /v1/dlq/{queue}.
type DLQList struct {
	Queue    string        `json:"queue"`
	Messages []dlq.Message `json:"messages"`
	// More is true when the queue holds more than the page: SQS has no order, so the next
	// call may show others (or the same ones) and there is no cursor.
	More bool `json:"more"`
}

func (s *Server) dlqURL(r *http.Request) (string, string, error) {
	if s.d.SQS == nil {
		return "", "", &apiError{status: http.StatusServiceUnavailable, typ: ProblemUnavailable, detail: "SQS is not configured"}
	}
	name, ok := s.dlqByName(r.PathValue("queue"))
	if !ok {
		return "", "", notFound("", "%q is none of the configured dead-letter queues (JUNBAN_ORDERS_DLQ, JUNBAN_RESULTS_DLQ)", r.PathValue("queue"))
	}
	url, err := queue.ResolveURL(r.Context(), s.d.SQS, name)
	return name, url, err
}

func (s *Server) listDLQ(w http.ResponseWriter, r *http.Request) error {
	if err := onlyParams(r.URL.Query(), "limit"); err != nil {
		return err
	}
	limit, _, err := pageParams(r, 100, 1000)
	if err != nil {
		return err
	}
	name, url, err := s.dlqURL(r)
	if err != nil {
		return err
	}
	msgs, more, err := dlq.List(r.Context(), s.d.SQS, url, limit)
	if err != nil {
		return err
	}
	if msgs == nil {
		msgs = []dlq.Message{}
	}
	writeJSON(w, http.StatusOK, DLQList{Queue: name, Messages: msgs, More: more})
	return nil
}

// RedriveRequest is the optional body of POST /v1/dlq/{queue}/redrive.
type RedriveRequest struct {
	// To, when given, must name the queue the DLQ serves (JUNBAN_ORDERS_QUEUE for
	// JUNBAN_ORDERS_DLQ, JUNBAN_RESULTS_QUEUE for JUNBAN_RESULTS_DLQ), by its name or URL;
	// any other queue is a 400. The messages go to that queue whether it is given or not.
	To string `json:"to"`
	// Max bounds the messages moved; 0: the DLQ's depth at the start.
	Max int `json:"max"`
}

func (s *Server) redriveDLQ(w http.ResponseWriter, r *http.Request) error {
	if err := onlyParams(r.URL.Query()); err != nil {
		return err
	}
	var req RedriveRequest
	if err := decodeBody(r, &req); err != nil && !errors.Is(err, io.EOF) && !isEmptyBody(err) {
		return err
	}
	if req.Max < 0 {
		return badRequest("max %d is negative", req.Max)
	}
	name, _, err := s.dlqURL(r)
	if err != nil {
		return err
	}
	rep, err := dlq.Redrive(r.Context(), s.d.SQS, s.d.Queues, dlq.RedriveOptions{DLQ: name, To: req.To, Max: req.Max})
	s.log.Info("api: dlq redrive", append(tracing.LogFields(r.Context()), zap.String("dlq", name), zap.Int("moved", rep.Total()), zap.Int("repeats", rep.Repeats), zap.Error(err))...)
	if errors.Is(err, dlq.ErrBadTarget) {
		return badRequest("%v", err)
	}
	if err != nil && rep.DLQ == "" {
		return err
	}
	if err != nil {
		// Some may have moved: the log says how many, the problem why the run stopped.
		return &apiError{status: http.StatusBadGateway, typ: ProblemConflict, detail: err.Error()}
	}
	if rep.Moved == nil {
		rep.Moved = map[string]int{}
	}
	writeJSON(w, http.StatusOK, rep)
	return nil
}

// isEmptyBody: an empty body means the defaults.
func isEmptyBody(err error) bool {
	var ae *apiError
	return errors.As(err, &ae) && ae.detail == emptyBodyDetail
}
