package trellistest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
)

// ContractTransport is an http.RoundTripper that validates every response
// it carries against OpenAPI contracts (kin-openapi's openapi3filter), so
// that a status, a header or a body they do not describe fails the test:
// the service and its contracts cannot drift apart unnoticed. A mismatch
// is reported with t.Errorf, so it may be used from any goroutine. A
// request on a path the contracts
// have, with a method they do not, must be answered 405 with an Allow
// header; a path they do not have, 404 matching a contract's UnknownPath
// response (the framework's contract has it). Requests are not validated:
// tests send bad ones on purpose.
type ContractTransport struct {
	t       testing.TB
	base    http.RoundTripper
	routers []routers.Router
	// unknownPath is the UnknownPath response of a contract (the
	// framework's), which a request on no contract's path must match.
	unknownPath *openapi3.Response
}

// CheckContracts makes a ContractTransport over base (http.DefaultTransport when
// nil) for the OpenAPI documents specs. It fails the test if one does not
// load or is not valid.
func CheckContracts(t testing.TB, base http.RoundTripper, specs ...[]byte) *ContractTransport {
	t.Helper()
	if base == nil {
		base = http.DefaultTransport
	}
	tr := &ContractTransport{t: t, base: base}
	for i, spec := range specs {
		doc, err := openapi3.NewLoader().LoadFromData(spec)
		if err != nil {
			t.Fatalf("load contract %d: %v", i, err)
		}
		if err := doc.Validate(context.Background()); err != nil {
			t.Fatalf("contract %d (%s) is not valid OpenAPI: %v", i, doc.Info.Title, err)
		}
		// The servers name where the service may be deployed; the tests'
		// is a loopback port, so match the paths only.
		doc.Servers = nil
		if doc.Components == nil { // a contract may have none
			doc.Components = &openapi3.Components{}
		}
		if ref := doc.Components.Responses["UnknownPath"]; ref != nil && tr.unknownPath == nil {
			tr.unknownPath = ref.Value
		}
		r, err := legacy.NewRouter(doc)
		if err != nil {
			t.Fatalf("route contract %d: %v", i, err)
		}
		tr.routers = append(tr.routers, r)
	}
	return tr
}

// RoundTrip sends req and validates the response. A stream of
// Server-Sent Events (text/event-stream) is returned as it comes, its
// body unread: its status, headers and media type are validated, not
// its events, which end only when the stream does.
func (tr *ContractTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := tr.base.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	if isEventStream(resp) {
		if err := tr.validate(req, resp, nil); err != nil {
			tr.t.Errorf("%s %s answered %d, which the contracts do not describe: %v (a stream of events)",
				req.Method, req.URL.RequestURI(), resp.StatusCode, err)
		}
		return resp, nil
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if err := tr.validate(req, resp, body); err != nil {
		tr.t.Errorf("%s %s answered %d, which the contracts do not describe: %v\nbody: %s",
			req.Method, req.URL.RequestURI(), resp.StatusCode, err, body)
	}
	return resp, nil
}

// validate checks one response against the first contract that has its
// path.
func (tr *ContractTransport) validate(req *http.Request, resp *http.Response, body []byte) error {
	methodKnown := false
	for _, r := range tr.routers {
		route, params, err := r.FindRoute(req)
		switch {
		case isMethodNotAllowed(err):
			methodKnown = true
			continue
		case err != nil:
			continue
		}
		stream := isEventStream(resp)
		in := &openapi3filter.ResponseValidationInput{
			RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
			Status:                 resp.StatusCode,
			Header:                 resp.Header,
			Body:                   io.NopCloser(bytes.NewReader(body)),
			Options:                &openapi3filter.Options{IncludeResponseStatus: true, ExcludeResponseBody: stream},
		}
		if err := openapi3filter.ValidateResponse(req.Context(), in); err != nil || !stream {
			return err
		}
		return streamDeclared(route.Operation, resp)
	}
	switch {
	case methodKnown && (resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") == ""):
		return fmt.Errorf("no %s operation on this path: want 405 with Allow", req.Method)
	case !methodKnown && resp.StatusCode != http.StatusNotFound:
		return errors.New("no such path in the contracts: want 404")
	case !methodKnown:
		return tr.validateUnknownPath(resp, body)
	}
	return nil
}

// validateUnknownPath checks the 404 of a request on no contract's path
// against the contracts' UnknownPath response: its media type and schema.
func (tr *ContractTransport) validateUnknownPath(resp *http.Response, body []byte) error {
	if tr.unknownPath == nil {
		return nil
	}
	ct := resp.Header.Get("Content-Type")
	media := tr.unknownPath.Content.Get(ct)
	if media == nil || media.Schema == nil {
		return fmt.Errorf("a 404 for an unknown path must be one of the UnknownPath response's media types, not %q", ct)
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return fmt.Errorf("the 404 for an unknown path is not JSON: %w", err)
	}
	if err := media.Schema.Value.VisitJSON(v); err != nil {
		return fmt.Errorf("the 404 for an unknown path does not match UnknownPath: %w", err)
	}
	return nil
}

// isMethodNotAllowed reports whether a router's err says the path exists
// without the method: the routers return a new RouteError with the
// sentinel's reason, not the sentinel.
func isMethodNotAllowed(err error) bool {
	var re *routers.RouteError
	return errors.As(err, &re) && re.Reason == routers.ErrMethodNotAllowed.Error()
}

// isEventStream reports whether resp is a stream of Server-Sent Events.
func isEventStream(resp *http.Response) bool {
	mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	return err == nil && mt == "text/event-stream"
}

// streamDeclared checks that op declares a stream of events for resp's
// status (the body's validation, which checks the media type, is off
// for a stream).
func streamDeclared(op *openapi3.Operation, resp *http.Response) error {
	ref := op.Responses.Status(resp.StatusCode)
	if ref == nil {
		ref = op.Responses.Default()
	}
	if ref == nil || ref.Value == nil || ref.Value.Content.Get("text/event-stream") == nil {
		return fmt.Errorf("its %d response has no text/event-stream content", resp.StatusCode)
	}
	return nil
}
