package outbox_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/trellis-go/trellis/samples/outbox"
	"github.com/trellis-go/trellis/trellistest"
)

// instance is one instance of the outbox service in a cluster test, with
// a mailbox of its own: whichever mails is the queue's owner.
type instance struct {
	ts *trellistest.Service
	m  *mailbox
}

// holdsMailed counts, over every mailbox, how often each hold's notice was
// mailed.
func holdsMailed(in ...*instance) map[string]int {
	seen := make(map[string]int)
	for _, i := range in {
		i.m.mu.Lock()
		for _, n := range i.m.sent {
			seen[n.Hold]++
		}
		i.m.mu.Unlock()
	}
	return seen
}

// change asks for a hold's change through ts and wants it accepted.
func change(t *testing.T, ts *trellistest.Service, hold string) {
	t.Helper()
	if resp := ts.Do(t, http.MethodPut, "/holds/"+hold+"/state/expired", nil); resp.Status != http.StatusAccepted {
		t.Fatalf("change %s: %d %s", hold, resp.Status, resp.Body)
	}
}

// owner is the instance that mailed something since its mailbox was last
// emptied, and the other.
func owner(t *testing.T, a, b *instance) (own, other *instance) {
	t.Helper()
	switch ca, cb := a.m.count(), b.m.count(); {
	case ca > 0 && cb == 0:
		return a, b
	case cb > 0 && ca == 0:
		return b, a
	default:
		t.Fatalf("mails on both instances (%d, %d): two owners, or none", ca, cb)
		return nil, nil
	}
}

// TestOutboxOnTwoInstances: on two instances of the service, a change
// accepted by either is mailed, by the instance that owns the queue (the
// other hands its notices over); after the owner stops gracefully, the
// other takes the queue over at once and nothing is mailed twice; when
// the owner is killed with notices stored but not yet mailed (its mail
// server was down), the other takes the queue over once the dead one's
// lease lapses and mails them, and the changes it accepted meanwhile
// (they waited for it): every notice is mailed, and no more twice than
// the flow-control window allows.
func TestOutboxOnTwoInstances(t *testing.T) {
	trellistest.Long(t)
	const perPhase = 10
	const window = 50 // delivery's default FlowControlWindow: what a crash may mail again
	a := &instance{m: &mailbox{}}
	a.ts = trellistest.StartInstances(t, 1, outbox.Setup(a.m))[0]
	b := &instance{m: &mailbox{}}
	b.ts = trellistest.JoinInstance(t, a.ts, outbox.Setup(b.m))
	all := []*instance{a, b}
	sent := 0
	accept := func(through ...*instance) {
		t.Helper()
		for i := range perPhase {
			change(t, through[i%len(through)].ts, fmt.Sprintf("h%d", sent))
			sent++
		}
	}
	phase := func(name string, through ...*instance) {
		t.Helper()
		accept(through...)
		trellistest.Eventually(t, 30*time.Second, name+": every notice mailed", func() bool {
			return len(holdsMailed(all...)) == sent
		})
	}

	phase("through both instances", a, b)
	own, other := owner(t, a, b)
	if twice := mailedTwice(holdsMailed(all...)); len(twice) > 0 {
		t.Fatalf("mailed twice without a fault: %v", twice)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if err := own.ts.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	phase("after the owner's graceful stop", other)
	if twice := mailedTwice(holdsMailed(all...)); len(twice) > 0 {
		t.Fatalf("mailed twice after a graceful stop: %v", twice)
	}

	back := &instance{m: &mailbox{}}
	back.ts = trellistest.JoinInstance(t, other.ts, outbox.Setup(back.m))
	all = append(all, back)
	phase("through the survivor and a new instance", other, back)
	if back.m.count() > 0 {
		t.Fatal("the new instance mailed while the survivor owned the queue")
	}

	other.m.pause()
	accept(other, back) // stored, not mailed
	other.ts.Kill()
	phase("after the owner was killed", back)
	for i := sent - 2*perPhase; i < sent-perPhase; i++ {
		if hold := fmt.Sprintf("h%d", i); holdsMailed(back)[hold] == 0 {
			t.Errorf("%s, stored before the kill, was not mailed by the survivor", hold)
		}
	}
	twice := mailedTwice(holdsMailed(all...))
	if len(twice) > window {
		t.Fatalf("%d notices mailed twice after a kill, more than the window of %d: %v", len(twice), window, twice)
	}
	t.Logf("%d notices, %d mailed again after the kill (at most %d allowed)", sent, len(twice), window)
}

// mailedTwice lists the holds mailed more than once.
func mailedTwice(seen map[string]int) []string {
	var out []string
	for hold, n := range seen {
		if n > 1 {
			out = append(out, hold)
		}
	}
	return out
}
