package trellis_test

import (
	"bytes"
	"net"
	"net/http"
	"testing"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/api"
	"github.com/trellis-go/trellis/internal/testenv"
)

// TestHealthAndReadiness: /healthz answers while the process runs;
// /readyz answers 200 when the store answers a ping and 503 when it does
// not (a Redis URL pointing at a closed port).
func TestHealthAndReadiness(t *testing.T) {
	tests := []struct {
		name      string                                  // case name
		opts      func(t *testing.T) []trellis.TestOption // the store
		wantReady int                                     // /readyz status
	}{
		{name: "memory", opts: func(*testing.T) []trellis.TestOption { return nil }, wantReady: http.StatusOK},
		{name: "redis", opts: func(t *testing.T) []trellis.TestOption {
			return []trellis.TestOption{trellis.WithRedisURL(testenv.RedisURL(t))}
		}, wantReady: http.StatusOK},
		{name: "redis unreachable", opts: func(t *testing.T) []trellis.TestOption {
			// A fixed prefix: the test kit does not try to clean up a Redis
			// that is not there.
			return []trellis.TestOption{trellis.WithRedisURL("redis://" + closedPort(t) + "/0"), trellis.WithStorePrefix("unreachable")}
		}, wantReady: http.StatusServiceUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts := start(t, &counterApp{}, tt.opts(t)...)

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

// TestOpenAPISpecServed: GET /openapi.yaml serves the embedded contract.
func TestOpenAPISpecServed(t *testing.T) {
	ts := start(t, &counterApp{})
	resp := ts.Get(t, "/openapi.yaml")
	if resp.Status != http.StatusOK {
		t.Fatalf("status %d", resp.Status)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/yaml" {
		t.Errorf("Content-Type %q, want application/yaml", ct)
	}
	if !bytes.Equal(resp.Body, api.Spec) {
		t.Errorf("body (%d bytes) differs from api.Spec (%d bytes)", len(resp.Body), len(api.Spec))
	}
}
