package entities_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/internal/cluster"
)

// fakeCluster is an entities.Cluster whose answers the test sets.
type fakeCluster struct {
	mu       sync.Mutex
	fence    cluster.Fence // what Fence answers
	serving  bool          // whether Fence and Admit serve
	routes   []string      // what Route answers, in order, the last one again and again; "" is here
	reply    string        // what Forward answers
	fwdErr   error         // or this
	forwards []components.DeferredCall
	ids      []string // the command id each forward carried
	admitted int      // commands admitted and not done
	// run, when set, is the owner's side of a forward: it runs before
	// Forward answers (with fwdErr, if set, whatever run did).
	run func(ctx context.Context, call components.DeferredCall)
}

func (c *fakeCluster) Fence(string, string) (cluster.Fence, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.fence, c.serving
}

func (c *fakeCluster) Route(context.Context, string, string) (string, func(), error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	addr := c.routes[0]
	if len(c.routes) > 1 {
		c.routes = c.routes[1:]
	}
	if addr != "" {
		return addr, nil, nil
	}
	c.admitted++
	return "", c.done, nil
}

func (c *fakeCluster) Admit(context.Context, string, string) (func(), error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.serving {
		return nil, fmt.Errorf("fake: %w", entities.ErrMoved)
	}
	c.admitted++
	return c.done, nil
}

func (c *fakeCluster) done() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.admitted--
}

func (c *fakeCluster) Forward(ctx context.Context, _ string, call components.DeferredCall) (json.RawMessage, error) {
	c.mu.Lock()
	run := c.run
	c.mu.Unlock()
	if run != nil {
		run(ctx, call)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.forwards = append(c.forwards, call)
	id, _ := components.CommandIDFrom(ctx)
	c.ids = append(c.ids, id)
	if c.fwdErr != nil {
		return nil, c.fwdErr
	}
	return json.RawMessage(c.reply), nil
}

// set changes the fake's answers under its lock.
func (c *fakeCluster) set(f func(c *fakeCluster)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f(c)
}

// fencedMemory is a FencedStore in memory whose fence the test moves, and
// that counts the calls an entity makes.
type fencedMemory struct {
	*entities.MemoryStore
	current             atomic.Pointer[cluster.Fence]
	loads, revs, writes atomic.Int64
}

func newFencedMemory(f cluster.Fence) *fencedMemory {
	s := &fencedMemory{MemoryStore: entities.NewMemoryStore()}
	s.current.Store(&f)
	return s
}

func (s *fencedMemory) Load(ctx context.Context, typ, id string) (entities.Record, error) {
	s.loads.Add(1)
	return s.MemoryStore.Load(ctx, typ, id)
}

func (s *fencedMemory) Revision(ctx context.Context, typ, id string) (uint64, error) {
	s.revs.Add(1)
	return s.MemoryStore.Revision(ctx, typ, id)
}

func (s *fencedMemory) SaveFenced(ctx context.Context, f cluster.Fence, typ, id string, data []byte, expected uint64) (uint64, error) {
	s.writes.Add(1)
	if f != *s.current.Load() {
		return 0, fmt.Errorf("save: %w", entities.ErrFenced)
	}
	return s.Save(ctx, typ, id, data, expected)
}

func (s *fencedMemory) DeleteFenced(ctx context.Context, f cluster.Fence, typ, id string, expected uint64) error {
	s.writes.Add(1)
	if f != *s.current.Load() {
		return fmt.Errorf("delete: %w", entities.ErrFenced)
	}
	return s.Delete(ctx, typ, id, expected)
}

var (
	fence1 = cluster.Fence{Shard: cluster.ShardOf("acct", "a"), Incarnation: "me", Epoch: 1}
	fence2 = cluster.Fence{Shard: fence1.Shard, Incarnation: "other", Epoch: 2}
)

// startClusterNode starts the Accts entity with a Host.Cluster.
func startClusterNode(t *testing.T, c *fakeCluster, s *fencedMemory) *node {
	t.Helper()
	return startNode(t, s, func(h *entities.Host) { h.Cluster = c })
}

// startServingWith5 starts a node that serves entity a's shard under
// fence1 and deposits 5 into a.
func startServingWith5(t *testing.T) (*fakeCluster, *fencedMemory, *node) {
	t.Helper()
	c := &fakeCluster{fence: fence1, serving: true, routes: []string{""}}
	s := newFencedMemory(fence1)
	n := startClusterNode(t, c, s)
	if _, err := Deposit.Invoke(t.Context(), n.client, "a", 5); err != nil {
		t.Fatal(err)
	}
	return c, s, n
}

// TestClusterReadsFromMemory: the owner answers commands that write
// nothing from memory, with no store call at all, and writes under its
// fence.
func TestClusterReadsFromMemory(t *testing.T) {
	c, s, n := startServingWith5(t)
	ctx := t.Context()
	for range 10 {
		if got, err := Balance.Invoke(ctx, n.client, "a", done); err != nil || got.Balance != 5 {
			t.Fatalf("balance = %+v, %v; want 5", got, err)
		}
	}
	if _, err := Withdraw.Invoke(ctx, n.client, "a", 50); err == nil {
		t.Fatal("a refusal was not an error")
	}
	if l, r, w := s.loads.Load(), s.revs.Load(), s.writes.Load(); l != 1 || r != 0 || w != 1 {
		t.Fatalf("store calls: %d loads, %d revision checks, %d writes; want 1, 0, 1", l, r, w)
	}
	if c.admitted != 0 {
		t.Fatalf("%d commands admitted and never done", c.admitted)
	}
}

// TestClusterFencedWriteReroutes: a write the store's fence refuses (the
// instance still believes it owns the shard; another took it) drops the
// state and goes, once, to the owner, whose JSON reply decodes into the
// handle's type.
func TestClusterFencedWriteReroutes(t *testing.T) {
	c := &fakeCluster{fence: fence1, serving: true, routes: []string{"", "127.0.0.1:9"}, reply: `{"id":"a","balance":12}`}
	s := newFencedMemory(fence2)
	n := startClusterNode(t, c, s)
	got, err := Deposit.Invoke(t.Context(), n.client, "a", 5)
	if err != nil || got != (Acct{ID: "a", Balance: 12}) {
		t.Fatalf("deposit = %+v, %v; want the owner's reply", got, err)
	}
	if len(c.forwards) != 1 || c.forwards[0].Method != "deposit" || string(c.forwards[0].Argument) != "5" {
		t.Fatalf("forwarded %+v, want one deposit of 5", c.forwards)
	}
	// The state was dropped: served again, the entity loads it afresh.
	c.set(func(c *fakeCluster) { c.routes = []string{""} })
	s.current.Store(&fence1)
	loads := s.loads.Load()
	if _, err := Balance.Invoke(t.Context(), n.client, "a", done); err != nil {
		t.Fatal(err)
	}
	if s.loads.Load() != loads+1 {
		t.Fatal("the entity did not load its state again after the fence refused its write")
	}
}

// TestClusterFenceChangeReloads: a shard that moved away and came back
// (another fence) is read afresh: the other owner may have written.
func TestClusterFenceChangeReloads(t *testing.T) {
	c, s, n := startServingWith5(t)
	ctx := t.Context()
	rec, _ := s.MemoryStore.Load(ctx, "acct", "a")
	s.current.Store(&fence2)
	if _, err := s.SaveFenced(ctx, fence2, "acct", "a", []byte(`{"id":"a","balance":100}`), rec.Revision); err != nil {
		t.Fatal(err)
	}
	c.set(func(c *fakeCluster) { c.fence = fence2 })
	if got, err := Balance.Invoke(ctx, n.client, "a", done); err != nil || got.Balance != 100 {
		t.Fatalf("balance after the shard came back = %+v, %v; want 100, the other owner's write", got, err)
	}
}

// TestClusterNotServingReroutes: a command admitted just as the instance
// stopped serving the shard is not run here; it goes to the owner.
func TestClusterNotServingReroutes(t *testing.T) {
	c := &fakeCluster{fence: fence1, serving: false, routes: []string{"", "127.0.0.1:9"}, reply: `{"id":"a","balance":1}`}
	s := newFencedMemory(fence1)
	n := startClusterNode(t, c, s)
	if got, err := Balance.Invoke(t.Context(), n.client, "a", done); err != nil || got.Balance != 1 {
		t.Fatalf("balance = %+v, %v; want the owner's", got, err)
	}
	if s.loads.Load() != 0 {
		t.Fatal("an instance that does not serve the shard loaded the state")
	}
}

// TestClusterMovedEveryTime: a command refused as moved each time it is
// routed fails with ErrMoved, ErrShardMoving and ErrUnavailable, having
// been sent MaxRoutes times, not more.
func TestClusterMovedEveryTime(t *testing.T) {
	c := &fakeCluster{routes: []string{"127.0.0.1:9"}, fwdErr: fmt.Errorf("peer: %w", entities.ErrMoved)}
	n := startClusterNode(t, c, newFencedMemory(fence1))
	_, err := Deposit.Invoke(t.Context(), n.client, "a", 5)
	if !errors.Is(err, entities.ErrMoved) || !errors.Is(err, components.ErrShardMoving) || !errors.Is(err, components.ErrUnavailable) {
		t.Fatalf("err = %v, want ErrMoved, ErrShardMoving and ErrUnavailable", err)
	}
	if len(c.forwards) != entities.MaxRoutes {
		t.Fatalf("forwarded %d times, want %d", len(c.forwards), entities.MaxRoutes)
	}
	if want := "owners tried in turn: 127.0.0.1:9, 127.0.0.1:9"; !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v, want it to name the owners tried (%q)", err, want)
	}
}

// TestClusterMaybeRunNotRoutedAgain: a forward that may have run on the
// owner is answered as unknown and never sent again, even when its error
// also says the shard moved.
func TestClusterMaybeRunNotRoutedAgain(t *testing.T) {
	c := &fakeCluster{routes: []string{"127.0.0.1:9"},
		fwdErr: fmt.Errorf("peer: %w: %w", entities.ErrMoved, components.ErrOutcomeUnknown)}
	n := startClusterNode(t, c, newFencedMemory(fence1))
	_, err := Deposit.Invoke(t.Context(), n.client, "a", 5)
	if !errors.Is(err, components.ErrOutcomeUnknown) {
		t.Fatalf("err = %v, want ErrOutcomeUnknown", err)
	}
	if len(c.forwards) != 1 {
		t.Fatalf("forwarded %d times, want once", len(c.forwards))
	}
}

// TestClusterCommandID: a command that runs where it is called at once
// carries no command id and records none; a forwarded one carries one,
// the same on every attempt; and a forward that ran on the owner though it
// was answered as not run is applied once when it is routed again here,
// answered from the owner's record.
func TestClusterCommandID(t *testing.T) {
	t.Run("here at once", func(t *testing.T) {
		_, s, n := startServingWith5(t)
		if got := s.AppliedRecords("acct", "a"); got != 0 {
			t.Fatalf("%d records after a command that ran here at once, want none", got)
		}
		if got := n.balance(t, "a"); got != 5 {
			t.Fatalf("balance = %d, want 5", got)
		}
	})
	t.Run("forwarded", func(t *testing.T) {
		c := &fakeCluster{routes: []string{"127.0.0.1:9", "127.0.0.1:8"}, reply: `{"id":"a","balance":5}`}
		c.fwdErr = fmt.Errorf("peer: %w", entities.ErrMoved)
		n := startClusterNode(t, c, newFencedMemory(fence1))
		if _, err := Deposit.Invoke(t.Context(), n.client, "a", 5); !errors.Is(err, entities.ErrMoved) {
			t.Fatalf("err = %v, want ErrMoved after every route", err)
		}
		if len(c.ids) != entities.MaxRoutes || c.ids[0] == "" {
			t.Fatalf("forwards carried ids %q, want %d, not empty", c.ids, entities.MaxRoutes)
		}
		for _, id := range c.ids {
			if id != c.ids[0] {
				t.Fatalf("forwards carried ids %q, want the same one each time", c.ids)
			}
		}
	})
	t.Run("ran on the owner, answered as not run", func(t *testing.T) {
		c, s, n := startServingWith5(t)
		c.set(func(c *fakeCluster) {
			c.routes = []string{"127.0.0.1:9", ""}
			c.fwdErr = fmt.Errorf("peer: the owner could not be reached: %w", entities.ErrMoved)
			c.run = func(ctx context.Context, call components.DeferredCall) {
				// The owner shares the store: it runs the command as a
				// forwarded one, and its answer is lost.
				if _, err := n.running.InvokeJSONHere(ctx, call.EntityID, call.Method, call.Argument); err != nil {
					t.Errorf("the owner's run: %v", err)
				}
			}
		})
		got, err := Deposit.Invoke(t.Context(), n.client, "a", 3)
		if err != nil || got.Balance != 8 {
			t.Fatalf("deposit = %+v, %v; want the owner's answer, balance 8", got, err)
		}
		c.set(func(c *fakeCluster) { c.run = nil })
		if got := n.balance(t, "a"); got != 8 {
			t.Fatalf("balance = %d, want 8: the deposit applied once", got)
		}
		if got := s.AppliedRecords("acct", "a"); got != 1 {
			t.Fatalf("%d records, want the forwarded command's one", got)
		}
	})
}

// TestClusterInvokeHere: a forwarded command runs here once admitted, and
// is refused with ErrMoved, never sent on, when it is not.
func TestClusterInvokeHere(t *testing.T) {
	c := &fakeCluster{fence: fence1, serving: true, routes: []string{"127.0.0.1:9"}}
	n := startClusterNode(t, c, newFencedMemory(fence1))
	reply, err := n.running.InvokeJSONHere(t.Context(), "a", "deposit", []byte("3"))
	if err != nil || string(reply) != `{"id":"a","balance":3}` {
		t.Fatalf("InvokeJSONHere = %s, %v", reply, err)
	}
	c.set(func(c *fakeCluster) { c.serving = false })
	if _, err := n.running.InvokeJSONHere(t.Context(), "a", "deposit", []byte("3")); !errors.Is(err, entities.ErrMoved) {
		t.Fatalf("InvokeJSONHere on a shard not served = %v, want ErrMoved", err)
	}
	if len(c.forwards) != 0 {
		t.Fatalf("a forwarded command was sent on: %+v", c.forwards)
	}
}

// TestClusterNeedsFencedStore: a Host.Cluster with a store that cannot
// fence its writes does not start.
func TestClusterNeedsFencedStore(t *testing.T) {
	client := components.NewClient(components.NewRegistry())
	n := startNode(t, entities.NewMemoryStore())
	_, err := Accts.Start(entities.Host{System: n.sys, Client: client, Store: entities.NewMemoryStore(), Cluster: &fakeCluster{}})
	if err == nil || !strings.Contains(err.Error(), "FencedStore") {
		t.Fatalf("start with a MemoryStore and a Cluster: err = %v, want one naming FencedStore", err)
	}
}

// TestClusterInvokeLocal: InvokeLocal runs a command on this instance
// when it serves the entity's shard, admitted there, and otherwise runs
// nothing and sends nothing on: ErrMoved.
func TestClusterInvokeLocal(t *testing.T) {
	c := &fakeCluster{fence: fence1, serving: true, routes: []string{""}}
	n := startClusterNode(t, c, newFencedMemory(fence1))
	reply, err := n.running.InvokeLocal(t.Context(), "a", "deposit", 3)
	if a, ok := reply.(Acct); err != nil || !ok || a.Balance != 3 {
		t.Fatalf("InvokeLocal = %#v, %v; want the account of balance 3", reply, err)
	}
	if c.admitted != 0 {
		t.Fatalf("%d commands admitted and not done", c.admitted)
	}
	c.set(func(c *fakeCluster) { c.routes = []string{"127.0.0.1:9"} })
	if _, err := n.running.InvokeLocal(t.Context(), "a", "deposit", 3); !errors.Is(err, entities.ErrMoved) {
		t.Fatalf("InvokeLocal on a shard served elsewhere = %v, want ErrMoved", err)
	}
	if len(c.forwards) != 0 {
		t.Fatalf("a local command was forwarded: %+v", c.forwards)
	}
	c.set(func(c *fakeCluster) { c.routes = []string{""} })
	if got := n.balance(t, "a"); got != 3 {
		t.Fatalf("balance = %d, want 3: the command refused ran", got)
	}
}
