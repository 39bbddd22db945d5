// Package awslimits holds the local emulators to the limits AWS documents for SNS and SQS
// messages, which they do not enforce: a loopback reverse proxy put in front of the SNS or
// SQS endpoint that refuses, with the error AWS answers, what AWS would refuse, and passes
// the rest through. It is test infrastructure; no binary links it.
//
// What it checks, for the requests aws-sdk-go-v2 sends:
//
//   - SNS (the query protocol, Action=Publish or PublishBatch): a message over the limit
//     (262,144 bytes), counting its attributes as AWS does (name + data type + value), is
//     refused with InvalidParameter; so is a message or string attribute value holding a
//     character outside #x9 | #xA | #xD | #x20-#xD7FF | #xE000-#xFFFD | #x10000-#x10FFFF; a
//     PublishBatch whose messages together are over the limit is refused with
//     BatchRequestTooLong.
//   - SQS (the JSON protocol, X-Amz-Target AmazonSQS.SendMessage or SendMessageBatch): the
//     same counts against the queue's MaximumMessageSize (Limits.SQSMax, 1 MiB unless
//     said), refused with InvalidParameterValue (too long), InvalidMessageContents (a
//     character) and BatchRequestTooLong (the batch's total).
//
// Its limits: a refusal fails the whole request, where AWS may answer a PublishBatch or
// SendMessageBatch entry alone in the response's Failed list; the batch's total is checked
// before its entries. The message's Subject, group and deduplication ids and system
// attributes are not counted (AWS does not count the last three). Everything else (other
// actions, other protocols, the number of entries, attribute names) passes unchecked.
package awslimits

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"sync"
	"testing"
	"unicode/utf8"
)

// The limits AWS documents.
const (
	// SNSMaxDefault is the most bytes of an SNS message with its attributes, and of a
	// PublishBatch's messages together.
	SNSMaxDefault = 262_144
	// SQSMaxDefault is an SQS queue's MaximumMessageSize unless set lower: the most bytes of
	// a message with its attributes, and of a SendMessageBatch's messages together.
	SQSMaxDefault = 1_048_576
)

// bodyMax bounds the request body the proxy reads; AWS refuses far smaller ones.
const bodyMax = 16 << 20

// Limits are the sizes a Proxy holds requests to.
type Limits struct {
	// SNSMax is the most bytes of an SNS message and of a PublishBatch; SNSMaxDefault when 0.
	SNSMax int
	// SQSMax is the queue's MaximumMessageSize; SQSMaxDefault when 0.
	SQSMax int
}

// Proxy is an http.Handler that refuses what AWS would and forwards the rest to its target.
type Proxy struct {
	limits Limits
	next   *httputil.ReverseProxy

	mu      sync.Mutex
	refused map[string]int
}

// New returns a Proxy forwarding to target (an endpoint URL such as http://127.0.0.1:4566).
func New(target string, l Limits) (*Proxy, error) {
	u, err := url.Parse(target)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil, fmt.Errorf("awslimits: target %q: not an endpoint URL", target)
	}
	if l.SNSMax <= 0 {
		l.SNSMax = SNSMaxDefault
	}
	if l.SQSMax <= 0 {
		l.SQSMax = SQSMaxDefault
	}
	return &Proxy{limits: l, next: httputil.NewSingleHostReverseProxy(u), refused: map[string]int{}}, nil
}

// Start serves a Proxy to target on a loopback port until the test ends and returns it
// with its URL, the endpoint to give the client.
func Start(t testing.TB, target string, l Limits) (*Proxy, string) {
	t.Helper()
	p, err := New(target, l)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	return p, srv.URL
}

// Refused tells how many requests the proxy refused with code (BatchRequestTooLong, ...).
func (p *Proxy) Refused(code string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.refused[code]
}

// refusal is an error response AWS would give: its code, and for SQS the code its query
// protocol names (x-amzn-query-error).
type refusal struct {
	code, queryCode, message string
}

func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, bodyMax+1))
	r.Body.Close()
	if err != nil || len(body) > bodyMax {
		http.Error(w, "awslimits: request body unreadable or over 16 MiB", http.StatusRequestEntityTooLarge)
		return
	}
	r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	var ref *refusal
	switch target := r.Header.Get("X-Amz-Target"); {
	case target == "AmazonSQS.SendMessage" || target == "AmazonSQS.SendMessageBatch":
		msgs, batch, err := parseSQS(target, body)
		if err != nil {
			http.Error(w, "awslimits: "+err.Error(), http.StatusBadRequest)
			return
		}
		ref = checkSQS(msgs, batch, p.limits.SQSMax)
	case r.Method == http.MethodPost && target == "":
		if msgs, batch, ok := parseSNS(body); ok {
			ref = checkSNS(msgs, batch, p.limits.SNSMax)
		}
	}
	if ref == nil {
		p.next.ServeHTTP(w, r)
		return
	}
	p.mu.Lock()
	p.refused[ref.code]++
	p.mu.Unlock()
	if ref.queryCode != "" {
		writeSQSError(w, ref)
	} else {
		writeSNSError(w, ref)
	}
}

// message is one message of a request: its body and attributes.
type message struct {
	body  string
	attrs []attribute
}

// attribute is a message attribute; value is the string value, or the binary one decoded.
type attribute struct {
	name, dataType, value string
	binary                bool
}

// size is the message's size as AWS counts it: the body, and each attribute's name, data
// type and value.
func (m message) size() int {
	n := len(m.body)
	for _, a := range m.attrs {
		n += len(a.name) + len(a.dataType) + len(a.value)
	}
	return n
}

// validChars tells whether s is UTF-8 holding only the characters AWS allows in messages.
func validChars(s string) bool {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n <= 1 {
			return false
		}
		if !(r == 0x9 || r == 0xA || r == 0xD || (r >= 0x20 && r <= 0xD7FF) || (r >= 0xE000 && r <= 0xFFFD) || (r >= 0x10000 && r <= 0x10FFFF)) {
			return false
		}
		i += n
	}
	return true
}

// badChars tells whether the message's body or a string attribute holds a character AWS refuses.
func (m message) badChars() bool {
	if !validChars(m.body) {
		return true
	}
	for _, a := range m.attrs {
		if !a.binary && !validChars(a.value) {
			return true
		}
	}
	return false
}

// total is the size of msgs together.
func total(msgs []message) int {
	n := 0
	for _, m := range msgs {
		n += m.size()
	}
	return n
}

func checkSNS(msgs []message, batch bool, max int) *refusal {
	if t := total(msgs); batch && t > max {
		return &refusal{code: "BatchRequestTooLong", message: fmt.Sprintf("The length of all the messages put together is more than the limit (%d bytes > %d).", t, max)}
	}
	for _, m := range msgs {
		if m.badChars() {
			return &refusal{code: "InvalidParameter", message: "Invalid parameter: Message contains invalid characters"}
		}
		if m.size() > max {
			return &refusal{code: "InvalidParameter", message: fmt.Sprintf("Invalid parameter: Message too long (%d bytes > %d)", m.size(), max)}
		}
	}
	return nil
}

func checkSQS(msgs []message, batch bool, max int) *refusal {
	if t := total(msgs); batch && t > max {
		return &refusal{code: "BatchRequestTooLong", queryCode: "AWS.SimpleQueueService.BatchRequestTooLong",
			message: fmt.Sprintf("Batch requests cannot be longer than %d bytes. You have sent %d bytes.", max, t)}
	}
	for _, m := range msgs {
		if m.badChars() {
			return &refusal{code: "InvalidMessageContents", queryCode: "InvalidMessageContents",
				message: "Invalid characters found. Valid unicode characters are #x9 | #xA | #xD | #x20 to #xD7FF | #xE000 to #xFFFD | #x10000 to #x10FFFF"}
		}
		if m.size() > max {
			return &refusal{code: "InvalidParameterValue", queryCode: "InvalidParameterValue",
				message: fmt.Sprintf("One or more parameters are invalid. Reason: Message must be shorter than %d bytes.", max+1)}
		}
	}
	return nil
}

// snsKey matches the form keys of a message's parts: an optional PublishBatch entry
// ("PublishBatchRequestEntries.member.N."), then "Message", or an attribute's part
// ("MessageAttributes.entry.M." and "Name", "Value.DataType", "Value.StringValue" or
// "Value.BinaryValue").
var snsKey = regexp.MustCompile(`^(?:PublishBatchRequestEntries\.member\.(\d+)\.)?(?:(Message)|MessageAttributes\.entry\.(\d+)\.(Name|Value\.DataType|Value\.StringValue|Value\.BinaryValue))$`)

// parseSNS reads a Publish or PublishBatch form; ok is false for any other request.
func parseSNS(body []byte) (msgs []message, batch, ok bool) {
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, false, false
	}
	switch form.Get("Action") {
	case "Publish":
	case "PublishBatch":
		batch = true
	default:
		return nil, false, false
	}
	entries := map[int]*message{}
	attrs := map[[2]int]*attribute{}
	for k, v := range form {
		sub := snsKey.FindStringSubmatch(k)
		if sub == nil || len(v) == 0 {
			continue
		}
		e, _ := strconv.Atoi(sub[1])
		if entries[e] == nil {
			entries[e] = &message{}
		}
		if sub[2] != "" {
			entries[e].body = v[0]
			continue
		}
		a, _ := strconv.Atoi(sub[3])
		key := [2]int{e, a}
		if attrs[key] == nil {
			attrs[key] = &attribute{}
		}
		switch sub[4] {
		case "Name":
			attrs[key].name = v[0]
		case "Value.DataType":
			attrs[key].dataType = v[0]
		case "Value.StringValue":
			attrs[key].value = v[0]
		case "Value.BinaryValue":
			b, err := base64.StdEncoding.DecodeString(v[0])
			if err != nil {
				b = []byte(v[0])
			}
			attrs[key].value, attrs[key].binary = string(b), true
		}
	}
	keys := make([][2]int, 0, len(attrs))
	for k := range attrs {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return keys[i][0] < keys[j][0] || keys[i][0] == keys[j][0] && keys[i][1] < keys[j][1]
	})
	for _, k := range keys {
		if entries[k[0]] == nil {
			entries[k[0]] = &message{}
		}
		entries[k[0]].attrs = append(entries[k[0]].attrs, *attrs[k])
	}
	ids := make([]int, 0, len(entries))
	for e := range entries {
		ids = append(ids, e)
	}
	sort.Ints(ids)
	for _, e := range ids {
		msgs = append(msgs, *entries[e])
	}
	return msgs, batch, true
}

// sqsMessage is a SendMessage request or a SendMessageBatch entry, as JSON.
type sqsMessage struct {
	MessageBody       string `json:"MessageBody"`
	MessageAttributes map[string]struct {
		DataType    string `json:"DataType"`
		StringValue string `json:"StringValue"`
		BinaryValue []byte `json:"BinaryValue"`
	} `json:"MessageAttributes"`
}

func (s sqsMessage) message() message {
	m := message{body: s.MessageBody}
	for name, v := range s.MessageAttributes {
		a := attribute{name: name, dataType: v.DataType, value: v.StringValue}
		if v.BinaryValue != nil {
			a.value, a.binary = string(v.BinaryValue), true
		}
		m.attrs = append(m.attrs, a)
	}
	return m
}

// parseSQS reads a SendMessage or SendMessageBatch request.
func parseSQS(target string, body []byte) (msgs []message, batch bool, err error) {
	if target == "AmazonSQS.SendMessage" {
		var in sqsMessage
		if err := json.Unmarshal(body, &in); err != nil {
			return nil, false, fmt.Errorf("SendMessage: %w", err)
		}
		return []message{in.message()}, false, nil
	}
	var in struct {
		Entries []sqsMessage `json:"Entries"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, true, fmt.Errorf("SendMessageBatch: %w", err)
	}
	for _, e := range in.Entries {
		msgs = append(msgs, e.message())
	}
	return msgs, true, nil
}

// writeSNSError answers as SNS's query protocol does.
func writeSNSError(w http.ResponseWriter, ref *refusal) {
	var msg bytes.Buffer
	xml.EscapeText(&msg, []byte(ref.message))
	w.Header().Set("Content-Type", "text/xml")
	w.WriteHeader(http.StatusBadRequest)
	fmt.Fprintf(w, `<ErrorResponse xmlns="http://sns.amazonaws.com/doc/2010-03-31/"><Error><Type>Sender</Type>`+
		`<Code>%s</Code><Message>%s</Message></Error><RequestId>awslimits</RequestId></ErrorResponse>`, ref.code, msg.String())
}

// writeSQSError answers as SQS's JSON protocol does, with the query protocol's code beside.
func writeSQSError(w http.ResponseWriter, ref *refusal) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.Header().Set("X-Amzn-Query-Error", ref.queryCode+";Sender")
	w.Header().Set("X-Amzn-Requestid", "awslimits")
	w.WriteHeader(http.StatusBadRequest)
	json.NewEncoder(w).Encode(map[string]string{"__type": "com.amazonaws.sqs#" + ref.code, "message": ref.message})
}
