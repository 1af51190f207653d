package api

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/trellis-go/trellis/components"
)

// The headers of idempotent requests (the IETF httpapi draft
// "The Idempotency-Key HTTP Header Field").
const (
	// HeaderIdempotencyKey carries the client's key: 1 to 255 visible
	// ASCII characters, unique per intended effect (a UUID).
	HeaderIdempotencyKey = "Idempotency-Key"
	// HeaderIdempotencyReplayed is "true" on an answer replayed from the
	// first request with the key.
	HeaderIdempotencyReplayed = "Idempotency-Replayed"
)

// The defaults of IdempotencyOptions.
const (
	DefaultIdempotencyRetention = 24 * time.Hour
	DefaultIdempotencyInFlight  = 2 * time.Minute
)

// maxIdempotencyKey bounds a key's length.
const maxIdempotencyKey = 255

// ProblemTypeInProgress is the problem type of the 409 that answers a
// request whose Idempotency-Key is held by a request still running: retry
// after its Retry-After. A business refusal's 409 has another type.
const ProblemTypeInProgress = "urn:trellis:problem:idempotency-key-in-progress"

// inProgressRetryAfter is the in-progress 409's Retry-After, in seconds.
const inProgressRetryAfter = "1"

// IdempotencyOptions configure [Idempotency].
type IdempotencyOptions struct {
	// Store keeps the keys (required).
	Store IdempotencyStore
	// Routes are the routes that take keys, as "METHOD pattern" with the
	// chi pattern ("POST /orders/{id}/confirm"); a request to any other
	// route passes through untouched.
	Routes []string
	// Retention is how long an answer (or an unknown outcome) is kept:
	// the window in which a retry with the same key finds it
	// (DefaultIdempotencyRetention when 0).
	Retention time.Duration
	// InFlight bounds a claim whose request never finished (its instance
	// died, or its answer could not be settled): after it, the key may be
	// claimed again (DefaultIdempotencyInFlight when 0). The request
	// timeout plus a few seconds to settle is enough: no request runs
	// longer.
	InFlight time.Duration
	// Holder names this instance in its claims, and HolderGone reports
	// whether the instance a claim names is gone (its membership of the
	// cluster ended: it died, or left): the claim of a request of a gone
	// instance is taken over at once by a retry of the same request,
	// instead of answering "in progress" until it lapses. Both need a
	// Store that is an IdempotencyHolderStore; unset, claims only lapse.
	Holder     string
	HolderGone func(ctx context.Context, holder string) bool
}

// Idempotency is chi middleware that makes the routes of o.Routes honour
// the Idempotency-Key request header. Mount it where the route is known:
// in a generated handler's Middlewares (ChiServerOptions), or with
// r.With or r.Group's Use, not with the router's own Use, which runs
// before routing. A request without the header runs
// as usual. With it, the first request with a key claims it (scoped to
// the route), runs, and its answer is kept for o.Retention:
//
//   - the same key with the same request (method, path, query, body) is
//     answered with the first answer, replayed, with
//     Idempotency-Replayed: true, and does not run again;
//   - the same key with a different request is 422;
//   - the same key while the first request still runs is 409 of type
//     ProblemTypeInProgress, with a Retry-After;
//   - a first answer of 503 ("nothing was changed"), 408, 429 or a 409
//     with a Retry-After (write conflicts), each an invitation to retry,
//     and a 202 (accepted, not settled: replaying it would present a
//     pending answer as current), releases the key, so that the retry
//     runs as if the first had not been made; any other answer, a
//     business refusal included (a 409 without Retry-After), is kept;
//   - a first answer of 504 or another 5xx (the outcome is unknown, or a
//     fault) keeps the key as unknown: the retry with the same key runs
//     the handler again, and its answer is kept. So the handlers of these
//     routes must be idempotent per key: a second run with the key must
//     find what the first did, and not do it again (the order sample
//     derives the order's id from the key: see [IdempotencyKey]).
//
// Replaying a 504 instead would leave the client with "unknown" for good;
// re-running is the one rule that ends in a known outcome, and it causes
// one effect at most: the request's context carries the key (scoped to
// the route) as a components.WithIdempotencyKey, so every entity command
// the handler invokes records its answer with its write, and a re-run is
// answered with the first answers. A store that cannot claim the key is
// a 503: nothing ran. An empty Idempotency-Key header is a 400.
//
// A claim whose answer was lost is a 503 (the request did not run), and
// the key is released as soon as the store answers again. A key's answer
// is settled before it is written; when the store does not take it (it
// is unreachable just then), the answer is written anyway and the
// settling is tried again in the background until the store takes it or
// the claim lapses (o.InFlight after it was made): a retry is told "in
// progress" only until the store answers again, not for the rest of the
// claim. A 504's retry then runs, and each entity command it invokes with
// the key is answered from the entity's record of the first run, if that
// applied. (A retry that claimed the key before a late settling lands
// loses its claim to it: a request with the key may then run beside it,
// which the entities' records make harmless.)
func Idempotency(o IdempotencyOptions) func(http.Handler) http.Handler {
	o.Retention = cmpOr(o.Retention, DefaultIdempotencyRetention)
	o.InFlight = cmpOr(o.InFlight, DefaultIdempotencyInFlight)
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			values, sent := r.Header[HeaderIdempotencyKey]
			scope := r.Method + " " + chi.RouteContext(r.Context()).RoutePattern()
			if !sent || !slices.Contains(o.Routes, scope) {
				next.ServeHTTP(w, r)
				return
			}
			key := ""
			if len(values) == 1 {
				key = values[0]
			}
			o.serve(w, r, next, scope, key)
		})
	}
}

// serve runs the request r with key through the key's record.
func (o IdempotencyOptions) serve(w http.ResponseWriter, r *http.Request, next http.Handler, scope, key string) {
	if !saneIdempotencyKey(key) {
		WriteError(w, r, InvalidField(HeaderIdempotencyKey, fmt.Sprintf("must be 1 to %d visible ASCII characters", maxIdempotencyKey)))
		return
	}
	digest, err := requestDigest(r)
	if err != nil {
		WriteError(w, r, err)
		return
	}
	lapse := time.Now().Add(o.InFlight)
	held, err := o.claim(r.Context(), scope, key, digest)
	switch {
	case errors.Is(err, components.ErrOutcomeUnknown):
		// The claim may have been made, and nothing ran: free the key as
		// soon as the store answers, so that a retry is not told "in
		// progress" of a request that never ran.
		go settleLater(context.WithoutCancel(r.Context()), func(ctx context.Context) error {
			return o.Store.Release(ctx, scope, key, digest)
		}, lapse)
		WriteError(w, r, fmt.Errorf("claim the Idempotency-Key (its answer was lost; the request did not run): %v: %w", err, components.ErrUnavailable))
	case err != nil:
		WriteError(w, r, fmt.Errorf("claim the Idempotency-Key: %w", err))
	case held == nil:
		o.run(w, r, next, scope, key, digest, lapse)
	case held.Digest != digest:
		WriteProblem(w, r, http.StatusUnprocessableEntity, "this Idempotency-Key was used for a different request; use a new key")
	case held.State == IdempotencyDone && held.Answer != nil:
		replay(w, *held.Answer)
	default:
		w.Header().Set("Retry-After", inProgressRetryAfter)
		WriteProblemBody(w, r, Problem{Status: http.StatusConflict, Type: ProblemTypeInProgress, Title: "Idempotency-Key in progress",
			Detail: "a request with this Idempotency-Key is still in progress; retry after Retry-After"})
	}
}

// claim claims the key for the request digest, naming this instance as
// its holder when the store keeps holders; a claim of the same request
// held by a gone instance is taken over.
func (o IdempotencyOptions) claim(ctx context.Context, scope, key, digest string) (*IdempotencyRecord, error) {
	hs, named := o.Store.(IdempotencyHolderStore)
	if !named || o.Holder == "" {
		return o.Store.Claim(ctx, scope, key, digest, o.InFlight)
	}
	held, err := hs.ClaimAs(ctx, scope, key, digest, o.Holder, "", o.InFlight)
	if err != nil || held == nil || held.State != IdempotencyInFlight || held.Digest != digest ||
		held.Holder == "" || held.Holder == o.Holder || o.HolderGone == nil || !o.HolderGone(ctx, held.Holder) {
		return held, err
	}
	return hs.ClaimAs(ctx, scope, key, digest, o.Holder, held.Holder, o.InFlight)
}

// run runs the claimed request, whose claim lapses by itself at lapse,
// and keeps, or releases, its answer before it is written.
func (o IdempotencyOptions) run(w http.ResponseWriter, r *http.Request, next http.Handler, scope, key, digest string, lapse time.Time) {
	rec := newAnswerRecorder()
	ctx := components.WithIdempotencyKey(context.WithValue(r.Context(), idempotencyKeyKey, key), scope+" "+key)
	next.ServeHTTP(rec, r.WithContext(ctx))
	answer := rec.answer()
	settle := func(ctx context.Context) error {
		switch {
		case retryable(answer):
			return o.Store.Release(ctx, scope, key, digest)
		case answer.Status >= 500:
			return o.Store.Finish(ctx, scope, key, IdempotencyRecord{State: IdempotencyUnknown, Digest: digest}, o.Retention)
		default:
			return o.Store.Finish(ctx, scope, key, IdempotencyRecord{State: IdempotencyDone, Digest: digest, Answer: &answer}, o.Retention)
		}
	}
	// The request's context may be over (a 504): settle the key anyway.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), settleTimeout)
	err := settle(sctx)
	cancel()
	if err != nil {
		logAt(r, slog.LevelWarn, "Idempotency-Key not settled; settling it again until the store answers, or its claim lapses", err)
		go settleLater(context.WithoutCancel(r.Context()), settle, lapse)
	}
	rec.writeTo(w)
}

// retryable reports whether an answer says that nothing was changed and
// that the same request may succeed later: 503 (the store was not
// available), 408 (the body did not arrive), 429, and a 409 with a
// Retry-After (write conflicts; a business refusal has none); or that it
// is not settled (202). Replaying it would refuse the retry it invites,
// or present a pending answer as current, so the key is released instead.
func retryable(a StoredAnswer) bool {
	switch a.Status {
	case http.StatusServiceUnavailable, http.StatusRequestTimeout, http.StatusTooManyRequests, http.StatusAccepted:
		return true
	case http.StatusConflict:
		return a.Header.Get("Retry-After") != ""
	}
	return false
}

// replay answers with a kept answer.
func replay(w http.ResponseWriter, a StoredAnswer) {
	h := w.Header()
	for name, values := range a.Header {
		h[name] = slices.Clone(values)
	}
	h.Set(HeaderIdempotencyReplayed, "true")
	w.WriteHeader(a.Status)
	_, _ = w.Write(a.Body)
}

type idempotencyCtxKey struct{}

var idempotencyKeyKey idempotencyCtxKey

// IdempotencyKey is the Idempotency-Key of the request whose context is
// ctx, when the route takes keys and the request has one; "" otherwise. A
// handler derives from it what must be the same on a retry (an id it
// creates), so that a second run finds the first's work.
func IdempotencyKey(ctx context.Context) string {
	key, _ := ctx.Value(idempotencyKeyKey).(string)
	return key
}

// saneIdempotencyKey accepts 1 to 255 visible ASCII characters.
func saneIdempotencyKey(key string) bool {
	if key == "" || len(key) > maxIdempotencyKey {
		return false
	}
	for i := 0; i < len(key); i++ {
		if key[i] < '!' || key[i] > '~' {
			return false
		}
	}
	return true
}

// requestDigest identifies r: its method, path and query, and body (which
// it reads and puts back for the handler).
func requestDigest(r *http.Request) (string, error) {
	h := sha256.New()
	_, _ = fmt.Fprintf(h, "%s\n%s\n", r.Method, r.URL.RequestURI())
	if r.Body != nil && r.Body != http.NoBody {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			var tooLarge *http.MaxBytesError
			if errors.As(err, &tooLarge) {
				return "", &RequestError{Status: http.StatusRequestEntityTooLarge,
					Detail: fmt.Sprintf("the request body is larger than %d bytes", tooLarge.Limit), Err: err}
			}
			return "", &RequestError{Status: http.StatusBadRequest, Detail: "the request body could not be read", Err: err}
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		h.Write(body)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// cmpOr is d, or def when d is not positive.
func cmpOr(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}
