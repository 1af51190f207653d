package peer

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/trellis-go/trellis/internal/tracing"
)

// refusalLogMax is how many refused requests a second are logged.
const refusalLogMax = 20

// DefaultMaxBodyBytes is the largest argument a server reads and the
// largest reply a client reads: 4 MiB.
const DefaultMaxBodyBytes = 4 << 20

// ServerConfig configures a [Server]. Zero fields take their defaults.
type ServerConfig struct {
	// Secret is the cluster secret (EnvSecret), at least MinSecretLen
	// bytes. Empty: the server refuses every request with 401.
	Secret []byte
	// Handler runs the forwarded calls. Required.
	Handler Handler
	// Receive takes the told messages (see Client.Tell); nil: tells are
	// answered KindNotFound.
	Receive Receiver
	// MaxBodyBytes is the largest argument accepted; a larger one is
	// answered KindTooLarge (default DefaultMaxBodyBytes).
	MaxBodyBytes int64
	// MaxSkew is how far a request's timestamp may be from this server's
	// clock (default DefaultMaxSkew).
	MaxSkew time.Duration
	// ReplayMemory is how many accepted requests (streams opened,
	// forwards of their own) the server remembers, each for as long as
	// its timestamp is within MaxSkew, to refuse a replay of one (default
	// DefaultReplayMemory). Past it, a request is answered ErrUnavailable
	// (it did not run) until the oldest leave the window.
	ReplayMemory int
	// Health is the HTTP/2 ping health check of the connections (zero
	// fields: DefaultHealth).
	Health Health
	// Logger receives refusals and failures, never the secret nor an
	// argument (default slog.Default()).
	Logger *slog.Logger
	// Now is the clock the timestamps are checked against (default
	// time.Now); tests set it.
	Now func() time.Time
	// Listen makes the listener Start serves on (default net.Listen). A
	// test kit puts its fault points here.
	Listen func(network, addr string) (net.Listener, error)
	// TLS, when set (TLSFiles.Load), makes the server speak HTTP/2 over
	// TLS only, to clients whose certificate it checks; nil: HTTP/2 over
	// cleartext. The secret is required either way.
	TLS *tls.Config
}

// Server is the internal port: it answers forwarded calls, and takes told
// messages, from peers that hold the cluster secret, over HTTP/2 over
// cleartext, or over TLS (ServerConfig.TLS). Start it once; Shutdown stops it.
type Server struct {
	cfg    ServerConfig
	signer *signer
	log    *slog.Logger
	srv    *http.Server

	refusals   logLimit // of the "call refused" lines
	replays    *replayGuard
	tellOrder  tellOrders
	stopping   context.Context // canceled when Shutdown starts: ends the tell streams
	stopCancel context.CancelFunc

	mu      sync.Mutex
	ln      net.Listener
	served  chan struct{} // closed when Serve has returned
	started bool
}

// NewServer checks cfg and makes a server; it listens from Start on. A
// secret of 1 to MinSecretLen-1 bytes is an error naming EnvSecret.
func NewServer(cfg ServerConfig) (*Server, error) {
	if cfg.Handler == nil {
		return nil, errors.New("peer server: Handler is nil")
	}
	sg, err := newSigner(cfg.Secret)
	if err != nil {
		return nil, fmt.Errorf("peer server: %w", err)
	}
	cfg.MaxBodyBytes = positiveOr(cfg.MaxBodyBytes, DefaultMaxBodyBytes)
	cfg.MaxSkew = positiveOr(cfg.MaxSkew, DefaultMaxSkew)
	cfg.ReplayMemory = positiveOr(cfg.ReplayMemory, DefaultReplayMemory)
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Listen == nil {
		cfg.Listen = net.Listen
	}
	cfg.Secret = nil // the signer holds its own copy
	s := &Server{cfg: cfg, signer: sg, log: cfg.Logger, served: make(chan struct{}),
		refusals: logLimit{max: refusalLogMax, window: time.Second},
		replays:  newReplayGuard(cfg.MaxSkew, cfg.ReplayMemory)}
	s.stopping, s.stopCancel = context.WithCancel(context.Background())

	mux := http.NewServeMux()
	mux.HandleFunc("POST "+callsPath, s.serveCalls)
	mux.HandleFunc("POST "+forwardPrefix, s.serveForward)
	mux.HandleFunc("POST "+tellPrefix, s.serveTell)
	s.srv = &http.Server{
		Handler:           mux,
		Protocols:         http2Only(cfg.TLS != nil),
		TLSConfig:         cfg.TLS,
		HTTP2:             cfg.Health.withDefaults().http2Config(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       15 * time.Minute, // longer than the client's, which hangs up first
		ErrorLog:          slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn),
	}
	s.srv.RegisterOnShutdown(s.stopCancel) // a tell or call stream never ends by itself
	return s, nil
}

// Start listens on addr ("host:port"; port 0 picks one, see Addr) and
// serves in the background until Shutdown.
func (s *Server) Start(addr string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return errors.New("peer server: started twice")
	}
	ln, err := s.cfg.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("peer server: listen on %s: %w", addr, err)
	}
	s.started, s.ln = true, ln
	if !s.signer.enabled {
		s.log.Warn("peer: no cluster secret: every call is refused", "setting", EnvSecret, "addr", ln.Addr().String())
	}
	go func() {
		defer close(s.served)
		serve := s.srv.Serve
		if s.srv.TLSConfig != nil {
			serve = func(ln net.Listener) error { return s.srv.ServeTLS(ln, "", "") } // the certificate is in TLSConfig
		}
		if err := serve(ln); !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("peer: serving stopped", "addr", ln.Addr().String(), "err", err)
		}
	}()
	return nil
}

// Addr is the address the server listens on, once started ("" before).
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// Shutdown stops listening, ends the tell streams (delivering what was
// read), stops reading the call streams (an end line tells each client
// which calls it read), lets the forwards in flight finish and answer,
// then closes the connections.
// If ctx ends first it closes them at once, which cancels the handlers'
// contexts, and returns ctx's error.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	started := s.started
	s.started = true // a later Start fails
	s.mu.Unlock()
	if !started {
		s.stopCancel()
		return nil
	}
	err := s.srv.Shutdown(ctx)
	if err != nil {
		err = errors.Join(fmt.Errorf("peer server: shutdown: %w", err), s.srv.Close())
	}
	<-s.served
	return err
}

// serveForward authenticates a forwarded call, runs it under the caller's
// deadline and answers the signed reply. The signature covers the body's
// digest (see signForward): it is checked, and the request admitted,
// before a byte of the body is read.
func (s *Server) serveForward(w http.ResponseWriter, r *http.Request) {
	h, ok := s.checkHeaders(w, r)
	if !ok {
		return
	}
	sig := h.sig
	timeout, digest := r.Header.Get(headerTimeout), r.Header.Get(headerBodyDigest)
	switch {
	case len(digest) != signatureLen: // a SHA-256 in base64url is as long as a signature
		s.refuse(w, r, fmt.Errorf("%s header missing or malformed (a peer of a version that signs the body itself?)", headerBodyDigest))
		return
	case !equal(sig, s.signer.signForward(r.Method, r.RequestURI, h.ts, timeout, readTrace(r.Header), digest)):
		s.refuse(w, r, errors.New("bad signature: another secret, or the request was altered"))
		return
	}
	if !s.admit(w, r, h) {
		return
	}
	body, err := readAll(r.Body, r.ContentLength, s.cfg.MaxBodyBytes, "argument")
	if err != nil {
		s.fail(w, sig, err)
		return
	}
	if !equal(digest, bodyDigest(body)) {
		s.refuse(w, r, fmt.Errorf("the body does not match its %s: altered on the way", headerBodyDigest))
		return
	}

	call, err := parseForwardPath(r.RequestURI)
	if err != nil {
		s.fail(w, sig, NewError(KindBadRequest, "", "%v", err))
		return
	}
	call.Argument = body
	// The caller's trace, now that the signature vouches for it.
	ctx, cancel, err := callContext(tracing.Extract(r.Context(), r.Header), timeout, &call)
	if err != nil {
		s.fail(w, sig, NewError(KindBadRequest, "", "%s header %q: %v", headerTimeout, timeout, err))
		return
	}
	defer cancel()
	reply, err := s.run(ctx, call)
	if err != nil {
		s.log.Debug("peer: call failed", "call", call.String(), "err", err)
		s.fail(w, sig, err)
		return
	}
	s.answer(w, sig, http.StatusOK, reply.Value)
}

// signedHeaders are a request's timestamp and signature.
type signedHeaders struct {
	ts  string // as sent, which the signature covers
	ms  int64  // its value, Unix milliseconds
	sig string
}

// checkHeaders does the checks that come before the signature's: the
// server has a secret, the timestamp is within MaxSkew, a signature is
// there. It answers 401 and returns false when one fails.
func (s *Server) checkHeaders(w http.ResponseWriter, r *http.Request) (h signedHeaders, ok bool) {
	h.ts, h.sig = r.Header.Get(headerTime), r.Header.Get(headerSignature)
	err := errNoSecret
	if s.signer.enabled {
		h.ms, err = checkTime(h.ts, s.cfg.Now(), s.cfg.MaxSkew)
	}
	if err == nil && len(h.sig) != signatureLen {
		err = fmt.Errorf("%s header missing or malformed", headerSignature)
	}
	if err != nil {
		s.refuse(w, r, err)
		return signedHeaders{}, false
	}
	return h, true
}

// admit records a request whose signature checked (see replayGuard). It
// answers 401 to a replay, unavailable when there is no room to remember
// the request, and returns false then.
func (s *Server) admit(w http.ResponseWriter, r *http.Request, h signedHeaders) bool {
	err := s.replays.admit(h.ms, h.sig, s.cfg.Now())
	var full errReplayFull
	switch {
	case err == nil:
		return true
	case errors.As(err, &full):
		s.logRefusal(r, err)
		s.fail(w, h.sig, NewError(KindUnavailable, "", "%v", err))
	default:
		s.refuse(w, r, err)
	}
	return false
}

// checkStream authenticates a stream's opening (what names its kind):
// the header checks, and a signature with no timeout and no body digest,
// the body being a stream. It answers 401 and returns false when one
// fails.
func (s *Server) checkStream(w http.ResponseWriter, r *http.Request, what string) (sig string, ok bool) {
	h, ok := s.checkHeaders(w, r)
	if !ok {
		return "", false
	}
	if !equal(h.sig, s.signer.signRequest(r.Method, r.RequestURI, h.ts, "", nil)) {
		s.refuse(w, r, errors.New("bad signature on a "+what+" stream"))
		return "", false
	}
	if !s.admit(w, r, h) {
		return "", false
	}
	return h.sig, true
}

// run calls the handler, turning a panic into an internal error.
func (s *Server) run(ctx context.Context, call Call) (reply Reply, err error) {
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("peer: handler panicked", "call", call.String(), "panic", p)
			err = NewError(KindInternal, "", "the handler panicked")
		}
	}()
	return s.cfg.Handler(ctx, call)
}

// refuse answers 401 to a request that did not authenticate, and logs
// why (never the secret, which is not in the request anyway).
// At most refusalLogMax lines a second are logged.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, why error) {
	s.logRefusal(r, why)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusUnauthorized)
	_, _ = w.Write(mustJSON(wireError{Kind: KindUnauthorized.String(), Message: "not authenticated as a peer of this cluster; the server's log says why"}))
}

// logRefusal logs why r was refused, at most refusalLogMax lines a
// second.
func (s *Server) logRefusal(r *http.Request, why error) {
	if ok, leftOut := s.refusals.allow(time.Now()); ok {
		args := []any{"remote", r.RemoteAddr, "reason", why.Error()}
		if leftOut > 0 {
			args = append(args, "refusals_not_logged", leftOut)
		}
		s.log.Warn("peer: call refused", args...)
	}
}

// fail answers err's kind, signed.
func (s *Server) fail(w http.ResponseWriter, sig string, err error) {
	we := classify(err)
	s.answer(w, sig, kinds[kindNamed(we.Kind)].status, mustJSON(we))
}

// answer writes a signed reply.
func (s *Server) answer(w http.ResponseWriter, requestSig string, status int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set(headerSignature, s.signer.signReply(requestSig, status, body))
	w.WriteHeader(status)
	_, _ = w.Write(body) // a caller that is gone cannot be told
}
