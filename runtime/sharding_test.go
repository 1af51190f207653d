package runtime_test

import (
	"context"
	"errors"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	trt "github.com/trellis-go/trellis/runtime"
)

// shardingCmd is the message of the test entities.
type shardingCmd struct {
	n        int  // echoed in the event, to check order
	stopSelf bool // the entity stops itself after handling it
	fail     bool // the entity panics instead of handling it
}

// shardingEvent is what a test entity reports for each message it handles.
type shardingEvent struct {
	id          string
	incarnation int // 1 for the first Create of the id, 2 for the next, …
	n           int // the message's n
	seen        int // messages this incarnation has handled, this one included
}

// shardingEntities makes the test entities and records what they do.
type shardingEntities struct {
	mu      sync.Mutex
	created map[string]int     // Create calls per id
	events  chan shardingEvent // one per handled message
	stopped chan string        // an entity's id when one of its incarnations handles Stopped
	// release, when not nil, holds every Stopped handler until it is
	// closed, so a test can act while an entity is stopping.
	release chan struct{}
}

func newShardingEntities() *shardingEntities {
	return &shardingEntities{
		created: make(map[string]int),
		events:  make(chan shardingEvent, 1024),
		stopped: make(chan string, 64),
	}
}

// holdStopped makes Stopped handlers wait until the returned function is
// called; the test's cleanup calls it too, before the system shuts down.
func (e *shardingEntities) holdStopped(t *testing.T) (release func()) {
	e.release = make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(e.release) }) }
	t.Cleanup(release)
	return release
}

// create is the Entity.Create of the test entities.
func (e *shardingEntities) create(id string) trt.Behavior[shardingCmd] {
	e.mu.Lock()
	e.created[id]++
	incarnation := e.created[id]
	e.mu.Unlock()
	seen := 0
	return trt.Funcs[shardingCmd]{
		Message: func(ctx *trt.Context[shardingCmd], m shardingCmd) {
			if m.fail {
				panic("shardingCmd.fail")
			}
			seen++
			e.events <- shardingEvent{id: id, incarnation: incarnation, n: m.n, seen: seen}
			if m.stopSelf {
				ctx.Stop(ctx.Self())
			}
		},
		Signal: func(_ *trt.Context[shardingCmd], s trt.Signal) {
			if _, ok := s.(trt.Stopped); ok {
				e.stopped <- id
				if e.release != nil {
					<-e.release
				}
			}
		},
	}
}

func (e *shardingEntities) createdCount(id string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.created[id]
}

// expect checks that the next events are want, in order.
func (e *shardingEntities) expect(t *testing.T, want ...shardingEvent) {
	t.Helper()
	for i, w := range want {
		if got := recv(t, e.events); got != w {
			t.Fatalf("event %d = %+v, want %+v", i, got, w)
		}
	}
}

// shardingInit starts sharding of the test entities on sys.
func shardingInit(t *testing.T, sys *trt.System, e *shardingEntities, passivateAfter time.Duration) *trt.Sharding[shardingCmd] {
	t.Helper()
	s, err := trt.InitSharding(sys, trt.Entity[shardingCmd]{
		Key:            trt.NewEntityTypeKey[shardingCmd]("test"),
		Create:         e.create,
		PassivateAfter: passivateAfter,
	})
	if err != nil {
		t.Fatalf("InitSharding: %v", err)
	}
	return s
}

// shardingTimerArmed waits until the fake clock has at least n pending timers.
func shardingTimerArmed(t *testing.T, fc *clockwork.FakeClock, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := fc.BlockUntilContext(ctx, n); err != nil {
		t.Fatalf("waiting for %d pending timers: %v", n, err)
	}
}

// TestShardingEntityLifecycle pins down that an entity starts on its first
// message (one Create per id), handles its messages in order with its own
// state, and that Active counts the running entities.
func TestShardingEntityLifecycle(t *testing.T) {
	sys := newSystem(t, trt.WithClock(clockwork.NewFakeClock()))
	ents := newShardingEntities()
	s := shardingInit(t, sys, ents, 0)

	a, b := s.EntityRef("a"), s.EntityRef("b")
	if got, want := a.Path(), "/system/sharding/test/a"; got != want {
		t.Fatalf("path = %q, want %q", got, want)
	}
	if s.Active() != 0 || ents.createdCount("a") != 0 {
		t.Fatalf("an entity started before its first message: Active %d, Create calls %d", s.Active(), ents.createdCount("a"))
	}
	for _, m := range []struct {
		to trt.Ref[shardingCmd] // the entity told
		n  int                  // the message's n
	}{{a, 1}, {b, 1}, {a, 2}, {a, 3}, {b, 2}} {
		m.to.Tell(shardingCmd{n: m.n})
	}
	got := map[string][]shardingEvent{}
	for range 5 {
		ev := recv(t, ents.events)
		got[ev.id] = append(got[ev.id], ev)
	}
	want := map[string][]shardingEvent{
		"a": {{"a", 1, 1, 1}, {"a", 1, 2, 2}, {"a", 1, 3, 3}},
		"b": {{"b", 1, 1, 1}, {"b", 1, 2, 2}},
	}
	for id, evs := range want {
		if len(got[id]) != len(evs) {
			t.Fatalf("entity %s handled %+v, want %+v", id, got[id], evs)
		}
		for i := range evs {
			if got[id][i] != evs[i] {
				t.Fatalf("entity %s handled %+v, want %+v", id, got[id], evs)
			}
		}
		if n := ents.createdCount(id); n != 1 {
			t.Fatalf("Create(%q) called %d times, want 1", id, n)
		}
	}
	if n := s.Active(); n != 2 {
		t.Fatalf("Active = %d, want 2", n)
	}
}

// TestShardingPassivation pins down when an idle entity is passivated:
// after PassivateAfter without a message (zero meaning the default), never
// for a negative PassivateAfter; and that the next message then starts a
// fresh incarnation.
func TestShardingPassivation(t *testing.T) {
	cases := []struct {
		name           string        // what the case shows
		passivateAfter time.Duration // Entity.PassivateAfter
		idle           time.Duration // how far the clock moves with no message
		wantStop       bool          // whether the entity must be passivated
	}{
		{"idle for PassivateAfter", 10 * time.Second, 10 * time.Second, true},
		{"idle for longer", 10 * time.Second, time.Hour, true},
		{"zero is DefaultPassivateAfter", 0, trt.DefaultPassivateAfter, true},
		{"idle just under PassivateAfter", 10 * time.Second, 10*time.Second - time.Nanosecond, false},
		{"zero: just under DefaultPassivateAfter", 0, trt.DefaultPassivateAfter - time.Nanosecond, false},
		{"negative never passivates", -1, 1000 * time.Hour, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fc := clockwork.NewFakeClock()
			sys := newSystem(t, trt.WithClock(fc))
			ents := newShardingEntities()
			s := shardingInit(t, sys, ents, tc.passivateAfter)
			ref := s.EntityRef("e")

			ref.Tell(shardingCmd{n: 1})
			ents.expect(t, shardingEvent{"e", 1, 1, 1})
			if tc.passivateAfter >= 0 {
				shardingTimerArmed(t, fc, 1)
			}
			fc.Advance(tc.idle)

			if tc.wantStop {
				if id := recv(t, ents.stopped); id != "e" {
					t.Fatalf("stopped %q, want e", id)
				}
				eventually(t, "Active drops to 0", func() bool { return s.Active() == 0 })
				ref.Tell(shardingCmd{n: 2})
				ents.expect(t, shardingEvent{"e", 2, 2, 1})
				if n := ents.createdCount("e"); n != 2 {
					t.Fatalf("Create called %d times, want 2", n)
				}
			} else {
				// No timer was due, so nothing is under way: the entity
				// must still be the first incarnation, with its state.
				ref.Tell(shardingCmd{n: 2})
				ents.expect(t, shardingEvent{"e", 1, 2, 2})
				if n := ents.createdCount("e"); n != 1 {
					t.Fatalf("Create called %d times, want 1", n)
				}
				select {
				case id := <-ents.stopped:
					t.Fatalf("entity %s stopped", id)
				default:
				}
			}
			if n := s.Active(); n != 1 {
				t.Fatalf("Active = %d, want 1", n)
			}
		})
	}
}

// TestShardingBusyEntityIsNotPassivated pins down that PassivateAfter is
// measured from the last message, not from the start: an entity that gets
// a message more often than that keeps running, and is passivated once
// the messages stop.
func TestShardingBusyEntityIsNotPassivated(t *testing.T) {
	const (
		after = 10 * time.Second
		step  = 4 * time.Second // less than after, more than after/3
		steps = 10
	)
	fc := clockwork.NewFakeClock()
	sys := newSystem(t, trt.WithClock(fc))
	ents := newShardingEntities()
	s := shardingInit(t, sys, ents, after)
	ref := s.EntityRef("busy")

	ref.Tell(shardingCmd{n: 0})
	ents.expect(t, shardingEvent{"busy", 1, 0, 1})
	for i := 1; i <= steps; i++ {
		// The idle timer is pending again (a fired one has been handled
		// and re-armed), so this advance fires it whenever it is due.
		shardingTimerArmed(t, fc, 1)
		fc.Advance(step)
		ref.Tell(shardingCmd{n: i})
		ents.expect(t, shardingEvent{"busy", 1, i, i + 1})
	}
	select {
	case id := <-ents.stopped:
		t.Fatalf("busy entity %s was passivated", id)
	default:
	}
	if n := ents.createdCount("busy"); n != 1 {
		t.Fatalf("Create called %d times, want 1", n)
	}
	// The watch still works: idle for after from the last message, it stops.
	shardingTimerArmed(t, fc, 1)
	fc.Advance(after)
	if id := recv(t, ents.stopped); id != "busy" {
		t.Fatalf("stopped %q, want busy", id)
	}
}

// TestShardingNoMessageLostWhileStopping pins down that messages sent
// while an entity is stopping (passivated, or stopped by itself) wait and
// go, in order, to its next incarnation; and that a stopped entity is
// started again by its next message.
func TestShardingNoMessageLostWhileStopping(t *testing.T) {
	cases := []struct {
		name      string // what the case shows
		passivate bool   // stop by passivation; otherwise the entity stops itself
		during    bool   // send while the Stopped handler runs; otherwise once Active() is 0
	}{
		{"passivated, messages while stopping", true, true},
		{"passivated, messages after it stopped", true, false},
		{"stopped itself, messages while stopping", false, true},
		{"stopped itself, messages after it stopped", false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			const after = 10 * time.Second
			fc := clockwork.NewFakeClock()
			sys := newSystem(t, trt.WithClock(fc), trt.WithWorkers(4))
			ents := newShardingEntities()
			release := ents.holdStopped(t)
			s := shardingInit(t, sys, ents, after)
			ref := s.EntityRef("e")

			ref.Tell(shardingCmd{n: 1, stopSelf: !tc.passivate})
			ents.expect(t, shardingEvent{"e", 1, 1, 1})
			if tc.passivate {
				shardingTimerArmed(t, fc, 1)
				fc.Advance(after)
			}
			// The first incarnation is now in its Stopped handler, held.
			if id := recv(t, ents.stopped); id != "e" {
				t.Fatalf("stopped %q, want e", id)
			}
			const msgs = 5
			send := func() {
				for n := 2; n < 2+msgs; n++ {
					ref.Tell(shardingCmd{n: n})
				}
			}
			if tc.during {
				send()
				if n := s.Active(); n != 1 {
					t.Fatalf("Active = %d while stopping with mail waiting, want 1", n)
				}
				release()
			} else {
				release()
				eventually(t, "Active drops to 0", func() bool { return s.Active() == 0 })
				send()
			}
			for n := 2; n < 2+msgs; n++ {
				ents.expect(t, shardingEvent{"e", 2, n, n - 1})
			}
			if n := ents.createdCount("e"); n != 2 {
				t.Fatalf("Create called %d times, want 2", n)
			}
			if n := s.Active(); n != 1 {
				t.Fatalf("Active = %d, want 1", n)
			}
			if n := sys.DeadLetters(); n != 0 {
				t.Fatalf("%d dead letters, want none", n)
			}
		})
	}
}

// TestShardingPassivationAfterRestart pins down that an entity restarted
// after a failure is still passivated when idle.
func TestShardingPassivationAfterRestart(t *testing.T) {
	const after = 10 * time.Second
	fc := clockwork.NewFakeClock()
	sys := newSystem(t, trt.WithClock(fc))
	ents := newShardingEntities()
	s := shardingInit(t, sys, ents, after)
	ref := s.EntityRef("e")

	ref.Tell(shardingCmd{fail: true}) // a first failure restarts at once
	ref.Tell(shardingCmd{n: 1})
	ents.expect(t, shardingEvent{"e", 2, 1, 1}) // Create made the restarted behavior
	shardingTimerArmed(t, fc, 1)
	fc.Advance(after)
	if id := recv(t, ents.stopped); id != "e" {
		t.Fatalf("stopped %q, want e", id)
	}
	eventually(t, "Active drops to 0", func() bool { return s.Active() == 0 })
}

// TestShardingInitErrors pins down which InitSharding calls fail: a type
// name already in use (whatever the message type), a nil Create, and any
// after Shutdown; and that distinct names do not clash.
func TestShardingInitErrors(t *testing.T) {
	initInt := func(sys *trt.System, name string) error {
		_, err := trt.InitSharding(sys, trt.Entity[int]{
			Key:    trt.NewEntityTypeKey[int](name),
			Create: func(string) trt.Behavior[int] { return trt.ReceiveFunc(func(*trt.Context[int], int) {}) },
		})
		return err
	}
	initOrders := func(t *testing.T, sys *trt.System) {
		if err := initInt(sys, "orders"); err != nil {
			t.Fatalf("first InitSharding: %v", err)
		}
	}
	cases := []struct {
		name    string                              // what the case shows
		setup   func(t *testing.T, sys *trt.System) // runs first
		init    func(sys *trt.System) error         // the InitSharding call checked
		wantErr bool                                // whether it must fail
		is      error                               // when not nil, the error must wrap it
	}{
		{
			name:  "distinct type names",
			setup: initOrders,
			init:  func(sys *trt.System) error { return initInt(sys, "carts") },
		},
		{
			name:    "same type name twice",
			setup:   initOrders,
			init:    func(sys *trt.System) error { return initInt(sys, "orders") },
			wantErr: true,
		},
		{
			name:  "same type name, other message type",
			setup: initOrders,
			init: func(sys *trt.System) error {
				_, err := trt.InitSharding(sys, trt.Entity[string]{
					Key:    trt.NewEntityTypeKey[string]("orders"),
					Create: func(string) trt.Behavior[string] { return trt.ReceiveFunc(func(*trt.Context[string], string) {}) },
				})
				return err
			},
			wantErr: true,
		},
		{
			name:  "nil Create",
			setup: func(*testing.T, *trt.System) {},
			init: func(sys *trt.System) error {
				_, err := trt.InitSharding(sys, trt.Entity[int]{Key: trt.NewEntityTypeKey[int]("orders")})
				return err
			},
			wantErr: true,
		},
		{
			name: "after Shutdown",
			setup: func(t *testing.T, sys *trt.System) {
				if err := sys.Shutdown(context.Background()); err != nil {
					t.Fatalf("shutdown: %v", err)
				}
			},
			init:    func(sys *trt.System) error { return initInt(sys, "orders") },
			wantErr: true,
			is:      trt.ErrSystemStopped,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sys := newSystem(t)
			tc.setup(t, sys)
			err := tc.init(sys)
			if (err != nil) != tc.wantErr {
				t.Fatalf("InitSharding error = %v, want error: %v", err, tc.wantErr)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Fatalf("InitSharding error = %v, want one wrapping %v", err, tc.is)
			}
		})
	}
}

// TestShardingShutdown pins down that Shutdown stops every entity (each
// handles Stopped) and that later messages are dead letters that start
// nothing.
func TestShardingShutdown(t *testing.T) {
	sys := newSystem(t, trt.WithClock(clockwork.NewFakeClock()))
	ents := newShardingEntities()
	s := shardingInit(t, sys, ents, 0)
	ids := []string{"a", "b", "c"}
	for i, id := range ids {
		s.EntityRef(id).Tell(shardingCmd{n: i})
	}
	for range ids {
		recv(t, ents.events)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := sys.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	// Shutdown has returned, so every Stopped handler has run.
	stopped := map[string]int{}
	for range ids {
		select {
		case id := <-ents.stopped:
			stopped[id]++
		default:
			t.Fatalf("Shutdown returned with only %v stopped", stopped)
		}
	}
	for _, id := range ids {
		if stopped[id] != 1 {
			t.Fatalf("Stopped handled %v, want once by each of %v", stopped, ids)
		}
	}
	if n := s.Active(); n != 0 {
		t.Fatalf("Active = %d after Shutdown, want 0", n)
	}
	before := sys.DeadLetters()
	s.EntityRef("a").Tell(shardingCmd{n: 10})
	s.EntityRef("new").Tell(shardingCmd{n: 11})
	if got := sys.DeadLetters() - before; got != 2 {
		t.Fatalf("%d dead letters from 2 tells after Shutdown, want 2", got)
	}
	if s.Active() != 0 || ents.createdCount("new") != 0 {
		t.Fatalf("a tell after Shutdown started an entity: Active %d, Create(new) calls %d", s.Active(), ents.createdCount("new"))
	}
}

// shardingTally is one entity id's record in TestShardingConcurrentTraffic,
// shared by all its incarnations.
type shardingTally struct {
	inFlight atomic.Int32 // messages being handled now: never more than 1
	overlaps atomic.Int32 // times a message was handled while another was
	handled  atomic.Int64 // messages handled
	disorder atomic.Int32 // messages that came before an earlier one of the same sender
	lastSeq  []int        // per sender, the last seq handled; only the entity touches it
}

// shardingTrafficMsg is the message of TestShardingConcurrentTraffic.
type shardingTrafficMsg struct {
	sender, seq int // who sent it, and its place among that sender's messages
}

// TestShardingConcurrentTraffic pins down that, under concurrent senders
// and with passivation racing the traffic, every message is handled exactly
// once, in each sender's order, and an entity never handles two at once.
func TestShardingConcurrentTraffic(t *testing.T) {
	const (
		senders   = 8
		perSender = 1000
		ids       = 100
	)
	cases := []struct {
		name           string        // what the case shows
		passivateAfter time.Duration // Entity.PassivateAfter, on the real clock
		// pace makes each sender pause for 0 to 2 ms after every 10
		// messages, so that entities go idle for about passivateAfter in
		// the middle of the traffic and passivations meet new messages.
		pace bool
		// run sends every other message with Sharding.Run, so that idle
		// entities run on the senders' goroutines between their Tells.
		run bool
	}{
		{"no passivation", -1, false, false},
		{"passivation racing the traffic", time.Millisecond, true, false},
		{"Run and Tell mixed", -1, false, true},
		{"Run and Tell mixed, passivation racing the traffic", time.Millisecond, true, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sys := newSystem(t) // the real clock: passivation timers fire as they will
			tallies := make(map[string]*shardingTally, ids)
			for i := range ids {
				tallies["e"+strconv.Itoa(i)] = &shardingTally{lastSeq: make([]int, senders)}
			}
			var creates atomic.Int64
			s, err := trt.InitSharding(sys, trt.Entity[shardingTrafficMsg]{
				Key:            trt.NewEntityTypeKey[shardingTrafficMsg]("traffic"),
				PassivateAfter: tc.passivateAfter,
				Create: func(id string) trt.Behavior[shardingTrafficMsg] {
					creates.Add(1)
					tl := tallies[id]
					return trt.ReceiveFunc(func(_ *trt.Context[shardingTrafficMsg], m shardingTrafficMsg) {
						if tl.inFlight.Add(1) != 1 {
							tl.overlaps.Add(1)
						}
						runtime.Gosched() // widen the window for a second handler
						if m.seq <= tl.lastSeq[m.sender] {
							tl.disorder.Add(1)
						}
						tl.lastSeq[m.sender] = m.seq
						tl.handled.Add(1)
						tl.inFlight.Add(-1)
					})
				},
			})
			if err != nil {
				t.Fatalf("InitSharding: %v", err)
			}
			var wg sync.WaitGroup
			for sender := range senders {
				wg.Go(func() {
					for seq := 1; seq <= perSender; seq++ {
						id, m := "e"+strconv.Itoa((sender*13+seq)%ids), shardingTrafficMsg{sender: sender, seq: seq}
						if tc.run && seq%2 == 1 {
							s.Run(id, m)
						} else {
							s.EntityRef(id).Tell(m)
						}
						if tc.pace && seq%10 == 0 {
							time.Sleep(time.Duration((sender*7+seq/10)%21) * 100 * time.Microsecond)
						}
					}
				})
			}
			wg.Wait()
			total := func() (n int64) {
				for _, tl := range tallies {
					n += tl.handled.Load()
				}
				return n
			}
			eventually(t, "every message is handled", func() bool { return total() >= senders*perSender })
			// Shutdown waits for every entity to stop: the counts are final.
			ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
			defer cancel()
			if err := sys.Shutdown(ctx); err != nil {
				t.Fatalf("shutdown: %v", err)
			}
			for id, tl := range tallies {
				if got, want := tl.handled.Load(), int64(senders*perSender/ids); got != want {
					t.Errorf("entity %s handled %d messages, want %d", id, got, want)
				}
				if n := tl.overlaps.Load(); n != 0 {
					t.Errorf("entity %s handled two messages at once %d times", id, n)
				}
				if n := tl.disorder.Load(); n != 0 {
					t.Errorf("entity %s handled %d messages out of their sender's order", id, n)
				}
			}
			if n := sys.DeadLetters(); n != 0 {
				t.Errorf("%d dead letters, want none", n)
			}
			t.Logf("%d incarnations for %d ids", creates.Load(), ids)
			if tc.pace && creates.Load() <= ids {
				t.Errorf("no entity was passivated and started again: the case raced nothing")
			}
		})
	}
}

// guardedEntity holds off its passivation while its last message said so.
type guardedEntity struct {
	hold    bool
	stopped chan<- struct{}
}

func (g *guardedEntity) Receive(_ *trt.Context[bool], hold bool) { g.hold = hold }
func (g *guardedEntity) HoldsPassivation() bool                  { return g.hold }
func (g *guardedEntity) OnSignal(_ *trt.Context[bool], s trt.Signal) {
	if _, ok := s.(trt.Stopped); ok {
		g.stopped <- struct{}{}
	}
}

// TestShardingPassivationGuard: an entity whose behavior holds off its
// passivation is not passivated however long it idles; once it lets go,
// it is, PassivateAfter after its last message.
func TestShardingPassivationGuard(t *testing.T) {
	const after = 10 * time.Second
	fc := clockwork.NewFakeClock()
	sys := newSystem(t, trt.WithClock(fc))
	stopped := make(chan struct{}, 1)
	s, err := trt.InitSharding(sys, trt.Entity[bool]{
		Key:            trt.NewEntityTypeKey[bool]("guarded"),
		Create:         func(string) trt.Behavior[bool] { return &guardedEntity{stopped: stopped} },
		PassivateAfter: after,
	})
	if err != nil {
		t.Fatal(err)
	}
	s.Tell("g", true)
	for range 3 {
		shardingTimerArmed(t, fc, 1)
		fc.Advance(after)
	}
	shardingTimerArmed(t, fc, 1) // the last check ran, and armed the next one
	select {
	case <-stopped:
		t.Fatal("passivated while its behavior held it off")
	default:
	}
	if s.Active() != 1 {
		t.Fatalf("Active %d, want 1", s.Active())
	}
	s.Tell("g", false)
	eventually(t, "passivated once let go", func() bool {
		select {
		case <-stopped:
			return true
		default:
			fc.Advance(after)
			return false
		}
	})
}
