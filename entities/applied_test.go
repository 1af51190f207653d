package entities_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/entities"
)

// losingStore is a MemoryStore whose next write is applied and its answer
// lost, as when Redis's reply never comes back.
type losingStore struct {
	*entities.MemoryStore
	loseNext atomic.Bool
}

func (s *losingStore) Save(ctx context.Context, typ, id string, data []byte, expected uint64) (uint64, error) {
	rev, err := s.MemoryStore.Save(ctx, typ, id, data, expected)
	if err == nil && s.loseNext.CompareAndSwap(true, false) {
		return 0, fmt.Errorf("injected: the answer was lost: %w", components.ErrOutcomeUnknown)
	}
	return rev, err
}

// A retry of a keyed command whose answer was lost, after 20 other keyed
// commands, is answered with the first answer and applied once; a
// refusal and a reply are recorded too; a key is scoped to its entity and
// command; a command id records only a change.
func TestAppliedKeysMemory(t *testing.T) {
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
			if got := s.AppliedRecords("acct", "a"); got != 0 {
				t.Fatalf("%d records after a read with a command id, want 0", got)
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
			s := &losingStore{MemoryStore: entities.NewMemoryStore()}
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
