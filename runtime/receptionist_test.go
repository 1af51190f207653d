package runtime_test

import (
	"slices"
	"strconv"
	"sync"
	"testing"

	trt "github.com/trellis-go/trellis/runtime"
)

// receptionOpKind is what one step of a receptionist test does.
type receptionOpKind int

const (
	receptionRegister   receptionOpKind = iota // Register the actor under the key
	receptionDeregister                        // Deregister the actor from the key
	receptionStop                              // stop the actor and wait until it has terminated
)

// receptionOp is one step of a receptionist test.
type receptionOp struct {
	kind  receptionOpKind
	actor string // name of the probe actor the step acts on
}

// receptionWorld is a system with probe actors named a, b, c and zz (all
// of message type string), each registered under receptionAlive so that a
// test can tell when one has fully terminated.
type receptionWorld struct {
	sys    *trt.System
	probes map[string]*probe[string]
}

// receptionAlive lists every live probe of a receptionWorld: its
// registrations are dropped, under the receptionist's lock, together with
// everything else the actor registered or subscribed, so seeing a probe
// leave it proves that the receptionist has forgotten the probe.
var receptionAlive = trt.NewServiceKey[string]("alive")

func newReceptionWorld(t *testing.T) *receptionWorld {
	t.Helper()
	w := &receptionWorld{sys: newSystem(t), probes: make(map[string]*probe[string])}
	for _, name := range []string{"a", "b", "c", "zz"} {
		p := newProbe[string](t, w.sys, name)
		trt.Register(w.sys, receptionAlive, p.Ref)
		w.probes[name] = p
	}
	return w
}

// apply runs op on key.
func (w *receptionWorld) apply(t *testing.T, key trt.ServiceKey[string], op receptionOp) {
	t.Helper()
	ref := w.probes[op.actor].Ref
	switch op.kind {
	case receptionRegister:
		trt.Register(w.sys, key, ref)
	case receptionDeregister:
		trt.Deregister(w.sys, key, ref)
	case receptionStop:
		w.sys.Stop(ref)
		eventually(t, op.actor+" has terminated", func() bool {
			return !slices.Contains(receptionPaths(trt.Find(w.sys, receptionAlive)), "/user/"+op.actor)
		})
	}
}

// receptionPaths are the paths of refs, in their order.
func receptionPaths[T any](refs []trt.Ref[T]) []string {
	out := make([]string, 0, len(refs))
	for _, ref := range refs {
		out = append(out, ref.Path())
	}
	return out
}

// receptionUser are the paths of top-level actors with these names.
func receptionUser(names ...string) []string {
	out := make([]string, 0, len(names))
	for _, n := range names {
		out = append(out, "/user/"+n)
	}
	return out
}

// TestReceptionistFind pins down what Find returns after Register and
// Deregister: each live registered ref once, sorted by path.
func TestReceptionistFind(t *testing.T) {
	r := func(a string) receptionOp { return receptionOp{receptionRegister, a} }
	d := func(a string) receptionOp { return receptionOp{receptionDeregister, a} }
	s := func(a string) receptionOp { return receptionOp{receptionStop, a} }
	cases := []struct {
		name string        // what the case shows
		ops  []receptionOp // applied in order to one key
		want []string      // names of the actors Find must return, in order
	}{
		{"register then find", []receptionOp{r("a")}, []string{"a"}},
		{"nothing registered", nil, []string{}},
		{"register twice counts once", []receptionOp{r("a"), r("a")}, []string{"a"}},
		{"register twice then deregister once removes", []receptionOp{r("a"), r("a"), d("a")}, []string{}},
		{"deregister removes only that ref", []receptionOp{r("a"), r("b"), d("a")}, []string{"b"}},
		{"deregister of an unregistered ref does nothing", []receptionOp{r("a"), d("b")}, []string{"a"}},
		{"register again after deregister", []receptionOp{r("a"), d("a"), r("a")}, []string{"a"}},
		{"sorted by path, not by registration", []receptionOp{r("c"), r("a"), r("b")}, []string{"a", "b", "c"}},
		{"a stopped actor is removed", []receptionOp{r("a"), r("b"), s("a")}, []string{"b"}},
		{"register of a stopped actor does nothing", []receptionOp{s("a"), r("a"), r("b")}, []string{"b"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newReceptionWorld(t)
			key := trt.NewServiceKey[string]("svc")
			for _, op := range tc.ops {
				w.apply(t, key, op)
			}
			if got, want := receptionPaths(trt.Find(w.sys, key)), receptionUser(tc.want...); !slices.Equal(got, want) {
				t.Fatalf("Find = %v, want %v", got, want)
			}
		})
	}
}

// TestReceptionistSubscribe pins down the listings a subscriber gets: the
// current one at once, then exactly one per change, in the order of the
// changes, and none for a step that changes nothing.
func TestReceptionistSubscribe(t *testing.T) {
	r := func(a string) receptionOp { return receptionOp{receptionRegister, a} }
	d := func(a string) receptionOp { return receptionOp{receptionDeregister, a} }
	s := func(a string) receptionOp { return receptionOp{receptionStop, a} }
	cases := []struct {
		name   string        // what the case shows
		before []receptionOp // applied before Subscribe
		ops    []receptionOp // applied after Subscribe, in order
		want   [][]string    // listings the subscriber must get, as actor names, in order
	}{
		{
			name: "current listing at once, then one per change",
			ops:  []receptionOp{r("a"), r("b"), d("a"), r("c")},
			want: [][]string{{}, {"a"}, {"a", "b"}, {"b"}, {"b", "c"}},
		},
		{
			name:   "a late subscriber starts from the current listing",
			before: []receptionOp{r("b"), r("a")},
			ops:    []receptionOp{d("b")},
			want:   [][]string{{"a", "b"}, {"a"}},
		},
		{
			name: "steps that change nothing publish nothing",
			ops:  []receptionOp{r("a"), r("a"), d("b"), r("b")},
			want: [][]string{{}, {"a"}, {"a", "b"}},
		},
		{
			name: "a registered actor that stops is removed and published",
			ops:  []receptionOp{r("a"), r("b"), s("a")},
			want: [][]string{{}, {"a"}, {"a", "b"}, {"b"}},
		},
		{
			name: "registering a stopped actor publishes nothing",
			ops:  []receptionOp{r("b"), s("a"), r("a")},
			want: [][]string{{}, {"b"}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newReceptionWorld(t)
			key := trt.NewServiceKey[string]("svc")
			sub := newProbe[trt.Listing[string]](t, w.sys, "subscriber")
			for _, op := range tc.before {
				w.apply(t, key, op)
			}
			trt.Subscribe(w.sys, key, sub.Ref)
			for _, op := range tc.ops {
				w.apply(t, key, op)
			}
			// A last change whose listing is recognisable: listings reach a
			// subscriber in order, so once it arrives every earlier one has.
			w.apply(t, key, r("zz"))
			var got [][]string
			for {
				l := sub.Expect(t)
				if l.Key != key {
					t.Fatalf("listing for key %v, want %v", l.Key, key)
				}
				paths := receptionPaths(l.Refs)
				if slices.Contains(paths, "/user/zz") {
					if want := append(receptionUser(tc.want[len(tc.want)-1]...), "/user/zz"); !slices.Equal(paths, want) {
						t.Fatalf("last listing = %v, want %v", paths, want)
					}
					break
				}
				got = append(got, paths)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %d listings %v, want %d %v", len(got), got, len(tc.want), tc.want)
			}
			for i := range got {
				if want := receptionUser(tc.want[i]...); !slices.Equal(got[i], want) {
					t.Fatalf("listing %d = %v, want %v (all: %v)", i, got[i], want, got)
				}
			}
		})
	}
}

// TestReceptionistKeyTypes pins down that a key is its id and its message
// type: keys with the same id and different types are separate services.
func TestReceptionistKeyTypes(t *testing.T) {
	sys := newSystem(t)
	strKey := trt.NewServiceKey[string]("svc")
	intKey := trt.NewServiceKey[int]("svc")
	if strKey.ID() != "svc" || intKey.ID() != "svc" {
		t.Fatalf("IDs = %q, %q, want svc", strKey.ID(), intKey.ID())
	}
	s := newProbe[string](t, sys, "s")
	i := newProbe[int](t, sys, "i")
	i2 := newProbe[int](t, sys, "i2")
	intSub := newProbe[trt.Listing[int]](t, sys, "int-subscriber")

	trt.Subscribe(sys, intKey, intSub.Ref)
	if l := intSub.Expect(t); len(l.Refs) != 0 {
		t.Fatalf("first int listing = %v, want empty", receptionPaths(l.Refs))
	}
	trt.Register(sys, strKey, s.Ref)
	if got := trt.Find(sys, intKey); len(got) != 0 {
		t.Fatalf("int key finds %v after registering under the string key", receptionPaths(got))
	}
	trt.Register(sys, intKey, i.Ref)
	if got, want := receptionPaths(trt.Find(sys, strKey)), receptionUser("s"); !slices.Equal(got, want) {
		t.Fatalf("string key finds %v, want %v", got, want)
	}
	if got, want := receptionPaths(trt.Find(sys, intKey)), receptionUser("i"); !slices.Equal(got, want) {
		t.Fatalf("int key finds %v, want %v", got, want)
	}
	// The string registration must not have been published to the int
	// subscriber: its next listing is the one of the int registration.
	if got, want := receptionPaths(intSub.Expect(t).Refs), receptionUser("i"); !slices.Equal(got, want) {
		t.Fatalf("int listing = %v, want %v", got, want)
	}
	trt.Deregister(sys, strKey, s.Ref)
	trt.Register(sys, intKey, i2.Ref)
	if got, want := receptionPaths(intSub.Expect(t).Refs), receptionUser("i", "i2"); !slices.Equal(got, want) {
		t.Fatalf("int listing after the string deregister = %v, want %v", got, want)
	}
	if got := trt.Find(sys, strKey); len(got) != 0 {
		t.Fatalf("string key finds %v after deregister", receptionPaths(got))
	}
}

// TestReceptionistStoppedSubscriberIsDropped pins down that a subscriber
// that stops gets nothing more: later changes make no dead letters.
func TestReceptionistStoppedSubscriberIsDropped(t *testing.T) {
	cases := []struct {
		name      string // what the case shows
		stopFirst bool   // stop the subscriber before Subscribe rather than after
	}{
		{"subscriber stops after subscribing", false},
		{"subscribing an already stopped actor", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sys := newSystem(t)
			key := trt.NewServiceKey[string]("svc")
			// The subscriber also registers itself under subs, so the test
			// can see when the receptionist has forgotten it.
			subs := trt.NewServiceKey[trt.Listing[string]]("subscribers")
			sub := newProbe[trt.Listing[string]](t, sys, "subscriber")
			trt.Register(sys, subs, sub.Ref)
			stop := func() {
				sys.Stop(sub.Ref)
				eventually(t, "the subscriber is forgotten", func() bool { return len(trt.Find(sys, subs)) == 0 })
			}
			if tc.stopFirst {
				stop()
				trt.Subscribe(sys, key, sub.Ref)
			} else {
				trt.Subscribe(sys, key, sub.Ref)
				if l := sub.Expect(t); len(l.Refs) != 0 {
					t.Fatalf("first listing = %v, want empty", receptionPaths(l.Refs))
				}
				stop()
			}
			a := newProbe[string](t, sys, "a")
			before := sys.DeadLetters()
			trt.Register(sys, key, a.Ref)
			if got, want := receptionPaths(trt.Find(sys, key)), receptionUser("a"); !slices.Equal(got, want) {
				t.Fatalf("Find = %v, want %v", got, want)
			}
			// Register publishes synchronously, so a listing sent to the
			// stopped subscriber would already be counted.
			if after := sys.DeadLetters(); after != before {
				t.Fatalf("dead letters went from %d to %d: the stopped subscriber was told", before, after)
			}
		})
	}
}

// TestReceptionistRegisterRacingStop pins down that an actor registered
// while it stops is never left listed after it has terminated.
func TestReceptionistRegisterRacingStop(t *testing.T) {
	const actors = 200
	sys := newSystem(t)
	key := trt.NewServiceKey[int]("racing")
	var wg sync.WaitGroup
	for i := range actors {
		ref, err := trt.Spawn(sys, "r"+strconv.Itoa(i), func() trt.Behavior[int] {
			return trt.ReceiveFunc(func(*trt.Context[int], int) {})
		})
		if err != nil {
			t.Fatalf("spawn: %v", err)
		}
		wg.Add(2)
		go func() { defer wg.Done(); trt.Register(sys, key, ref) }()
		go func() { defer wg.Done(); sys.Stop(ref) }()
	}
	// Every Register has returned: whatever they listed must go away as
	// the actors terminate.
	wg.Wait()
	eventually(t, "every stopped actor is unlisted", func() bool { return len(trt.Find(sys, key)) == 0 })
}
