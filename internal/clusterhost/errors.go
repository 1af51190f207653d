package clusterhost

import (
	"errors"
	"strings"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/internal/peer"
)

// wireErrors are the errors of a component call that cross the transport
// as a peer kind and code, and are the same sentinel again on the caller's
// side.
var wireErrors = []struct {
	sentinel error
	kind     peer.Kind
	code     string
}{
	{entities.ErrMoved, peer.KindMoved, "moved"},
	{components.ErrUnknownComponent, peer.KindNotFound, "unknown_component"},
	{components.ErrUnknownMethod, peer.KindNotFound, "unknown_method"},
	{components.ErrBadArgument, peer.KindBadRequest, "bad_argument"},
	{components.ErrMissingEntityID, peer.KindBadRequest, "missing_entity_id"},
	{components.ErrConflict, peer.KindRefused, "revision_conflict"},
	{components.ErrOutcomeUnknown, peer.KindUnavailable, "store_outcome_unknown"},
	{components.ErrUnavailable, peer.KindUnavailable, "store_unavailable"},
}

// refusalCode prefixes the code of a *components.CommandError; its kind
// follows ("refusal:not_found").
const refusalCode = "refusal:"

// refusalKinds are the kinds of CommandError, by their code.
var refusalKinds = []components.ErrorKind{components.Failure, components.Invalid, components.NotFound, components.Conflict}

func refusalName(k components.ErrorKind) string { return strings.ReplaceAll(k.String(), " ", "_") }

// toPeer is what the handler answers for err, a local call's error: a
// command's refusal keeps its kind and message, a known sentinel its
// code; a context error and anything else go as they are (the transport
// makes them KindDeadline, KindCanceled or KindInternal).
func toPeer(err error) error {
	var ce *components.CommandError
	if errors.As(err, &ce) {
		return peer.NewError(peer.KindRefused, refusalCode+refusalName(ce.Kind), "%s", ce.Message)
	}
	for _, w := range wireErrors {
		if errors.Is(err, w.sentinel) {
			return peer.NewError(w.kind, w.code, "%s", err.Error())
		}
	}
	return err
}

// fromPeer is a forwarded call's error as the caller would have had it
// locally: a *components.CommandError again, or an error that is both the
// sentinel its code names and the *peer.Error. The owner unreachable is
// components.ErrUnavailable, a call sent whose answer was lost
// components.ErrOutcomeUnknown; other transport errors stay *peer.Error
// (which is context.DeadlineExceeded or context.Canceled for those kinds).
func fromPeer(err error) error {
	var pe *peer.Error
	if !errors.As(err, &pe) {
		return err
	}
	if name, ok := strings.CutPrefix(pe.Code, refusalCode); ok && pe.Kind == peer.KindRefused {
		for _, k := range refusalKinds {
			if refusalName(k) == name {
				return &components.CommandError{Kind: k, Message: pe.Message}
			}
		}
	}
	for _, w := range wireErrors {
		if pe.Kind == w.kind && pe.Code == w.code {
			return remoteError{sentinel: w.sentinel, err: pe}
		}
	}
	if errors.Is(pe, peer.ErrOutcomeUnknown) {
		// Sent, and no answer came back: the owner may have run it.
		return remoteError{sentinel: components.ErrOutcomeUnknown, err: pe}
	}
	switch pe.Kind {
	case peer.KindMoved:
		return remoteError{sentinel: entities.ErrMoved, err: pe}
	case peer.KindUnavailable:
		return remoteError{sentinel: components.ErrUnavailable, err: pe}
	}
	return pe
}

// remoteError is a forwarded call's failure that is also the sentinel a
// local call would have wrapped.
type remoteError struct {
	sentinel error
	err      *peer.Error
}

func (e remoteError) Error() string   { return e.err.Error() }
func (e remoteError) Unwrap() []error { return []error{e.sentinel, e.err} }
