package trellis_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/trellis-go/trellis/api"
	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/internal/testkit/fixture"
)

// TestClientErrors pins every 4xx the service answers: status,
// application/problem+json, and that the problem names the field at fault
// (or, where no field is at fault, says what is wrong).
func TestClientErrors(t *testing.T) {
	ts := fixture.StartCounter(t, &fixture.CounterApp{})
	tooLarge := `{"by":1,"pad":"` + strings.Repeat("x", api.DefaultMaxBodyBytes) + `"}`
	tests := []struct {
		name        string // case name
		method      string // HTTP method
		path        string // request path
		body        string // raw request body ("" for none)
		contentType string // Content-Type ("" for application/json when there is a body)
		chunked     bool   // send the body without a Content-Length
		status      int    // expected status
		field       string // the field the problem must name in errors ("" for none)
		message     string // substring of that field's message, or of the detail when field is ""
		allow       string // expected Allow header ("" to not check)
	}{
		{name: "malformed JSON", method: "POST", path: "/counters/c1/increase", body: `{"by": }`, status: 400, field: "by", message: "offset 7"},
		{name: "malformed JSON after a value", method: "POST", path: "/counters/c1/increase", body: `{"by": 1,}`, status: 400, message: "malformed JSON at offset 9"},
		{name: "truncated JSON", method: "POST", path: "/counters/c1/increase", body: `{"by": 1`, status: 400, message: "offset 8"},
		{name: "two JSON values", method: "POST", path: "/counters/c1/increase", body: `{"by":1}{"by":2}`, status: 400, message: "one JSON value"},
		{name: "empty body", method: "POST", path: "/counters/c1/increase", status: 400, message: "empty"},
		{name: "unknown field", method: "POST", path: "/counters/c1/increase", body: `{"by":1,"extra":2}`, status: 400, field: "extra", message: "not a known field"},
		{name: "field name in the wrong case", method: "POST", path: "/counters/c1/increase", body: `{"BY":1}`, status: 400, field: "BY", message: "not a known field"},
		{name: "field given twice", method: "POST", path: "/counters/c1/increase", body: `{"by":1,"by":2}`, status: 400, field: "by", message: "more than once"},
		{name: "wrong type: string", method: "POST", path: "/counters/c1/increase", body: `{"by":"five"}`, status: 400, field: "by", message: "must be an integer"},
		{name: "wrong type: fraction", method: "POST", path: "/counters/c1/increase", body: `{"by":1.5}`, status: 400, field: "by", message: "must be an integer"},
		{name: "wrong type: not an object", method: "POST", path: "/counters/c1/increase", body: `[1]`, status: 400, message: "must be an object"},
		{name: "missing required field", method: "POST", path: "/counters/c1/increase", body: `{}`, status: 400, field: "by", message: "is required"},
		{name: "required field null", method: "POST", path: "/counters/c1/increase", body: `{"by":null}`, status: 400, field: "by", message: "must not be null"},
		{name: "by below range", method: "POST", path: "/counters/c1/increase", body: `{"by":0}`, status: 400, field: "by", message: "at least 1"},
		{name: "by negative", method: "POST", path: "/counters/c1/increase", body: `{"by":-3}`, status: 400, field: "by", message: "at least 1"},
		{name: "by above range", method: "POST", path: "/counters/c1/increase", body: `{"by":1000001}`, status: 400, field: "by", message: "at most 1000000"},
		{name: "bad id on POST", method: "POST", path: "/counters/bad!id/increase", body: `{"by":1}`, status: 400, field: "id", message: "letters, digits"},
		{name: "bad id on GET", method: "GET", path: "/counters/bad.id", status: 400, field: "id", message: "letters, digits"},
		{name: "id too long", method: "DELETE", path: "/counters/" + strings.Repeat("a", 65), status: 400, field: "id", message: "1 to 64"},
		{name: "not JSON", method: "POST", path: "/counters/c1/increase", body: `by=1`, contentType: "application/x-www-form-urlencoded", status: 415, message: "must be application/json"},
		{name: "body too large", method: "POST", path: "/counters/c1/increase", body: tooLarge, status: 413, message: "larger than 1048576 bytes"},
		{name: "body too large, chunked", method: "POST", path: "/counters/c1/increase", body: tooLarge, chunked: true, status: 413, message: "larger than 1048576 bytes"},
		{name: "unknown route", method: "GET", path: "/nope", status: 404, message: "no route /nope"},
		{name: "unknown route under counters", method: "GET", path: "/counters/c1/decrease", status: 404, message: "no route"},
		{name: "wrong method", method: "PUT", path: "/counters/c1", body: `{}`, status: 405, message: "PUT is not allowed", allow: "GET, HEAD, DELETE"},
		{name: "wrong method on a system route", method: "POST", path: "/healthz", status: 405, message: "POST is not allowed", allow: "GET, HEAD"},
		{name: "invalid UTF-8 in a string", method: "POST", path: "/counters/c1/increase", body: "{\"by\":1,\"n\xffte\":\"x\"}", status: 400, field: "n\ufffdte", message: "not UTF-8"},
		{name: "bad escape in the query", method: "GET", path: "/counters/c1?limit=%ZZ", status: 400, field: "limit", message: "not validly percent-encoded"},
		{name: "bad escape in a query name", method: "GET", path: "/counters/c1?li%ZZmit=1", status: 400, field: "li%ZZmit", message: "not validly percent-encoded"},
		{name: "semicolon in the query", method: "GET", path: "/counters/c1?a=1;b=2", status: 400, field: "a", message: "contains ';'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var body io.Reader
			if tt.body != "" {
				body = strings.NewReader(tt.body)
				if tt.chunked { // hide the length, so net/http streams it
					body = io.MultiReader(body)
				}
			}
			req, err := http.NewRequestWithContext(context.Background(), tt.method, ts.URL+tt.path, body)
			if err != nil {
				t.Fatal(err)
			}
			if tt.body != "" {
				ct := tt.contentType
				if ct == "" {
					ct = api.ContentTypeJSON
				}
				req.Header.Set("Content-Type", ct)
			}
			resp, err := ts.Send(req)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Status != tt.status {
				t.Fatalf("status %d, want %d: %s", resp.Status, tt.status, resp.Body)
			}
			p := resp.Problem(t)
			if p.Title == "" || p.Type == "" || p.Instance != req.URL.Path {
				t.Errorf("problem %+v: want a type, a title and the instance %q", p, req.URL.Path)
			}
			if p.CorrelationId != "" {
				t.Errorf("a 4xx carries a correlation id: %+v", p)
			}
			if tt.field == "" {
				if !strings.Contains(p.Detail, tt.message) {
					t.Errorf("detail %q, want it to contain %q", p.Detail, tt.message)
				}
			} else if !namesField(p, tt.field, tt.message) {
				t.Errorf("problem %s: want errors to name %q with %q", resp.Body, tt.field, tt.message)
			}
			if tt.allow != "" && resp.Header.Get("Allow") != tt.allow {
				t.Errorf("Allow = %q, want %q", resp.Header.Get("Allow"), tt.allow)
			}
		})
	}
}

func namesField(p api.Problem, field, message string) bool {
	for _, e := range p.Errors {
		if e.Field == field && strings.Contains(e.Message, message) {
			return true
		}
	}
	return false
}

// TestCommandError: an entity's error(message) is a 400 with that message,
// and the state is unchanged.
func TestCommandError(t *testing.T) {
	for _, sc := range fixture.Stores {
		t.Run(sc.Name, func(t *testing.T) {
			ts := fixture.StartCounter(t, &fixture.CounterApp{}, sc.Opts(t)...)
			// One increase through the component client (past the HTTP
			// route's bound on "by") puts the counter just below the maximum.
			call := components.DeferredCall{ComponentID: "counter", Method: "increase", EntityID: "nearly-full", Argument: []byte("999999999")}
			if _, err := ts.Client.Dispatch(context.Background(), call); err != nil {
				t.Fatal(err)
			}
			resp := ts.Post(t, "/counters/nearly-full/increase", map[string]int{"by": 2})
			if resp.Status != http.StatusBadRequest {
				t.Fatalf("status %d, want 400: %s", resp.Status, resp.Body)
			}
			p := resp.Problem(t)
			if p.Detail != "counter nearly-full would exceed 1000000000" {
				t.Errorf("detail %q, want the command's message", p.Detail)
			}
			if c := fixture.Counter(t, ts.Get(t, "/counters/nearly-full")); c.Value != 999999999 {
				t.Errorf("value %d after a refused command, want 999999999", c.Value)
			}
			if c := fixture.Counter(t, ts.Post(t, "/counters/nearly-full/increase", map[string]int{"by": 1})); c.Value != 1000000000 {
				t.Errorf("value %d, want 1000000000", c.Value)
			}
		})
	}
}

// TestPanicIsA500WithCorrelationID: a panicking handler answers 500 whose
// body carries only the request id as its correlation id; the panic and
// its stack are in the log under that id.
func TestPanicIsA500WithCorrelationID(t *testing.T) {
	ts := fixture.StartCounter(t, &fixture.CounterApp{PanicID: "explode"})
	tests := []struct {
		name      string // case name
		requestID string // X-Request-Id sent ("" for none)
		wantID    string // the id expected back ("" for any generated one)
	}{
		{name: "generated id"},
		{name: "client's id", requestID: "client-req-42", wantID: "client-req-42"},
		{name: "unsafe client id replaced", requestID: "bad id\twith tab"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodGet, ts.URL+"/counters/explode", nil)
			if err != nil {
				t.Fatal(err)
			}
			if tt.requestID != "" {
				req.Header.Set(api.HeaderRequestID, tt.requestID)
			}
			resp, err := ts.Send(req)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Status != http.StatusInternalServerError {
				t.Fatalf("status %d, want 500: %s", resp.Status, resp.Body)
			}
			p := resp.Problem(t)
			id := resp.Header.Get(api.HeaderRequestID)
			if id == "" || p.CorrelationId != id {
				t.Errorf("correlationId %q, X-Request-Id %q: want them equal and set", p.CorrelationId, id)
			}
			if tt.wantID != "" && id != tt.wantID {
				t.Errorf("X-Request-Id %q, want the client's %q", id, tt.wantID)
			}
			if tt.requestID != "" && tt.wantID == "" && id == tt.requestID {
				t.Errorf("the unsafe client id %q was echoed", id)
			}
			if p.Detail != "Unexpected error" || strings.Contains(string(resp.Body), "boom") || strings.Contains(string(resp.Body), "goroutine") {
				t.Errorf("body %s: want only \"Unexpected error\" and the correlation id", resp.Body)
			}
			if logs := ts.Logs(); !strings.Contains(logs, "boom: secret internal detail") || !strings.Contains(logs, id) {
				t.Errorf("the log lacks the panic under request id %s", id)
			}
		})
	}
	// The server survived: the next request is served.
	if c := fixture.Counter(t, ts.Get(t, "/counters/fine")); c.Value != 0 {
		t.Errorf("value %d, want 0", c.Value)
	}
}
