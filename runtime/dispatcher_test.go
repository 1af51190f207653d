package runtime_test

import (
	"context"
	"errors"
	"testing"

	trt "github.com/trellis-go/trellis/runtime"
)

// An actor on a dispatcher of its own keeps working while every worker of
// the default dispatcher is blocked, for plain actors and sharded entities;
// Shutdown stops that dispatcher's workers too (goleak checks in TestMain).
func TestDispatcherIsolatesBlockingActors(t *testing.T) {
	sys := newSystem(t, trt.WithWorkers(1))
	io, err := sys.NewDispatcher("io", 2, 5)
	if err != nil {
		t.Fatal(err)
	}

	gate, entered := make(chan struct{}), make(chan struct{})
	blocker, err := trt.Spawn(sys, "blocker", func() trt.Behavior[int] {
		return trt.Receive[int](func(*trt.Context[int], int) { close(entered); <-gate })
	})
	if err != nil {
		t.Fatal(err)
	}
	defer close(gate)
	blocker.Tell(1)
	recv(t, entered) // the default dispatcher's only worker is now held

	got := make(chan string, 2)
	onIO, err := trt.Spawn(sys, "on-io", func() trt.Behavior[string] {
		return trt.Receive[string](func(_ *trt.Context[string], m string) { got <- m })
	}, trt.WithDispatcher(io))
	if err != nil {
		t.Fatal(err)
	}
	onIO.Tell("actor")
	if m := recv(t, got); m != "actor" {
		t.Fatalf("got %q", m)
	}

	shards, err := trt.InitSharding(sys, trt.Entity[string]{
		Key:        trt.NewEntityTypeKey[string]("io-entity"),
		Dispatcher: io,
		Create: func(id string) trt.Behavior[string] {
			return trt.Receive[string](func(_ *trt.Context[string], m string) { got <- id + ":" + m })
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	shards.EntityRef("e1").Tell("entity")
	if m := recv(t, got); m != "e1:entity" {
		t.Fatalf("got %q", m)
	}
}

// NewDispatcher refuses pools that could never run anything, and a system
// that is shut down.
func TestDispatcherErrors(t *testing.T) {
	sys := newSystem(t)
	tests := []struct {
		name       string // the case
		workers    int    // requested workers
		throughput int    // requested throughput
	}{
		{"no workers", 0, 5},
		{"no throughput", 2, 0},
	}
	for _, tc := range tests {
		if _, err := sys.NewDispatcher(tc.name, tc.workers, tc.throughput); err == nil {
			t.Errorf("%s: NewDispatcher(%d, %d) succeeded", tc.name, tc.workers, tc.throughput)
		}
	}
	if err := sys.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := sys.NewDispatcher("late", 1, 1); !errors.Is(err, trt.ErrSystemStopped) {
		t.Errorf("after Shutdown: got %v, want ErrSystemStopped", err)
	}
}
