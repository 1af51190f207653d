package peer

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trellis-go/trellis/internal/testkit/testenv"
)

// testCA is a certificate authority made for a test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t testing.TB, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// files issues an instance's certificate (for serverAuth and clientAuth,
// named for no address: the name is not checked) and writes it, its key
// and the CA into a directory of the test's.
func (ca *testCA) files(t testing.TB, name string) TLSFiles {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	f := TLSFiles{Cert: filepath.Join(dir, "cert.pem"), Key: filepath.Join(dir, "key.pem"), CA: filepath.Join(dir, "ca.pem")}
	for path, data := range map[string][]byte{
		f.Cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		f.Key:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
		f.CA:   ca.pem,
	} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

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
	ca := newTestCA(t, "cluster CA")
	serverTLS, _ := load(t, ca.files(t, "a"))
	_, clientTLS := load(t, ca.files(t, "b"))
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
	ca, other := newTestCA(t, "cluster CA"), newTestCA(t, "another CA")
	serverTLS, memberTLS := load(t, ca.files(t, "a"))
	_, strangerTLS := load(t, other.files(t, "stranger"))
	// The stranger takes any server and shows its certificate to any: the
	// server is what refuses.
	strangerTLS.VerifyConnection = nil
	strangerTLS.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		return &strangerTLS.Certificates[0], nil
	}
	noCert := &tls.Config{MinVersion: tls.VersionTLS13, InsecureSkipVerify: true}
	var calls atomic.Int32
	s := startServer(t, ServerConfig{Handler: countingEcho(&calls), TLS: serverTLS}, &logBuffer{}, nil)
	strangerServer, _ := load(t, other.files(t, "stranger server"))
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
	good := newTestCA(t, "cluster CA").files(t, "a")
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
		{"the key of another", TLSFiles{Cert: good.Cert, Key: newTestCA(t, "x").files(t, "b").Key, CA: good.CA}, EnvTLSKey},
		{"a missing CA file", TLSFiles{Cert: good.Cert, Key: good.Key, CA: good.CA + ".gone"}, EnvTLSCA},
		{"a CA file without a certificate", TLSFiles{Cert: good.Cert, Key: good.Key, CA: notPEM}, EnvTLSCA},
	} {
		if _, _, err := tc.files.Load(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %s", tc.name, err, tc.want)
		}
	}
}
