package peer

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
)

// The settings that name the PEM files of the cluster port's mutual TLS
// (see TLSFiles). The caller reads them and passes the paths in; errors
// name the setting.
const (
	EnvTLSCert = "TRELLIS_CLUSTER_TLS_CERT"
	EnvTLSKey  = "TRELLIS_CLUSTER_TLS_KEY"
	EnvTLSCA   = "TRELLIS_CLUSTER_TLS_CA"
)

// TLSFiles names the PEM files of mutual TLS on the cluster port: this
// instance's certificate (with its chain) and key, which it shows both as
// a server and as a client, and the CA certificates that sign every
// instance's. All three, or none (cleartext).
//
// The CA is the cluster's own: any certificate it signs is a member's,
// whatever its name, so the name is not checked (instances are reached at
// addresses that change: a pod's IP). Each side checks the other's
// certificate against the CA, for its use: the server the client's
// (clientAuth), the client the server's (serverAuth). TLS 1.3 only.
type TLSFiles struct {
	Cert, Key, CA string
}

// Set reports whether any of the files is named.
func (f TLSFiles) Set() bool { return f.Cert != "" || f.Key != "" || f.CA != "" }

// TLSError is why TLSFiles.Load failed: Setting names the file at fault.
type TLSError struct {
	Setting string // EnvTLSCert, EnvTLSKey or EnvTLSCA
	Err     error
}

func (e *TLSError) Error() string { return e.Setting + ": " + e.Err.Error() }
func (e *TLSError) Unwrap() error { return e.Err }

// Load reads the files and returns the server's and the client's TLS
// configurations (ServerConfig.TLS, ClientConfig.TLS), or a *TLSError.
func (f TLSFiles) Load() (server, client *tls.Config, err error) {
	fail := func(setting string, err error) (*tls.Config, *tls.Config, error) {
		return nil, nil, &TLSError{Setting: setting, Err: err}
	}
	const all = "is not set: TLS on the cluster port needs the certificate, its key and the CA"
	switch {
	case f.Cert == "":
		return fail(EnvTLSCert, errors.New(all))
	case f.Key == "":
		return fail(EnvTLSKey, errors.New(all))
	case f.CA == "":
		return fail(EnvTLSCA, errors.New(all))
	}
	certPEM, err := os.ReadFile(f.Cert)
	if err != nil {
		return fail(EnvTLSCert, err)
	}
	keyPEM, err := os.ReadFile(f.Key)
	if err != nil {
		return fail(EnvTLSKey, err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return fail(EnvTLSKey, fmt.Errorf("%s with the certificate of %s: %w", f.Key, EnvTLSCert, err))
	}
	caPEM, err := os.ReadFile(f.CA)
	if err != nil {
		return fail(EnvTLSCA, err)
	}
	cas := x509.NewCertPool()
	if !cas.AppendCertsFromPEM(caPEM) {
		return fail(EnvTLSCA, fmt.Errorf("%s holds no PEM certificate", f.CA))
	}
	server = &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    cas,
	}
	client = &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{cert},
		// The chain is checked against the cluster's CA below, the name
		// not (see TLSFiles).
		InsecureSkipVerify: true,
		VerifyConnection:   func(cs tls.ConnectionState) error { return verifyServer(cs, cas) },
	}
	return server, client, nil
}

// verifyServer checks the server's certificate chain against the
// cluster's CA, for serverAuth, without a name.
func verifyServer(cs tls.ConnectionState, cas *x509.CertPool) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("the peer showed no certificate")
	}
	opts := x509.VerifyOptions{Roots: cas, Intermediates: x509.NewCertPool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	for _, c := range cs.PeerCertificates[1:] {
		opts.Intermediates.AddCert(c)
	}
	if _, err := cs.PeerCertificates[0].Verify(opts); err != nil {
		return fmt.Errorf("the peer's certificate is not the cluster CA's (%s): %w", EnvTLSCA, err)
	}
	return nil
}

// http2Only is the protocols of the transport, client or server side:
// HTTP/2 over TLS, or HTTP/2 over cleartext with prior knowledge (h2c);
// never HTTP/1.
func http2Only(tls bool) *http.Protocols {
	var p http.Protocols
	if tls {
		p.SetHTTP2(true)
	} else {
		p.SetUnencryptedHTTP2(true)
	}
	return &p
}
