package placement_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/trellis-go/trellis/internal/cluster"
	"github.com/trellis-go/trellis/internal/cluster/placement"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
	"github.com/trellis-go/trellis/runtime"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const self, other = "10.0.0.1:7000", "10.0.0.2:7000"

// table is an ownership table the test sets shard by shard: what this
// instance serves (with its fence) and whom it names as each shard's
// owner.
type table struct {
	mu      sync.Mutex
	serving map[int]cluster.Fence
	owners  map[int]cluster.Ownership
}

func newTable() *table {
	return &table{serving: map[int]cluster.Fence{}, owners: map[int]cluster.Ownership{}}
}

func (t *table) Serving(shard int) (cluster.Fence, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	f, ok := t.serving[shard]
	return f, ok
}

func (t *table) Owner(shard int) (cluster.Ownership, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	o, ok := t.owners[shard]
	return o, ok
}

// set makes shard served here at epoch (0: not served) and names owner
// (its address; "" for no live owner known).
func (t *table) set(shard int, epoch uint64, owner string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.serving, shard)
	if epoch != 0 {
		t.serving[shard] = cluster.Fence{Shard: shard, Incarnation: "me", Epoch: epoch}
	}
	delete(t.owners, shard)
	if owner != "" {
		t.owners[shard] = cluster.Ownership{Shard: shard, Owner: owner, Addr: owner, Epoch: epoch}
	}
}

func newSystem(t *testing.T) *runtime.System {
	sys := runtime.NewSystem(t.Name())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := sys.Shutdown(ctx); err != nil {
			t.Error(err)
		}
	})
	return sys
}

// noRemote is a transport to no other instance: these tests send only to
// entities served here.
type noRemote struct{}

func (noRemote) Tell(addr, _ string, _ []byte) error {
	return fmt.Errorf("no transport in this test (a message for %s)", addr)
}

// idsInTwoShards returns two ids of entityType in different shards.
func idsInTwoShards(entityType string) (a, b string) {
	a = "e0"
	for i := 1; ; i++ {
		b = fmt.Sprintf("e%d", i)
		if cluster.ShardOf(entityType, b) != cluster.ShardOf(entityType, a) {
			return a, b
		}
	}
}

// TestWhere: an entity is here while this instance serves its shard and is
// not handing it over; otherwise its messages go to the owner the table
// names, and nowhere ("", dead letters) when it names none or still names
// this instance.
func TestWhere(t *testing.T) {
	const typ = "counter"
	id, _ := idsInTwoShards(typ)
	shard := cluster.ShardOf(typ, id)
	tests := []struct {
		name     string
		epoch    uint64 // served here at this epoch (0: not served)
		owner    string // the table's owner
		release  uint64 // BeforeRelease ran at this epoch (0: never)
		serve    bool   // Serve ran after it, with the fence of the moment
		wantAddr string
		wantHere bool
	}{
		{name: "served here", epoch: 3, owner: self, wantHere: true},
		{name: "owned elsewhere", owner: other, wantAddr: other},
		{name: "no owner known", wantAddr: ""},
		{name: "stale entry naming this instance", owner: self, wantAddr: ""},
		{name: "handing over", epoch: 3, owner: other, release: 3, wantAddr: other},
		{name: "handing over, no owner yet", epoch: 3, owner: self, release: 3, wantAddr: ""},
		{name: "release failed, adopted again", epoch: 3, owner: self, release: 3, serve: true, wantHere: true},
		{name: "acquired again at a new epoch", epoch: 4, owner: self, release: 3, wantHere: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tab := newTable()
			p := placement.New(newSystem(t), tab, self)
			if tt.release != 0 {
				tab.set(shard, tt.release, self)
				p.BeforeRelease(context.Background(), shard)
			}
			tab.set(shard, tt.epoch, tt.owner)
			if f, ok := tab.Serving(shard); tt.serve && ok {
				p.Serve(f)
			}
			addr, here := p.Where(typ, id)
			if addr != tt.wantAddr || here != tt.wantHere {
				t.Fatalf("Where = (%q, %v), want (%q, %v)", addr, here, tt.wantAddr, tt.wantHere)
			}
		})
	}
}

// TestBeforeReleaseStopsTheShardsEntities: the entities of a shard being
// released stop here, the others keep running; a shard not served here
// is left alone.
func TestBeforeReleaseStopsTheShardsEntities(t *testing.T) {
	const typ = "placed"
	sys := newSystem(t)
	tab := newTable()
	p := placement.New(sys, tab, self)
	if err := sys.Connect(runtime.Link{Self: self, Remote: noRemote{}, Placement: p}); err != nil {
		t.Fatal(err)
	}
	leaving, staying := idsInTwoShards(typ)
	got := make(chan string, 16)
	region, err := runtime.InitSharding(sys, runtime.Entity[string]{Key: runtime.NewEntityTypeKey[string](typ),
		Create: func(id string) runtime.Behavior[string] {
			return runtime.ReceiveFunc(func(_ *runtime.Context[string], m string) { got <- id + ":" + m })
		}})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{leaving, staying} {
		tab.set(cluster.ShardOf(typ, id), 1, self)
		region.Tell(id, "hello")
		if m := testenv.Recv(t, got, 10*time.Second); m != id+":hello" {
			t.Fatalf("got %q, want %s:hello", m, id)
		}
	}

	p.BeforeRelease(context.Background(), cluster.ShardOf(typ, staying)+cluster.NumShards) // no such shard served
	if n := region.Active(); n != 2 {
		t.Fatalf("%d entities running after the release of a shard not served here, want 2", n)
	}
	p.BeforeRelease(context.Background(), cluster.ShardOf(typ, leaving))
	testenv.Eventually(t, 10*time.Second, "only the staying entity running", func() bool { return region.Active() == 1 })
	if addr, here := p.Where(typ, leaving); here || addr != "" {
		t.Fatalf("Where(leaving) = (%q, %v), want (\"\", false): released, no other owner known", addr, here)
	}
	region.Tell(staying, "again")
	if m := testenv.Recv(t, got, 10*time.Second); m != staying+":again" {
		t.Fatalf("got %q, want %s:again", m, staying)
	}
}
