package api

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// ContentTypeProblem is the media type of every error response (RFC 9457).
const ContentTypeProblem = "application/problem+json"

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

// WriteProblemBody answers with p, filling in what it leaves empty: Status
// (500), Type (about:blank), Title (the status text), Instance (the request
// path) and, on a 5xx, CorrelationId (the request id).
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
	w.WriteHeader(p.Status)
	_, _ = w.Write(b)
}
