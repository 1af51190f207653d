package runtime_test

import (
	"sync"
	"testing"

	"github.com/trellis-go/trellis/internal/testkit/remotetest"
	trt "github.com/trellis-go/trellis/runtime"
)

// mapPlacement places entities by a table the test sets: the address of
// each entity's instance ("" for none); an entity at self is here.
type mapPlacement struct {
	self string
	mu   sync.Mutex
	at   map[string]string // entity id -> address
}

func (p *mapPlacement) Where(_, id string) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	addr := p.at[id]
	return addr, addr == p.self && addr != ""
}

func (p *mapPlacement) set(id, addr string) {
	p.mu.Lock()
	p.at[id] = addr
	p.mu.Unlock()
}

// placedNode is an instance with a placement of its own and the entity
// type whose entities hand what they get to a probe.
type placedNode struct {
	*remotetest.Node
	place  *mapPlacement
	region *trt.Sharding[string]
	got    *probe[string]
}

func newPlacedNode(t *testing.T, name string) *placedNode {
	n := &placedNode{}
	n.Node = remotetest.NewNodeWith(t, name, remotetest.Config{Placement: func(self string) trt.Placement {
		n.place = &mapPlacement{self: self, at: map[string]string{}}
		return n.place
	}})
	n.got = newProbe[string](t, n.Sys, "got")
	region, err := trt.InitSharding(n.Sys, trt.Entity[string]{Key: trt.NewEntityTypeKey[string]("placed"),
		Create: func(id string) trt.Behavior[string] {
			return trt.ReceiveFunc(func(_ *trt.Context[string], m string) { n.got.Ref.Tell(name + ":" + id + ":" + m) })
		}})
	if err != nil {
		t.Fatal(err)
	}
	n.region = region
	return n
}

// TestPlacementAcrossInstances: with a Placement, a message to an entity
// goes to the instance that owns it, in order; an instance that no longer
// owns it sends it on once, and after that second hop it is a dead letter,
// as it is at once when no owner is known: nothing waits. EntitiesLeaving
// stops the entities that leave, and only those.
func TestPlacementAcrossInstances(t *testing.T) {
	a, b, c := newPlacedNode(t, "a"), newPlacedNode(t, "b"), newPlacedNode(t, "c")
	all := []*placedNode{a, b, c}
	place := func(id string, at *placedNode) {
		for _, n := range all {
			n.place.set(id, at.Addr())
		}
	}

	place("x", b)
	for _, m := range []string{"1", "2", "3"} {
		a.region.Tell("x", m)
	}
	for _, want := range []string{"b:x:1", "b:x:2", "b:x:3"} {
		if got := b.got.Expect(t); got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
	}
	if a.region.Active() != 0 || b.region.Active() != 1 {
		t.Fatalf("entities running: a %d, b %d; want x on b only", a.region.Active(), b.region.Active())
	}

	// a still thinks x is on b; b knows it moved to c: one more hop.
	place("x", c)
	a.place.set("x", b.Addr())
	a.region.Tell("x", "4")
	if got := c.got.Expect(t); got != "c:x:4" {
		t.Fatalf("got %q, want c:x:4", got)
	}

	// a thinks b, b thinks c, c thinks a: after two hops a dead letter.
	a.place.set("x", b.Addr())
	c.place.set("x", a.Addr())
	before := c.Sys.RemoteDeadLetters()
	a.region.Tell("x", "5")
	eventually(t, "the message a dead letter on c after two hops", func() bool { return c.Sys.RemoteDeadLetters() == before+1 })

	// No owner known: a dead letter at once, on the sender.
	a.place.set("y", "")
	before = a.Sys.RemoteDeadLetters()
	a.region.Tell("y", "6")
	if got := a.Sys.RemoteDeadLetters(); got != before+1 {
		t.Fatalf("remote dead letters %d, want %d", got, before+1)
	}

	// Entities leaving b stop there; the others keep running.
	place("p", b)
	place("q", b)
	a.region.Tell("p", "7")
	a.region.Tell("q", "8")
	for range 2 {
		b.got.Expect(t)
	}
	eventually(t, "x, p and q running on b", func() bool { return b.region.Active() == 3 })
	place("p", c)
	b.Sys.EntitiesLeaving(func(_, id string) bool { return id == "p" })
	eventually(t, "p stopped on b", func() bool { return b.region.Active() == 2 })
	a.region.Tell("p", "9")
	if got := c.got.Expect(t); got != "c:p:9" {
		t.Fatalf("got %q, want c:p:9", got)
	}
	if b.region.Active() != 2 {
		t.Fatalf("%d entities on b, want x and q", b.region.Active())
	}
}
