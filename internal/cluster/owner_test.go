package cluster

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/trellis-go/trellis/internal/keyspace"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
)

// TestAcquireRelease, on one Redis and on a Redis Cluster: the
// compare-and-set moves of a shard, step by step, and the epoch they
// leave: it grows by one on every change of owner and never otherwise.
func TestAcquireRelease(t *testing.T) {
	for _, target := range testenv.RedisTargets {
		t.Run(target.Name, func(t *testing.T) {
			client := target.Connect(t)
			prefix := testPrefix(t, client)
			a := mustJoin(t, testConfig(client, prefix, "a"))
			b := mustJoin(t, testConfig(client, prefix, "b"))
			const s = 42
			var fa1, fb2 Fence
			for _, step := range []struct {
				name      string
				do        func() (Fence, error)
				wantErr   error // nil: success
				wantEpoch uint64
				wantOwner string // the record's owner afterwards
			}{
				{"a takes the free shard", func() (f Fence, err error) { fa1, err = a.Acquire(t.Context(), s); return fa1, err }, nil, 1, "a"},
				{"a takes it again: no change", func() (Fence, error) { return a.Acquire(t.Context(), s) }, nil, 1, "a"},
				{"b cannot take a live owner's shard", func() (Fence, error) { return b.Acquire(t.Context(), s) }, ErrOwned, 1, "a"},
				{"b cannot release a's shard", func() (Fence, error) {
					return Fence{}, b.Release(t.Context(), Fence{Shard: s, Incarnation: b.Incarnation(), Epoch: 1})
				}, ErrChanged, 1, "a"},
				{"a releases: the epoch stays", func() (Fence, error) { return Fence{}, a.Release(t.Context(), fa1) }, nil, 1, ""},
				{"b takes the free shard", func() (f Fence, err error) { fb2, err = b.Acquire(t.Context(), s); return fb2, err }, nil, 2, "b"},
				{"a's old fence releases nothing", func() (Fence, error) { return Fence{}, a.Release(t.Context(), fa1) }, ErrChanged, 2, "b"},
				{"no shard 256", func() (Fence, error) { return a.Acquire(t.Context(), NumShards) }, errAny, 2, "b"},
			} {
				f, err := step.do()
				switch {
				case step.wantErr == nil && err != nil:
					t.Fatalf("%s: %v", step.name, err)
				case step.wantErr == errAny && err == nil, step.wantErr != nil && step.wantErr != errAny && !errors.Is(err, step.wantErr):
					t.Fatalf("%s: err %v, want %v", step.name, err, step.wantErr)
				case step.wantErr == nil && f.Shard == s && f.Epoch != step.wantEpoch:
					t.Fatalf("%s: fence epoch %d, want %d", step.name, f.Epoch, step.wantEpoch)
				}
				rec, err := a.record(t.Context(), s)
				if err != nil {
					t.Fatal(err)
				}
				if rec.Epoch != step.wantEpoch || rec.Owner != step.wantOwner {
					t.Fatalf("%s: record %+v, want owner %q epoch %d", step.name, rec, step.wantOwner, step.wantEpoch)
				}
			}
		})
	}
}

// errAny stands for "some error" in a table.
var errAny = errors.New("any error")

// TestAcquireNeedsAValidLease: a member whose own lease is not surely alive
// takes nothing.
func TestAcquireNeedsAValidLease(t *testing.T) {
	client := testenv.Redis(t)
	m := mustJoin(t, testConfig(client, testPrefix(t, client), "a"))
	m.lease.revoke()
	if _, err := m.Acquire(t.Context(), 1); !errors.Is(err, ErrNotServing) {
		t.Fatalf("Acquire = %v, want ErrNotServing", err)
	}
}

// fencedSet writes KEYS[2] = ARGV[3] only while the fence on the record
// KEYS[1] holds: the shape of every state write of the entity layer.
var fencedSet = FencedScript(`
if not fence_holds(KEYS[1], ARGV[1], ARGV[2]) then
	return 0
end
redis.call('SET', KEYS[2], ARGV[3])
return 1
`)

// write runs fencedSet for f.
func write(ctx context.Context, client redis.UniversalClient, space keyspace.Space, f Fence, value string) (bool, error) {
	state := space.Tagged("entity", ShardTag(f.Shard), "counter:x")
	return fencedSet.Run(ctx, client, []string{ShardRecordKey(space, f.Shard), state}, append(f.Args(), value)...).Bool()
}

// TestFenceRefusesADeposedOwner, on one Redis and on a Redis Cluster: an
// owner paused past its lease (its renewer stopped, nothing told to it)
// is deposed by another member at a higher epoch; the paused owner's
// write through a fenced script is then refused, and the new owner's
// accepted. The paused owner had stopped serving before it was deposed.
func TestFenceRefusesADeposedOwner(t *testing.T) {
	for _, target := range testenv.RedisTargets {
		t.Run(target.Name, func(t *testing.T) {
			client := target.Connect(t)
			prefix := testPrefix(t, client)
			space := keyspace.Must(prefix)
			a := mustJoin(t, testConfig(client, prefix, "a"))
			b := mustJoin(t, testConfig(client, prefix, "b"))
			const s = 7
			fa, err := a.Acquire(t.Context(), s)
			if err != nil {
				t.Fatal(err)
			}
			if ok, err := write(t.Context(), client, space, fa, "from a"); err != nil || !ok {
				t.Fatalf("a's write while owner = %v, %v", ok, err)
			}

			a.stopRenewing() // a pauses: no renewal, no notice
			var fb Fence
			testenv.Eventually(t, testLease+2*time.Second, "b to take shard 7 from the paused a", func() bool {
				fb, err = b.Acquire(t.Context(), s)
				if err != nil && !errors.Is(err, ErrOwned) {
					t.Fatal(err)
				}
				return err == nil
			})
			if a.Lease().Serving() {
				t.Error("a still considers itself serving after b took its shard")
			}
			if fb.Epoch != fa.Epoch+1 {
				t.Errorf("b's epoch %d, want %d", fb.Epoch, fa.Epoch+1)
			}
			if ok, err := write(t.Context(), client, space, fa, "late from a"); err != nil || ok {
				t.Errorf("the deposed a's write = %v, %v; want refused", ok, err)
			}
			if ok, err := write(t.Context(), client, space, fb, "from b"); err != nil || !ok {
				t.Errorf("b's write = %v, %v; want accepted", ok, err)
			}
			got, err := client.Get(t.Context(), space.Tagged("entity", ShardTag(s), "counter:x")).Result()
			if err != nil || got != "from b" {
				t.Errorf("state = %q, %v; want %q", got, err, "from b")
			}
		})
	}
}

// TestShardRecordsSpreadOverMasters: on the Redis Cluster (3 masters), the
// 256 shard records are within ±10 % of an even share on every master.
func TestShardRecordsSpreadOverMasters(t *testing.T) {
	client := testenv.RedisCluster(t)
	prefix := testPrefix(t, client)
	m := mustJoin(t, testConfig(client, prefix, "a"))
	for s := range NumShards {
		if _, err := m.Acquire(t.Context(), s); err != nil {
			t.Fatal(err)
		}
	}
	counts := testenv.KeysPerMaster(t, client, keyspace.Must(prefix).Key(area, "*:shard"))
	t.Logf("shard records per master: %v", counts)
	even := float64(NumShards) / float64(len(counts))
	for addr, n := range counts {
		if float64(n) < even*0.9 || float64(n) > even*1.1 {
			t.Errorf("master %s holds %d shard records, want %.1f ± 10 %%", addr, n, even)
		}
	}
}
