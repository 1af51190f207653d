package peer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
)

// Kind is what sort of failure an [Error] is. The kind, its code and its
// message cross the wire; the caller tests for a kind with errors.Is and
// the kind's sentinel (ErrNotFound, ErrMoved, ...).
type Kind uint8

// The kinds of failure. The first group is what a [Handler] answers; the
// second is what the transport itself finds.
const (
	// KindInternal: the peer failed in a way it has no better kind for
	// (a handler's plain error, a panic). It is the zero Kind.
	KindInternal Kind = iota
	// KindBadRequest: the call is malformed (unknown method, argument that
	// does not decode).
	KindBadRequest
	// KindNotFound: what the call names does not exist (unknown component).
	KindNotFound
	// KindRefused: the component refused the command (a business error);
	// Code says which refusal, for the component layer to restore.
	KindRefused
	// KindMoved: the peer does not own the entity (any more); the caller
	// refreshes its owner table and re-routes once.
	KindMoved
	// KindUnavailable: the peer could not be reached, or the connection
	// broke. With OutcomeUnknown set, the call may have run.
	KindUnavailable
	// KindDeadline: the caller's deadline passed, on either side.
	KindDeadline
	// KindCanceled: the caller gave up (its context was canceled).
	KindCanceled
	// KindUnauthorized: the peers do not share the cluster secret (or one
	// of them has none, or their clocks are further apart than MaxSkew).
	KindUnauthorized
	// KindTooLarge: the argument or the reply exceeds a body limit.
	KindTooLarge
	numKinds
)

// The sentinels, one per kind: errors.Is(err, ErrMoved) holds for an
// *Error of KindMoved, on whichever side it was made.
var (
	ErrInternal     = errors.New("peer: internal error")
	ErrBadRequest   = errors.New("peer: bad request")
	ErrNotFound     = errors.New("peer: not found")
	ErrRefused      = errors.New("peer: refused")
	ErrMoved        = errors.New("peer: not the owner (moved)")
	ErrUnavailable  = errors.New("peer: unavailable")
	ErrDeadline     = errors.New("peer: deadline exceeded")
	ErrCanceled     = errors.New("peer: canceled")
	ErrUnauthorized = errors.New("peer: unauthorized")
	ErrTooLarge     = errors.New("peer: too large")

	// ErrOutcomeUnknown matches an *Error whose call may have run on the
	// peer: it was sent, and no answer came back. Retrying such a call
	// may run it twice.
	ErrOutcomeUnknown = errors.New("peer: outcome unknown")
)

// kinds holds, per kind, its wire name, sentinel and HTTP status. The
// status is for people reading traffic; the client trusts the name in the
// body.
var kinds = [numKinds]struct {
	name     string
	sentinel error
	status   int
}{
	KindInternal:     {"internal", ErrInternal, http.StatusInternalServerError},
	KindBadRequest:   {"bad_request", ErrBadRequest, http.StatusBadRequest},
	KindNotFound:     {"not_found", ErrNotFound, http.StatusNotFound},
	KindRefused:      {"refused", ErrRefused, http.StatusUnprocessableEntity},
	KindMoved:        {"moved", ErrMoved, http.StatusMisdirectedRequest},
	KindUnavailable:  {"unavailable", ErrUnavailable, http.StatusServiceUnavailable},
	KindDeadline:     {"deadline", ErrDeadline, http.StatusGatewayTimeout},
	KindCanceled:     {"canceled", ErrCanceled, 499}, // nginx's "client closed request"
	KindUnauthorized: {"unauthorized", ErrUnauthorized, http.StatusUnauthorized},
	KindTooLarge:     {"too_large", ErrTooLarge, http.StatusRequestEntityTooLarge},
}

// String is the kind's wire name.
func (k Kind) String() string {
	if k < numKinds {
		return kinds[k].name
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// kindNamed is the kind with wire name s; an unknown name (from a newer
// peer) is KindInternal.
func kindNamed(s string) Kind {
	for k := range numKinds {
		if kinds[k].name == s {
			return k
		}
	}
	return KindInternal
}

// Error is a forwarded call's failure. Kind, Code and Message are what the
// peer answered (or what the transport found); Op and Addr say which call
// failed.
type Error struct {
	Op      string // "forward component.method[entity]"
	Addr    string // the peer's address
	Kind    Kind
	Code    string // the application's refinement of Kind; see NewError
	Message string
	// OutcomeUnknown: the call was sent and may have run on the peer.
	OutcomeUnknown bool

	cause error // a local cause (a context or network error); not sent
}

// NewError is what a [Handler] returns to answer a kind other than
// KindInternal. code refines the kind for the layer above the transport
// (the component client maps, say, a conflict refusal to KindRefused with
// code "conflict", or an unknown component to KindNotFound with code
// "unknown_component", and back); it may be empty.
func NewError(kind Kind, code, format string, args ...any) *Error {
	return &Error{Kind: kind, Code: code, Message: fmt.Sprintf(format, args...)}
}

func (e *Error) Error() string {
	s := e.Kind.String()
	if e.Code != "" {
		s += " (" + e.Code + ")"
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.Op != "" {
		s = e.Op + " to " + e.Addr + ": " + s
	}
	if e.OutcomeUnknown {
		s += " (outcome unknown)"
	}
	return s
}

// Is matches the kind's sentinel, ErrOutcomeUnknown when the outcome is
// unknown, and context.DeadlineExceeded / context.Canceled for
// KindDeadline / KindCanceled, so that code written for local calls keeps
// working on forwarded ones.
func (e *Error) Is(target error) bool {
	switch {
	case e.Kind < numKinds && target == kinds[e.Kind].sentinel:
		return true
	case target == ErrOutcomeUnknown:
		return e.OutcomeUnknown
	case target == context.DeadlineExceeded:
		return e.Kind == KindDeadline
	case target == context.Canceled:
		return e.Kind == KindCanceled
	}
	return false
}

// Unwrap is the local cause, if any (a network error, say).
func (e *Error) Unwrap() error { return e.cause }

// wireError is an Error's form in a reply body.
type wireError struct {
	Kind    string `json:"kind"`
	Code    string `json:"code,omitempty"`
	Message string `json:"message"`
	// OutcomeUnknown: the call ran, or may have (a reply over the
	// caller's limit, refused after the handler ran).
	OutcomeUnknown bool `json:"outcome_unknown,omitempty"`
}

// classify turns a handler's error into what the server answers: an
// *Error keeps its kind and its OutcomeUnknown (a handler that cannot
// tell whether the call took effect says so), a context error becomes
// KindDeadline or KindCanceled, and a bare sentinel its kind; anything
// else is internal.
func classify(err error) wireError {
	var pe *Error
	if errors.As(err, &pe) {
		return wireError{Kind: pe.Kind.String(), Code: pe.Code, Message: pe.Message, OutcomeUnknown: pe.OutcomeUnknown}
	}
	kind := KindInternal
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		kind = KindDeadline
	case errors.Is(err, context.Canceled):
		kind = KindCanceled
	default:
		for k := range numKinds {
			if errors.Is(err, kinds[k].sentinel) {
				kind = k
				break
			}
		}
	}
	return wireError{Kind: kind.String(), Message: err.Error()}
}

// decodeWireError reads an error reply's body; a body that is not one
// (from something that is not a peer) takes its kind from the status.
func decodeWireError(status int, body []byte) *Error {
	var w wireError
	if err := json.Unmarshal(body, &w); err != nil || w.Kind == "" {
		kind := KindInternal
		for k := range numKinds {
			if kinds[k].status == status {
				kind = k
			}
		}
		return &Error{Kind: kind, Message: fmt.Sprintf("HTTP %d from something that is not a peer", status)}
	}
	return &Error{Kind: kindNamed(w.Kind), Code: w.Code, Message: w.Message, OutcomeUnknown: w.OutcomeUnknown}
}
