package components_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/trellis-go/trellis/components"
)

// echo is a minimal component: method "echo" replies with its string
// argument, on entity ids only.
type echo struct{ id string }

func (e echo) ComponentID() string { return e.id }
func (echo) Kind() components.Kind { return components.KindKeyValueEntity }
func (echo) Methods() []string     { return []string{"echo"} }
func (e echo) Invoke(_ context.Context, entityID, method string, arg any) (any, error) {
	if method != "echo" {
		return nil, components.ErrUnknownMethod
	}
	if entityID == "" {
		return nil, components.ErrMissingEntityID
	}
	s, ok := arg.(string)
	if !ok {
		return nil, components.ErrBadArgument
	}
	if s == "refuse" {
		return nil, components.Errorf("refused %s", entityID)
	}
	return entityID + ":" + s, nil
}
func (e echo) InvokeJSON(ctx context.Context, entityID, method string, arg []byte) ([]byte, error) {
	s, err := components.DecodeArgument[string](arg)
	if err != nil {
		return nil, err
	}
	reply, err := e.Invoke(ctx, entityID, method, s)
	if err != nil {
		return nil, err
	}
	return json.Marshal(reply)
}

// The registry refuses an id twice and an empty id, and finds what it holds.
func TestRegistry(t *testing.T) {
	reg := components.NewRegistry()
	if err := reg.Register(echo{id: "a"}); err != nil {
		t.Fatal(err)
	}
	if err := reg.Register(echo{id: "a"}); !errors.Is(err, components.ErrDuplicate) {
		t.Errorf("second register of a: got %v, want ErrDuplicate", err)
	}
	if err := reg.Register(echo{id: ""}); err == nil {
		t.Error("register with an empty id succeeded")
	}
	if _, err := reg.Lookup("b"); !errors.Is(err, components.ErrUnknownComponent) {
		t.Errorf("lookup b: got %v, want ErrUnknownComponent", err)
	}
	if got := reg.Components(); len(got) != 1 || got[0].ComponentID() != "a" {
		t.Errorf("components = %v", got)
	}
}

// A deferred call survives its stored form, and dispatching one says
// precisely why it failed.
func TestDispatch(t *testing.T) {
	reg := components.NewRegistry()
	if err := reg.Register(echo{id: "echo"}); err != nil {
		t.Fatal(err)
	}
	client := components.NewClient(reg)
	m := components.NewEntityMethod[string, string]("echo", "echo")

	call, err := m.Deferred("e1", "hi")
	if err != nil {
		t.Fatal(err)
	}
	stored, err := call.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back, err := components.UnmarshalDeferredCall(stored)
	if err != nil {
		t.Fatal(err)
	}
	reply, err := client.Dispatch(context.Background(), back)
	if err != nil || string(reply) != `"e1:hi"` {
		t.Fatalf("dispatch = %s, %v", reply, err)
	}

	tests := []struct {
		name string                  // the case
		call components.DeferredCall // what is dispatched
		want error                   // the error it must wrap
	}{
		{"unknown component", components.DeferredCall{ComponentID: "gone", Method: "echo", EntityID: "e", Argument: []byte(`"x"`)}, components.ErrUnknownComponent},
		{"unknown method", components.DeferredCall{ComponentID: "echo", Method: "gone", EntityID: "e", Argument: []byte(`"x"`)}, components.ErrUnknownMethod},
		{"argument no longer decodes", components.DeferredCall{ComponentID: "echo", Method: "echo", EntityID: "e", Argument: []byte(`{"a":1}`)}, components.ErrBadArgument},
		{"argument is not JSON", components.DeferredCall{ComponentID: "echo", Method: "echo", EntityID: "e", Argument: []byte(`{`)}, components.ErrBadArgument},
		{"no entity id", components.DeferredCall{ComponentID: "echo", Method: "echo", Argument: []byte(`"x"`)}, components.ErrMissingEntityID},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := client.Dispatch(context.Background(), tc.call); !errors.Is(err, tc.want) {
				t.Errorf("got %v, want %v", err, tc.want)
			}
		})
	}

	_, err = client.Dispatch(context.Background(), components.DeferredCall{ComponentID: "echo", Method: "echo", EntityID: "e", Argument: []byte(`"refuse"`)})
	if msg, ok := components.IsCommandError(err); !ok || msg != "refused e" {
		t.Errorf("command error: got %v", err)
	}
}

// Typed handles invoke with typed arguments and replies, and the async form
// delivers the same outcome.
func TestEntityMethodInvoke(t *testing.T) {
	reg := components.NewRegistry()
	if err := reg.Register(echo{id: "echo"}); err != nil {
		t.Fatal(err)
	}
	client := components.NewClient(reg)
	m := components.NewEntityMethod[string, string]("echo", "echo")
	got, err := m.Invoke(context.Background(), client, "e2", "yo")
	if err != nil || got != "e2:yo" {
		t.Fatalf("invoke = %q, %v", got, err)
	}
	res := <-m.InvokeAsync(context.Background(), client, "e3", "yo")
	if res.Err != nil || res.Value != "e3:yo" {
		t.Fatalf("invoke async = %+v", res)
	}
	wrong := components.NewEntityMethod[string, int]("echo", "echo")
	if _, err := wrong.Invoke(context.Background(), client, "e", "x"); err == nil {
		t.Error("a handle whose reply type is wrong got no error")
	}
}

// Validate names every problem of a malformed call.
func TestDeferredCallValidate(t *testing.T) {
	err := components.DeferredCall{Argument: []byte("{")}.Validate()
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"componentId", "method", "argument"} {
		if !contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
