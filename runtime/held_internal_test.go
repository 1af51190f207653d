package runtime

import (
	"sync"
	"testing"
	"time"
)

// Mail held for a postponing actor that stops becomes dead letters, and
// so does postponable mail sent after it has terminated.
func TestHeldMailAtStop(t *testing.T) {
	sys, a := startDirect(t)
	a.setPostpone(t, true)
	before := sys.DeadLetters()
	TellPostponable(a.ref, directMsg{n: 1})
	TellPostponable(a.ref, directMsg{n: 2})
	sys.Stop(a.ref)
	deadline := time.Now().Add(5 * time.Second)
	for !a.c.terminated() {
		if time.Now().After(deadline) {
			t.Fatal("the actor never terminated")
		}
		time.Sleep(time.Millisecond) // bounded poll: termination has no event to wait on here
	}
	TellPostponable(a.ref, directMsg{n: 3})
	if got := sys.DeadLetters() - before; got != 3 {
		t.Fatalf("%d dead letters, want 3 (two held at the stop, one after)", got)
	}
	if got := a.handledNow(); len(got) != 0 {
		t.Fatalf("handled %v, want nothing", got)
	}
}

// A restart ends postponing: the new incarnation has not asked for it, so
// postponable mail wakes it again.
func TestHeldMailAfterRestart(t *testing.T) {
	_, a := startDirect(t)
	a.setPostpone(t, true)
	a.ref.Tell(directMsg{boom: true})
	TellPostponable(a.ref, directMsg{n: 9})
	if got := recvWithin(t, a.handled); got != 9 {
		t.Fatalf("handled %d after the restart, want 9", got)
	}
}

// Senders of postponable and plain mail race with an actor that turns
// postponing on and off: once it stops postponing, every message has been
// or will be handled, none twice, and each sender's postponable mail in
// order.
func TestHeldMailNoLostWakeup(t *testing.T) {
	const n = 2000
	sys, _ := startDirect(t) // for its system and its shutdown
	type msg struct {
		from, seq int
		last      bool // stop postponing for good
	}
	done := make(chan map[int][]int, 1)
	total := 0
	ref, err := Spawn(sys, "held", func() Behavior[msg] {
		got := map[int][]int{}
		stopped := false
		return ReceiveFunc(func(ctx *Context[msg], m msg) {
			got[m.from] = append(got[m.from], m.seq)
			total++
			stopped = stopped || m.last
			ctx.PostponeWakeups(!stopped && total%3 != 0)
			if total == 3*n+1 {
				done <- got
			}
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	var senders sync.WaitGroup
	for from := range 3 {
		senders.Add(1)
		go func() {
			defer senders.Done()
			for seq := range n {
				if from == 2 {
					ref.Tell(msg{from: from, seq: seq}) // plain mail, which wakes it
				} else {
					TellPostponable(ref, msg{from: from, seq: seq})
				}
			}
		}()
	}
	senders.Wait()
	ref.Tell(msg{from: 3, last: true})
	got := recvWithin(t, done)
	for from := range 3 {
		if len(got[from]) != n {
			t.Fatalf("sender %d: %d handled, want %d", from, len(got[from]), n)
		}
		for i, seq := range got[from] {
			if seq != i {
				t.Fatalf("sender %d: message %d is %d, want in order", from, i, seq)
			}
		}
	}
}
