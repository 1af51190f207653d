package entityhost

import (
	"errors"
	"strings"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/internal/peer"
)

// wireErrors are the errors of a component call that cross the transport
// as a peer kind and code, and are the same sentinel again on the caller's
// side. components.ErrOutcomeUnknown crosses it as well, first of all
// (see ToPeer and fromPeer).
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
	{components.ErrUnavailable, peer.KindUnavailable, "store_unavailable"},
}

// codeOutcomeUnknown is the code of a command whose write the owner's
// store may have applied; its *peer.Error has OutcomeUnknown set.
const codeOutcomeUnknown = "store_outcome_unknown"

// refusalCode prefixes the code of a *components.CommandError; its kind
// follows ("refusal:not_found").
const refusalCode = "refusal:"

// refusalKinds are the kinds of CommandError, by their code.
var refusalKinds = []components.ErrorKind{components.Failure, components.Invalid, components.NotFound, components.Conflict}

func refusalName(k components.ErrorKind) string { return strings.ReplaceAll(k.String(), " ", "_") }

// ToPeer is what a peer.Handler answers for err, a local call's error: a
// command that may have taken effect (a write whose answer the store
// lost) says so above all else, whatever else it wraps, so that the
// caller never takes it for one that did not run; a command's refusal
// keeps its kind and message, a known sentinel its code; a context error
// and anything else go as they are (the transport makes them
// KindDeadline, KindCanceled or KindInternal).
func ToPeer(err error) error {
	if errors.Is(err, components.ErrOutcomeUnknown) {
		e := peer.NewError(peer.KindUnavailable, codeOutcomeUnknown, "%s", err.Error())
		e.OutcomeUnknown = true
		return e
	}
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
// locally: a call that may have run (the owner says its store may have
// applied it, or the call was sent and its answer lost) is
// components.ErrOutcomeUnknown whatever its kind, and never ErrMoved or
// ErrUnavailable, which promise it did not run; otherwise a
// *components.CommandError again, or an error that is both the sentinel
// its code names and the *peer.Error. The owner unreachable is
// components.ErrUnavailable; other transport errors stay *peer.Error
// (which is context.DeadlineExceeded or context.Canceled for those
// kinds).
func fromPeer(err error) error {
	var pe *peer.Error
	if !errors.As(err, &pe) {
		return err
	}
	if pe.OutcomeUnknown || pe.Code == codeOutcomeUnknown { // the code alone: from a peer that does not set the flag
		return remoteError{sentinel: components.ErrOutcomeUnknown, err: pe}
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
	switch pe.Kind {
	case peer.KindMoved:
		return remoteError{sentinel: entities.ErrMoved, err: pe}
	case peer.KindUnavailable:
		return remoteError{sentinel: components.ErrUnavailable, err: pe}
	}
	return pe
}

// notRun reports whether err, a forward's error from the transport, says
// that the owner surely did not run the call because it was never
// reached: it could not be dialed, or the call's line was not written or
// not read. An answer of the owner's own (its store unavailable, say) is
// not one: the owner was reached and has answered.
func notRun(err error) bool {
	var pe *peer.Error
	return errors.As(err, &pe) && pe.Kind == peer.KindUnavailable && !pe.OutcomeUnknown && pe.Code == ""
}

// remoteError is a forwarded call's failure that is also the sentinel a
// local call would have wrapped.
type remoteError struct {
	sentinel error
	err      *peer.Error
}

func (e remoteError) Error() string   { return e.err.Error() }
func (e remoteError) Unwrap() []error { return []error{e.sentinel, e.err} }
