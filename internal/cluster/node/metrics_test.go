package node

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/internal/peer"
)

// forwardOutcome names each of the transport's answers and each error a
// forward's caller gets by its outcome.
func TestForwardOutcome(t *testing.T) {
	lost := &peer.Error{Kind: peer.KindUnavailable, OutcomeUnknown: true}
	lateSent := &peer.Error{Kind: peer.KindDeadline, OutcomeUnknown: true}
	cases := []struct {
		name string
		err  error
		want string
	}{
		{"nil", nil, "ok"},
		{"refusal", peer.NewError(peer.KindRefused, "refusal:invalid", "no"), "refused"},
		{"command error", &components.CommandError{Kind: components.Invalid, Message: "no"}, "refused"},
		{"conflict", fmt.Errorf("x: %w", components.ErrConflict), "refused"},
		{"not found", peer.NewError(peer.KindNotFound, "unknown_component", "x"), "refused"},
		{"bad request", peer.NewError(peer.KindBadRequest, "bad_argument", "x"), "refused"},
		{"internal", peer.NewError(peer.KindInternal, "", "boom"), "refused"},
		{"unauthorized", peer.NewError(peer.KindUnauthorized, "", "x"), "refused"},
		{"too large", peer.NewError(peer.KindTooLarge, "", "x"), "refused"},
		{"moved", peer.NewError(peer.KindMoved, "moved", "x"), "moved"},
		{"moved, as the caller gets it", fmt.Errorf("x: %w", entities.ErrMoved), "moved"},
		{"not reached", &peer.Error{Kind: peer.KindUnavailable}, "unavailable"},
		{"owner's store unavailable", peer.NewError(peer.KindUnavailable, "store_unavailable", "x"), "unavailable"},
		{"unavailable, as the caller gets it", errors.Join(components.ErrUnavailable, &peer.Error{Kind: peer.KindUnavailable}), "unavailable"},
		{"answer lost", lost, "unknown"},
		{"answer lost, as the caller gets it", errors.Join(components.ErrOutcomeUnknown, lost), "unknown"},
		{"owner's store outcome unknown, as the caller gets it",
			errors.Join(components.ErrOutcomeUnknown, peer.NewError(peer.KindUnavailable, "store_outcome_unknown", "x")), "unknown"},
		{"deadline before sending", &peer.Error{Kind: peer.KindDeadline}, "deadline"},
		{"deadline once sent", lateSent, "deadline"},
		{"context deadline", context.DeadlineExceeded, "deadline"},
		{"canceled", &peer.Error{Kind: peer.KindCanceled, OutcomeUnknown: true}, "canceled"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := forwardOutcome(tc.err); got != tc.want {
				t.Errorf("forwardOutcome(%v) = %q, want %q", tc.err, got, tc.want)
			}
		})
	}
}
