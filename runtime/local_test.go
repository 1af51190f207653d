package runtime_test

import (
	"context"
	"testing"

	trt "github.com/trellis-go/trellis/runtime"
)

// TestIsLocal: only refs that reach an actor of the same System are local;
// another System's actors are not, even in the same process, and neither
// is an ask's reply address, which reaches no actor.
func TestIsLocal(t *testing.T) {
	sys, other := newSystem(t), newSystem(t)
	tests := []struct {
		name string                        // the kind of ref
		ref  func(t *testing.T) trt.AnyRef // makes the ref
		want bool                          // whether it is local to sys
	}{
		{name: "own actor", want: true, ref: func(t *testing.T) trt.AnyRef { return newProbe[int](t, sys, "").Ref }},
		{name: "adapter of own actor", want: true, ref: func(t *testing.T) trt.AnyRef { return adapterOf(t, sys) }},
		{name: "stopped own actor", want: true, ref: func(t *testing.T) trt.AnyRef { return stoppedActor(t, sys) }},
		{name: "own sharded entity", want: true, ref: func(t *testing.T) trt.AnyRef { return entityOf(t, sys) }},
		{name: "another system's actor", ref: func(t *testing.T) trt.AnyRef { return newProbe[int](t, other, "").Ref }},
		{name: "adapter of another system's actor", ref: func(t *testing.T) trt.AnyRef { return adapterOf(t, other) }},
		{name: "another system's sharded entity", ref: func(t *testing.T) trt.AnyRef { return entityOf(t, other) }},
		{name: "Ask reply address", ref: func(t *testing.T) trt.AnyRef { return askReplyRef(t, sys) }},
		{name: "AskFrom reply address", ref: func(t *testing.T) trt.AnyRef { return askFromReplyRef(t, sys) }},
		{name: "nil", ref: func(*testing.T) trt.AnyRef { return nil }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ref := tt.ref(t)
			if got := trt.IsLocal(sys, ref); got != tt.want {
				t.Fatalf("IsLocal(%s) = %t, want %t", pathOf(ref), got, tt.want)
			}
		})
	}
	if trt.IsLocal(nil, newProbe[int](t, sys, "").Ref) {
		t.Fatal("IsLocal(nil system, an actor) = true, want false")
	}
}

func pathOf(ref trt.AnyRef) string {
	if ref == nil {
		return "nil"
	}
	return ref.Path()
}

// adapterOf returns a MessageAdapter of a new actor of sys.
func adapterOf(t *testing.T, sys *trt.System) trt.AnyRef {
	t.Helper()
	made := make(chan trt.Ref[string], 1)
	_, err := trt.Spawn(sys, "", func() trt.Behavior[int] {
		return trt.Funcs[int]{Signal: func(ctx *trt.Context[int], s trt.Signal) {
			if _, ok := s.(trt.Started); ok {
				made <- trt.MessageAdapter(ctx, func(s string) int { return len(s) })
			}
		}}
	})
	if err != nil {
		t.Fatalf("spawn: %v", err)
	}
	return recv(t, made)
}

// stoppedActor returns the ref of an actor of sys that has stopped.
func stoppedActor(t *testing.T, sys *trt.System) trt.AnyRef {
	t.Helper()
	p := newProbe[int](t, sys, "")
	done := lifecycleWatch(t, sys, p.Ref)
	sys.Stop(p.Ref)
	recv(t, done)
	return p.Ref
}

// entityOf returns the ref of an entity of a sharding region of sys.
func entityOf(t *testing.T, sys *trt.System) trt.AnyRef {
	t.Helper()
	region, err := trt.InitSharding(sys, trt.Entity[int]{
		Key:    trt.NewEntityTypeKey[int]("local"),
		Create: func(string) trt.Behavior[int] { return trt.ReceiveFunc(func(*trt.Context[int], int) {}) },
	})
	if err != nil {
		t.Fatalf("init sharding: %v", err)
	}
	return region.EntityRef("e1")
}

// askReplyRef returns the reply address of an Ask from plain Go code, once
// the ask is answered.
func askReplyRef(t *testing.T, sys *trt.System) trt.AnyRef {
	t.Helper()
	p := newProbe[trt.Ref[int]](t, sys, "")
	asked := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		_, err := trt.Ask(ctx, p.Ref, func(r trt.Ref[int]) trt.Ref[int] { return r })
		asked <- err
	}()
	r := p.Expect(t)
	r.Tell(1)
	if err := recv(t, asked); err != nil {
		t.Fatalf("ask: %v", err)
	}
	return r
}

// askFromReplyRef returns the reply address of an actor's AskFrom, once the
// ask is answered.
func askFromReplyRef(t *testing.T, sys *trt.System) trt.AnyRef {
	t.Helper()
	p := newProbe[trt.Ref[int]](t, sys, "")
	answered := make(chan error, 1)
	_, err := trt.Spawn(sys, "", func() trt.Behavior[error] {
		return trt.Funcs[error]{
			Signal: func(ctx *trt.Context[error], s trt.Signal) {
				if _, ok := s.(trt.Started); ok {
					trt.AskFrom(ctx, p.Ref, waitLimit, func(r trt.Ref[int]) trt.Ref[int] { return r },
						func(_ int, err error) error { return err })
				}
			},
			Message: func(_ *trt.Context[error], err error) { answered <- err },
		}
	})
	if err != nil {
		t.Fatalf("spawn: %v", err)
	}
	r := p.Expect(t)
	r.Tell(1)
	if err := recv(t, answered); err != nil {
		t.Fatalf("ask: %v", err)
	}
	return r
}
