package trellistest_test

import (
	"bufio"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

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

// streamSpec is a contract with a stream of events and a JSON answer,
// and no components.
var streamSpec = []byte(`openapi: 3.0.3
info: {title: streams, version: "1"}
paths:
  /events:
    get:
      responses:
        "200":
          description: events
          content:
            text/event-stream:
              schema: {type: string}
  /json:
    get:
      responses:
        "200":
          description: an object
          content:
            application/json:
              schema: {type: object}
`)

// TestCheckContractsStream: a stream of events is handed over as it
// comes, before it ends, and reported when the contract describes no
// stream there; a contract without components loads.
func TestCheckContractsStream(t *testing.T) {
	for _, tt := range []struct {
		path, drift string
	}{
		{"/events", ""},
		{"/json", "no text/event-stream content"},
	} {
		t.Run(tt.path, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = w.Write([]byte("event: ready\ndata: {}\n\n"))
				w.(http.Flusher).Flush()
				<-r.Context().Done() // a stream ends when its client goes
			}))
			defer srv.Close()
			rec := &errorsOf{TB: t}
			c := &http.Client{Transport: trellistest.CheckContracts(rec, nil, streamSpec)}
			defer c.CloseIdleConnections()
			got := make(chan string, 1)
			go func() {
				resp, err := c.Get(srv.URL + tt.path)
				if err != nil {
					got <- err.Error()
					return
				}
				defer resp.Body.Close()
				line, _ := bufio.NewReader(resp.Body).ReadString('\n')
				got <- line
			}()
			if line := trellistest.Recv(t, got, 10*time.Second); line != "event: ready\n" {
				t.Errorf("read %q, want the stream's first line", line)
			}
			rec.mu.Lock()
			defer rec.mu.Unlock()
			if errs := strings.Join(rec.errs, "\n"); (tt.drift == "") != (errs == "") || !strings.Contains(errs, tt.drift) {
				t.Errorf("reported %q, want %q", errs, tt.drift)
			}
		})
	}
}
