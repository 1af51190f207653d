package entityhost

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"testing"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/internal/peer"
)

// TestErrorsRoundTrip: each error a command can end with crosses the real
// transport (ToPeer on the owner, fromPeer on the caller) and is the same
// sentinel, or an equal CommandError, on the caller's side.
func TestErrorsRoundTrip(t *testing.T) {
	var sent []error
	for _, k := range refusalKinds {
		sent = append(sent, &components.CommandError{Kind: k, Message: "refused as " + k.String()})
	}
	for _, w := range wireErrors {
		sent = append(sent, fmt.Errorf("counter.add on %q: %w", "c-1", w.sentinel))
	}
	sent = append(sent, fmt.Errorf("counter.add on %q: %w", "c-1", components.ErrOutcomeUnknown))
	secret := []byte("entityhost-test-secret-0123456789abcdef")
	srv, err := peer.NewServer(peer.ServerConfig{Secret: secret, Logger: slog.New(slog.DiscardHandler),
		Handler: func(_ context.Context, c peer.Call) (peer.Reply, error) {
			i, _ := strconv.Atoi(c.EntityID)
			return peer.Reply{}, ToPeer(sent[i])
		}})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	client, err := peer.NewClient(peer.ClientConfig{Secret: secret, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })

	for i, want := range sent {
		_, err := client.Forward(t.Context(), srv.Addr(), peer.Call{ComponentID: "counter", Method: "add", EntityID: strconv.Itoa(i)})
		got := fromPeer(err)
		var wantCE, gotCE *components.CommandError
		switch {
		case errors.As(want, &wantCE):
			if !errors.As(got, &gotCE) || *gotCE != *wantCE {
				t.Errorf("sent %#v, got %v", wantCE, got)
			}
		case !errors.Is(got, errors.Unwrap(want)):
			t.Errorf("sent %v, got %v: not the same sentinel", want, got)
		}
	}
	// What may have run is unknown, whatever else it wraps or says, and
	// never an answer that promises it did not run.
	mayHaveRun := []error{
		ToPeer(fmt.Errorf("save: %w: %w", entities.ErrMoved, components.ErrOutcomeUnknown)),
		ToPeer(fmt.Errorf("save: %w: %w", components.ErrUnavailable, components.ErrOutcomeUnknown)),
		&peer.Error{Kind: peer.KindUnavailable, Code: "store_unavailable", OutcomeUnknown: true},
		&peer.Error{Kind: peer.KindMoved, OutcomeUnknown: true},
		&peer.Error{Kind: peer.KindUnavailable, Code: "store_outcome_unknown"}, // a peer that does not set the flag
	}
	for _, err := range mayHaveRun {
		got := fromPeer(err)
		if !errors.Is(got, components.ErrOutcomeUnknown) || errors.Is(got, entities.ErrMoved) || errors.Is(got, components.ErrUnavailable) {
			t.Errorf("%v came back as %v: want unknown, and neither moved nor unavailable", err, got)
		}
	}
	if got := fromPeer(&peer.Error{Kind: peer.KindUnavailable}); !errors.Is(got, components.ErrUnavailable) {
		t.Errorf("an owner that cannot be reached: %v, want ErrUnavailable", got)
	}
	if got := fromPeer(&peer.Error{Kind: peer.KindMoved}); !errors.Is(got, entities.ErrMoved) {
		t.Errorf("a moved answer without a code: %v, want ErrMoved", got)
	}
}
