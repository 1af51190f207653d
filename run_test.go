package trellis_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/trellis-go/trellis"
)

// listenWatch is a log sink that tells when the service logged "listening"
// and at which address.
type listenWatch struct {
	once sync.Once
	addr chan string
}

func (l *listenWatch) Write(p []byte) (int, error) {
	for _, line := range bytes.Split(p, []byte("\n")) {
		if !bytes.Contains(line, []byte(`"msg":"listening"`)) {
			continue
		}
		_, rest, _ := strings.Cut(string(line), `"addr":"`)
		addr, _, _ := strings.Cut(rest, `"`)
		l.once.Do(func() { l.addr <- addr })
	}
	return len(p), nil
}

// greeter is an application with a flag of its own, -greeting, read by
// its one route, GET /greeting; a greeting "invalid" is refused by setup
// as an invalid setting of its own.
func greeter(greeting *string) (trellis.Setup, trellis.Option) {
	setup := func(h *trellis.Host, r chi.Router) error {
		if *greeting == "invalid" {
			return fmt.Errorf("greeter: %w", &trellis.ConfigError{Var: "-greeting", Reason: "must not be invalid"})
		}
		r.Get("/greeting", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, *greeting) })
		return nil
	}
	flags := trellis.WithFlags(func(fs *flag.FlagSet) {
		fs.StringVar(greeting, "greeting", "hello", "what GET /greeting answers")
	})
	return setup, flags
}

// Run is a service's main: the application's flags beside Trellis's,
// -h, invalid settings (Trellis's or the application's) and a graceful
// stop each end with their exit code.
func TestRun(t *testing.T) {
	tests := []struct {
		name     string   // case name
		args     []string // the command line, after the program name
		wantCode int      // the exit code
		wantOut  string   // what stderr says ("" for nothing checked)
		serves   string   // what GET /greeting answers ("": Run does not serve)
	}{
		{"serves with the app's flag", []string{"-addr", "127.0.0.1:0", "-greeting", "hi there"}, trellis.ExitOK, "", "hi there"},
		{"the app flag's default", []string{"-addr", "127.0.0.1:0"}, trellis.ExitOK, "", "hello"},
		{"help lists both flag sets", []string{"-h"}, trellis.ExitOK, "-greeting", ""},
		{"unknown flag", []string{"-nope"}, trellis.ExitInvalidConfig, "flag provided but not defined: -nope", ""},
		{"invalid Trellis setting", []string{"-log-level", "loud"}, trellis.ExitInvalidConfig, "TRELLIS_LOG_LEVEL", ""},
		{"invalid app setting", []string{"-addr", "127.0.0.1:0", "-greeting", "invalid"}, trellis.ExitInvalidConfig, "-greeting: must not be invalid", ""},
		{"cannot listen", []string{"-addr", "192.0.2.1:1"}, trellis.ExitFailure, "listen on 192.0.2.1:1", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var greeting string
			setup, flags := greeter(&greeting)
			watch := &listenWatch{addr: make(chan string, 1)}
			var stderr bytes.Buffer
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			code := make(chan int, 1)
			go func() {
				code <- trellis.Run(ctx, setup, flags,
					trellis.WithArgs(tt.args),
					trellis.WithGetenv(func(string) string { return "" }),
					trellis.WithStderr(&stderr),
					trellis.WithLogger(slog.New(slog.NewJSONHandler(watch, nil))),
				)
			}()
			if tt.serves != "" {
				var addr string
				select {
				case addr = <-watch.addr:
				case c := <-code:
					t.Fatalf("Run returned %d before serving: %s", c, &stderr)
				case <-time.After(20 * time.Second):
					t.Fatal("Run did not serve within 20 s")
				}
				resp, err := http.Get("http://" + addr + "/greeting")
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				_ = resp.Body.Close()
				if string(body) != tt.serves {
					t.Errorf("GET /greeting = %q, want %q", body, tt.serves)
				}
				cancel() // as a signal would
			}
			select {
			case c := <-code:
				if c != tt.wantCode {
					t.Fatalf("exit code %d, want %d; stderr:\n%s", c, tt.wantCode, &stderr)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("Run did not return within 20 s")
			}
			if !strings.Contains(stderr.String(), tt.wantOut) {
				t.Errorf("stderr does not say %q:\n%s", tt.wantOut, &stderr)
			}
		})
	}
}
