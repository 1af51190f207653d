package runtime_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	trt "github.com/trellis-go/trellis/runtime"
)

// TestStashCapacity pins that a stash takes messages up to its capacity and
// then refuses the next with an error wrapping ErrStashFull that names the
// capacity, keeping nothing of it.
func TestStashCapacity(t *testing.T) {
	tests := []struct {
		name     string // the case
		capacity int    // the stash's capacity
	}{
		{name: "zero", capacity: 0},
		{name: "one", capacity: 1},
		{name: "several", capacity: 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := trt.NewStash[int](tc.capacity)
			for i := range tc.capacity {
				if s.IsFull() {
					t.Fatalf("IsFull with %d of %d", i, tc.capacity)
				}
				if err := s.Stash(i); err != nil {
					t.Fatalf("Stash %d of %d: %v", i+1, tc.capacity, err)
				}
			}
			if !s.IsFull() {
				t.Fatal("IsFull = false at capacity")
			}
			err := s.Stash(99)
			if !errors.Is(err, trt.ErrStashFull) {
				t.Fatalf("Stash on a full stash = %v, want an error wrapping ErrStashFull", err)
			}
			if want := "capacity " + strconv.Itoa(tc.capacity); !strings.Contains(err.Error(), want) {
				t.Fatalf("error %q does not name the capacity (%q)", err, want)
			}
			if s.Len() != tc.capacity {
				t.Fatalf("Len = %d after a refused Stash, want %d", s.Len(), tc.capacity)
			}
			s.Clear()
			if s.Len() != 0 || (tc.capacity > 0 && s.IsFull()) {
				t.Fatalf("after Clear: Len = %d, IsFull = %v", s.Len(), s.IsFull())
			}
		})
	}
}

// stashMsg is the protocol of stashActor.
type stashMsg struct {
	op   string        // "data", "open", "hold"
	tag  string        // for data: reported when handled; a tag ending in "!" closes the actor after it is handled; one starting with "again" is stashed and unstashed once when first handled
	gate chan struct{} // for open and hold: wait until it is closed
}

// stashActor stashes data while closed; "open" opens it and unstashes.
type stashActor struct {
	stash  *trt.Stash[stashMsg]
	open   bool
	again  map[string]bool // "again" tags already stashed once
	events chan<- string
}

func (a *stashActor) Receive(ctx *trt.Context[stashMsg], m stashMsg) {
	switch m.op {
	case "hold":
		a.events <- "holding"
		<-m.gate
	case "open":
		if m.gate != nil {
			a.events <- "opening"
			<-m.gate
		}
		a.open = true
		a.stash.UnstashAll(ctx)
	case "data":
		switch {
		case !a.open:
			if err := a.stash.Stash(m); err != nil {
				a.events <- "error:" + err.Error()
			}
		case strings.HasPrefix(m.tag, "again") && !a.again[m.tag]:
			a.again[m.tag] = true
			if err := a.stash.Stash(m); err != nil {
				a.events <- "error:" + err.Error()
			}
			a.stash.UnstashAll(ctx)
		default:
			a.events <- m.tag
			if strings.HasSuffix(m.tag, "!") {
				a.open = false
			}
		}
	}
}

func newStashActor(t *testing.T, sys *trt.System) (trt.Ref[stashMsg], chan string) {
	t.Helper()
	events := make(chan string, 256)
	ref, err := trt.Spawn(sys, "stasher", func() trt.Behavior[stashMsg] {
		return &stashActor{stash: trt.NewStash[stashMsg](16), again: map[string]bool{}, events: events}
	})
	if err != nil {
		t.Fatalf("spawn: %v", err)
	}
	return ref, events
}

// stashExpect fails unless the next events are want.
func stashExpect(t *testing.T, events <-chan string, want ...string) {
	t.Helper()
	for i, w := range want {
		if got := recv(t, events); got != w {
			t.Fatalf("event %d = %q, want %q (all wanted: %q)", i, got, w, want)
		}
	}
}

func stashData(ref trt.Ref[stashMsg], tags ...string) {
	for _, tag := range tags {
		ref.Tell(stashMsg{op: "data", tag: tag})
	}
}

// TestStashUnstashOrder pins that UnstashAll delivers the stashed messages
// in the order they were stashed, before the mail already queued in the
// mailbox, wherever that mail waits.
func TestStashUnstashOrder(t *testing.T) {
	tests := []struct {
		name      string // the case
		sameBatch bool   // everything is queued before the actor runs (else: the rest comes while "open" is handled)
	}{
		{name: "rest told while unstashing"},
		{name: "rest queued with the stashed mail", sameBatch: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sys := newSystem(t)
			ref, events := newStashActor(t, sys)
			gate := make(chan struct{})
			if tc.sameBatch {
				ref.Tell(stashMsg{op: "hold", gate: gate})
				stashExpect(t, events, "holding")
				stashData(ref, "s1", "s2", "s3")
				ref.Tell(stashMsg{op: "open"})
				stashData(ref, "q1", "q2")
			} else {
				stashData(ref, "s1", "s2", "s3")
				ref.Tell(stashMsg{op: "open", gate: gate})
				stashExpect(t, events, "opening")
				stashData(ref, "q1", "q2")
			}
			close(gate)
			stashExpect(t, events, "s1", "s2", "s3", "q1", "q2")
		})
	}
}

// TestStashDuringUnstash pins that an actor can stash again while handling
// unstashed messages: what it stashes keeps its order, and unstashing while
// unstashed messages remain puts the new ones first.
func TestStashDuringUnstash(t *testing.T) {
	tests := []struct {
		name  string     // the case
		waves [][]string // tags told in turn, each followed by "open"
		want  []string   // the order the data is handled
	}{
		{
			name:  "closed again while unstashing",
			waves: [][]string{{"a", "b!", "c", "d"}, {"e"}},
			want:  []string{"a", "b!", "c", "d", "e"},
		},
		{
			name:  "unstashed again while unstashing",
			waves: [][]string{{"a", "again1", "b", "again2"}, {"c"}},
			want:  []string{"a", "again1", "b", "again2", "c"},
		},
		{
			name:  "both",
			waves: [][]string{{"a!", "again", "b"}, {"c!"}, {"d"}},
			want:  []string{"a!", "again", "b", "c!", "d"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sys := newSystem(t)
			ref, events := newStashActor(t, sys)
			for _, wave := range tc.waves {
				stashData(ref, wave...)
				ref.Tell(stashMsg{op: "open"})
			}
			stashExpect(t, events, tc.want...)
		})
	}
}
