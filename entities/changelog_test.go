package entities_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/internal/cluster"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
)

// changeStore is a store with a change log whose writes need no fence
// argument (the sharded store's go under an owner's fences), and the fence
// its checkpoints are saved under.
type changeStore interface {
	entities.Store
	entities.ChangeLog
	SetChangeLogLimit(n int)
}

// changeTargets are the stores with a change log: memory, and the
// sharded store on one Redis and on a Redis Cluster.
func changeTargets(t *testing.T) map[string]func(t *testing.T) (changeStore, func(shard int) cluster.Fence) {
	targets := map[string]func(t *testing.T) (changeStore, func(int) cluster.Fence){
		"memory": func(*testing.T) (changeStore, func(int) cluster.Fence) {
			return entities.NewMemoryStore(), func(int) cluster.Fence { return cluster.Fence{} }
		},
	}
	for _, target := range testenv.RedisTargets {
		targets[target.Name] = func(t *testing.T) (changeStore, func(int) cluster.Fence) {
			client := target.Connect(t)
			prefix := newTestPrefix()
			w := &fencedWriter{ShardedRedisStore: newTestShardedStore(t, client, prefix), owner: joinOwner(t, client, prefix, "owner")}
			return w, func(shard int) cluster.Fence { return w.owner.fence(t, shard) }
		}
	}
	return targets
}

// idsInShard returns n ids of entity type typ that fall in shard.
func idsInShard(typ string, shard, n int) []string {
	var ids []string
	for i := 0; len(ids) < n; i++ {
		if id := fmt.Sprintf("e-%d", i); cluster.ShardOf(typ, id) == shard {
			ids = append(ids, id)
		}
	}
	return ids
}

// TestChangeLog: a shard records its changes once a consumer registered,
// in order, numbered without gap, deletes included; a checkpoint trims
// up to the lowest; the bound keeps the log short and tells a reader
// behind it that it missed changes; Current reads the states; Watch
// hears the changes recorded, as the log holds them.
func TestChangeLog(t *testing.T) {
	for name, newStore := range changeTargets(t) {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			s, fence := newStore(t)
			const shard = 7
			ids := idsInShard("order", shard, 3)
			var heardMu sync.Mutex
			var heard []entities.Change
			stop := s.Watch(func(in int, c entities.Change) {
				heardMu.Lock()
				defer heardMu.Unlock()
				if in != shard {
					t.Errorf("Watch heard %+v in shard %d, want %d", c, in, shard)
				}
				heard = append(heard, c)
			})
			defer stop()

			mustSave(t, ctx, s, "order", ids[0], `{"n":0}`, 0) // before any consumer: not recorded
			for _, consumer := range []string{"mailer", "ledger"} {
				if cp, err := s.Register(ctx, consumer, shard); err != nil || cp != 0 {
					t.Fatalf("Register %s = %d, %v; want 0", consumer, cp, err)
				}
			}
			r1 := mustSave(t, ctx, s, "order", ids[1], `{"n":1}`, 0)
			rev, err := s.Revision(ctx, "order", ids[0])
			if err != nil {
				t.Fatal(err)
			}
			mustDelete(t, ctx, s, "order", ids[0], rev)
			mustDelete(t, ctx, s, "order", ids[2], 0) // absent: nothing changes, nothing recorded
			changes, head, missed, err := s.Changes(ctx, shard, 0, 10)
			if err != nil {
				t.Fatal(err)
			}
			want := []string{fmt.Sprintf("1 %s r%d {\"n\":1}", ids[1], r1), fmt.Sprintf("2 %s r%d deleted", ids[0], rev)}
			if got := describe(changes); !slices.Equal(got, want) || head != 2 || missed {
				t.Fatalf("Changes = %q head %d missed %v, want %q head 2", got, head, missed, want)
			}
			if changes[0].At.IsZero() || changes[0].EntityType != "order" {
				t.Errorf("change %+v: want its type and time", changes[0])
			}
			heardMu.Lock()
			if !slices.EqualFunc(heard, changes, sameChange) {
				t.Errorf("Watch heard %+v, want the changes recorded, as the log holds them: %+v", heard, changes)
			}
			heardMu.Unlock()

			// Two consumers: the log is trimmed up to the lower checkpoint.
			if err := s.SaveCheckpoint(ctx, fence(shard), "mailer", shard, 2); err != nil {
				t.Fatal(err)
			}
			if err := s.SaveCheckpoint(ctx, fence(shard), "ledger", shard, 1); err != nil {
				t.Fatal(err)
			}
			if changes, _, missed, _ := s.Changes(ctx, shard, 1, 10); len(changes) != 1 || missed {
				t.Fatalf("after the checkpoints 2 and 1: %q missed %v, want change 2 kept for ledger", describe(changes), missed)
			}
			if _, _, missed, _ := s.Changes(ctx, shard, 0, 10); !missed {
				t.Fatal("change 1 was trimmed; a read after 0 must say it missed it")
			}
			if cp, ok, err := s.Checkpoint(ctx, "ledger", shard); err != nil || !ok || cp != 1 {
				t.Fatalf("ledger's checkpoint = %d %v %v, want 1", cp, ok, err)
			}
			if err := s.SaveCheckpoint(ctx, fence(shard), "ledger", shard, 2); err != nil {
				t.Fatal(err)
			}
			if changes, _, missed, _ := s.Changes(ctx, shard, 2, 10); len(changes) != 0 || missed {
				t.Fatalf("after both checkpoints: %q left (missed %v), want none", describe(changes), missed)
			}

			// The bound: a reader behind it is told it missed changes.
			const limit, writes = 10, 300
			s.SetChangeLogLimit(limit)
			r := r1
			for i := range writes {
				r = mustSave(t, ctx, s, "order", ids[1], fmt.Sprintf(`{"n":%d}`, i+2), r)
			}
			changes, head, missed, err = s.Changes(ctx, shard, 2, 1000)
			if err != nil {
				t.Fatal(err)
			}
			// MAXLEN ~ trims whole stream nodes (100 entries).
			if len(changes) < limit || len(changes) > limit+100 || !missed || head != 2+writes {
				t.Fatalf("after %d writes: %d changes, missed %v, head %d; want %d to %d, missed, head %d",
					writes, len(changes), missed, head, limit, limit+100, 2+writes)
			}
			if last := changes[len(changes)-1]; last.Seq != head || last.Revision != r {
				t.Fatalf("last change %+v, want seq %d revision %d", last, head, r)
			}

			var current []string
			if err := s.Current(ctx, shard, "order", func(c entities.Change) error {
				current = append(current, fmt.Sprintf("%s r%d %s", c.EntityID, c.Revision, c.Data))
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if want := []string{fmt.Sprintf("%s r%d {\"n\":%d}", ids[1], r, writes+1)}; !slices.Equal(current, want) {
				t.Fatalf("Current = %q, want %q", current, want)
			}
		})
	}
}

// sameChange compares two changes field by field.
func sameChange(a, b entities.Change) bool {
	return a.Seq == b.Seq && a.EntityType == b.EntityType && a.EntityID == b.EntityID && a.Revision == b.Revision &&
		a.Deleted == b.Deleted && string(a.Data) == string(b.Data) && a.At.Equal(b.At)
}

// describe prints changes as "seq id revision data-or-deleted".
func describe(changes []entities.Change) []string {
	var out []string
	for _, c := range changes {
		what := string(c.Data)
		if c.Deleted {
			what = "deleted"
		}
		out = append(out, fmt.Sprintf("%d %s r%d %s", c.Seq, c.EntityID, c.Revision, what))
	}
	return out
}
