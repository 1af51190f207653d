package workflows_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"go.uber.org/goleak"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
	"github.com/trellis-go/trellis/runtime"
	"github.com/trellis-go/trellis/timers"
	"github.com/trellis-go/trellis/workflows"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(testenv.Servers(m)) }

// Wallet is the test entity the transfers move money between; Applied
// counts the withdrawals and deposits it applied.
type Wallet struct {
	Balance int `json:"balance"`
	Applied int `json:"applied"`
}

var (
	Wallets = entities.Define("wallet", func(string) Wallet { return Wallet{} })

	Credit = entities.Command(Wallets, "credit",
		func(ctx *entities.Ctx[Wallet, Wallet], w Wallet, n int) entities.Effect[Wallet, Wallet] {
			w.Balance += n
			w.Applied++
			return ctx.UpdateState(w).ThenReply(w)
		})
	Debit = entities.Command(Wallets, "debit",
		func(ctx *entities.Ctx[Wallet, Wallet], w Wallet, n int) entities.Effect[Wallet, Wallet] {
			if n > w.Balance {
				return ctx.Conflict("debit %d: the balance is %d", n, w.Balance)
			}
			w.Balance -= n
			w.Applied++
			return ctx.UpdateState(w).ThenReply(w)
		})
	Balance = entities.Command(Wallets, "balance",
		func(ctx *entities.Ctx[Wallet, Wallet], w Wallet, _ components.Done) entities.Effect[Wallet, Wallet] {
			return ctx.Reply(w)
		})
)

// env is a workflow started on the embedded store with a fake clock and
// a timer scheduler on it.
type env[S any] struct {
	clock  *clockwork.FakeClock
	client *components.Client
	timers *timers.Scheduler
	store  *entities.MemoryStore
	wf     *workflows.Running[S]
	// runners are the host's, as a service's (they hold wf).
	runners *workflows.Runners
}

// start starts the wallets and t on a fresh embedded store (or store,
// when given: what an instance that restarts finds).
func start[S any](t *testing.T, wt *workflows.Type[S], store *entities.MemoryStore, clock *clockwork.FakeClock) *env[S] {
	t.Helper()
	if store == nil {
		store = entities.NewMemoryStore()
	}
	if clock == nil {
		// A whole millisecond: the timers round due times up to one.
		clock = clockwork.NewFakeClockAt(time.Now().Truncate(time.Millisecond))
	}
	ctx := context.Background()
	sys := runtime.NewSystem("test", runtime.WithClock(clock))
	client := components.NewClient(components.NewRegistry())
	sched, err := timers.New(timers.NewMemoryStore(clock), client, timers.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := sched.Start(ctx); err != nil {
		t.Fatal(err)
	}
	eh := entities.Host{System: sys, Client: client, Store: store}
	if _, err := Wallets.Start(eh); err != nil {
		t.Fatal(err)
	}
	runners := &workflows.Runners{}
	wf, err := wt.Start(workflows.Host{Entities: eh, Timers: sched, Runners: runners})
	if err != nil {
		t.Fatal(err)
	}
	e := &env[S]{clock: clock, client: client, timers: sched, store: store, wf: wf, runners: runners}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			_ = wf.Stop(ctx)
			_ = sched.Shutdown(ctx)
			_ = sys.Shutdown(ctx)
		})
	}
	t.Cleanup(stop)
	return e
}

// waitFor polls instance id until cond holds (bounded) and returns it.
func waitFor[S any](t *testing.T, e *env[S], id string, what string, cond func(workflows.Instance[S]) bool) workflows.Instance[S] {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		in, err := e.wf.Get(context.Background(), id)
		if err == nil && cond(in) {
			return in
		}
		if time.Now().After(deadline) {
			t.Fatalf("workflow %s: not %s within 10s: %+v (err %v)", id, what, in, err)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// status is a waitFor condition.
func status[S any](s workflows.Status) func(workflows.Instance[S]) bool {
	return func(in workflows.Instance[S]) bool { return in.Status == s }
}

// wallet reads a wallet.
func wallet(t testing.TB, client *components.Client, id string) Wallet {
	t.Helper()
	w, err := Balance.Invoke(context.Background(), client, id, components.Done{})
	if err != nil {
		t.Fatalf("balance of %s: %v", id, err)
	}
	return w
}
