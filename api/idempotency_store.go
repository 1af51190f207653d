package api

import (
	"context"
	"net/http"
	"time"
)

// IdempotencyState is where a request made with an Idempotency-Key stands.
type IdempotencyState string

// The states a key goes through: claimed (in flight) by the first request,
// then done (its answer kept for replay) or unknown (its outcome was not
// known: the next request with the key runs again). A request that
// changed nothing (a 503) releases the key instead: it is as if it had
// never been made.
const (
	IdempotencyInFlight IdempotencyState = "in-flight"
	IdempotencyDone     IdempotencyState = "done"
	IdempotencyUnknown  IdempotencyState = "unknown"
)

// IdempotencyRecord is what an [IdempotencyStore] keeps under a key.
type IdempotencyRecord struct {
	// State is where the request stands.
	State IdempotencyState `json:"state"`
	// Digest identifies the request (method, path, query and body): a
	// request with the same key and another digest is a different request.
	Digest string `json:"digest"`
	// Answer is the response to replay, when State is IdempotencyDone.
	Answer *StoredAnswer `json:"answer,omitempty"`
	// Holder names the instance whose request holds the claim, when the
	// store keeps it (see IdempotencyHolderStore); "" otherwise.
	Holder string `json:"holder,omitempty"`
}

// StoredAnswer is a response kept for replay.
type StoredAnswer struct {
	Status int         `json:"status"`
	Header http.Header `json:"header,omitempty"`
	Body   []byte      `json:"body,omitempty"`
}

// IdempotencyStore keeps the records of Idempotency-Keys, each under a
// scope (the route, as "POST /orders/{id}/confirm") and the key. Every
// method is atomic. The service gives one that lives in its state store
// (Redis, or memory for the embedded store); see trellis.Host.
type IdempotencyStore interface {
	// Claim sets the key in flight with digest for ttl when it is free or
	// holds an unknown outcome of the same digest, and then returns nil;
	// otherwise it changes nothing and returns what the key holds.
	Claim(ctx context.Context, scope, key, digest string, ttl time.Duration) (*IdempotencyRecord, error)
	// Finish replaces the claim of (scope, key) for digest by rec, kept
	// for ttl; it does nothing if the key no longer holds that claim.
	Finish(ctx context.Context, scope, key string, rec IdempotencyRecord, ttl time.Duration) error
	// Release frees the key, if it holds the claim for digest.
	Release(ctx context.Context, scope, key, digest string) error
}

// IdempotencyHolderStore is an IdempotencyStore whose claims name the
// instance that holds them, so that the claim of a request whose instance
// is gone (its membership in the cluster ended) is taken over at once
// rather than after it lapses. The service's stores are.
type IdempotencyHolderStore interface {
	IdempotencyStore
	// ClaimAs is Claim with holder named as the claim's holder; with
	// takeFrom set, an in-flight claim of the same digest held by
	// takeFrom is taken over as if it were free.
	ClaimAs(ctx context.Context, scope, key, digest, holder, takeFrom string, ttl time.Duration) (*IdempotencyRecord, error)
}
