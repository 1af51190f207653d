package eventsourced_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/eventsourced"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
)

// storeMakers are the stores an entity runs on without a cluster: memory,
// and a RedisStore on one Redis and on a Redis Cluster.
func storeMakers() map[string]func(t *testing.T) entities.JournalStore {
	makers := map[string]func(t *testing.T) entities.JournalStore{
		"memory": func(*testing.T) entities.JournalStore { return entities.NewMemoryStore() },
	}
	for _, target := range testenv.RedisTargets {
		makers["redis/"+target.Name] = func(t *testing.T) entities.JournalStore {
			client := target.Connect(t)
			prefix := "test-" + rand.Text()
			t.Cleanup(func() { testenv.DeleteKeys(t, client, prefix+":*") })
			return entities.NewRedisStore(client, prefix)
		}
	}
	return makers
}

// TestEffects runs every effect on every store, then checks the journal
// the commands left.
func TestEffects(t *testing.T) {
	cases := []struct {
		name string
		run  func(t *testing.T, ctx context.Context, n *node)
		// journal is what the entity's journal holds after run: name and
		// data of each event.
		journal string
	}{
		{"PersistThenReplyFromTheStateAfter", func(t *testing.T, ctx context.Context, n *node) {
			w, err := Deposit.Invoke(ctx, n.client, "w-1", Deposited{Amount: 5, Note: "a"})
			if err != nil || w.Balance != 5 || fmt.Sprint(w.Notes) != "[+a]" {
				t.Fatalf("deposit = %+v, %v; want balance 5, notes [+a]", w, err)
			}
			notes, err := Move.Invoke(ctx, n.client, "w-1", 2)
			if err != nil || notes != 3 {
				t.Fatalf("move = %d, %v; want 3 notes", notes, err)
			}
		}, `deposited {"amount":5,"note":"a"}|withdrawn {"amount":2}|deposited {"amount":2,"note":"moved"}|`},
		{"ReplyChangesNothing", func(t *testing.T, ctx context.Context, n *node) {
			mustDeposit(t, ctx, n, "w-1", 3)
			for range 2 {
				w, err := Balance.Invoke(ctx, n.client, "w-1", done)
				if err != nil || w.Balance != 3 || fmt.Sprint(w.Notes) != "[+]" {
					t.Fatalf("balance = %+v, %v; want 3 with one note (the handler's changes in place unseen)", w, err)
				}
			}
		}, `deposited {"amount":3}|`},
		{"RefusalsPersistNothing", func(t *testing.T, ctx context.Context, n *node) {
			wantRefused(t, errOf(Deposit.Invoke(ctx, n.client, "w-1", Deposited{})), "deposit 0", components.Invalid, "must be positive")
			wantRefused(t, errOf(Move.Invoke(ctx, n.client, "w-1", 1)), "move 1 of 0", components.Conflict, "the balance is 0")
		}, ``},
		{"DeleteThenRefused", func(t *testing.T, ctx context.Context, n *node) {
			mustDeposit(t, ctx, n, "w-1", 4)
			if got, err := Close.Invoke(ctx, n.client, "w-1", done); err != nil || got != 4 {
				t.Fatalf("close = %d, %v; want 4", got, err)
			}
			wantRefused(t, errOf(Deposit.Invoke(ctx, n.client, "w-1", Deposited{Amount: 1})), "deposit after close", components.NotFound, `wallet "w-1" was deleted`)
			wantRefused(t, errOf(Balance.Invoke(ctx, n.client, "w-1", done)), "balance after close", components.NotFound, "was deleted")
		}, `deposited {"amount":4}|withdrawn {"amount":4}|`},
		{"UnregisteredEventWritesNothing", func(t *testing.T, ctx context.Context, n *node) {
			_, err := PersistStranger.Invoke(ctx, n.client, "w-1", done)
			if !errors.Is(err, eventsourced.ErrUnregisteredEvent) {
				t.Fatalf("persist a struct{X int}: %v, want ErrUnregisteredEvent", err)
			}
		}, ``},
		{"EventOverTheLimitWritesNothing", func(t *testing.T, ctx context.Context, n *node) {
			_, err := Deposit.Invoke(ctx, n.client, "w-1", Deposited{Amount: 1, Note: strings.Repeat("x", 300)})
			wantRefused(t, errOf(0, err), "a 300-byte note", components.Invalid, "over the limit of 200 bytes")
		}, ``},
		{"IdempotencyKeyAppliedOnce", func(t *testing.T, ctx context.Context, n *node) {
			keyed := components.WithIdempotencyKey(ctx, "deposit-1")
			for range 2 {
				w, err := Deposit.Invoke(keyed, n.client, "w-1", Deposited{Amount: 7})
				if err != nil || w.Balance != 7 {
					t.Fatalf("deposit with a key = %+v, %v; want the first answer, balance 7", w, err)
				}
			}
			if w := mustDeposit(t, ctx, n, "w-1", 1); w.Balance != 8 {
				t.Fatalf("deposit without a key: balance %d, want 8", w.Balance)
			}
		}, `deposited {"amount":7}|deposited {"amount":1}|`},
		{"ZeroEffectFails", func(t *testing.T, ctx context.Context, n *node) {
			if _, err := Nothing.Invoke(ctx, n.client, "w-1", done); err == nil || !strings.Contains(err.Error(), "no effect") {
				t.Fatalf("nothing: %v, want an error saying it returned no effect", err)
			}
		}, ``},
	}
	for name, newStore := range storeMakers() {
		t.Run(name, func(t *testing.T) {
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					store := newStore(t)
					n := startNode(t, store)
					c.run(t, t.Context(), n)
					if got := journalText(t, store, "w-1"); got != c.journal {
						t.Fatalf("journal\n%s\nwant\n%s", got, c.journal)
					}
				})
			}
		})
	}
}

func mustDeposit(t *testing.T, ctx context.Context, n *node, id string, amount int) Wallet {
	t.Helper()
	w, err := Deposit.Invoke(ctx, n.client, id, Deposited{Amount: amount})
	if err != nil {
		t.Fatalf("deposit %d on %s: %v", amount, id, err)
	}
	return w
}

// wantRefused checks a command's outcome is a refusal of kind, its
// message containing msg.
func wantRefused(t *testing.T, err error, what string, kind components.ErrorKind, msg string) {
	t.Helper()
	var ce *components.CommandError
	if !errors.As(err, &ce) || ce.Kind != kind || !strings.Contains(ce.Message, msg) {
		t.Fatalf("%s: %v, want a %v refusal saying %q", what, err, kind, msg)
	}
}

// errOf is a command's error, its reply dropped.
func errOf(_ any, err error) error { return err }

// journalText is the entity's whole journal: "name data|" per event, with
// its numbers checked to run from 1 with no gap.
func journalText(t *testing.T, s entities.JournalStore, id string) string {
	t.Helper()
	events, err := s.Events(t.Context(), "wallet", id, 0, 10_000)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for i, e := range events {
		if e.Seq != uint64(i+1) {
			t.Fatalf("event %d of the journal is numbered %d", i+1, e.Seq)
		}
		fmt.Fprintf(&b, "%s %s|", e.Name, e.Data)
	}
	return b.String()
}
