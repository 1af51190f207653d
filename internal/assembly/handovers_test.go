package assembly

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/trellis-go/trellis/internal/peer"
)

func TestHandoversServeTheProducersAdded(t *testing.T) {
	hs := newHandovers(nil, "instance-a 10.0.0.1:25520")
	echo := func(_ context.Context, arg json.RawMessage) (json.RawMessage, error) { return arg, nil }
	if err := hs.Add("notices", echo); err != nil {
		t.Fatalf("Add: %v", err)
	}
	if err := hs.Add("notices", echo); err == nil {
		t.Error("a second producer of the same id was added")
	}
	for _, tc := range []struct {
		name      string
		producer  string
		wantValue string
		wantErr   error
	}{
		{name: "a producer that runs here takes the send", producer: "notices", wantValue: `"hello"`},
		{name: "a producer that does not is moved", producer: "invoices", wantErr: peer.ErrMoved},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reply, err := hs.serve(context.Background(), peer.Call{ComponentID: producerComponent, Method: tc.producer, Argument: json.RawMessage(`"hello"`)})
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("serve: %v, want %v", err, tc.wantErr)
			}
			if string(reply.Value) != tc.wantValue {
				t.Errorf("reply = %s, want %s", reply.Value, tc.wantValue)
			}
		})
	}
	if hs.Holder() != "instance-a 10.0.0.1:25520" {
		t.Errorf("Holder = %q", hs.Holder())
	}
}
