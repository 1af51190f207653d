package peer

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"sync"
	"time"
)

// EnvSecret is the setting that holds the cluster secret. The caller reads
// it (from the environment, a file, a vault) and passes the bytes in;
// errors name the setting, never the value.
const EnvSecret = "TRELLIS_CLUSTER_SECRET"

// MinSecretLen is the shortest secret accepted: 32 bytes, the HMAC-SHA256
// key size.
const MinSecretLen = 32

// DefaultMaxSkew is how far a request's timestamp may be from the
// server's clock.
const DefaultMaxSkew = 30 * time.Second

// The headers of the scheme. The secret itself is never sent.
const (
	headerTime       = "Trellis-Time"        // the sender's clock, Unix milliseconds
	headerSignature  = "Trellis-Signature"   // base64url HMAC-SHA256, see signer
	headerBodyDigest = "Trellis-Body-Digest" // base64url SHA-256 of a forward's body, see signForward
)

// errNoSecret is why every request is refused when no secret is set.
var errNoSecret = errors.New(EnvSecret + " is not set: the peer transport refuses every call")

// signer signs and checks requests and replies with the cluster secret.
//
// A stream's opening is signed HMAC-SHA256(secret, "trellis-peer/1
// request\n" method "\n" request-URI "\n" time "\n\n"), a forward of its
// own as signForward says: both bind the target (the stream, or the
// component, method and entity of the URI), a forward its deadline and
// argument too, and the time limits how long the server remembers a
// request to refuse its replay (MaxSkew). A reply's is
// HMAC-SHA256(secret, "trellis-peer/1 reply\n" request-signature "\n"
// status "\n" body): the caller knows the answer comes from a holder of
// the secret and belongs to its own request. The fields before the body
// hold no newline, so the message reads one way only.
type signer struct {
	enabled bool // false: no secret; every check fails
	pool    sync.Pool
}

// newSigner checks the secret's length; an empty secret makes a signer
// that refuses everything.
func newSigner(secret []byte) (*signer, error) {
	s := &signer{enabled: len(secret) > 0}
	if s.enabled && len(secret) < MinSecretLen {
		return nil, fmt.Errorf("%s: the cluster secret is %d bytes; at least %d are needed", EnvSecret, len(secret), MinSecretLen)
	}
	key := append([]byte(nil), secret...) // the caller may wipe its copy
	s.pool.New = func() any { return &macState{h: hmac.New(sha256.New, key)} }
	return s, nil
}

// signatureLen is the length of a signature in base64url without padding.
var signatureLen = base64.RawURLEncoding.EncodedLen(sha256.Size)

// signRequest returns a stream's opening's signature, base64url (its
// timeout and body are empty: the body is the stream, whose lines are
// signed each).
func (s *signer) signRequest(method, uri, unixMilli, timeout string, body []byte) string {
	return s.sign(body, "trellis-peer/1 request\n", method, "\n", uri, "\n", unixMilli, "\n", timeout, "\n")
}

// signForward returns the signature of a forward of its own:
// HMAC-SHA256(secret, "trellis-peer/2 forward\n" method "\n" request-URI
// "\n" time "\n" timeout "\n" traceparent "\n" tracestate "\n" digest),
// where digest is bodyDigest of the argument, sent in its own header. It
// covers the argument through its digest rather than the argument itself,
// so the server checks it before it reads a byte of the body: a stranger's
// body is never read. Its message starts apart from signRequest's, so
// that no request can be read as the other kind.
func (s *signer) signForward(method, uri, unixMilli, timeout string, tc traceHeaders, digest string) string {
	return s.sign(nil, "trellis-peer/2 forward\n", method, "\n", uri, "\n", unixMilli, "\n", timeout, "\n",
		tc.parent, "\n", tc.state, "\n", digest)
}

// bodyDigest is the SHA-256 of a forward's body, base64url, as its
// headerBodyDigest carries it.
func bodyDigest(body []byte) string {
	sum := sha256.Sum256(body)
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// signReply returns the reply's signature, base64url.
func (s *signer) signReply(requestSig string, status int, body []byte) string {
	return s.sign(body, "trellis-peer/1 reply\n", requestSig, "\n", strconv.Itoa(status), "\n")
}

// macState is a pooled HMAC and the scratch it writes the fields from.
type macState struct {
	h   hash.Hash
	buf []byte
}

func (s *signer) sign(body []byte, parts ...string) string {
	m := s.pool.Get().(*macState)
	m.buf = m.buf[:0]
	for _, p := range parts {
		m.buf = append(m.buf, p...)
	}
	return string(s.finish(nil, m, body))
}

// finish MACs m's fields (m.buf) and then body, appends the signature
// (base64url) to dst, and puts m back in the pool.
func (s *signer) finish(dst []byte, m *macState, body []byte) []byte {
	m.h.Reset()
	m.h.Write(m.buf)
	m.h.Write(body)
	m.buf = m.h.Sum(m.buf[:0])
	dst = base64.RawURLEncoding.AppendEncode(dst, m.buf)
	s.pool.Put(m)
	return dst
}

// equal compares a received signature with the expected one in constant
// time.
func equal(got, want string) bool {
	return len(got) == signatureLen && hmac.Equal([]byte(got), []byte(want))
}

// checkTime returns a request's timestamp (Unix milliseconds) if it is
// within maxSkew of now, or why not.
func checkTime(unixMilli string, now time.Time, maxSkew time.Duration) (int64, error) {
	ms, err := strconv.ParseInt(unixMilli, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s header missing or malformed", headerTime)
	}
	skew := now.Sub(time.UnixMilli(ms))
	if skew > maxSkew || skew < -maxSkew {
		return 0, fmt.Errorf("timestamp %v from the server's clock (max %v): an old request replayed, or clocks apart", skew.Round(time.Millisecond), maxSkew)
	}
	return ms, nil
}
