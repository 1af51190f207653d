package httpserver_test

import (
	"bytes"
	"net"
	"net/http"
	"testing"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/api"
	"github.com/trellis-go/trellis/internal/testkit/fixture"
	"github.com/trellis-go/trellis/trellistest"
)

// TestHealthAndReadiness: /healthz answers while the process runs;
// /readyz answers 200 when the store answers a ping and 503 when it does
// not (a Redis URL pointing at a closed port).
func TestHealthAndReadiness(t *testing.T) {
	tests := []struct {
		name      string                                  // case name
		opts      func(t *testing.T) []trellistest.Option // the store
		wantReady int                                     // /readyz status
	}{
		{name: "memory", opts: func(*testing.T) []trellistest.Option { return nil }, wantReady: http.StatusOK},
		{name: "redis", opts: func(t *testing.T) []trellistest.Option {
			return []trellistest.Option{trellistest.WithRedisURL(trellistest.RedisURL(t))}
		}, wantReady: http.StatusOK},
		{name: "redis unreachable", opts: func(t *testing.T) []trellistest.Option {
			// A fixed prefix: the test kit does not try to clean up a Redis
			// that is not there.
			return []trellistest.Option{trellistest.WithRedisURL("redis://" + closedPort(t) + "/0"), trellistest.WithStorePrefix("unreachable")}
		}, wantReady: http.StatusServiceUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts := fixture.StartCounter(t, &fixture.CounterApp{}, tt.opts(t)...)

			resp := ts.Get(t, "/healthz")
			if resp.Status != http.StatusOK || resp.Header.Get("Content-Type") != api.ContentTypeJSON {
				t.Errorf("/healthz: %d %s %s", resp.Status, resp.Header.Get("Content-Type"), resp.Body)
			}
			var h struct{ Status string }
			resp.JSON(t, &h)
			if h.Status != "ok" {
				t.Errorf("/healthz status %q, want ok", h.Status)
			}

			resp = ts.Get(t, "/readyz")
			if resp.Status != tt.wantReady {
				t.Fatalf("/readyz: %d, want %d: %s", resp.Status, tt.wantReady, resp.Body)
			}
			if tt.wantReady != http.StatusOK {
				if p := resp.Problem(t); p.Detail != "the state store is not reachable" {
					t.Errorf("/readyz problem detail %q", p.Detail)
				}
			}
		})
	}
}

// closedPort is a loopback address where nothing listens.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// TestOpenAPISpecServed: GET /openapi.yaml serves the application's
// contract (404 when it gave none), and GET /admin/openapi.yaml the
// framework's own, without a token.
func TestOpenAPISpecServed(t *testing.T) {
	appSpec := []byte("openapi: 3.0.3\ninfo: {title: the app, version: '1'}\npaths: {}\n")
	tests := []struct {
		name string               // case name
		opts []trellistest.Option // how the service is started
		path string               // the route asked
		want []byte               // the document served (nil: 404)
	}{
		{"app contract", []trellistest.Option{trellistest.WithServiceOptions(trellis.WithContract(appSpec))}, "/openapi.yaml", appSpec},
		{"no app contract", nil, "/openapi.yaml", nil},
		{"framework contract", nil, "/admin/openapi.yaml", api.Spec},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts := fixture.StartCounter(t, &fixture.CounterApp{}, tt.opts...)
			resp := ts.Get(t, tt.path)
			if tt.want == nil {
				if resp.Status != http.StatusNotFound {
					t.Fatalf("status %d, want 404", resp.Status)
				}
				resp.Problem(t)
				return
			}
			if resp.Status != http.StatusOK {
				t.Fatalf("status %d", resp.Status)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/yaml" {
				t.Errorf("Content-Type %q, want application/yaml", ct)
			}
			if !bytes.Equal(resp.Body, tt.want) {
				t.Errorf("body (%d bytes) differs from the document (%d bytes)", len(resp.Body), len(tt.want))
			}
		})
	}
}
