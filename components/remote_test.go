package components_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/trellis-go/trellis/components"
)

// forwarded is a component whose every reply came from another instance:
// the JSON it holds, as a RemoteReply.
type forwarded struct{ reply string }

func (forwarded) ComponentID() string   { return "far" }
func (forwarded) Kind() components.Kind { return components.KindKeyValueEntity }
func (forwarded) Methods() []string     { return []string{"get"} }
func (f forwarded) Invoke(context.Context, string, string, any) (any, error) {
	return components.RemoteReply(f.reply), nil
}
func (f forwarded) InvokeJSON(ctx context.Context, entityID, method string, _ []byte) ([]byte, error) {
	reply, err := f.Invoke(ctx, entityID, method, nil)
	if err != nil {
		return nil, err
	}
	return json.Marshal(reply)
}

// A forwarded reply decodes into the handle's reply type, passes through
// InvokeJSON as the JSON it is, and a reply that does not fit the type is
// an error.
func TestRemoteReply(t *testing.T) {
	type point struct{ X, Y int }
	reg := components.NewRegistry()
	if err := reg.Register(forwarded{reply: `{"X":1,"Y":2}`}); err != nil {
		t.Fatal(err)
	}
	client := components.NewClient(reg)
	got, err := components.NewEntityMethod[components.Done, point]("far", "get").Invoke(t.Context(), client, "e", components.Done{})
	if err != nil || got != (point{1, 2}) {
		t.Fatalf("typed invoke = %+v, %v; want {1 2}", got, err)
	}
	raw, err := client.Dispatch(t.Context(), components.DeferredCall{ComponentID: "far", Method: "get", EntityID: "e"})
	if err != nil || string(raw) != `{"X":1,"Y":2}` {
		t.Fatalf("dispatch = %s, %v; want the forwarded JSON as is", raw, err)
	}
	if _, err := components.NewEntityMethod[components.Done, int]("far", "get").Invoke(t.Context(), client, "e", components.Done{}); err == nil {
		t.Fatal("a forwarded object decoded into an int")
	}
	if b, _ := json.Marshal(components.RemoteReply(nil)); string(b) != "null" {
		t.Fatalf("empty RemoteReply marshals to %s, want null", b)
	}
}
