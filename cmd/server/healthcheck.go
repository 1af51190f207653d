package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/trellis-go/trellis"
)

// healthcheckTimeout bounds one check. It is below the Dockerfile's
// HEALTHCHECK --timeout (3 s), so that a hung server is reported by the
// check itself, with a reason, rather than by Docker killing it.
const healthcheckTimeout = 2 * time.Second

// isHealthcheck reports whether the command line asks for the health check
// mode: -healthcheck (or --healthcheck) as the first argument.
func isHealthcheck(args []string) bool {
	return len(args) > 0 && (args[0] == "-healthcheck" || args[0] == "--healthcheck")
}

// healthcheck is the -healthcheck mode, for the container image, which has
// no curl: it asks the server running next to it for GET /healthz, on the
// port of TRELLIS_HTTP_ADDR (or -addr after -healthcheck), and returns the
// exit code: 0 when it answers 200 within 2 s, 1 otherwise (Docker reads
// 1 as unhealthy and reserves 2), with the reason on stderr.
func healthcheck(getenv func(string) string, args []string, stderr io.Writer) int {
	addr := trellis.DefaultConfig().HTTPAddr
	if v := getenv(trellis.EnvHTTPAddr); v != "" {
		addr = v
	}
	fs := flag.NewFlagSet("server -healthcheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&addr, "addr", addr, "the server's listen address (env "+trellis.EnvHTTPAddr+")")
	if err := fs.Parse(args); err != nil {
		return 1
	}
	url, err := healthzURL(addr)
	if err == nil {
		err = checkHealth(context.Background(), url, healthcheckTimeout)
	}
	if err != nil {
		fmt.Fprintln(stderr, "server -healthcheck: unhealthy:", err)
		return 1
	}
	return 0
}

// healthzURL is the /healthz URL of a server that listens on addr
// (host:port). A wildcard host (none, 0.0.0.0 or ::) is reached on the
// loopback address 127.0.0.1; a specific host is asked on that host.
func healthzURL(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("%s %q is not host:port: %w", trellis.EnvHTTPAddr, addr, err)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("%s %q has no fixed port to check (want 1 to 65535)", trellis.EnvHTTPAddr, addr)
	}
	switch host {
	case "", "0.0.0.0", "::":
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port) + "/healthz", nil
}

// checkHealth asks url with a GET bounded by timeout; nil means it
// answered 200.
func checkHealth(ctx context.Context, url string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	// A transport of its own, without keep-alive: the process exits right
	// after, and no proxy from the environment may stand in between.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("GET %s: no answer within %v: %w", url, timeout, err)
		}
		return fmt.Errorf("GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s, want 200", url, resp.Status)
	}
	return nil
}

// healthcheckUsage is what -h says about the mode.
func healthcheckUsage() string {
	return "\nHealth check mode (the container image's HEALTHCHECK):\n  -healthcheck [-addr host:port]\n" +
		"    \tGET /healthz of the server on " + trellis.EnvHTTPAddr + " (loopback for a wildcard host) within " +
		healthcheckTimeout.String() + "; exit 0 when it answers 200, else 1\n"
}
