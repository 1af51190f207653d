package peer

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
)

// A forward carries the caller's idempotency key, or else its command id,
// to the handler's ctx, on a call stream and as a request of its own
// (an argument too long for a line).
func TestForwardCarriesKeys(t *testing.T) {
	type seen struct{ key, id string }
	got := make(chan seen, 1)
	s := startServer(t, ServerConfig{Handler: func(ctx context.Context, c Call) (Reply, error) {
		key, _ := components.IdempotencyKeyFrom(ctx)
		id, _ := components.CommandIDFrom(ctx)
		got <- seen{key, id}
		return Reply{Value: json.RawMessage(`1`)}, nil
	}}, nil, nil)
	c := newClient(t, ClientConfig{})
	long := json.RawMessage(`"` + strings.Repeat("x", callLineMax) + `"`)
	cases := []struct {
		name string
		ctx  func(context.Context) context.Context
		arg  json.RawMessage
		want seen
	}{
		{"none", func(ctx context.Context) context.Context { return ctx }, nil, seen{}},
		{"key", func(ctx context.Context) context.Context {
			return components.WithIdempotencyKey(ctx, "k 1/?&=é")
		}, nil, seen{key: "k 1/?&=é"}},
		{"command id", func(ctx context.Context) context.Context {
			return components.WithCommandID(ctx, "id-1")
		}, nil, seen{id: "id-1"}},
		{"key on a request of its own", func(ctx context.Context) context.Context {
			return components.WithIdempotencyKey(ctx, "k2")
		}, long, seen{key: "k2"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			call := Call{ComponentID: "c", Method: "m", EntityID: "e/1", Argument: tc.arg}
			if _, err := c.Forward(tc.ctx(within(t, 5*time.Second)), s.Addr(), call); err != nil {
				t.Fatal(err)
			}
			if s := testenv.Recv(t, got, 5*time.Second); s != tc.want {
				t.Fatalf("the handler saw %+v, want %+v", s, tc.want)
			}
		})
	}
}
