package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/trellis-go/trellis/api"
	"github.com/trellis-go/trellis/trellistest"
)

// TestRawErrorsAreProblems sends, over real TCP to the real server, what
// net/http refuses before any handler runs: each answer is problem+json
// with the status net/http chose, valid against the contract's Problem
// schema (no operation of a contract has these requests' paths, so the
// schema is what can be checked).
func TestRawErrorsAreProblems(t *testing.T) {
	ts := trellistest.Start(t, setup(&samples{}))
	problemSchema := contractSchema(t, "Problem")
	addr := strings.TrimPrefix(ts.URL, "http://")
	tests := []struct {
		name    string
		request string
		status  int
	}{
		{"malformed escape in an entity path", "GET /orders/%ZZ HTTP/1.1\r\nHost: x\r\n\r\n", http.StatusBadRequest},
		{"malformed escape in an admin path", "GET /admin/timers/%ZZ HTTP/1.1\r\nHost: x\r\n\r\n", http.StatusBadRequest},
		{"bad request line", "NOT A REQUEST LINE\r\n\r\n", http.StatusBadRequest},
		{"no Host", "GET /healthz HTTP/1.1\r\n\r\n", http.StatusBadRequest},
		{"1.5 MB header", "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 1536<<10) + "\r\n\r\n", http.StatusRequestHeaderFieldsTooLarge},
		{"2M-character path", "GET /" + strings.Repeat("a", 2<<20) + " HTTP/1.1\r\nHost: x\r\n\r\n", http.StatusRequestHeaderFieldsTooLarge},
		{"unsupported transfer coding", "POST /orders HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: zip\r\n\r\n", http.StatusNotImplemented},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := rawRoundTrip(t, addr, tt.request)
			defer resp.Body.Close()
			p := checkProblem(t, resp, tt.status)
			var v any
			b, _ := json.Marshal(p)
			_ = json.Unmarshal(b, &v)
			if err := problemSchema.VisitJSON(v); err != nil {
				t.Fatalf("the problem does not match the contract's Problem schema: %v", err)
			}
		})
	}
	// A handler's own answers are left alone: a 404 of the router is its
	// problem, with the request's path as the instance.
	resp := rawRoundTrip(t, addr, "GET /no/such/route HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	defer resp.Body.Close()
	if p := checkProblem(t, resp, http.StatusNotFound); p.Instance != "/no/such/route" || resp.Header.Get(api.HeaderRequestID) == "" {
		t.Fatalf("the router's 404 was rewritten: %+v", p)
	}
}

// rawRoundTrip writes request to addr as it is and reads one response.
// The server may answer before it has read the whole request, and close.
func rawRoundTrip(t *testing.T, addr, request string) *http.Response {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	go func() { _, _ = io.WriteString(c, request) }() // fails harmlessly once the server closes
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("read the response: %v", err)
	}
	return resp
}

// checkProblem checks that resp is a problem of status and returns it.
func checkProblem(t *testing.T, resp *http.Response, status int) api.Problem {
	t.Helper()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var p api.Problem
	if resp.StatusCode != status || resp.Header.Get("Content-Type") != api.ContentTypeProblem ||
		json.Unmarshal(body, &p) != nil || p.Status != status || p.Title != http.StatusText(status) || p.Detail == "" {
		t.Fatalf("%d %s: %s; want a %d problem", resp.StatusCode, resp.Header.Get("Content-Type"), body, status)
	}
	return p
}

// contractSchema is the schema name of the framework's contract.
func contractSchema(t *testing.T, name string) *openapi3.Schema {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(api.Spec)
	if err != nil {
		t.Fatal(err)
	}
	ref := doc.Components.Schemas[name]
	if ref == nil || ref.Value == nil {
		t.Fatalf("the contract has no schema %s", name)
	}
	return ref.Value
}
