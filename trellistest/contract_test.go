package trellistest_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/trellis-go/trellis/api"
	"github.com/trellis-go/trellis/trellistest"
)

// errorsOf is a testing.TB that keeps what Errorf reports instead of
// failing the test.
type errorsOf struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (e *errorsOf) Errorf(format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.errs = append(e.errs, fmt.Sprintf(format, args...))
}

// TestCheckContracts: responses the framework's contract describes pass,
// and each kind of drift is reported.
func TestCheckContracts(t *testing.T) {
	tests := []struct {
		name    string           // case name
		method  string           // request method
		path    string           // request path
		handler http.HandlerFunc // what the server answers
		drift   string           // substring of the report ("" for none)
	}{
		{name: "documented", method: http.MethodGet, path: "/healthz", handler: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", api.ContentTypeJSON)
			_, _ = w.Write([]byte(`{"status":"ok"}`))
		}},
		{name: "undocumented status", method: http.MethodGet, path: "/healthz", handler: func(w http.ResponseWriter, r *http.Request) {
			api.WriteProblem(w, r, http.StatusTeapot, "no")
		}, drift: "answered 418"},
		{name: "body off its schema", method: http.MethodGet, path: "/healthz", handler: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", api.ContentTypeJSON)
			_, _ = w.Write([]byte(`{"status":7}`))
		}, drift: "answered 200"},
		{name: "405 without Allow", method: http.MethodPost, path: "/healthz", handler: func(w http.ResponseWriter, r *http.Request) {
			api.WriteProblem(w, r, http.StatusMethodNotAllowed, "no")
		}, drift: "want 405 with Allow"},
		{name: "unknown path not 404", method: http.MethodGet, path: "/nowhere", handler: func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusOK)
		}, drift: "want 404"},
		{name: "unknown path's problem", method: http.MethodGet, path: "/nowhere", handler: func(w http.ResponseWriter, r *http.Request) {
			api.WriteProblem(w, r, http.StatusNotFound, "no route /nowhere")
		}},
		{name: "unknown path's 404 not a problem", method: http.MethodGet, path: "/nowhere", handler: func(w http.ResponseWriter, r *http.Request) {
			http.NotFound(w, r)
		}, drift: "UnknownPath"},
		{name: "unknown path's problem off its schema", method: http.MethodGet, path: "/nowhere", handler: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", api.ContentTypeProblem)
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"status":"404"}`))
		}, drift: "does not match UnknownPath"},
		{name: "a contract as YAML", method: http.MethodGet, path: "/admin/openapi.yaml", handler: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/yaml")
			_, _ = w.Write(api.Spec)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(tt.handler)
			defer srv.Close()
			rec := &errorsOf{TB: t}
			c := &http.Client{Transport: trellistest.CheckContracts(rec, nil, api.Spec)}
			req, _ := http.NewRequest(tt.method, srv.URL+tt.path, nil)
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
			c.CloseIdleConnections()
			got := strings.Join(rec.errs, "\n")
			if (tt.drift == "") != (got == "") || !strings.Contains(got, tt.drift) {
				t.Fatalf("reported %q, want %q", got, tt.drift)
			}
		})
	}
}
