package entities_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/internal/cluster"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
)

// journalUnderTest is a JournalStore, the fence its writes go under, and
// whether it records changes in a change log.
type journalUnderTest struct {
	s     entities.JournalStore
	fence func(t *testing.T, entityType, id string) entities.Fence
	log   entities.ChangeLog // nil: keeps none
}

func noFence(*testing.T, string, string) entities.Fence { return entities.Fence{} }

// TestJournalConformance runs the JournalStore suite on every store: in
// memory, RedisStore and ShardedRedisStore on one Redis and on a Redis
// Cluster.
func TestJournalConformance(t *testing.T) {
	t.Run("memory", func(t *testing.T) {
		runJournalConformance(t, func(t *testing.T) journalUnderTest {
			s := entities.NewMemoryStore()
			return journalUnderTest{s: s, fence: noFence, log: s}
		})
	})
	for _, target := range testenv.RedisTargets {
		t.Run("redis/"+target.Name, func(t *testing.T) {
			client := target.Connect(t)
			runJournalConformance(t, func(t *testing.T) journalUnderTest {
				return journalUnderTest{s: newTestRedisStore(t, client, newTestPrefix()), fence: noFence}
			})
		})
		t.Run("sharded/"+target.Name, func(t *testing.T) {
			client := target.Connect(t)
			runJournalConformance(t, func(t *testing.T) journalUnderTest {
				prefix := newTestPrefix()
				s := newTestShardedStore(t, client, prefix)
				o := joinOwner(t, client, prefix, "owner")
				return journalUnderTest{s: s, log: s, fence: func(t *testing.T, typ, id string) entities.Fence {
					return o.fence(t, cluster.ShardOf(typ, id))
				}}
			})
		})
	}
}

// ev is event seq of a test journal.
func ev(seq uint64, name string) entities.JournalEvent {
	return entities.JournalEvent{Seq: seq, Name: name, Data: []byte(`{"n":` + strconv.FormatUint(seq, 10) + `}`),
		At: time.UnixMilli(1_700_000_000_000 + int64(seq))}
}

func evs(from, to uint64) []entities.JournalEvent {
	var out []entities.JournalEvent
	for seq := from; seq <= to; seq++ {
		out = append(out, ev(seq, "added"))
	}
	return out
}

func runJournalConformance(t *testing.T, newStore func(t *testing.T) journalUnderTest) {
	const typ, id = "wallet", "w-1"
	cases := []struct {
		name string
		run  func(t *testing.T, ctx context.Context, j journalUnderTest)
	}{
		{"EmptyIsZero", func(t *testing.T, ctx context.Context, j journalUnderTest) {
			wantJournal(t, ctx, j.s, typ, id, entities.JournalHead{}, nil)
		}},
		{"AppendInOrder", func(t *testing.T, ctx context.Context, j journalUnderTest) {
			mustAppend(t, ctx, j, typ, id, entities.JournalWrite{Expected: 0, Events: evs(1, 2)})
			mustAppend(t, ctx, j, typ, id, entities.JournalWrite{Expected: 2, Events: evs(3, 3)})
			wantJournal(t, ctx, j.s, typ, id, entities.JournalHead{Seq: 3}, evs(1, 3))
		}},
		{"ConflictWritesNothing", func(t *testing.T, ctx context.Context, j journalUnderTest) {
			mustAppend(t, ctx, j, typ, id, entities.JournalWrite{Events: evs(1, 2)})
			err := j.s.Append(ctx, j.fence(t, typ, id), typ, id, entities.JournalWrite{Expected: 1, Events: evs(2, 3)})
			if !errors.Is(err, entities.ErrConflict) {
				t.Fatalf("append over a stale seq: %v, want ErrConflict", err)
			}
			wantJournal(t, ctx, j.s, typ, id, entities.JournalHead{Seq: 2}, evs(1, 2))
		}},
		{"SnapshotThenEventsAfterIt", func(t *testing.T, ctx context.Context, j journalUnderTest) {
			snap := &entities.Snapshot{Seq: 3, Data: []byte(`{"sum":6}`), At: time.UnixMilli(1_700_000_000_003)}
			mustAppend(t, ctx, j, typ, id, entities.JournalWrite{Events: evs(1, 3), Snapshot: snap})
			mustAppend(t, ctx, j, typ, id, entities.JournalWrite{Expected: 3, Events: evs(4, 5)})
			wantJournal(t, ctx, j.s, typ, id, entities.JournalHead{Seq: 5, Snapshot: snap}, evs(4, 5))
			wantEvents(t, ctx, j.s, typ, id, 0, 100, evs(1, 5))
		}},
		{"EventsPaged", func(t *testing.T, ctx context.Context, j journalUnderTest) {
			mustAppend(t, ctx, j, typ, id, entities.JournalWrite{Events: evs(1, 7)})
			wantEvents(t, ctx, j.s, typ, id, 0, 3, evs(1, 3))
			wantEvents(t, ctx, j.s, typ, id, 3, 3, evs(4, 6))
			wantEvents(t, ctx, j.s, typ, id, 6, 3, evs(7, 7))
			wantEvents(t, ctx, j.s, typ, id, 7, 3, nil)
		}},
		{"TrimDropsCoveredOnly", func(t *testing.T, ctx context.Context, j journalUnderTest) {
			snap := &entities.Snapshot{Seq: 4, Data: []byte(`{}`), At: time.UnixMilli(1_700_000_000_004)}
			mustAppend(t, ctx, j, typ, id, entities.JournalWrite{Events: evs(1, 4), Snapshot: snap})
			mustAppend(t, ctx, j, typ, id, entities.JournalWrite{Expected: 4, Events: evs(5, 6), TrimThrough: 3})
			wantEvents(t, ctx, j.s, typ, id, 0, 100, evs(4, 6))
			wantJournal(t, ctx, j.s, typ, id, entities.JournalHead{Seq: 6, Snapshot: snap}, evs(5, 6))
		}},
		{"DeletedRefusesAppends", func(t *testing.T, ctx context.Context, j journalUnderTest) {
			mustAppend(t, ctx, j, typ, id, entities.JournalWrite{Events: evs(1, 1), Delete: true})
			wantJournal(t, ctx, j.s, typ, id, entities.JournalHead{Seq: 1, Deleted: true}, evs(1, 1))
			err := j.s.Append(ctx, j.fence(t, typ, id), typ, id, entities.JournalWrite{Expected: 1, Events: evs(2, 2)})
			if !errors.Is(err, entities.ErrJournalDeleted) {
				t.Fatalf("append on a deleted entity: %v, want ErrJournalDeleted", err)
			}
			wantJournal(t, ctx, j.s, typ, id, entities.JournalHead{Seq: 1, Deleted: true}, evs(1, 1))
		}},
		{"JournalIDs", func(t *testing.T, ctx context.Context, j journalUnderTest) {
			for _, id := range []string{"b", "a:1", "c*"} {
				mustAppend(t, ctx, j, typ, id, entities.JournalWrite{Events: evs(1, 1)})
			}
			mustAppend(t, ctx, j, "walle", "t:x", entities.JournalWrite{Events: evs(1, 1)})
			ids, err := j.s.JournalIDs(ctx, typ)
			if err != nil || fmt.Sprint(ids) != "[a:1 b c*]" {
				t.Fatalf("JournalIDs = %q, %v; want [a:1 b c*]", ids, err)
			}
		}},
		{"AppliedOnce", func(t *testing.T, ctx context.Context, j journalUnderTest) {
			rec := entities.Applied{Key: "i3:add:x", Answer: []byte(`r1`), Retention: time.Minute}
			mustAppend(t, ctx, j, typ, id, entities.JournalWrite{Events: evs(1, 1), Applied: []entities.Applied{rec}})
			other := entities.Applied{Key: "i3:add:y", Answer: []byte(`r2`), Retention: time.Minute}
			err := j.s.Append(ctx, j.fence(t, typ, id), typ, id, entities.JournalWrite{Expected: 1, Events: evs(2, 2),
				Applied: []entities.Applied{other, rec}})
			var done *entities.AlreadyAppliedError
			if !errors.As(err, &done) || string(done.Answer) != "r1" {
				t.Fatalf("append again with a kept key: %v, want AlreadyAppliedError with the first answer r1", err)
			}
			wantJournal(t, ctx, j.s, typ, id, entities.JournalHead{Seq: 1}, evs(1, 1))
			mustAppend(t, ctx, j, typ, id, entities.JournalWrite{Expected: 1, Events: evs(2, 2), Applied: []entities.Applied{other}})
			wantJournal(t, ctx, j.s, typ, id, entities.JournalHead{Seq: 2}, evs(1, 2))
		}},
		{"BadEventNameWritesNothing", func(t *testing.T, ctx context.Context, j journalUnderTest) {
			err := j.s.Append(ctx, j.fence(t, typ, id), typ, id, entities.JournalWrite{Events: []entities.JournalEvent{ev(1, `bad"name`)}})
			if err == nil {
				t.Fatal("append of an event named bad\"name: no error")
			}
			wantJournal(t, ctx, j.s, typ, id, entities.JournalHead{}, nil)
		}},
		{"ChangesRecordedWithTheEvents", func(t *testing.T, ctx context.Context, j journalUnderTest) {
			if j.log == nil {
				t.Skip("the store keeps no change log")
			}
			shard := cluster.ShardOf(typ, id)
			if _, err := j.log.Register(ctx, "c", shard); err != nil {
				t.Fatal(err)
			}
			mustAppend(t, ctx, j, typ, id, entities.JournalWrite{Events: evs(1, 2)})
			mustAppend(t, ctx, j, typ, id, entities.JournalWrite{Expected: 2, Delete: true})
			changes, _, _, err := j.log.Changes(ctx, shard, 0, 10)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, c := range changes {
				got = append(got, fmt.Sprintf("%s/%s r%d del=%v %s", c.EntityType, c.EntityID, c.Revision, c.Deleted, c.Data))
			}
			want := []string{
				`wallet/w-1 r1 del=false {"name":"added","data":{"n":1}}`,
				`wallet/w-1 r2 del=false {"name":"added","data":{"n":2}}`,
				`wallet/w-1 r2 del=true `,
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("changes\n%q\nwant\n%q", got, want)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.run(t, t.Context(), newStore(t))
		})
	}
}

// TestShardedJournalFence: an append under a fence that is no longer the
// shard's is refused with ErrFenced and writes nothing.
func TestShardedJournalFence(t *testing.T) {
	onEachTarget(t, func(t *testing.T, ctx context.Context, client redis.UniversalClient, prefix string, s *entities.ShardedRedisStore) {
		a, b := joinOwner(t, client, prefix, "a"), joinOwner(t, client, prefix, "b")
		shard := cluster.ShardOf("wallet", "w-1")
		old := a.fence(t, shard)
		if err := s.Append(ctx, old, "wallet", "w-1", entities.JournalWrite{Events: evs(1, 1)}); err != nil {
			t.Fatal(err)
		}
		if err := a.m.Release(ctx, old); err != nil {
			t.Fatal(err)
		}
		b.fence(t, shard)
		err := s.Append(ctx, old, "wallet", "w-1", entities.JournalWrite{Expected: 1, Events: evs(2, 2)})
		if !errors.Is(err, entities.ErrFenced) {
			t.Fatalf("append under the old fence: %v, want ErrFenced", err)
		}
		if err := s.Append(ctx, entities.Fence{}, "wallet", "w-1", entities.JournalWrite{Expected: 1, Events: evs(2, 2)}); !errors.Is(err, entities.ErrFenced) {
			t.Fatalf("append with no fence: %v, want ErrFenced", err)
		}
		wantJournal(t, ctx, s, "wallet", "w-1", entities.JournalHead{Seq: 1}, evs(1, 1))
	})
}

func mustAppend(t *testing.T, ctx context.Context, j journalUnderTest, typ, id string, w entities.JournalWrite) {
	t.Helper()
	if err := j.s.Append(ctx, j.fence(t, typ, id), typ, id, w); err != nil {
		t.Fatalf("append %+v: %v", w, err)
	}
}

func wantJournal(t *testing.T, ctx context.Context, s entities.JournalStore, typ, id string, head entities.JournalHead, events []entities.JournalEvent) {
	t.Helper()
	h, got, err := s.ReadJournal(ctx, typ, id)
	if err != nil {
		t.Fatalf("ReadJournal: %v", err)
	}
	seq, deleted, err := s.JournalSeq(ctx, typ, id)
	if err != nil || seq != head.Seq || deleted != head.Deleted {
		t.Fatalf("JournalSeq = %d, %v, %v; want %d, %v", seq, deleted, err, head.Seq, head.Deleted)
	}
	if showHead(h) != showHead(head) {
		t.Fatalf("head %s, want %s", showHead(h), showHead(head))
	}
	if showEvents(got) != showEvents(events) {
		t.Fatalf("events after the snapshot\n%s\nwant\n%s", showEvents(got), showEvents(events))
	}
}

func wantEvents(t *testing.T, ctx context.Context, s entities.JournalStore, typ, id string, after uint64, limit int, want []entities.JournalEvent) {
	t.Helper()
	got, err := s.Events(ctx, typ, id, after, limit)
	if err != nil {
		t.Fatalf("Events: %v", err)
	}
	if showEvents(got) != showEvents(want) {
		t.Fatalf("Events after %d (limit %d)\n%s\nwant\n%s", after, limit, showEvents(got), showEvents(want))
	}
}

func showHead(h entities.JournalHead) string {
	s := fmt.Sprintf("seq %d deleted %v", h.Seq, h.Deleted)
	if h.Snapshot != nil {
		s += fmt.Sprintf(" snapshot %d %s at %d", h.Snapshot.Seq, h.Snapshot.Data, h.Snapshot.At.UnixMilli())
	}
	return s
}

func showEvents(events []entities.JournalEvent) string {
	s := ""
	for _, e := range events {
		s += fmt.Sprintf("%d %s %s %d\n", e.Seq, e.Name, e.Data, e.At.UnixMilli())
	}
	return s
}
