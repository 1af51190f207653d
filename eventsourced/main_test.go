package eventsourced_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"go.uber.org/goleak"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/eventsourced"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
	"github.com/trellis-go/trellis/runtime"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(testenv.Servers(m)) }

// Wallet is the test entity's state: a balance and the notes of its
// events (a slice, so that the state is not flat).
type Wallet struct {
	Balance int      `json:"balance"`
	Notes   []string `json:"notes,omitempty"`
}

type Deposited struct {
	Amount int    `json:"amount"`
	Note   string `json:"note,omitempty"`
}

type Withdrawn struct {
	Amount int `json:"amount"`
}

// creditedV1 is the shape "credited" events had before they became
// Deposited: read through an upcaster.
type creditedV1 struct {
	Cents int `json:"cents"`
}

var (
	Wallets = eventsourced.Define("wallet", func(string) Wallet { return Wallet{} }, applyWallet,
		eventsourced.SnapshotEvery(5), eventsourced.MaxEventSize(200))

	Deposit = eventsourced.Command(Wallets, "deposit",
		func(ctx *eventsourced.Ctx[Wallet, Wallet], w Wallet, d Deposited) eventsourced.Effect[Wallet, Wallet] {
			if d.Amount <= 0 {
				return ctx.Invalid("deposit %d: must be positive", d.Amount)
			}
			return ctx.Persist(d).ThenReply(func(w Wallet) Wallet { return w })
		})
	// Move withdraws and deposits again: two events in one command.
	Move = eventsourced.Command(Wallets, "move",
		func(ctx *eventsourced.Ctx[Wallet, int], w Wallet, n int) eventsourced.Effect[Wallet, int] {
			if n > w.Balance {
				return ctx.Conflict("move %d: the balance is %d", n, w.Balance)
			}
			return ctx.Persist(Withdrawn{Amount: n}, Deposited{Amount: n, Note: "moved"}).
				ThenReply(func(w Wallet) int { return len(w.Notes) })
		})
	Balance = eventsourced.Command(Wallets, "balance",
		func(ctx *eventsourced.Ctx[Wallet, Wallet], w Wallet, _ components.Done) eventsourced.Effect[Wallet, Wallet] {
			reply := Wallet{Balance: w.Balance, Notes: append([]string(nil), w.Notes...)}
			// Changed in place: the entity must not see it.
			w.Balance = -1
			if len(w.Notes) > 0 {
				w.Notes[0] = "changed"
			}
			return ctx.Reply(reply)
		})
	Close = eventsourced.Command(Wallets, "close",
		func(ctx *eventsourced.Ctx[Wallet, int], w Wallet, _ components.Done) eventsourced.Effect[Wallet, int] {
			return ctx.DeleteEntity(Withdrawn{Amount: w.Balance}).ThenReply(w.Balance)
		})
	PersistStranger = eventsourced.Command(Wallets, "stranger",
		func(ctx *eventsourced.Ctx[Wallet, int], w Wallet, _ components.Done) eventsourced.Effect[Wallet, int] {
			return ctx.Persist(Deposited{Amount: 1}, struct{ X int }{1}).ThenReply(func(Wallet) int { return 0 })
		})
	Nothing = eventsourced.Command(Wallets, "nothing",
		func(ctx *eventsourced.Ctx[Wallet, int], w Wallet, _ components.Done) eventsourced.Effect[Wallet, int] {
			return eventsourced.Effect[Wallet, int]{}
		})
)

func init() {
	eventsourced.Event[Deposited](Wallets, "deposited")
	eventsourced.Event[Withdrawn](Wallets, "withdrawn")
	eventsourced.Upcast(Wallets, "credited", func(data json.RawMessage) (any, error) {
		var c creditedV1
		if err := json.Unmarshal(data, &c); err != nil {
			return nil, err
		}
		return Deposited{Amount: c.Cents / 100, Note: "credited"}, nil
	})
}

func applyWallet(w Wallet, e any) Wallet {
	switch e := e.(type) {
	case Deposited:
		w.Balance += e.Amount
		w.Notes = append(w.Notes, "+"+e.Note)
	case Withdrawn:
		w.Balance -= e.Amount
		w.Notes = append(w.Notes, "-")
	}
	return w
}

var done = components.Done{}

// node is one instance with Wallets started over a store.
type node struct {
	sys     *runtime.System
	clock   *clockwork.FakeClock
	client  *components.Client
	running *eventsourced.Running[Wallet]
}

func startNode(t *testing.T, store entities.Store, opts ...func(*eventsourced.Host)) *node {
	t.Helper()
	fc := clockwork.NewFakeClockAt(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	sys := testenv.System(t, t.Name(), runtime.WithClock(fc))
	client := components.NewClient(components.NewRegistry())
	h := eventsourced.Host{System: sys, Client: client, Store: store}
	for _, o := range opts {
		o(&h)
	}
	r, err := Wallets.Start(h)
	if err != nil {
		t.Fatal(err)
	}
	return &node{sys: sys, clock: fc, client: client, running: r}
}
