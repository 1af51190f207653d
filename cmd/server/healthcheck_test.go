package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// healthzURL asks the loopback address for a wildcard host and the host
// itself otherwise, and refuses an address without a fixed port.
func TestHealthzURL(t *testing.T) {
	tests := []struct {
		addr    string // TRELLIS_HTTP_ADDR
		want    string // the URL checked
		wantErr bool   // the address cannot be checked
	}{
		{":9000", "http://127.0.0.1:9000/healthz", false},
		{"0.0.0.0:9000", "http://127.0.0.1:9000/healthz", false},
		{"[::]:9000", "http://127.0.0.1:9000/healthz", false},
		{"127.0.0.1:8080", "http://127.0.0.1:8080/healthz", false},
		{"localhost:8080", "http://localhost:8080/healthz", false},
		{"[::1]:8080", "http://[::1]:8080/healthz", false},
		{"127.0.0.1:0", "", true},
		{":http", "", true},
		{"nowhere", "", true},
	}
	for _, tt := range tests {
		got, err := healthzURL(tt.addr)
		if got != tt.want || (err != nil) != tt.wantErr {
			t.Errorf("healthzURL(%q) = %q, %v; want %q, error %v", tt.addr, got, err, tt.want, tt.wantErr)
		}
	}
}

// The check passes on a 200 only, and gives up on a server that does not
// answer within its timeout.
func TestCheckHealth(t *testing.T) {
	hang := make(chan struct{})
	defer close(hang) // before the servers close, which wait for handlers
	tests := []struct {
		name    string           // the case
		handler http.HandlerFunc // the server's /healthz
		wantErr string           // what the error says ("" for none)
	}{
		{"200", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(`{"status":"ok"}`)) }, ""},
		{"503", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) }, "503"},
		{"404", http.NotFound, "404"},
		{"hangs", func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-hang:
			case <-r.Context().Done():
			}
		}, "no answer within"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(tt.handler)
			defer srv.Close()
			const timeout = 300 * time.Millisecond
			start := time.Now()
			err := checkHealth(context.Background(), srv.URL+"/healthz", timeout)
			if took := time.Since(start); took > timeout+2*time.Second {
				t.Errorf("the check took %v, its timeout is %v", took, timeout)
			}
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("err = %v, want nil", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("err = %v, want one saying %q", err, tt.wantErr)
			}
		})
	}
}

// The -healthcheck mode exits 0 for a healthy server on the port of
// TRELLIS_HTTP_ADDR (or -addr), and 1 with a reason otherwise.
func TestHealthcheckMode(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(`{"status":"ok"}`))
	}))
	defer srv.Close()
	_, port, err := net.SplitHostPort(srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	// A port nothing listens on: taken, then released.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := ln.Addr().String()
	_ = ln.Close()

	tests := []struct {
		name     string   // the case
		addrEnv  string   // TRELLIS_HTTP_ADDR
		args     []string // the arguments after -healthcheck
		wantCode int      // the exit code
	}{
		{"wildcard host", ":" + port, nil, 0},
		{"loopback host", "127.0.0.1:" + port, nil, 0},
		{"-addr wins", deadAddr, []string{"-addr", ":" + port}, 0},
		{"nothing listens", deadAddr, nil, 1},
		{"random port", "127.0.0.1:0", nil, 1},
		{"bad flag", ":" + port, []string{"-nope"}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{"TRELLIS_HTTP_ADDR": tt.addrEnv}
			var stderr bytes.Buffer
			code := healthcheck(func(k string) string { return env[k] }, tt.args, &stderr)
			if code != tt.wantCode {
				t.Fatalf("exit code %d, want %d; stderr: %s", code, tt.wantCode, &stderr)
			}
			if code != 0 && stderr.Len() == 0 {
				t.Error("an unhealthy result says nothing on stderr")
			}
		})
	}
}

// Only -healthcheck as the first argument selects the mode.
func TestIsHealthcheck(t *testing.T) {
	tests := []struct {
		args []string // the command line after the program name
		want bool     // the health check mode
	}{
		{[]string{"-healthcheck"}, true},
		{[]string{"--healthcheck"}, true},
		{[]string{"-healthcheck", "-addr", ":1"}, true},
		{nil, false},
		{[]string{"-addr", ":1", "-healthcheck"}, false},
		{[]string{"-healthcheck=false"}, false},
	}
	for _, tt := range tests {
		if got := isHealthcheck(tt.args); got != tt.want {
			t.Errorf("isHealthcheck(%q) = %v, want %v", tt.args, got, tt.want)
		}
	}
}
