package entities_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/internal/cluster"
)

// TestShardedRedisStoreSaveBatch: a batch writes its updates in order,
// each with a revision of its own above the one before, and a change each
// in the shard's log once a consumer registered; the state is the last.
// Under an old fence, over another revision, or for an entity that does
// not exist, it writes nothing.
func TestShardedRedisStoreSaveBatch(t *testing.T) {
	onEachTarget(t, func(t *testing.T, ctx context.Context, client redis.UniversalClient, prefix string, s *entities.ShardedRedisStore) {
		a, b := joinOwner(t, client, prefix, "a"), joinOwner(t, client, prefix, "b")
		shard := cluster.ShardOf("counter", "c-1")
		f := a.fence(t, shard)
		updates := func(values ...int) []entities.Update {
			var u []entities.Update
			for _, v := range values {
				u = append(u, entities.Update{Data: fmt.Appendf(nil, `{"value":%d}`, v)})
			}
			return u
		}
		if _, err := s.SaveFencedBatch(ctx, f, "counter", "c-1", updates(1), 0); !errors.Is(err, entities.ErrConflict) {
			t.Fatalf("a batch for an entity that does not exist: %v, want ErrConflict", err)
		}
		rev, err := s.SaveFenced(ctx, f, "counter", "c-1", []byte(`{"value":0}`), 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Register(ctx, "watcher", shard); err != nil {
			t.Fatal(err)
		}
		_, after, _, err := s.Changes(ctx, shard, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		revs, err := s.SaveFencedBatch(ctx, f, "counter", "c-1", updates(1, 2, 3), rev)
		if err != nil || len(revs) != 3 {
			t.Fatalf("SaveFencedBatch = %v, %v; want 3 revisions", revs, err)
		}
		for i, r := range revs {
			prev := rev
			if i > 0 {
				prev = revs[i-1]
			}
			if r <= prev {
				t.Fatalf("revisions %v after %d: not rising", revs, rev)
			}
		}
		wantRecord(t, ctx, s, "counter", "c-1", `{"value":3}`, revs[2])
		changes, _, _, err := s.Changes(ctx, shard, after, 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(changes) != 3 {
			t.Fatalf("%d changes logged, want 3: %+v", len(changes), changes)
		}
		for i, c := range changes {
			if want := fmt.Sprintf(`{"value":%d}`, i+1); c.Revision != revs[i] || string(c.Data) != want {
				t.Fatalf("change %d = rev %d %s, want rev %d %s", i, c.Revision, c.Data, revs[i], want)
			}
		}

		if _, err := s.SaveFencedBatch(ctx, f, "counter", "c-1", updates(9), rev); !errors.Is(err, entities.ErrConflict) {
			t.Fatalf("a batch over an old revision: %v, want ErrConflict", err)
		}
		if err := a.m.Release(ctx, f); err != nil {
			t.Fatal(err)
		}
		b.fence(t, shard)
		wantFenced(t, "a batch under an old fence", batchErr(ctx, s, f, revs[2]))
		wantRecord(t, ctx, s, "counter", "c-1", `{"value":3}`, revs[2])
	})
}

func batchErr(ctx context.Context, s *entities.ShardedRedisStore, f cluster.Fence, expected uint64) error {
	_, err := s.SaveFencedBatch(ctx, f, "counter", "c-1", []entities.Update{{Data: []byte(`{"value":9}`)}}, expected)
	return err
}
