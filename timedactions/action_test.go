package timedactions_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/timedactions"
)

var (
	Jobs = timedactions.Define("jobs")

	// Run is done for "ok", fails with error(message) for "fail" and panics
	// for "panic".
	Run = timedactions.Method(Jobs, "run", func(ctx *timedactions.Ctx, what string) timedactions.Effect {
		switch what {
		case "fail":
			return ctx.Error("job %s failed", what)
		case "panic":
			panic("job panicked")
		case "nothing":
			return timedactions.Effect{}
		}
		return ctx.Done()
	})
)

// A timed action's outcome reaches its caller as done, a command error, or
// a failure, through deferred calls and the test kit alike.
func TestOutcomes(t *testing.T) {
	client := components.NewClient(components.NewRegistry())
	if _, err := Jobs.Start(client); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		arg        string // what the job is told
		wantErr    bool   // any error
		wantCmdErr string // the command error's message, when it is one
	}{
		{"ok", false, ""},
		{"fail", true, "job fail failed"},
		{"panic", true, ""},
		{"nothing", true, ""},
	}
	for _, tc := range tests {
		call, err := Run.Deferred(tc.arg)
		if err != nil {
			t.Fatal(err)
		}
		_, dispatchErr := client.Dispatch(context.Background(), call)
		tryErr := timedactions.Try(Jobs, Run, tc.arg, client)
		for name, err := range map[string]error{"dispatch": dispatchErr, "try": tryErr} {
			if (err != nil) != tc.wantErr {
				t.Errorf("%s(%s): err = %v", name, tc.arg, err)
			}
			msg, isCmd := components.IsCommandError(err)
			if tc.wantCmdErr != "" && (!isCmd || msg != tc.wantCmdErr) {
				t.Errorf("%s(%s): got %v, want command error %q", name, tc.arg, err, tc.wantCmdErr)
			}
			if tc.arg == "panic" && (isCmd || !strings.Contains(err.Error(), "panicked")) {
				t.Errorf("%s(panic): got %v, want a failure naming the panic", name, err)
			}
		}
	}
}

// Calls the action cannot take fail with distinct errors.
func TestBadCalls(t *testing.T) {
	client := components.NewClient(components.NewRegistry())
	if _, err := Jobs.Start(client); err != nil {
		t.Fatal(err)
	}
	if _, err := Jobs.Start(client); !errors.Is(err, components.ErrDuplicate) {
		t.Errorf("second start: %v", err)
	}
	tests := []struct {
		name string                  // the case
		call components.DeferredCall // what is dispatched
		want error                   // the error it must wrap
	}{
		{"argument no longer decodes", components.DeferredCall{ComponentID: "jobs", Method: "run", Argument: []byte(`12`)}, components.ErrBadArgument},
		{"unknown method", components.DeferredCall{ComponentID: "jobs", Method: "walk", Argument: []byte(`"ok"`)}, components.ErrUnknownMethod},
		{"an entity id", components.DeferredCall{ComponentID: "jobs", Method: "run", EntityID: "e", Argument: []byte(`"ok"`)}, components.ErrMissingEntityID},
	}
	for _, tc := range tests {
		if _, err := client.Dispatch(context.Background(), tc.call); !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.want)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Run.Invoke(ctx, client, "ok"); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}
