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
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/trellis-go/trellis/internal/tracing"
)

// DefaultTimeout bounds a forward whose context has no deadline.
const DefaultTimeout = 30 * time.Second

// ClientConfig configures a [Client]. Zero fields take their defaults.
type ClientConfig struct {
	// Secret is the cluster secret (EnvSecret), at least MinSecretLen
	// bytes. Empty: every Forward fails with ErrUnauthorized, unsent.
	Secret []byte
	// MaxBodyBytes is the largest reply read; a larger one fails with
	// KindTooLarge (default DefaultMaxBodyBytes).
	MaxBodyBytes int64
	// DefaultTimeout bounds a forward whose context has no deadline
	// (default DefaultTimeout): no call waits forever.
	DefaultTimeout time.Duration
	// DialTimeout bounds connecting to a peer (default 5 s).
	DialTimeout time.Duration
	// Dial connects to a peer, under a context that DialTimeout bounds
	// (default: a net.Dialer's DialContext). A test kit puts its fault
	// points here.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Health is the HTTP/2 ping health check of the connections (zero
	// fields: DefaultHealth).
	Health Health
	// TellQueue is how many told messages wait per peer (default
	// DefaultTellQueue); past it Tell fails.
	TellQueue int
	// Logger is for the client's own troubles (default slog.Default()).
	Logger *slog.Logger
	// Now is the clock that stamps requests (default time.Now).
	Now func() time.Time
	// TLS, when set (TLSFiles.Load), makes the client speak HTTP/2 over
	// TLS, showing its certificate and checking the peer's; nil: HTTP/2
	// over cleartext. Both sides of a cluster set it, or neither.
	TLS *tls.Config
}

// Client forwards calls to peers: one HTTP/2 connection per peer address,
// dialed on first use and again after it breaks, carrying a call stream
// (every forward a line on it) and a tell stream. It is safe for concurrent use; one per instance.
type Client struct {
	cfg    ClientConfig
	signer *signer
	tr     *http.Transport
	hc     *http.Client
	id     string // names this client's tell streams
	scheme string // of the peers' URLs: "http://" (h2c) or "https://" (TLS)

	ctx    context.Context // canceled by Close: stops the senders
	cancel context.CancelFunc
	closed atomic.Bool

	mu      sync.Mutex           // guards senders and calls
	senders map[string]*sender   // by peer address
	calls   map[string]*callPeer // by peer address
	wg      sync.WaitGroup       // the senders and the call streams' readers

	streamFailures atomic.Uint64 // see StreamFailures
	streams        atomic.Uint64 // call streams opened, which numbers them
}

// NewClient checks cfg and makes a client. A secret of 1 to
// MinSecretLen-1 bytes is an error naming EnvSecret.
func NewClient(cfg ClientConfig) (*Client, error) {
	sg, err := newSigner(cfg.Secret)
	if err != nil {
		return nil, fmt.Errorf("peer client: %w", err)
	}
	cfg.MaxBodyBytes = positiveOr(cfg.MaxBodyBytes, DefaultMaxBodyBytes)
	cfg.DefaultTimeout = positiveOr(cfg.DefaultTimeout, DefaultTimeout)
	cfg.DialTimeout = positiveOr(cfg.DialTimeout, 5*time.Second)
	cfg.TellQueue = positiveOr(cfg.TellQueue, DefaultTellQueue)
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	cfg.Secret = nil // the signer holds its own copy

	dial := (&net.Dialer{Timeout: cfg.DialTimeout, KeepAlive: 15 * time.Second}).DialContext
	if cfg.Dial != nil {
		dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
			ctx, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
			defer cancel()
			return cfg.Dial(ctx, network, addr)
		}
	}
	h2 := cfg.Health.withDefaults().http2Config()
	// One connection per peer: calls made while it is being dialed wait
	// for it rather than dial their own, and calls past the peer's stream
	// limit wait for a stream rather than open a second connection.
	h2.StrictMaxConcurrentRequests = true
	tr := &http.Transport{
		Protocols:          http2Only(cfg.TLS != nil),
		TLSClientConfig:    cfg.TLS,
		DialContext:        dial,
		MaxConnsPerHost:    1,
		HTTP2:              h2,
		IdleConnTimeout:    10 * time.Minute, // a peer not called for this long is hung up on
		DisableCompression: true,             // the signature covers the bytes as sent
		// Proxy stays nil: peers talk directly, whatever HTTP_PROXY says.
	}
	ctx, cancel := context.WithCancel(context.Background())
	hc := &http.Client{
		Transport: tr,
		// A peer never redirects; whatever does is not one, and the
		// call goes nowhere else.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	scheme := "http://"
	if cfg.TLS != nil {
		scheme = "https://"
	}
	return &Client{cfg: cfg, signer: sg, tr: tr, hc: hc, id: newClientID(), scheme: scheme,
		ctx: ctx, cancel: cancel, senders: map[string]*sender{}, calls: map[string]*callPeer{}}, nil
}

// Forward sends call to the peer at addr ("host:port") and returns its
// reply. The call runs there under ctx's deadline (DefaultTimeout when
// ctx has none); canceling ctx cancels it there. A failure is an *Error:
// test it with errors.Is and a sentinel (ErrMoved: re-route once;
// ErrUnavailable without ErrOutcomeUnknown: it did not run, safe to
// retry; ErrOutcomeUnknown: it may have run).
//
// The call goes as a line on the client's call stream to the peer
// (opened on first use, and again after it ends); a call whose line
// would exceed callLineMax, or to a peer without call streams (an older
// version, during a rolling upgrade), goes as a request of its own.
func (c *Client) Forward(ctx context.Context, addr string, call Call) (Reply, error) {
	fail := func(e *Error) (Reply, error) {
		e.Op, e.Addr = "forward "+call.String(), addr
		return Reply{}, e
	}
	if c.closed.Load() {
		return fail(&Error{Kind: KindUnavailable, Message: "the client is closed"})
	}
	if !c.signer.enabled {
		return fail(&Error{Kind: KindUnauthorized, Message: errNoSecret.Error()})
	}
	path, err := forwardPath(call)
	if err != nil {
		return fail(&Error{Kind: KindBadRequest, Message: err.Error()})
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.cfg.DefaultTimeout)
		defer cancel()
	}
	deadline, _ := ctx.Deadline()
	// timeLeft is what the peer is told the caller has, taken just before
	// each send: a stream's opening or a first attempt may have used some.
	timeLeft := func() (time.Duration, *Error) {
		if left := time.Until(deadline); left > 0 {
			return left, nil
		}
		return 0, &Error{Kind: KindDeadline, Message: "the deadline passed before sending", cause: context.DeadlineExceeded}
	}
	if _, e := timeLeft(); e != nil {
		return fail(e)
	}
	trace := tracing.Capture(ctx)
	request := func() (Reply, error) {
		left, e := timeLeft()
		if e != nil {
			return fail(e)
		}
		reply, e := c.forwardRequest(ctx, addr, path, left, call.Argument)
		if e != nil {
			return fail(e)
		}
		return reply, nil
	}
	if callLineLen(path, trace, call.Argument) > callLineMax {
		return request()
	}
	line := callLine{Path: path, Trace: trace, Arg: call.Argument}
	for first := true; ; first = false {
		st, e := c.stream(ctx, addr)
		if e != nil && e.cause == errNoCallStream {
			return request()
		} else if e != nil {
			return fail(e)
		}
		left, e := timeLeft()
		if e != nil {
			return fail(e)
		}
		line.Seq, line.Sig, line.Timeout = 0, "", left.String()
		reply, e := st.call(ctx, &line)
		switch {
		case e == nil:
			return Reply{Value: reply}, nil
		case first && e.cause == errStreamEnded: // unwritten: once more, on a new stream
		default:
			return fail(e)
		}
	}
}

// url is the URL of path at the peer at addr.
func (c *Client) url(addr, path string) string { return c.scheme + addr + path }

// callPeer holds the call stream to one peer, and the opening of the
// next one, which the calls that find none wait for.
type callPeer struct {
	mu      sync.Mutex
	st      *callStream
	opening chan struct{} // closed when the opening under way is done
	openErr *Error        // why the last opening failed
}

// stream is the open call stream to addr. When there is none it starts
// opening one in the background (one at a time) and waits for it within
// ctx, so that a peer slow to answer holds a call no longer than its
// deadline.
func (c *Client) stream(ctx context.Context, addr string) (*callStream, *Error) {
	c.mu.Lock()
	if c.closed.Load() {
		c.mu.Unlock()
		return nil, &Error{Kind: KindUnavailable, Message: "the client is closed"}
	}
	p := c.calls[addr]
	if p == nil {
		p = &callPeer{}
		c.calls[addr] = p
	}
	p.mu.Lock()
	if p.st != nil && !p.st.isEnded() {
		st := p.st
		p.mu.Unlock()
		c.mu.Unlock()
		return st, nil
	}
	if p.opening == nil {
		opening := make(chan struct{})
		p.opening = opening
		c.wg.Add(1) // under c.mu: Close has not begun waiting
		go func() {
			defer c.wg.Done()
			st, e := c.openStream(addr)
			p.mu.Lock()
			p.st, p.openErr, p.opening = st, e, nil
			p.mu.Unlock()
			close(opening)
		}()
	}
	opening := p.opening
	p.mu.Unlock()
	c.mu.Unlock()
	select {
	case <-opening:
	case <-ctx.Done():
		return nil, contextError(ctx, false)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.st == nil {
		e := *p.openErr // each caller's own copy, which Forward names
		return nil, &e
	}
	return p.st, nil
}

// forget drops the entry of a peer whose stream st was retired for
// idleness, unless a newer stream or an opening took its place.
func (c *Client) forget(st *callStream) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.calls[st.addr]
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.st == st && p.opening == nil {
		delete(c.calls, st.addr)
	}
}

// transportError is the *Error of a request that got no (whole) answer:
// the caller's deadline or cancellation, a peer that could not be
// reached (the call did not run), or a connection that broke (it may
// have).
func transportError(ctx context.Context, err error) *Error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err // the URL repeats what Op and Addr say
	}
	e := &Error{Kind: KindUnavailable, Message: err.Error(), OutcomeUnknown: true, cause: err}
	var oe *net.OpError
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		e.Kind, e.Message = KindDeadline, "no reply within the caller's deadline"
	case errors.Is(ctx.Err(), context.Canceled):
		e.Kind, e.Message = KindCanceled, "the caller canceled"
	case errors.As(err, &oe) && oe.Op == "dial":
		e.Message, e.OutcomeUnknown = "cannot connect: "+err.Error(), false
	}
	return e
}

// StreamFailures counts the tell streams that could not be opened, that
// broke, or that the peer ended (each may have lost what was in flight on
// it), to every peer since the client was made.
func (c *Client) StreamFailures() uint64 { return c.streamFailures.Load() }

// Close makes later calls fail with ErrUnavailable, stops the senders
// (what they still queue is dropped; what they wrote may still arrive),
// ends the call streams and closes the connections. The forwards in
// flight on a stream get their replies first, for up to closeGrace; then
// the stream is canceled (they fail, their outcome unknown) and Close
// returns.
func (c *Client) Close() error {
	c.mu.Lock() // no Tell is between its check and its queuing
	c.closed.Store(true)
	peers := make([]*callPeer, 0, len(c.calls))
	for _, p := range c.calls {
		peers = append(peers, p)
	}
	c.mu.Unlock()
	var streams []*callStream
	for _, p := range peers { // no stream opens from here on
		p.mu.Lock()
		if p.st != nil {
			p.st.retire()
			streams = append(streams, p.st)
		}
		p.mu.Unlock()
	}
	for _, st := range streams {
		<-st.done // its calls answered, or closeGrace passed
	}
	c.cancel()
	c.wg.Wait()
	c.tr.CloseIdleConnections()
	return nil
}

func (c *Client) closeIdleIfClosed() {
	if c.closed.Load() {
		c.tr.CloseIdleConnections()
	}
}
