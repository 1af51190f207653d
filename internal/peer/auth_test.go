package peer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trellis-go/trellis/internal/testkit/peertest"
)

// h2c is a bare HTTP/2-over-cleartext client, for requests the tests
// build by hand.
func h2c(t testing.TB) *http.Client {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &p}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// rawRequest is a forward as the wire carries it.
type rawRequest struct {
	path, ts, timeout, sig, digest string
	body                           []byte
}

// signed is a valid request for c.m[e] stamped at now.
func signed(t testing.TB, now time.Time, body string) rawRequest {
	sg, err := newSigner(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	r := rawRequest{path: forwardPrefix + "c/m/e", ts: strconv.FormatInt(now.UnixMilli(), 10), timeout: "5s",
		digest: bodyDigest([]byte(body)), body: []byte(body)}
	r.sig = sg.signForward(http.MethodPost, r.path, r.ts, r.timeout, traceHeaders{}, r.digest)
	return r
}

// send posts r to addr and returns the status.
func (r rawRequest) send(t testing.TB, hc *http.Client, addr string) int {
	t.Helper()
	req, err := http.NewRequestWithContext(within(t, 5*time.Second), http.MethodPost, "http://"+addr+r.path, bytes.NewReader(r.body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{headerTime: r.ts, headerTimeout: r.timeout, headerSignature: r.sig, headerBodyDigest: r.digest} {
		if v != "" {
			req.Header.Set(k, v)
		}
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestAuthRefusesRequests: a request without the headers, altered in any
// signed part (its body through its digest), sent again, or stamped too
// far behind or ahead is answered 401 and never reaches the handler; the
// genuine one is served.
func TestAuthRefusesRequests(t *testing.T) {
	var calls atomic.Int32
	var clockOffset atomic.Int64 // the server's clock runs this far ahead
	logs := &logBuffer{}
	s := startServer(t, ServerConfig{
		Handler: func(ctx context.Context, c Call) (Reply, error) { calls.Add(1); return echo(ctx, c) },
		Now:     func() time.Time { return time.Now().Add(time.Duration(clockOffset.Load())) },
	}, logs, nil)
	hc := h2c(t)

	genuine := signed(t, time.Now(), `{"n":1}`)
	if st := genuine.send(t, hc, s.Addr()); st != http.StatusOK || calls.Load() != 1 {
		t.Fatalf("the genuine request: %d, %d calls", st, calls.Load())
	}
	// altered is a request signed now but not sent, changed by alter.
	altered := func(alter func(r *rawRequest)) rawRequest {
		r := signed(t, time.Now(), `{"n":1}`)
		alter(&r)
		return r
	}
	for _, tc := range []struct {
		name  string
		req   rawRequest
		later time.Duration // how far the server's clock has moved on
	}{
		{"no headers", rawRequest{path: genuine.path, body: genuine.body}, 0},
		{"no signature", altered(func(r *rawRequest) { r.sig = "" }), 0},
		{"garbage signature", altered(func(r *rawRequest) { r.sig = strings.Repeat("A", signatureLen) }), 0},
		{"no body digest", altered(func(r *rawRequest) { r.digest = "" }), 0},
		{"altered body", altered(func(r *rawRequest) { r.body = []byte(`{"n":2}`) }), 0},
		{"altered body and digest", altered(func(r *rawRequest) { r.body = []byte(`{"n":2}`); r.digest = bodyDigest(r.body) }), 0},
		{"altered entity", altered(func(r *rawRequest) { r.path = forwardPrefix + "c/m/other" }), 0},
		{"altered timeout", altered(func(r *rawRequest) { r.timeout = "1h" }), 0},
		{"sent again", genuine, 0},
		{"sent again after MaxSkew", genuine, DefaultMaxSkew + time.Second},
		{"stamped ahead", signed(t, time.Now().Add(DefaultMaxSkew+time.Second), `{}`), 0},
	} {
		clockOffset.Store(int64(tc.later))
		if st := tc.req.send(t, hc, s.Addr()); st != http.StatusUnauthorized {
			t.Errorf("%s: %d, want 401", tc.name, st)
		}
	}
	if calls.Load() != 1 {
		t.Errorf("the handler ran %d times, want once", calls.Load())
	}
	if n := strings.Count(logs.String(), "peer: call refused"); n != 11 {
		t.Errorf("%d refusals logged, want 11:\n%s", n, logs)
	}
}

// TestAuthWrongSecretOrClock: a client with another secret, or a clock
// too far off, gets ErrUnauthorized, and the call did not run.
func TestAuthWrongSecretOrClock(t *testing.T) {
	var calls atomic.Int32
	s := startServer(t, ServerConfig{Handler: countingEcho(&calls)}, &logBuffer{}, nil)
	for name, cfg := range map[string]ClientConfig{
		"other secret": {Secret: bytes.Repeat([]byte("x"), MinSecretLen)},
		"clock behind": {Now: func() time.Time { return time.Now().Add(-time.Hour) }},
	} {
		_, err := newClient(t, cfg).Forward(within(t, 5*time.Second), s.Addr(), Call{ComponentID: "c", Method: "m"})
		if !errors.Is(err, ErrUnauthorized) || errors.Is(err, ErrOutcomeUnknown) {
			t.Errorf("%s: %v, want unauthorized, outcome known", name, err)
		}
	}
	if calls.Load() != 0 {
		t.Errorf("the handler ran %d times", calls.Load())
	}
}

// TestAuthNoSecretRefusesEverything: a server without a secret refuses
// every call, and a client without one sends none.
func TestAuthNoSecretRefusesEverything(t *testing.T) {
	var calls atomic.Int32
	logs := &logBuffer{}
	s := startServer(t, ServerConfig{Secret: []byte{}, Handler: countingEcho(&calls)}, logs, nil)
	_, err := newClient(t, ClientConfig{}).Forward(within(t, 5*time.Second), s.Addr(), Call{ComponentID: "c", Method: "m"})
	if !errors.Is(err, ErrUnauthorized) || calls.Load() != 0 {
		t.Errorf("to a server without a secret: %v, %d calls", err, calls.Load())
	}
	if !strings.Contains(logs.String(), EnvSecret) {
		t.Errorf("the log does not name %s:\n%s", EnvSecret, logs)
	}

	p := peertest.NewProxy(t, s.Addr()) // counts whether anything dials
	_, err = newClient(t, ClientConfig{Secret: []byte{}}).Forward(within(t, 5*time.Second), p.Addr(), Call{ComponentID: "c", Method: "m"})
	if !errors.Is(err, ErrUnauthorized) || errors.Is(err, ErrOutcomeUnknown) || !strings.Contains(err.Error(), EnvSecret) {
		t.Errorf("from a client without a secret: %v", err)
	}
	if p.Accepted() != 0 {
		t.Error("a client without a secret dialed")
	}
}

// TestAuthShortSecretRefused: a secret under MinSecretLen bytes is an
// error naming the setting, not the value.
func TestAuthShortSecretRefused(t *testing.T) {
	short := testSecret[:MinSecretLen-1]
	_, serr := NewServer(ServerConfig{Secret: short, Handler: echo})
	_, cerr := NewClient(ClientConfig{Secret: short})
	for _, err := range []error{serr, cerr} {
		if err == nil || !strings.Contains(err.Error(), EnvSecret) || strings.Contains(err.Error(), string(short)) {
			t.Errorf("short secret: %v", err)
		}
	}
}

// TestAuthReplyMustBeSigned: an answer that does not carry the cluster's
// signature (a stranger at the address), to a call stream's opening or
// to a call sent as a request of its own, fails with ErrUnauthorized, and
// the outcome is unknown; a redirect is not followed.
func TestAuthReplyMustBeSigned(t *testing.T) {
	var redirected, redirect atomic.Int32
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	srv := &http.Server{Protocols: &p, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != callsPath { // a call stream's body never ends
			io.Copy(io.Discard, r.Body)
		}
		switch {
		case strings.HasPrefix(r.URL.Path, "/elsewhere"):
			redirected.Add(1)
		case redirect.Load() == 1:
			http.Redirect(w, r, "/elsewhere", http.StatusTemporaryRedirect)
			return
		}
		w.Write([]byte(`{"fake":true}`))
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(ln) }()
	defer func() { srv.Close(); <-done }()

	c := newClient(t, ClientConfig{})
	big := json.RawMessage(`"` + strings.Repeat("b", callLineMax) + `"`) // goes as a request of its own
	for _, tc := range []struct {
		name     string
		redirect bool
		arg      json.RawMessage
	}{
		{"stream answer", false, nil},
		{"stream redirect", true, nil},
		{"request answer", false, big},
		{"request redirect", true, big},
	} {
		redirect.Store(0)
		if tc.redirect {
			redirect.Store(1)
		}
		_, err = c.Forward(within(t, 5*time.Second), ln.Addr().String(), Call{ComponentID: "c", Method: "m", Argument: tc.arg})
		if !errors.Is(err, ErrUnauthorized) || !errors.Is(err, ErrOutcomeUnknown) {
			t.Errorf("%s from a stranger: %v", tc.name, err)
		}
	}
	if redirected.Load() != 0 {
		t.Error("the client followed a redirect")
	}
}

// TestAuthSecretNeverLogged: whatever happens (calls served, refused,
// failed, panicking), neither the secret nor an argument appears in the
// server's or the client's log, debug level included.
func TestAuthSecretNeverLogged(t *testing.T) {
	const payload = "PAYLOAD-MARKER-7f3a"
	logs := &logBuffer{}
	s := startServer(t, ServerConfig{Handler: func(_ context.Context, c Call) (Reply, error) {
		switch c.Method {
		case "fail":
			return Reply{}, errors.New("failed")
		case "panic":
			panic("boom")
		}
		return Reply{Value: c.Argument}, nil
	}}, logs, nil)
	good := newClient(t, ClientConfig{Logger: logs.logger()})
	bad := newClient(t, ClientConfig{Secret: bytes.Repeat([]byte("y"), MinSecretLen), Logger: logs.logger()})
	arg := []byte(`"` + payload + `"`)
	for _, c := range []*Client{good, bad} {
		for _, m := range []string{"ok", "fail", "panic"} {
			c.Forward(within(t, 5*time.Second), s.Addr(), Call{ComponentID: "c", Method: m, Argument: arg})
		}
	}
	NewServer(ServerConfig{Secret: testSecret[:5], Handler: echo, Logger: logs.logger()})
	out := logs.String()
	if !strings.Contains(out, "call refused") || !strings.Contains(out, "handler panicked") {
		t.Fatalf("the log misses what happened:\n%s", out)
	}
	if strings.Contains(out, string(testSecret)) || strings.Contains(out, string(testSecret[:16])) || strings.Contains(out, payload) {
		t.Fatalf("the log holds the secret or an argument:\n%s", out)
	}
}

// TestAuthRefusalLogLimited: a peer with a wrong secret calling in a
// loop does not flood the log: at most refusalLogMax lines a second.
func TestAuthRefusalLogLimited(t *testing.T) {
	logs := &logBuffer{}
	s := startServer(t, ServerConfig{Handler: echo}, logs, nil)
	c := newClient(t, ClientConfig{Secret: bytes.Repeat([]byte("w"), MinSecretLen)})
	const n = 100
	start := time.Now()
	for range n {
		c.Forward(within(t, 5*time.Second), s.Addr(), Call{ComponentID: "c", Method: "m"})
	}
	windows := int(time.Since(start)/time.Second) + 2 // the calls touch at most this many
	lines := strings.Count(logs.String(), "peer: call refused")
	if lines == 0 || lines > refusalLogMax*windows || lines >= n {
		t.Fatalf("%d refusals logged for %d refused calls over %d windows of a second", lines, n, windows)
	}
}

// countingBody counts the bytes read from a request's body.
type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

// TestAuthStrangersBodyUnread: a stranger's forward with a body of
// MaxBodyBytes is refused before the server reads a byte of it, however
// it is signed; a genuine one's body is read.
func TestAuthStrangersBodyUnread(t *testing.T) {
	var read atomic.Int64
	s := startServer(t, ServerConfig{Handler: echo}, &logBuffer{}, func(r *http.Request) {
		r.Body = countingBody{r.Body, &read}
	})
	hc := h2c(t)
	body := `"` + strings.Repeat("s", DefaultMaxBodyBytes-2) + `"`
	garbage := strings.Repeat("A", signatureLen)
	for _, tc := range []struct {
		name  string
		alter func(r *rawRequest)
		want  int
	}{
		{"garbage signature", func(r *rawRequest) { r.sig = garbage }, http.StatusUnauthorized},
		{"garbage signature, no digest", func(r *rawRequest) { r.sig, r.digest = garbage, "" }, http.StatusUnauthorized},
		{"garbage signature and digest", func(r *rawRequest) { r.sig, r.digest = garbage, garbage }, http.StatusUnauthorized},
		{"genuine", func(*rawRequest) {}, http.StatusOK},
	} {
		read.Store(0)
		r := signed(t, time.Now(), body)
		tc.alter(&r)
		st := r.send(t, hc, s.Addr())
		wantRead := int64(0)
		if tc.want == http.StatusOK {
			wantRead = int64(len(body))
		}
		if st != tc.want || read.Load() != wantRead {
			t.Errorf("%s: %d with %d bytes of the body read, want %d with %d", tc.name, st, read.Load(), tc.want, wantRead)
		}
	}
}
