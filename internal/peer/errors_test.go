package peer

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// TestErrorKindsSurviveTheTrip: what a handler returns comes back to the
// caller with its kind (errors.Is on the sentinel), code and message; a
// plain error or a panic is internal, a context error keeps its meaning;
// a handler's "may have run" (OutcomeUnknown) arrives as such.
func TestErrorKindsSurviveTheTrip(t *testing.T) {
	cases := []struct {
		name     string
		err      func() error // what the handler returns (or panics)
		sentinel error
		code     string
		message  string
		unknown  bool // the outcome is unknown
	}{
		{"not found", func() error { return NewError(KindNotFound, "unknown_component", "no component %q", "x") }, ErrNotFound, "unknown_component", `no component "x"`, false},
		{"bad request", func() error { return NewError(KindBadRequest, "bad_argument", "qty: not a number") }, ErrBadRequest, "bad_argument", "qty: not a number", false},
		{"refused", func() error { return NewError(KindRefused, "conflict", "order exists") }, ErrRefused, "conflict", "order exists", false},
		{"moved", func() error { return NewError(KindMoved, "", "shard 7 is owned by b") }, ErrMoved, "", "shard 7 is owned by b", false},
		{"moved, wrapped sentinel", func() error { return fmt.Errorf("shard 7: %w", ErrMoved) }, ErrMoved, "", "shard 7: peer: not the owner (moved)", false},
		{"unavailable", func() error { return NewError(KindUnavailable, "", "handing off") }, ErrUnavailable, "", "handing off", false},
		{"unavailable, outcome unknown", func() error {
			return fmt.Errorf("save: %w", &Error{Kind: KindUnavailable, Code: "store_outcome_unknown", Message: "reply lost", OutcomeUnknown: true})
		}, ErrOutcomeUnknown, "store_outcome_unknown", "reply lost", true},
		{"deadline", func() error { return fmt.Errorf("load: %w", context.DeadlineExceeded) }, context.DeadlineExceeded, "", "load: context deadline exceeded", false},
		{"internal", func() error { return errors.New("disk on fire") }, ErrInternal, "", "disk on fire", false},
		{"panic", func() error { panic("boom") }, ErrInternal, "", "the handler panicked", false},
	}
	s := startServer(t, ServerConfig{Handler: func(_ context.Context, c Call) (Reply, error) {
		for _, tc := range cases {
			if tc.name == c.Method {
				return Reply{}, tc.err()
			}
		}
		return Reply{}, errors.New("no case " + c.Method)
	}}, &logBuffer{}, nil)
	c := newClient(t, ClientConfig{})

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Forward(within(t, 5*time.Second), s.Addr(), Call{ComponentID: "c", Method: tc.name, EntityID: "e"})
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("Forward: %v (%T), want an *Error", err, err)
			}
			if !errors.Is(err, tc.sentinel) || pe.Code != tc.code || pe.Message != tc.message || pe.OutcomeUnknown != tc.unknown {
				t.Errorf("got kind %v code %q message %q outcome unknown %v; want %v %q %q %v",
					pe.Kind, pe.Code, pe.Message, pe.OutcomeUnknown, tc.sentinel, tc.code, tc.message, tc.unknown)
			}
			if pe.Op != "forward c."+tc.name+"[e]" || pe.Addr != s.Addr() {
				t.Errorf("op %q addr %q", pe.Op, pe.Addr)
			}
		})
	}
}

// TestErrorIs: an *Error matches its own kind's sentinel only, and the
// context errors for the deadline and cancel kinds.
func TestErrorIs(t *testing.T) {
	for k := range numKinds {
		e := &Error{Kind: k}
		for j := range numKinds {
			if got := errors.Is(e, kinds[j].sentinel); got != (j == k) {
				t.Errorf("errors.Is(%v, sentinel of %v) = %v", k, Kind(j), got)
			}
		}
		if errors.Is(e, context.DeadlineExceeded) != (k == KindDeadline) || errors.Is(e, context.Canceled) != (k == KindCanceled) {
			t.Errorf("%v and the context errors disagree", k)
		}
		if kindNamed(k.String()) != k {
			t.Errorf("%v does not read back from its name", k)
		}
	}
	if errors.Is(&Error{}, ErrOutcomeUnknown) || !errors.Is(&Error{OutcomeUnknown: true}, ErrOutcomeUnknown) {
		t.Error("ErrOutcomeUnknown does not follow OutcomeUnknown")
	}
}
