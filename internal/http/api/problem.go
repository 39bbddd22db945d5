package api

import (
	"encoding/json"
	"net/http"

	gojson "github.com/goccy/go-json"
)

// Problem is an RFC 9457 problem details object: every error the API answers.
type Problem struct {
	// Type names the kind of problem: a URN of problemTypes.
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	// Instance is the request path.
	Instance string `json:"instance,omitempty"`
	// Reason is junban's reason code when one applies (ERR_UNKNOWN_SKU, ...).
	Reason string `json:"reason,omitempty"`
}

// Problem types; docs/api.md lists them.
const (
	ProblemInvalid      = "urn:junban:problem:invalid-request"
	ProblemUnauthorized = "urn:junban:problem:unauthorized"
	ProblemForbidden    = "urn:junban:problem:forbidden"
	ProblemNotFound     = "urn:junban:problem:not-found"
	ProblemTooLarge     = "urn:junban:problem:too-large"
	ProblemConflict     = "urn:junban:problem:conflict"
	ProblemUnavailable  = "urn:junban:problem:unavailable"
	ProblemInternal     = "urn:junban:problem:internal"
	ProblemMethod       = "urn:junban:problem:method-not-allowed"
	ProblemMisdirected  = "urn:junban:problem:misdirected"
)

var problemTitles = map[string]string{
	ProblemInvalid:      "invalid request",
	ProblemUnauthorized: "no or unknown bearer token",
	ProblemForbidden:    "the token's scope does not allow this",
	ProblemNotFound:     "not found",
	ProblemTooLarge:     "request body too large",
	ProblemConflict:     "conflict",
	ProblemUnavailable:  "a backing service did not answer in time",
	ProblemInternal:     "internal error",
	ProblemMethod:       "method not allowed",
	ProblemMisdirected:  "the Host is none of this server's names",
}

// maxInstance bounds the path a problem repeats: a request may send 64 KB of it.
const maxInstance = 256

func writeProblem(w http.ResponseWriter, r *http.Request, status int, typ, detail, reason string) {
	p := Problem{Type: typ, Title: problemTitles[typ], Status: status, Detail: detail, Instance: clip(r.URL.Path, maxInstance), Reason: reason}
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Cache-Control", "no-store")
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="junban"`)
	}
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(p)
}

// writeJSON answers v. go-json encodes the documents (availability is the hot read) at
// about half encoding/json's cost, with the same output for these types.
// writeEncoded answers body, a JSON document encoded already with its final newline, as
// writeJSON does. body is only read: cached answers are shared.
func writeEncoded(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := gojson.Marshal(v)
	if err != nil {
		b, _ = json.Marshal(Problem{Type: ProblemInternal, Title: problemTitles[ProblemInternal], Status: http.StatusInternalServerError})
		status = http.StatusInternalServerError
		w.Header().Set("Content-Type", "application/problem+json")
	} else {
		w.Header().Set("Content-Type", "application/json")
	}
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}
