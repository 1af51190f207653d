package entities_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jonboulle/clockwork"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/internal/entityhook"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
	"github.com/trellis-go/trellis/runtime"
)

// Ledgers expect new entities (entityhook.ExpectNew): a ledger not in
// memory is assumed absent until a write says otherwise.
var (
	Ledgers = entities.Define("ledger", func(id string) Acct { return Acct{ID: id} })

	Credit = entities.Command(Ledgers, "credit",
		func(ctx *entities.Ctx[Acct, Acct], a Acct, n int) entities.Effect[Acct, Acct] {
			a.Balance += n
			return ctx.UpdateState(a).ThenReply(a)
		})
	LedgerBalance = entities.Command(Ledgers, "balance",
		func(ctx *entities.Ctx[Acct, Acct], a Acct, _ components.Done) entities.Effect[Acct, Acct] {
			return ctx.Reply(a)
		})
	Debit = entities.Command(Ledgers, "debit",
		func(ctx *entities.Ctx[Acct, Acct], a Acct, n int) entities.Effect[Acct, Acct] {
			if a.Balance == 0 {
				return ctx.NotFound("no ledger %s", ctx.EntityID())
			}
			if n > a.Balance {
				return ctx.Conflict("debit %d: the balance is %d", n, a.Balance)
			}
			a.Balance -= n
			return ctx.UpdateState(a).ThenReply(a)
		})
	// Halve fails (panics) on an empty ledger, as a handler may on the
	// empty state it was never meant to see.
	Halve = entities.Command(Ledgers, "halve",
		func(ctx *entities.Ctx[Acct, Acct], a Acct, _ components.Done) entities.Effect[Acct, Acct] {
			if a.Balance == 0 {
				panic("no balance to halve")
			}
			a.Balance /= 2
			return ctx.UpdateState(a).ThenReply(a)
		})
	CloseLedger = entities.Command(Ledgers, "close",
		func(ctx *entities.Ctx[Acct, int], a Acct, _ components.Done) entities.Effect[Acct, int] {
			return ctx.DeleteEntity().ThenReply(a.Balance)
		})
)

func init() { entityhook.ExpectNew(Ledgers) }

// startLedgers starts Ledgers on a system of its own over store: an
// instance that holds no ledger in memory.
func startLedgers(t *testing.T, store entities.Store) *components.Client {
	t.Helper()
	sys := testenv.System(t, t.Name(), runtime.WithClock(clockwork.NewFakeClock()))
	client := components.NewClient(components.NewRegistry())
	if _, err := Ledgers.Start(entities.Host{System: sys, Client: client, Store: store}); err != nil {
		t.Fatal(err)
	}
	return client
}

// TestExpectNew: a command on an entity not in memory of a type that
// expects new entities runs on the empty state with no read of the store
// when the entity is new; when it exists, every effect is the one its
// stored state gives — a write's conflict, a reply, a refusal, a delete
// and a handler's failure each read it and run the command again.
func TestExpectNew(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name  string
		run   func(*components.Client) (any, error)
		want  any // the reply, or the refusal's kind
		loads int32
		after int // the stored balance afterwards (-1: deleted)
	}{
		{"write on a new entity", func(c *components.Client) (any, error) { return Credit.Invoke(ctx, c, "new", 2) },
			Acct{ID: "new", Balance: 2}, 0, 2},
		{"write on an existing one", func(c *components.Client) (any, error) { return Credit.Invoke(ctx, c, "l-1", 3) },
			Acct{ID: "l-1", Balance: 8}, 1, 8},
		{"reply", func(c *components.Client) (any, error) { return LedgerBalance.Invoke(ctx, c, "l-1", done) },
			Acct{ID: "l-1", Balance: 5}, 1, 5},
		{"refusal", func(c *components.Client) (any, error) { return Debit.Invoke(ctx, c, "l-1", 10) },
			components.Conflict, 1, 5},
		{"delete", func(c *components.Client) (any, error) { return CloseLedger.Invoke(ctx, c, "l-1", done) },
			5, 1, -1},
		{"a handler that fails on the empty state", func(c *components.Client) (any, error) { return Halve.Invoke(ctx, c, "l-1", done) },
			Acct{ID: "l-1", Balance: 2}, 1, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			store := &faultyStore{MemoryStore: entities.NewMemoryStore()}
			if _, err := Credit.Invoke(ctx, startLedgers(t, store), "l-1", 5); err != nil {
				t.Fatal(err)
			}
			store.loads.Store(0)
			got, err := c.run(startLedgers(t, store))
			if kind, ok := c.want.(components.ErrorKind); ok {
				var ce *components.CommandError
				if !errors.As(err, &ce) || ce.Kind != kind {
					t.Fatalf("got %v, %v; want a %v refusal", got, err, kind)
				}
			} else if err != nil || got != c.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, c.want)
			}
			if n := store.loads.Load(); n != c.loads {
				t.Errorf("%d loads of the store, want %d", n, c.loads)
			}
			id := "l-1"
			if c.name == "write on a new entity" {
				id = "new"
			}
			rec, err := store.MemoryStore.Load(ctx, "ledger", id)
			if err != nil {
				t.Fatal(err)
			}
			stored, _ := Ledgers.Decode(id, rec.Revision, rec.Data)
			if (c.after < 0) != (rec.Revision == 0) || (c.after >= 0 && stored.Balance != c.after) {
				t.Errorf("stored %s at revision %d, want a balance of %d", rec.Data, rec.Revision, c.after)
			}
		})
	}
}
