package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
)

// ContentTypeProblem is the media type of every error response (RFC 9457).
const ContentTypeProblem = "application/problem+json"

// Problem is an RFC 9457 problem: the body of every error response, served
// as application/problem+json. Its fields are in the order they are
// encoded in.
type Problem struct {
	// CorrelationId is, on server errors, the request id (also the
	// X-Request-Id response header) under which the server logged the
	// details.
	CorrelationId string `json:"correlationId,omitempty"`
	// Detail says what went wrong with this request, for a person to read.
	Detail string `json:"detail,omitempty"`
	// Errors are the invalid fields of the request, when there are any.
	Errors []FieldError `json:"errors,omitempty"`
	// Instance is the path of the request that failed.
	Instance string `json:"instance,omitempty"`
	// Status is the HTTP status code.
	Status int `json:"status"`
	// Title is a short summary of the problem type (for about:blank, the
	// HTTP status text).
	Title string `json:"title"`
	// Type is a URI reference that identifies the problem type;
	// about:blank when the status says it all.
	Type string `json:"type"`
}

// FieldError is one invalid field of a request.
type FieldError struct {
	// Field is the field's name as the request spells it: a JSON path such
	// as `items[2].name`, or the name of a path or query parameter.
	Field string `json:"field"`
	// Message says what is wrong with it.
	Message string `json:"message"`
}

// ProblemTypeBlank is the problem type of a problem that the HTTP status
// describes well enough; its title is then the status text.
const ProblemTypeBlank = "about:blank"

// WriteProblem answers with an RFC 9457 problem: the status, its text as
// the title, detail, the request path as the instance and the invalid
// fields, if any. A 5xx problem also carries the request id as its
// correlationId, so that a client can quote it and an operator find the
// log line.
func WriteProblem(w http.ResponseWriter, r *http.Request, status int, detail string, fields ...FieldError) {
	WriteProblemBody(w, r, Problem{Status: status, Detail: detail, Errors: fields})
}

// MaxListedErrors bounds the invalid fields a problem lists: a body with
// thousands of unknown keys must not get a response many times its size.
// The detail says how many more there were.
const MaxListedErrors = 20

// WriteProblemBody answers with p, filling in what it leaves empty: Status
// (500), Type (about:blank), Title (the status text), Instance (the request
// path) and, on a 5xx, CorrelationId (the request id). A 503 carries
// Retry-After (RetryAfterSeconds) unless the handler set one: whatever made
// the service unavailable, the client learns when to try again. Beyond
// MaxListedErrors invalid fields, the rest are left out and counted in the
// detail.
func WriteProblemBody(w http.ResponseWriter, r *http.Request, p Problem) {
	if p.Status == 0 {
		p.Status = http.StatusInternalServerError
	}
	if p.Type == "" {
		p.Type = ProblemTypeBlank
	}
	if p.Title == "" {
		p.Title = http.StatusText(p.Status)
	}
	if p.Instance == "" && r != nil {
		p.Instance = r.URL.Path
	}
	if n := len(p.Errors); n > MaxListedErrors {
		p.Errors = p.Errors[:MaxListedErrors]
		p.Detail += fmt.Sprintf(" (%d more invalid fields not listed)", n-MaxListedErrors)
	}
	if p.CorrelationId == "" && p.Status >= 500 && r != nil {
		p.CorrelationId = RequestID(r.Context())
	}
	// A Problem holds only strings and ints, so Marshal cannot fail.
	b, _ := json.Marshal(p)
	b = append(b, '\n')
	h := w.Header()
	h.Set("Content-Type", ContentTypeProblem)
	h.Set("Content-Length", strconv.Itoa(len(b)))
	h.Set("X-Content-Type-Options", "nosniff")
	if p.Status == http.StatusServiceUnavailable && h.Get("Retry-After") == "" {
		h.Set("Retry-After", retryAfter)
	}
	w.WriteHeader(p.Status)
	_, _ = w.Write(b)
}
