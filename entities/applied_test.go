package entities_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/redis/go-redis/v9"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
)

// losingStore is a store whose next write is applied and its answer lost,
// as when Redis's reply never comes back.
type losingStore struct {
	entities.AppliedStore
	loseNext atomic.Bool
}

func (s *losingStore) Save(ctx context.Context, typ, id string, data []byte, expected uint64) (uint64, error) {
	rev, err := s.AppliedStore.Save(ctx, typ, id, data, expected)
	if err == nil && s.loseNext.CompareAndSwap(true, false) {
		return 0, fmt.Errorf("injected: the answer was lost: %w", components.ErrOutcomeUnknown)
	}
	return rev, err
}

// A retry of a keyed command whose answer was lost, after 20 other keyed
// commands, is answered with the first answer and applied once; a
// refusal and a reply are recorded too; a key is scoped to its entity and
// command; a command id records only a change. On every store: memory,
// Redis and Redis Cluster (RedisStore and ShardedRedisStore).
func TestAppliedKeys(t *testing.T) {
	stores := []appliedTarget{{"memory", func(*testing.T) entities.AppliedStore { return entities.NewMemoryStore() }}}
	for _, target := range testenv.RedisTargets {
		stores = append(stores, appliedTarget{"redis/" + target.Name, func(t *testing.T) entities.AppliedStore {
			return newTestRedisStore(t, target.Connect(t), newTestPrefix())
		}}, appliedTarget{"sharded/" + target.Name, func(t *testing.T) entities.AppliedStore {
			client, prefix := target.Connect(t), newTestPrefix()
			return &fencedWriter{ShardedRedisStore: newTestShardedStore(t, client, prefix), owner: joinOwner(t, client, prefix, "a")}
		}})
	}
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) { testAppliedKeys(t, st.make) })
	}
}

// appliedTarget is a store the applied keys' tests run on.
type appliedTarget struct {
	name string
	make func(t *testing.T) entities.AppliedStore
}

func testAppliedKeys(t *testing.T, makeStore func(t *testing.T) entities.AppliedStore) {
	keyed := func(k string) context.Context { return components.WithIdempotencyKey(context.Background(), k) }
	cases := []struct {
		name string
		run  func(t *testing.T, s *losingStore, n *node)
	}{
		{"a lost answer, retried after 20 others", func(t *testing.T, s *losingStore, n *node) {
			s.loseNext.Store(true)
			if _, err := Deposit.Invoke(keyed("k"), n.client, "a", 5); err == nil {
				t.Fatal("the lost answer gave no error")
			}
			for i := range 20 {
				if _, err := Deposit.Invoke(keyed(fmt.Sprint("other-", i)), n.client, "a", 1); err != nil {
					t.Fatal(err)
				}
			}
			a, err := Deposit.Invoke(keyed("k"), n.client, "a", 5)
			if err != nil || a.Balance != 5 {
				t.Fatalf("retry: %+v, %v; want the first answer, balance 5", a, err)
			}
			if got := n.balance(t, "a"); got != 25 {
				t.Fatalf("balance %d, want 25 (applied once)", got)
			}
		}},
		{"a refusal is replayed", func(t *testing.T, s *losingStore, n *node) {
			mustDeposit(t, n, "a", 1)
			_, err := Withdraw.Invoke(keyed("w"), n.client, "a", 3)
			if kind, ok := refusalKind(err); !ok || kind != components.Conflict {
				t.Fatalf("withdraw 3 of 1: %v, want a conflict", err)
			}
			mustDeposit(t, n, "a", 10)
			_, err = Withdraw.Invoke(keyed("w"), n.client, "a", 3)
			if kind, ok := refusalKind(err); !ok || kind != components.Conflict {
				t.Fatalf("retried withdraw: %v, want the first answer's conflict", err)
			}
			if got := n.balance(t, "a"); got != 11 {
				t.Fatalf("balance %d, want 11", got)
			}
		}},
		{"a reply is replayed", func(t *testing.T, s *losingStore, n *node) {
			mustDeposit(t, n, "a", 1)
			if a, err := Balance.Invoke(keyed("b"), n.client, "a", done); err != nil || a.Balance != 1 {
				t.Fatalf("balance: %+v, %v", a, err)
			}
			mustDeposit(t, n, "a", 1)
			if a, err := Balance.Invoke(keyed("b"), n.client, "a", done); err != nil || a.Balance != 1 {
				t.Fatalf("retried balance: %+v, %v; want the first answer, 1", a, err)
			}
		}},
		{"a read without its context's key is not recorded", func(t *testing.T, s *losingStore, n *node) {
			mustDeposit(t, n, "a", 1)
			plain := components.WithoutIdempotencyKey(keyed("b"))
			if _, ok := components.IdempotencyKeyFrom(plain); ok {
				t.Fatal("WithoutIdempotencyKey left the key")
			}
			for want := 1; want <= 2; want++ {
				if a, err := Balance.Invoke(plain, n.client, "a", done); err != nil || a.Balance != want {
					t.Fatalf("balance: %+v, %v; want %d, as it is", a, err, want)
				}
				mustDeposit(t, n, "a", 1)
			}
			if a, err := Balance.Invoke(keyed("b"), n.client, "a", done); err != nil || a.Balance != 3 {
				t.Fatalf("balance with the key: %+v, %v; want 3, none recorded under it", a, err)
			}
		}},
		{"a key is scoped to its entity and command", func(t *testing.T, s *losingStore, n *node) {
			for _, id := range []string{"a", "b"} {
				if _, err := Deposit.Invoke(keyed("same"), n.client, id, 2); err != nil {
					t.Fatal(err)
				}
			}
			if a, err := Withdraw.Invoke(keyed("same"), n.client, "a", 1); err != nil || a.Balance != 1 {
				t.Fatalf("withdraw with a deposit's key: %+v, %v", a, err)
			}
			if got := n.balance(t, "b"); got != 2 {
				t.Fatalf("balance of b %d, want 2", got)
			}
		}},
		{"a delete is replayed", func(t *testing.T, s *losingStore, n *node) {
			mustDeposit(t, n, "a", 7)
			for range 2 {
				if last, err := Close.Invoke(keyed("c"), n.client, "a", done); err != nil || last != 7 {
					t.Fatalf("close: %d, %v; want 7", last, err)
				}
			}
		}},
		{"a command id records a change only", func(t *testing.T, s *losingStore, n *node) {
			ctx := components.WithCommandID(context.Background(), "id")
			mustDeposit(t, n, "a", 1)
			if _, err := Balance.Invoke(ctx, n.client, "a", done); err != nil {
				t.Fatal(err)
			}
			for range 2 {
				if a, err := Deposit.Invoke(ctx, n.client, "a", 1); err != nil || a.Balance != 2 {
					t.Fatalf("deposit: %+v, %v; want balance 2", a, err)
				}
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := &losingStore{AppliedStore: makeStore(t)}
			tc.run(t, s, startNode(t, s))
		})
	}
}

// A record is kept for its retention, then the key applies again; expired
// records are trimmed by the entity's next keyed write.
func TestAppliedKeysExpire(t *testing.T) {
	s := entities.NewMemoryStore()
	fc := clockwork.NewFakeClock()
	s.SetClock(fc)
	n := startNode(t, s, func(h *entities.Host) { h.KeyRetention = time.Hour })
	ctx := components.WithIdempotencyKey(context.Background(), "k")
	for i := range 10 {
		if _, err := Deposit.Invoke(components.WithIdempotencyKey(ctx, fmt.Sprint(i)), n.client, "a", 1); err != nil {
			t.Fatal(err)
		}
	}
	fc.Advance(time.Hour)
	if a, err := Deposit.Invoke(ctx, n.client, "a", 1); err != nil || a.Balance != 11 {
		t.Fatalf("after the retention: %+v, %v; want applied again, 11", a, err)
	}
	if got := s.AppliedRecords("acct", "a"); got != 1 {
		t.Fatalf("%d records kept, want 1 (the expired ones trimmed)", got)
	}
}

func mustDeposit(t *testing.T, n *node, id string, amount int) {
	t.Helper()
	if _, err := Deposit.Invoke(context.Background(), n.client, id, amount); err != nil {
		t.Fatal(err)
	}
}

// refusalKind is err's CommandError's kind.
func refusalKind(err error) (components.ErrorKind, bool) {
	var ce *components.CommandError
	if errors.As(err, &ce) {
		return ce.Kind, true
	}
	return 0, false
}

// Redis trims expired records on the entity's later writes, a few per
// write, oldest first, so an entity's hash holds no more than its
// retention's records, and never a record within its retention. On both
// Redis layouts.
func TestAppliedKeysTrimmedInRedis(t *testing.T) {
	const retention = 300 * time.Millisecond
	stores := []struct {
		name string
		make func(t *testing.T, client *redis.Client, prefix string) entities.Store
	}{
		{"redis", func(t *testing.T, client *redis.Client, prefix string) entities.Store {
			return newTestRedisStore(t, client, prefix)
		}},
		{"sharded", func(t *testing.T, client *redis.Client, prefix string) entities.Store {
			return &fencedWriter{ShardedRedisStore: newTestShardedStore(t, client, prefix), owner: joinOwner(t, client, prefix, "a")}
		}},
	}
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			client, prefix := testenv.Redis(t), newTestPrefix()
			n := startNode(t, st.make(t, client, prefix), func(h *entities.Host) { h.KeyRetention = retention })
			ctx := context.Background()
			redisNow := func() time.Time {
				t.Helper()
				now, err := client.Time(ctx).Result()
				if err != nil {
					t.Fatal(err)
				}
				return now
			}
			written := map[string]time.Time{} // key: Redis's time before its write
			deposit := func(key string) {
				t.Helper()
				written[key] = redisNow()
				if _, err := Deposit.Invoke(components.WithIdempotencyKey(ctx, key), n.client, "a", 1); err != nil {
					t.Fatal(err)
				}
			}
			// records lists the keys recorded in the entity's hash, and
			// fails if one that cannot have expired yet is missing.
			records := func() int {
				t.Helper()
				hash := entityHash(t, client, prefix, "acct", "a")
				fields, err := client.HKeys(ctx, hash).Result()
				if err != nil {
					t.Fatal(err)
				}
				kept := map[string]bool{}
				for _, f := range fields {
					if rec, ok := strings.CutPrefix(f, "a:"); ok {
						kept[rec[strings.LastIndexByte(rec, ':')+1:]] = true // k<len>:<method>:<key>
					}
				}
				now := redisNow()
				for key, at := range written {
					if !kept[key] && now.Before(at.Add(retention)) {
						t.Fatalf("the record of %q, written at %v, is gone at %v, within its retention", key, at, now)
					}
				}
				return len(kept)
			}
			waitPast := func(at time.Time) {
				t.Helper()
				testenv.Eventually(t, 5*time.Second, "the retention to pass on Redis's clock", func() bool {
					return redisNow().After(at.Add(retention + 50*time.Millisecond))
				})
			}

			for i := range 10 {
				deposit(fmt.Sprint("old-", i))
			}
			if got := records(); got != 10 {
				t.Fatalf("%d records, want 10", got)
			}
			waitPast(written["old-9"])
			for i := range 4 {
				deposit(fmt.Sprint("new-", i))
			}
			if got := records(); got != 4 {
				t.Fatalf("%d records after 4 writes past the retention, want 4 (the 10 expired trimmed)", got)
			}
			deposit("more")
			records() // none live trimmed
			waitPast(written["more"])
			for i := range 2 {
				deposit(fmt.Sprint("last-", i))
			}
			if got := records(); got != 2 {
				t.Fatalf("%d records after 2 writes past every retention, want 2 (the 5 expired trimmed)", got)
			}
		})
	}
}

// entityHash is the key of the hash that holds entity typ/id's state and
// records in either Redis layout under prefix.
func entityHash(t *testing.T, client *redis.Client, prefix, typ, id string) string {
	t.Helper()
	var found []string
	iter := client.Scan(context.Background(), 0, "*"+prefix+"*", 1000).Iterator()
	for iter.Next(context.Background()) {
		if strings.HasSuffix(iter.Val(), fmt.Sprintf("%d:%s:%s", len(typ), typ, id)) {
			found = append(found, iter.Val())
		}
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	if len(found) != 1 {
		t.Fatalf("keys of %s/%s under %s: %q, want one", typ, id, prefix, found)
	}
	return found[0]
}
