package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestHealthz(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv := newServer(config{addr: ln.Addr().String(), logLevel: slog.LevelInfo}, logger)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()

	resp, err := http.Get("http://" + ln.Addr().String() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Errorf("status = %d, want 200", resp.StatusCode)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
	var got struct{ Status string }
	if err := json.Unmarshal(body, &got); err != nil || got.Status != "ok" {
		t.Errorf("body = %q, want {\"status\":\"ok\"}", body)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		t.Fatalf("Serve returned %v, want http.ErrServerClosed", err)
	}
}

func TestParseConfig(t *testing.T) {
	tests := []struct {
		name      string            // test case name
		env       map[string]string // environment variables
		args      []string          // command-line flags
		wantAddr  string            // expected listen address
		wantLevel slog.Level        // expected log level
		wantErr   string            // substring of the expected error; "" for none
	}{
		{name: "defaults", wantAddr: ":9000", wantLevel: slog.LevelInfo},
		{
			name:      "from env",
			env:       map[string]string{"TRELLIS_HTTP_ADDR": "127.0.0.1:8080", "TRELLIS_LOG_LEVEL": "debug"},
			wantAddr:  "127.0.0.1:8080",
			wantLevel: slog.LevelDebug,
		},
		{
			name:      "flag overrides env",
			env:       map[string]string{"TRELLIS_HTTP_ADDR": ":8080", "TRELLIS_LOG_LEVEL": "warn"},
			args:      []string{"-addr", ":7000", "-log-level", "error"},
			wantAddr:  ":7000",
			wantLevel: slog.LevelError,
		},
		{
			name:    "invalid log level",
			env:     map[string]string{"TRELLIS_LOG_LEVEL": "verbose"},
			wantErr: "TRELLIS_LOG_LEVEL",
		},
		{name: "unknown flag", args: []string{"-nope"}, wantErr: "nope"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			getenv := func(k string) string { return tt.env[k] }
			cfg, err := parseConfig(tt.args, getenv, io.Discard)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if cfg.addr != tt.wantAddr || cfg.logLevel != tt.wantLevel {
				t.Fatalf("got {%q %v}, want {%q %v}", cfg.addr, cfg.logLevel, tt.wantAddr, tt.wantLevel)
			}
		})
	}
}
