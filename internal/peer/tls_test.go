package peer

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trellis-go/trellis/internal/testkit/peertest"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
)

// issue is ca.Issue, as the peer package names the files.
func issue(t testing.TB, ca *peertest.CA, name string) TLSFiles { return TLSFiles(ca.Issue(t, name)) }

// load is f.Load, failing the test on an error.
func load(t testing.TB, f TLSFiles) (server, client *tls.Config) {
	t.Helper()
	server, client, err := f.Load()
	if err != nil {
		t.Fatal(err)
	}
	return server, client
}

// TestTLSCarriesEverything: with mutual TLS on both sides, forwards (on
// the call stream and as requests of their own) and tells go over TLS,
// each side showing its certificate, and are signed as over cleartext.
func TestTLSCarriesEverything(t *testing.T) {
	ca := peertest.NewCA(t, "cluster CA")
	serverTLS, _ := load(t, issue(t, ca, "a"))
	_, clientTLS := load(t, issue(t, ca, "b"))
	var clientCerts atomic.Int32
	got := make(chan told, 1)
	s := startServer(t, ServerConfig{Handler: echo, TLS: serverTLS, Receive: func(to string, msg []byte) { got <- told{to, string(msg)} }},
		&logBuffer{}, func(r *http.Request) {
			if r.TLS != nil && r.ProtoMajor == 2 && len(r.TLS.PeerCertificates) > 0 {
				clientCerts.Add(1)
			}
		})
	c := newClient(t, ClientConfig{TLS: clientTLS})
	big := json.RawMessage(`"` + strings.Repeat("b", callLineMax) + `"`) // goes as a request of its own
	for _, arg := range []json.RawMessage{json.RawMessage(`{"n":1}`), big} {
		reply, err := c.Forward(within(t, 5*time.Second), s.Addr(), Call{ComponentID: "c", Method: "m", Argument: arg})
		if err != nil || !bytes.Equal(reply.Value, arg) {
			t.Fatalf("forward of %d bytes over TLS: %v", len(arg), err)
		}
	}
	if err := c.Tell(s.Addr(), "actor", []byte("hi")); err != nil {
		t.Fatal(err)
	}
	if m := testenv.Recv(t, got, 5*time.Second); m != (told{"actor", "hi"}) {
		t.Fatalf("told %+v", m)
	}
	if n := clientCerts.Load(); n != 3 { // the call stream, the request, the tell stream
		t.Errorf("%d requests over HTTP/2 over TLS with the client's certificate, want 3", n)
	}
}

// TestTLSRefusesStrangers: a server with mutual TLS refuses whoever does
// not show a certificate of the cluster's CA, even with a genuine
// signature, and a client refuses a server whose certificate is not the
// CA's: nothing runs.
func TestTLSRefusesStrangers(t *testing.T) {
	ca, other := peertest.NewCA(t, "cluster CA"), peertest.NewCA(t, "another CA")
	serverTLS, memberTLS := load(t, issue(t, ca, "a"))
	_, strangerTLS := load(t, issue(t, other, "stranger"))
	// The stranger takes any server and shows its certificate to any: the
	// server is what refuses.
	strangerTLS.VerifyConnection = nil
	strangerTLS.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		return &strangerTLS.Certificates[0], nil
	}
	noCert := &tls.Config{MinVersion: tls.VersionTLS13, InsecureSkipVerify: true}
	var calls atomic.Int32
	s := startServer(t, ServerConfig{Handler: countingEcho(&calls), TLS: serverTLS}, &logBuffer{}, nil)
	strangerServer, _ := load(t, issue(t, other, "stranger server"))
	impostor := startServer(t, ServerConfig{Handler: countingEcho(&calls), TLS: strangerServer}, &logBuffer{}, nil)

	overTLS := func(cfg *tls.Config) *http.Client {
		tr := &http.Transport{Protocols: http2Only(true), TLSClientConfig: cfg}
		t.Cleanup(tr.CloseIdleConnections)
		return &http.Client{Transport: tr}
	}
	for _, tc := range []struct {
		name   string
		client *http.Client
		scheme string
	}{
		{"no client certificate", overTLS(noCert), "https://"},
		{"a certificate of another CA", overTLS(strangerTLS), "https://"},
		{"cleartext", h2c(t), "http://"},
	} {
		req, err := http.NewRequestWithContext(within(t, 5*time.Second), http.MethodPost, tc.scheme+s.Addr()+forwardPrefix+"c/m/e", nil)
		if err != nil {
			t.Fatal(err)
		}
		genuine := signed(t, time.Now(), "")
		req.Header = http.Header{headerTime: {genuine.ts}, headerTimeout: {genuine.timeout}, headerSignature: {genuine.sig}, headerBodyDigest: {genuine.digest}}
		if resp, err := tc.client.Do(req); err == nil {
			resp.Body.Close()
			t.Errorf("%s: answered %d, want no answer", tc.name, resp.StatusCode)
		}
	}

	_, err := newClient(t, ClientConfig{TLS: memberTLS}).Forward(within(t, 5*time.Second), impostor.Addr(), Call{ComponentID: "c", Method: "m"})
	if !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrOutcomeUnknown) {
		t.Errorf("a member calling a server of another CA: %v, want unavailable, not run", err)
	}
	if calls.Load() != 0 {
		t.Errorf("the handlers ran %d times, want never", calls.Load())
	}
}

// TestTLSFilesRefused: missing or unreadable files are errors naming the
// setting.
func TestTLSFilesRefused(t *testing.T) {
	good := issue(t, peertest.NewCA(t, "cluster CA"), "a")
	notPEM := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		files TLSFiles
		want  string
	}{
		{"no certificate", TLSFiles{Key: good.Key, CA: good.CA}, EnvTLSCert},
		{"no key", TLSFiles{Cert: good.Cert, CA: good.CA}, EnvTLSKey},
		{"no CA", TLSFiles{Cert: good.Cert, Key: good.Key}, EnvTLSCA},
		{"the key of another", TLSFiles{Cert: good.Cert, Key: issue(t, peertest.NewCA(t, "x"), "b").Key, CA: good.CA}, EnvTLSKey},
		{"a missing CA file", TLSFiles{Cert: good.Cert, Key: good.Key, CA: good.CA + ".gone"}, EnvTLSCA},
		{"a CA file without a certificate", TLSFiles{Cert: good.Cert, Key: good.Key, CA: notPEM}, EnvTLSCA},
	} {
		if _, _, err := tc.files.Load(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %s", tc.name, err, tc.want)
		}
	}
}
