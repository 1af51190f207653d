package entityhost_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/internal/cluster"
	"github.com/trellis-go/trellis/internal/peer"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
)

// TestAnyInstanceReachesAnyEntity: commands sent to every instance, typed
// and by name, reach each entity's one owner (the value is the sum of
// every increment), and a refusal comes back as the CommandError it was.
func TestAnyInstanceReachesAnyEntity(t *testing.T) {
	insts := startCluster(t, 3)
	ctx := t.Context()
	const entities = 12
	for e := range entities {
		id := fmt.Sprintf("c-%d", e)
		for i, inst := range insts {
			if _, err := Add.Invoke(ctx, inst.client, id, i+1); err != nil {
				t.Fatalf("add via %s: %v", inst.id, err)
			}
			call, _ := Add.Deferred(id, 1)
			if _, err := inst.client.Dispatch(ctx, call); err != nil {
				t.Fatalf("dispatch via %s: %v", inst.id, err)
			}
		}
	}
	for e := range entities {
		for _, inst := range insts {
			got, err := Get.Invoke(ctx, inst.client, fmt.Sprintf("c-%d", e), components.Done{})
			if err != nil || got.Value != 1+2+3+3 {
				t.Fatalf("get c-%d via %s = %+v, %v; want 9", e, inst.id, got, err)
			}
		}
	}
	// A refusal from another instance is the owner's CommandError.
	id := entityServedBy(t, insts[0])
	_, err := Add.Invoke(ctx, insts[1].client, id, 0)
	var ce *components.CommandError
	if !errors.As(err, &ce) || ce.Kind != components.Invalid || ce.Message != "add 0: must be positive" {
		t.Fatalf("refusal via another instance = %v, want the Invalid CommandError", err)
	}
}

// TestForwardToNonOwnerIsMoved: a call forwarded to an instance that
// does not serve the entity's shard is answered peer.ErrMoved, over the
// transport, and is not run or sent on.
func TestForwardToNonOwnerIsMoved(t *testing.T) {
	insts := startCluster(t, 2)
	id := entityServedBy(t, insts[1])
	client, err := peer.NewClient(peer.ClientConfig{Secret: testSecret, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	_, err = client.Forward(t.Context(), insts[0].server.Addr(), peer.Call{ComponentID: "counter", Method: "add", EntityID: id, Argument: []byte("1")})
	if !errors.Is(err, peer.ErrMoved) {
		t.Fatalf("forward to the non-owner: %v, want peer.ErrMoved", err)
	}
	if got, err := Get.Invoke(t.Context(), insts[1].client, id, components.Done{}); err != nil || got.Value != 0 {
		t.Fatalf("value after the refused forward = %+v, %v; want 0", got, err)
	}
}

// TestOwnerReadsDoNotTouchRedis: once an entity is loaded, reads on its
// owner, and reads forwarded to it, send no command to Redis at all.
func TestOwnerReadsDoNotTouchRedis(t *testing.T) {
	insts := startCluster(t, 2)
	owner, other := insts[0], insts[1]
	ctx := t.Context()
	id := entityServedBy(t, owner)
	if _, err := Add.Invoke(ctx, owner.client, id, 1); err != nil {
		t.Fatal(err)
	}
	before := owner.storeCmds.Load() + other.storeCmds.Load()
	const reads = 200
	for i := range reads {
		via := []*instance{owner, other}[i%2]
		if got, err := Get.Invoke(ctx, via.client, id, components.Done{}); err != nil || got.Value != 1 {
			t.Fatalf("get via %s = %+v, %v", via.id, got, err)
		}
	}
	if n := owner.storeCmds.Load() + other.storeCmds.Load() - before; n != 0 {
		t.Fatalf("%d reads sent %d commands to Redis, want 0", reads, n)
	}
	t.Logf("%d reads (half forwarded to the owner): 0 Redis commands", reads)
}

// TestDeposedOwnerCannotWrite: an owner that stops renewing (its
// rebalancer stopped, no leave) loses its shard to another member once its
// lease expires; its late write under the old fence is refused and
// changes nothing, commands sent to it are routed to the new owner, and
// when it wakes from a pause believing it still owns the shard, its
// entity's write is refused by the fence and the command re-routed.
func TestDeposedOwnerCannotWrite(t *testing.T) {
	insts := startCluster(t, 2)
	a, b := insts[0], insts[1]
	ctx := t.Context()
	id := entityServedBy(t, a)
	shard := cluster.ShardOf("counter", id)
	if _, err := Add.Invoke(ctx, a.client, id, 5); err != nil {
		t.Fatal(err)
	}
	old, _ := a.host.Fence("counter", id)
	rec, err := a.store.Load(ctx, "counter", id)
	if err != nil {
		t.Fatal(err)
	}

	a.host.Rebalancer().Shutdown()
	a.cut.on.Store(true)
	testenv.Eventually(t, testLease*2+5*time.Second, "b to take the shard", func() bool {
		_, ok := b.host.Rebalancer().Serving(shard)
		return ok
	})
	if _, ok := a.host.Fence("counter", id); ok {
		t.Fatal("the deposed owner still believes it serves the shard")
	}
	_, err = a.store.SaveFenced(ctx, old, "counter", id, []byte(`{"value":1000}`), rec.Revision)
	if !errors.Is(err, entities.ErrFenced) {
		t.Fatalf("the deposed owner's write: err = %v, want ErrFenced", err)
	}
	if got, err := a.store.Load(ctx, "counter", id); err != nil || got.Revision != rec.Revision {
		t.Fatalf("after the refused write: %+v, %v; want revision %d unchanged", got, err, rec.Revision)
	}
	for _, via := range []*instance{a, b} {
		if _, err := Add.Invoke(ctx, via.client, id, 1); err != nil {
			t.Fatalf("add via %s after the takeover: %v", via.id, err)
		}
	}

	// The deposed owner wakes from a pause believing it still serves the
	// shard: its entity, which holds the value 5 loaded under the old
	// fence, writes under it, is refused, drops its state, and the
	// command is routed again, to b.
	a.paused.wake.Store(&old)
	routes := a.paused.routes.Load()
	if _, err := Add.Invoke(ctx, a.client, id, 1); err != nil {
		t.Fatalf("add via the paused owner: %v", err)
	}
	if n := a.paused.routes.Load() - routes; n != 2 {
		t.Fatalf("the paused owner's command was routed %d times, want 2 (here, refused by the fence, then to b)", n)
	}
	if got, err := Get.Invoke(ctx, b.client, id, components.Done{}); err != nil || got.Value != 8 {
		t.Fatalf("value after the takeover = %+v, %v; want 5+1+1+1", got, err)
	}
}

// TestGracefulLeaveFailsNothing: one of three members leaves (hands every
// shard over, then leaves) under a steady load of increments sent to all
// three (the one that leaves forwards them once it has left): no request
// fails and no increment is lost.
func TestGracefulLeaveFailsNothing(t *testing.T) {
	insts := startCluster(t, 3)
	l := startLoad(t, insts)
	l.await(t, 200)
	before, start := l.sent.Load(), time.Now()
	if err := insts[2].host.Rebalancer().Leave(t.Context()); err != nil {
		t.Fatalf("leave: %v", err)
	}
	waitServed(t, insts[:2]...)
	during, took := l.sent.Load()-before, time.Since(start)
	l.await(t, l.sent.Load()+200)
	l.finish(t, insts[:2])
	if n := l.failures.Load(); n != 0 {
		t.Fatalf("%d of %d requests failed across the leave; first: %v", n, l.sent.Load(), l.firstErr.Load())
	}
	t.Logf("%d requests in all, %d of them while the shards moved (%v), none failed",
		l.sent.Load(), during, took.Round(time.Millisecond))
}

// TestKilledInstanceShardsServedAgain: a member that vanishes (no more
// renewals, no leave, transport closed) has its shards served by the
// others within its lease and a few seconds, and no acknowledged
// increment is lost.
func TestKilledInstanceShardsServedAgain(t *testing.T) {
	testenv.Long(t)
	insts := startCluster(t, 3)
	l := startLoad(t, insts[:2])
	l.await(t, 200)
	killed := time.Now()
	insts[2].kill(t)
	waitServed(t, insts[:2]...)
	took := time.Since(killed)
	l.await(t, l.sent.Load()+200)
	l.finish(t, insts[:2])
	t.Logf("shards served again %v after the kill (lease %v); %d requests, %d failed (%d of unknown outcome)",
		took.Round(time.Millisecond), testLease, l.sent.Load(), l.failures.Load(), l.unknown.Load())
	if took > testLease*4/3+3*time.Second {
		t.Fatalf("shards served again only after %v", took)
	}
	if n := l.failures.Load() - l.unknown.Load(); n != 0 {
		t.Fatalf("%d requests failed with a known outcome; first: %v", n, l.firstErr.Load())
	}
}

// loadEntities is how many counters a load spreads over.
const loadEntities = 8

// load sends Add 1 to counters load-0 … load-7 through some instances,
// from a few goroutines, each request with a deadline long enough to ride
// out a hand-over or a takeover.
type load struct {
	acked    [loadEntities]atomic.Int64
	sent     atomic.Int64
	failures atomic.Int64
	unknown  atomic.Int64 // failures whose outcome is unknown: they may have counted
	firstErr atomic.Value
	stop     chan struct{}
	wg       sync.WaitGroup
}

func startLoad(t *testing.T, via []*instance) *load {
	t.Helper()
	l := &load{stop: make(chan struct{})}
	for g := range 4 {
		l.wg.Go(func() {
			for n := g; ; n++ {
				select {
				case <-l.stop:
					return
				default:
				}
				e := n % loadEntities
				l.add(via[n%len(via)], e)
			}
		})
	}
	t.Cleanup(func() { l.stopOnce() })
	return l
}

// add sends one increment and records what became of it.
func (l *load) add(via *instance, e int) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	l.sent.Add(1)
	_, err := Add.Invoke(ctx, via.client, fmt.Sprintf("load-%d", e), 1)
	if err == nil {
		l.acked[e].Add(1)
		return
	}
	l.failures.Add(1)
	if errors.Is(err, peer.ErrOutcomeUnknown) {
		l.unknown.Add(1)
	}
	l.firstErr.CompareAndSwap(nil, err)
}

// await waits until n requests have been sent.
func (l *load) await(t *testing.T, n int64) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, fmt.Sprintf("%d requests sent", n), func() bool { return l.sent.Load() >= n })
}

func (l *load) stopOnce() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	l.wg.Wait()
}

// finish stops the load and checks that every counter holds at least
// every acknowledged increment, and no more than those plus the ones of
// unknown outcome.
func (l *load) finish(t *testing.T, via []*instance) {
	t.Helper()
	l.stopOnce()
	for e := range loadEntities {
		got, err := Get.Invoke(t.Context(), via[0].client, fmt.Sprintf("load-%d", e), components.Done{})
		if err != nil {
			t.Fatalf("get load-%d: %v", e, err)
		}
		acked := int(l.acked[e].Load())
		if got.Value < acked || got.Value > acked+int(l.unknown.Load()) {
			t.Errorf("load-%d = %d, want %d acknowledged increments (+ up to %d of unknown outcome)",
				e, got.Value, acked, l.unknown.Load())
		}
	}
}
