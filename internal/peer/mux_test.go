package peer

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"
)

// TestMux: over the real transport, each call reaches the handler of its
// kind, and every call of no registered kind the fallback; a kind is
// registered once, with a name and a handler.
func TestMux(t *testing.T) {
	answer := func(v string) Handler {
		return func(context.Context, Call) (Reply, error) { return Reply{Value: json.RawMessage(`"` + v + `"`)}, nil }
	}
	mux := NewMux(answer("entity"))
	if err := mux.Handle("trellis.producer", answer("producer")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		kind string
		h    Handler
	}{
		{"taken", "trellis.producer", answer("again")},
		{"no name", "", answer("x")},
		{"no handler", "other", nil},
	} {
		if err := mux.Handle(tc.kind, tc.h); err == nil {
			t.Errorf("%s: Handle(%q) = nil, want an error", tc.name, tc.kind)
		}
	}
	s := startServer(t, ServerConfig{Handler: mux.Serve}, nil, nil)
	c := newClient(t, ClientConfig{})
	for _, tc := range []struct {
		call Call
		want string
	}{
		{Call{ComponentID: "trellis.producer", Method: "outbox"}, `"producer"`},
		{Call{ComponentID: "orders", Method: "Place", EntityID: "o-1"}, `"entity"`},
		{Call{ComponentID: "trellis.producerx", Method: "outbox"}, `"entity"`},
	} {
		reply, err := c.Forward(within(t, 5*time.Second), s.Addr(), tc.call)
		if err != nil {
			t.Fatalf("forward %s: %v", tc.call, err)
		}
		if string(reply.Value) != tc.want {
			t.Errorf("forward %s answered %s, want %s", tc.call, reply.Value, tc.want)
		}
	}
	// A handler's error travels as the transport carries any handler's.
	if err := mux.Handle("refusing", func(context.Context, Call) (Reply, error) {
		return Reply{}, NewError(KindMoved, "not_owner", "no")
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Forward(within(t, 5*time.Second), s.Addr(), Call{ComponentID: "refusing", Method: "m"}); !errors.Is(err, ErrMoved) {
		t.Errorf("forward to a refusing kind: %v, want ErrMoved", err)
	}
}
