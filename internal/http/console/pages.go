package console

import (
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/junban/junban/internal/aws/dlq"
	"github.com/junban/junban/internal/http/api"
)

var funcs = template.FuncMap{
	"since": func(now, t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return now.Sub(t).Round(time.Millisecond).String()
	},
	"until": func(now, t time.Time) string { return t.Sub(now).Round(time.Second).String() },
	"ts": func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return t.UTC().Format("2006-01-02 15:04:05.000")
	},
	"f1":    func(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) },
	"esc":   url.PathEscape,
	"query": url.QueryEscape,
	"pct": func(part, total int64) string {
		if total <= 0 {
			return "0"
		}
		return strconv.FormatFloat(100*float64(part)/float64(total), 'f', 2, 64)
	},
	"add":        func(a, b int64) int64 { return a + b },
	"add3":       func(a, b, c int64) int64 { return a + b + c },
	"add4":       func(a, b, c, d int64) int64 { return a + b + c + d },
	"hasPrefix":  strings.HasPrefix,
	"trimPrefix": strings.TrimPrefix,
	"depth": func(n int) string {
		if n < 0 {
			return "?"
		}
		return strconv.Itoa(n)
	},
}

func (c *Console) orderSearch(w http.ResponseWriter, r *http.Request, s session) {
	lcid := strings.TrimSpace(r.URL.Query().Get("lcid"))
	if lcid == "" {
		c.render(w, r, http.StatusOK, "order", view{Title: "Order", Nav: "order", Session: s})
		return
	}
	http.Redirect(w, r, "/orders/"+url.PathEscape(lcid), http.StatusSeeOther)
}

type orderData struct {
	LCID  string
	Order api.OrderView
}

func (c *Console) orderPage(w http.ResponseWriter, r *http.Request, s session) {
	lcid := r.PathValue("lcid")
	d := orderData{LCID: lcid}
	code, p := c.callAPI(r, s, "GET", "/v1/orders/"+url.PathEscape(lcid)+"?limit=1000", nil, &d.Order)
	v := view{Title: "Order " + lcid, Nav: "order", Session: s, Error: p, Data: d, Flash: r.URL.Query().Get("msg")}
	c.render(w, r, code, "order", v)
}

func (c *Console) skip(w http.ResponseWriter, r *http.Request, s session) {
	f, err := parseSkip(r.PathValue("lcid"), r.PostForm)
	if err != nil {
		c.message(w, r, http.StatusBadRequest, "Bad request", err.Error())
		return
	}
	back := "/orders/" + url.PathEscape(f.LCID)
	if !f.Confirmed {
		c.confirm(w, r, s, "Skip the event in hand of "+f.LCID+"?",
			"The worker dead-letters it with ERR_SKIPPED, undoing what its runs did, and the turn moves on.",
			back+"/skip", nil, back)
		return
	}
	var ans api.SkipAnswer
	code, p := c.callAPI(r, s, "POST", "/v1/turns/"+url.PathEscape(f.LCID)+"/skip", nil, &ans)
	if p != nil {
		c.audit(r, s, "turn.skip", f.LCID, "failed", nil, zap.Int("status", code), zap.String("problem", p.Title+": "+p.Detail))
		c.message(w, r, code, "Skip failed", p.Detail)
		return
	}
	msg := fmt.Sprintf("skip asked for %s (%s); nudged: %v", ans.EventID, ans.Type, ans.Nudged)
	c.audit(r, s, "turn.skip", f.LCID, msg, nil, zap.String("event_id", ans.EventID))
	http.Redirect(w, r, back+"?msg="+url.QueryEscape(msg), http.StatusSeeOther)
}

func (c *Console) skuSearch(w http.ResponseWriter, r *http.Request, s session) {
	sku := strings.TrimSpace(r.URL.Query().Get("sku"))
	if sku == "" {
		c.render(w, r, http.StatusOK, "sku", view{Title: "SKU", Nav: "sku", Session: s})
		return
	}
	http.Redirect(w, r, "/skus/"+url.PathEscape(sku), http.StatusSeeOther)
}

// SKUMove is one move of the SKU page, with the SKU's sellable after it.
type SKUMove struct {
	At            time.Time
	EventID       string
	LotID         string
	From, To      string
	Qty           int64
	SellableAfter int64
}

type skuData struct {
	SKU      string
	View     api.SKUView
	Total    map[string]int64
	Max      int64
	Date     string
	Mode     string
	Avail    *api.AvailabilityAnswer
	AvailErr *api.Problem
	Moves    []SKUMove
	// Queue is the first page of the SKU's waiting lines, QueueErr why it is missing.
	Queue    *api.QueueView
	QueueErr *api.Problem
	// Chart is the SVG polyline of sellable over the moves, oldest first.
	Chart     string
	ChartMax  int64
	ChartFrom time.Time
}

// movesShown bounds the moves of the SKU page (and its chart).
const movesShown = 200

// queueShown bounds the waiting lines of the SKU page; the page says how many more wait.
const queueShown = 100

func (c *Console) skuPage(w http.ResponseWriter, r *http.Request, s session) {
	sku := r.PathValue("sku")
	q := r.URL.Query()
	d := skuData{SKU: sku, Date: q.Get("date"), Mode: q.Get("mode"), Total: map[string]int64{}}
	if d.Date == "" {
		d.Date = c.d.Now().UTC().Format("2006-01-02")
	}
	if d.Mode == "" {
		d.Mode = "ship"
	}
	code, p := c.callAPI(r, s, "GET", "/v1/skus/"+url.PathEscape(sku), nil, &d.View)
	if p == nil {
		for _, l := range d.View.Lots {
			d.Total["sellable"] += l.Sellable
			d.Total["reserved"] += l.Reserved
			d.Total["allocated"] += l.Allocated
			d.Total["hidden"] += l.Hidden
			d.Total["shipped"] += l.Shipped
			d.Max = max(d.Max, l.Sellable+l.Reserved+l.Allocated+l.Hidden+l.Shipped)
		}
		var a api.AvailabilityAnswer
		_, ap := c.callAPI(r, s, "GET", "/v1/skus/"+url.PathEscape(sku)+"/availability?date="+url.QueryEscape(d.Date)+"&mode="+url.QueryEscape(d.Mode), nil, &a)
		if ap == nil {
			d.Avail = &a
		}
		d.AvailErr = ap
		var qv api.QueueView
		if _, qp := c.callAPI(r, s, "GET", "/v1/skus/"+url.PathEscape(sku)+"/queue?limit="+strconv.Itoa(queueShown), nil, &qv); qp == nil {
			d.Queue = &qv
		} else {
			d.QueueErr = qp
		}
		if err := c.skuMoves(r, &d); err != nil {
			p = &api.Problem{Status: http.StatusServiceUnavailable, Title: "moves unreadable", Detail: "PostgreSQL failed; the log has the error"}
			code = http.StatusServiceUnavailable
			c.d.Logger.Warn("console: moves", zap.String("sku", sku), zap.Error(err))
		}
	}
	c.render(w, r, code, "sku", view{Title: "SKU " + sku, Nav: "sku", Session: s, Error: p, Data: d})
}

// skuMoves reads the SKU's latest moves and works its sellable back from the current
// total: each move into sellable raised it, each out of it lowered it.
func (c *Console) skuMoves(r *http.Request, d *skuData) error {
	var rows []struct {
		CreatedAt            time.Time
		EventID, LotID       string
		FromBucket, ToBucket string
		Qty                  int64
	}
	err := c.d.DB.WithContext(r.Context()).Raw(`SELECT created_at, event_id, lot_id, from_bucket, to_bucket, qty
FROM moves WHERE sku = ? ORDER BY created_at DESC, op_id DESC, idx DESC LIMIT ?`, d.SKU, movesShown).Scan(&rows).Error
	if err != nil {
		return err
	}
	sellable := d.Total["sellable"]
	for _, m := range rows {
		d.Moves = append(d.Moves, SKUMove{At: m.CreatedAt, EventID: m.EventID, LotID: m.LotID, From: m.FromBucket, To: m.ToBucket, Qty: m.Qty, SellableAfter: sellable})
		if m.ToBucket == "sellable" {
			sellable -= m.Qty
		}
		if m.FromBucket == "sellable" {
			sellable += m.Qty
		}
	}
	if len(d.Moves) == 0 {
		return nil
	}
	// Oldest first: the sellable before the first shown move, then after each.
	pts := []int64{sellable}
	for i := len(d.Moves) - 1; i >= 0; i-- {
		pts = append(pts, d.Moves[i].SellableAfter)
	}
	d.ChartMax = max(slices.Max(pts), 1)
	d.ChartFrom = d.Moves[len(d.Moves)-1].At
	var b strings.Builder
	for i, v := range pts {
		x := 600 * float64(i) / float64(max(len(pts)-1, 1))
		y := 120 - 115*float64(v)/float64(d.ChartMax)
		fmt.Fprintf(&b, "%.1f,%.1f ", x, y)
	}
	d.Chart = strings.TrimSpace(b.String())
	return nil
}

// ReasonCode is the reason code of a dead-letter reason ("ERR_MAX_ATTEMPTS stock
// service away": ERR_MAX_ATTEMPTS); a reason without one groups as itself.
func ReasonCode(reason string) string {
	code, _, _ := strings.Cut(reason, " ")
	if strings.HasPrefix(code, "ERR_") {
		return code
	}
	return reason
}

type dlqGroup struct {
	Code     string
	Messages []dlq.Message
}

type dlqQueue struct {
	Role, Name string
	Depth      int
	Listed     bool
	More       bool
	Groups     []dlqGroup
	Error      *api.Problem
}

func (c *Console) dlqPage(w http.ResponseWriter, r *http.Request, s session) {
	only := r.PathValue("queue")
	var qs []dlqQueue
	for _, role := range []string{"orders_dlq", "results_dlq"} {
		name := c.queueName(role)
		if name == "" || only != "" && only != name && only != path.Base(name) {
			continue
		}
		qs = append(qs, dlqQueue{Role: role, Name: path.Base(name), Depth: -1})
	}
	if only != "" && len(qs) == 0 {
		c.message(w, r, http.StatusNotFound, "Not found", only+" is none of the configured dead-letter queues.")
		return
	}
	// Each queue's read takes a receive's long poll or more: both at once.
	var wg sync.WaitGroup
	for i := range qs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.readDLQ(r, s, &qs[i])
		}()
	}
	wg.Wait()
	c.render(w, r, http.StatusOK, "dlq", view{Title: "Dead letters", Nav: "dlq", Session: s, Data: qs, Flash: r.URL.Query().Get("msg")})
}

// readDLQ fills q with its depth and, for an admin, its messages grouped by reason
// code; a queue whose depth is 0 is not listed (a list costs a receive's wait).
func (c *Console) readDLQ(r *http.Request, s session, q *dlqQueue) {
	if c.d.SQS != nil {
		if u, err := c.queueURL(r.Context(), c.queueName(q.Role)); err == nil {
			if _, n, err := dlq.QueueState(r.Context(), c.d.SQS, u); err == nil {
				q.Depth = n
			}
		}
	}
	if !s.Admin() {
		return
	}
	if q.Depth == 0 {
		q.Listed = true
		return
	}
	var l api.DLQList
	if _, p := c.callAPI(r, s, "GET", "/v1/dlq/"+url.PathEscape(q.Name)+"?limit=100", nil, &l); p != nil {
		q.Error = p
		return
	}
	q.Listed, q.More = true, l.More
	byCode := map[string]int{}
	for _, m := range l.Messages {
		code := ReasonCode(m.Reason)
		i, ok := byCode[code]
		if !ok {
			i = len(q.Groups)
			byCode[code] = i
			q.Groups = append(q.Groups, dlqGroup{Code: code})
		}
		q.Groups[i].Messages = append(q.Groups[i].Messages, m)
	}
	slices.SortFunc(q.Groups, func(a, b dlqGroup) int { return strings.Compare(a.Code, b.Code) })
}

// dlqName returns the configured DLQ that the path's {queue} names.
func (c *Console) dlqName(r *http.Request) (string, bool) {
	n := r.PathValue("queue")
	for _, q := range []string{c.d.Queues.OrdersDLQ, c.d.Queues.ResultsDLQ} {
		if q != "" && (q == n || path.Base(q) == n) {
			return q, true
		}
	}
	return "", false
}

func (c *Console) redrive(w http.ResponseWriter, r *http.Request, s session) {
	c.dlqAction(w, r, s, dlq.Move)
}

func (c *Console) deleteMessage(w http.ResponseWriter, r *http.Request, s session) {
	c.dlqAction(w, r, s, dlq.Delete)
}

// dlqAction moves or deletes one message (what=one, id), a reason's group (what=reason,
// reason) or, for a move, all (what=all, through the API's redrive), after a
// confirmation page.
func (c *Console) dlqAction(w http.ResponseWriter, r *http.Request, s session, act dlq.Action) {
	name, ok := c.dlqName(r)
	if !ok {
		c.message(w, r, http.StatusNotFound, "Not found", r.PathValue("queue")+" is none of the configured dead-letter queues.")
		return
	}
	f, err := parseDLQForm(r.PostForm, act)
	if err != nil {
		c.message(w, r, http.StatusBadRequest, "Bad request", strings.ToUpper(err.Error()[:1])+err.Error()[1:]+".")
		return
	}
	short := path.Base(name)
	verb := map[dlq.Action]string{dlq.Move: "redrive", dlq.Delete: "delete"}[act]
	back := "/dlq/" + url.PathEscape(short)
	if !f.Confirmed {
		detail := "They go back to the queue each came from, once each."
		if act == dlq.Delete {
			detail = "Deleted messages are gone for good."
		}
		c.confirm(w, r, s, fmt.Sprintf("%s %s of %s?", strings.ToUpper(verb[:1])+verb[1:], f.subject(), short), detail,
			back+"/"+verb, f.fields(), back)
		return
	}
	action := "dlq." + verb
	what := []zap.Field{zap.String("what", f.What), zap.String("id", f.ID), zap.String("reason", f.Reason)}
	var msg string
	if match := f.match(); match == nil {
		var rep dlq.Report
		code, p := c.callAPI(r, s, "POST", "/v1/dlq/"+url.PathEscape(short)+"/redrive", struct{}{}, &rep)
		if p != nil {
			c.audit(r, s, action, short, "failed", nil, append(what, zap.Int("status", code), zap.String("problem", p.Title+": "+p.Detail))...)
			c.message(w, r, code, "Redrive failed", p.Detail)
			return
		}
		msg = fmt.Sprintf("redrove %d of %s (%d left)", rep.Total(), short, rep.Left)
	} else {
		rep, err := dlq.Pick(r.Context(), c.d.SQS, c.d.Queues, dlq.PickOptions{DLQ: name, Match: match, Action: act})
		what = append(what, zap.Int("done", rep.Done), zap.Int("looked", rep.Looked))
		switch {
		case errors.Is(err, dlq.ErrNoMatch):
			msg = fmt.Sprintf("no message matched (looked at %d); it may have been moved already", rep.Looked)
		case err != nil:
			c.audit(r, s, action, short, "stopped", err, what...)
			c.message(w, r, http.StatusBadGateway, verb+" stopped", fmt.Sprintf("%d done, then: %v", rep.Done, err))
			return
		case act == dlq.Move:
			msg = fmt.Sprintf("redrove %d of %s", rep.Done, short)
		default:
			msg = fmt.Sprintf("deleted %d of %s", rep.Done, short)
		}
	}
	c.audit(r, s, action, short, msg, nil, what...)
	http.Redirect(w, r, back+"?msg="+url.QueryEscape(msg), http.StatusSeeOther)
}

type confirmData struct {
	Question, Detail, Action, Back string
	Fields                         map[string]string
}

func (c *Console) confirm(w http.ResponseWriter, r *http.Request, s session, question, detail, action string, fields map[string]string, back string) {
	c.render(w, r, http.StatusOK, "confirm", view{Title: "Confirm", Session: s,
		Data: confirmData{Question: question, Detail: detail, Action: action, Back: back, Fields: fields}})
}

func (c *Console) stuckPage(w http.ResponseWriter, r *http.Request, s session) {
	var l api.StuckList
	target := "/v1/turns/stuck?limit=500"
	if v := r.URL.Query().Get("older_than"); v != "" {
		target += "&older_than=" + url.QueryEscape(v)
	}
	code, p := c.callAPI(r, s, "GET", target, nil, &l)
	c.render(w, r, code, "stuck", view{Title: "Stuck turns", Nav: "stuck", Session: s, Error: p, Data: l})
}
