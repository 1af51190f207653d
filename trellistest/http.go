package trellistest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/trellis-go/trellis/api"
)

// Response is a test request's response, read in full.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// Call sends a request and reads the response. body is sent as is when it
// is a string or []byte (with Content-Type application/json), as JSON
// otherwise, and not at all when nil. Unlike the t helpers it may be used
// from any goroutine.
func (ts *Service) Call(ctx context.Context, method, path string, body any) (*Response, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("%s %s: encode the body: %w", method, path, err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequestWithContext(ctx, method, ts.URL+path, rd)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", api.ContentTypeJSON)
	}
	return ts.Send(req)
}

// Send sends req (its URL must point at ts.URL) and reads the response.
func (ts *Service) Send(req *http.Request) (*Response, error) {
	resp, err := ts.HTTP.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: read the response: %w", req.Method, req.URL.Path, err)
	}
	return &Response{Status: resp.StatusCode, Header: resp.Header, Body: b}, nil
}

// Do is Call for the test goroutine: it fails the test on a transport error.
func (ts *Service) Do(t testing.TB, method, path string, body any) *Response {
	t.Helper()
	resp, err := ts.Call(context.Background(), method, path, body)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// Get is Do with GET.
func (ts *Service) Get(t testing.TB, path string) *Response {
	t.Helper()
	return ts.Do(t, http.MethodGet, path, nil)
}

// Post is Do with POST.
func (ts *Service) Post(t testing.TB, path string, body any) *Response {
	t.Helper()
	return ts.Do(t, http.MethodPost, path, body)
}

// Delete is Do with DELETE.
func (ts *Service) Delete(t testing.TB, path string) *Response {
	t.Helper()
	return ts.Do(t, http.MethodDelete, path, nil)
}

// JSON decodes the body into v, failing the test if it is not JSON.
func (r *Response) JSON(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("response body %q: %v", r.Body, err)
	}
}

// Problem checks that the response is a problem (application/problem+json
// with the response's status) and returns it.
func (r *Response) Problem(t testing.TB) api.Problem {
	t.Helper()
	if ct := r.Header.Get("Content-Type"); ct != api.ContentTypeProblem {
		t.Fatalf("Content-Type = %q, want %q (status %d, body %s)", ct, api.ContentTypeProblem, r.Status, r.Body)
	}
	var p api.Problem
	r.JSON(t, &p)
	if p.Status != r.Status {
		t.Fatalf("problem status %d, response status %d", p.Status, r.Status)
	}
	return p
}
