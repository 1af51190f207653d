package entities_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"go.uber.org/goleak"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
	"github.com/trellis-go/trellis/runtime"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(testenv.Servers(m)) }

// Acct is the test entity's state: a balance that commands move.
type Acct struct {
	ID      string `json:"id"`
	Balance int    `json:"balance"`
}

var (
	Accts = entities.Define("acct", func(id string) Acct { return Acct{ID: id} })

	// inHandler counts handlers running per entity id, to catch overlap.
	inHandler sync.Map // id → *atomic.Int32
	overlap   atomic.Bool

	Deposit = entities.Command(Accts, "deposit",
		func(ctx *entities.Ctx[Acct, Acct], a Acct, n int) entities.Effect[Acct, Acct] {
			c, _ := inHandler.LoadOrStore(ctx.EntityID(), new(atomic.Int32))
			if c.(*atomic.Int32).Add(1) > 1 {
				overlap.Store(true)
			}
			defer c.(*atomic.Int32).Add(-1)
			if n <= 0 {
				return ctx.Error("deposit %d: must be positive", n)
			}
			a.Balance += n
			return ctx.UpdateState(a).ThenReply(a)
		})
	Balance = entities.Command(Accts, "balance",
		func(ctx *entities.Ctx[Acct, Acct], a Acct, _ components.Done) entities.Effect[Acct, Acct] {
			return ctx.Reply(a)
		})
	Close = entities.Command(Accts, "close",
		func(ctx *entities.Ctx[Acct, int], a Acct, _ components.Done) entities.Effect[Acct, int] {
			return ctx.DeleteEntity().ThenReply(a.Balance)
		})
	Boom = entities.Command(Accts, "boom",
		func(ctx *entities.Ctx[Acct, Acct], a Acct, _ components.Done) entities.Effect[Acct, Acct] {
			panic("boom")
		})
	// Withdraw refuses with each kind: Invalid for n <= 0, NotFound for an
	// account with no money ever put in, Conflict for more than the balance.
	Withdraw = entities.Command(Accts, "withdraw",
		func(ctx *entities.Ctx[Acct, Acct], a Acct, n int) entities.Effect[Acct, Acct] {
			switch {
			case n <= 0:
				return ctx.Invalid("withdraw %d: must be positive", n)
			case a.Balance == 0:
				return ctx.NotFound("no account %s", ctx.EntityID())
			case n > a.Balance:
				return ctx.Conflict("withdraw %d: the balance is %d", n, a.Balance)
			}
			a.Balance -= n
			return ctx.UpdateState(a).ThenReply(a)
		})
	Nothing = entities.Command(Accts, "nothing",
		func(ctx *entities.Ctx[Acct, Acct], a Acct, _ components.Done) entities.Effect[Acct, Acct] {
			return entities.Effect[Acct, Acct]{}
		})
)

var done = components.Done{}

// node is one running service instance: a runtime system, a registry with
// the Accts entity started on it, over a given store.
type node struct {
	sys     *runtime.System
	clock   *clockwork.FakeClock // the system's clock
	client  *components.Client
	running *entities.Running[Acct]
}

func startNode(t *testing.T, store entities.Store, opts ...func(*entities.Host)) *node {
	t.Helper()
	fc := clockwork.NewFakeClock()
	sys := testenv.System(t, t.Name(), runtime.WithClock(fc))
	client := components.NewClient(components.NewRegistry())
	h := entities.Host{System: sys, Client: client, Store: store}
	for _, o := range opts {
		o(&h)
	}
	r, err := Accts.Start(h)
	if err != nil {
		t.Fatal(err)
	}
	return &node{sys: sys, clock: fc, client: client, running: r}
}

func (n *node) balance(t *testing.T, id string) int {
	t.Helper()
	a, err := Balance.Invoke(context.Background(), n.client, id, done)
	if err != nil {
		t.Fatalf("balance of %s: %v", id, err)
	}
	return a.Balance
}

// faultyStore is a real MemoryStore with injected faults and counters.
type faultyStore struct {
	*entities.MemoryStore
	failSaves atomic.Bool
	loads     atomic.Int32
}

func (s *faultyStore) Save(ctx context.Context, typ, id string, data []byte, expected uint64) (uint64, error) {
	if s.failSaves.Load() {
		return 0, errors.New("injected: the store is down")
	}
	return s.MemoryStore.Save(ctx, typ, id, data, expected)
}

func (s *faultyStore) Load(ctx context.Context, typ, id string) (entities.Record, error) {
	s.loads.Add(1)
	return s.MemoryStore.Load(ctx, typ, id)
}

// Each kind of effect does what it says to the state, the store and the reply.
func TestEffects(t *testing.T) {
	store := entities.NewMemoryStore()
	n := startNode(t, store)
	ctx := context.Background()

	a, err := Deposit.Invoke(ctx, n.client, "a1", 5)
	if err != nil || a.Balance != 5 {
		t.Fatalf("deposit: %+v, %v", a, err)
	}
	if rec, _ := store.Load(ctx, "acct", "a1"); rec.Revision == 0 || string(rec.Data) != `{"id":"a1","balance":5}` {
		t.Fatalf("stored after update: %s rev %d", rec.Data, rec.Revision)
	}

	_, err = Deposit.Invoke(ctx, n.client, "a1", -1)
	if msg, ok := components.IsCommandError(err); !ok || msg != "deposit -1: must be positive" {
		t.Fatalf("error effect: %v", err)
	}
	if got := n.balance(t, "a1"); got != 5 {
		t.Fatalf("balance after an error effect = %d, want 5", got)
	}

	if _, err := Boom.Invoke(ctx, n.client, "a1", done); err == nil || !contains(err.Error(), "panicked") {
		t.Fatalf("panic: %v", err)
	}
	if _, err := Nothing.Invoke(ctx, n.client, "a1", done); err == nil {
		t.Fatal("the zero effect gave no error")
	}
	if got := n.balance(t, "a1"); got != 5 {
		t.Fatalf("balance after a panic = %d, want 5", got)
	}

	last, err := Close.Invoke(ctx, n.client, "a1", done)
	if err != nil || last != 5 {
		t.Fatalf("close: %d, %v", last, err)
	}
	if rec, _ := store.Load(ctx, "acct", "a1"); rec.Revision != 0 {
		t.Fatalf("still stored after delete: %+v", rec)
	}
	if got := n.balance(t, "a1"); got != 0 {
		t.Fatalf("balance after delete = %d, want the empty state's 0", got)
	}
}

// A write that fails is the caller's error; the entity keeps the state it
// had, and the store is unchanged.
func TestFailedWriteIsAnError(t *testing.T) {
	store := &faultyStore{MemoryStore: entities.NewMemoryStore()}
	n := startNode(t, store)
	ctx := context.Background()
	if _, err := Deposit.Invoke(ctx, n.client, "a", 10); err != nil {
		t.Fatal(err)
	}
	store.failSaves.Store(true)
	if _, err := Deposit.Invoke(ctx, n.client, "a", 1); err == nil || !contains(err.Error(), "injected") {
		t.Fatalf("deposit with the store down: %v", err)
	}
	store.failSaves.Store(false)
	if got := n.balance(t, "a"); got != 10 {
		t.Fatalf("balance = %d, want 10 (the failed deposit must not count)", got)
	}
}

// Commands to one id never overlap, and none is lost, under many callers.
func TestOneCommandAtATimePerID(t *testing.T) {
	n := startNode(t, entities.NewMemoryStore())
	overlap.Store(false)
	var wg sync.WaitGroup
	for g := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				id := fmt.Sprintf("c%d", g%4)
				if _, err := Deposit.Invoke(context.Background(), n.client, id, 1); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if overlap.Load() {
		t.Error("two commands ran at once on one entity")
	}
	for i := range 4 {
		if got := n.balance(t, fmt.Sprintf("c%d", i)); got != 250 {
			t.Errorf("c%d = %d, want 250", i, got)
		}
	}
}

// Two instances over one store (as two servers on one Redis) lose no
// update, and each reads what the other wrote.
func TestTwoInstancesOneStore(t *testing.T) {
	store := entities.NewMemoryStore()
	a, b := startNode(t, store), startNode(t, store)
	// Commands that conflict again and again pause on the entity's clock.
	testenv.KeepClocksMoving(t, a.clock, b.clock)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := a
			if g%2 == 1 {
				n = b
			}
			for range 100 {
				if _, err := Deposit.Invoke(context.Background(), n.client, "shared", 1); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if got := a.balance(t, "shared"); got != 800 {
		t.Errorf("through a: %d, want 800", got)
	}
	if _, err := Deposit.Invoke(context.Background(), b.client, "shared", 1); err != nil {
		t.Fatal(err)
	}
	if got := a.balance(t, "shared"); got != 801 {
		t.Errorf("a after b wrote: %d, want 801 (a read must see the other instance's write)", got)
	}
}

// An idle entity leaves memory and comes back from the store.
func TestPassivationAndReload(t *testing.T) {
	store := &faultyStore{MemoryStore: entities.NewMemoryStore()}
	fc := clockwork.NewFakeClock()
	sys := runtime.NewSystem(t.Name(), runtime.WithClock(fc), runtime.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	defer func() { _ = sys.Shutdown(context.Background()) }()
	client := components.NewClient(components.NewRegistry())
	r, err := Accts.Start(entities.Host{System: sys, Client: client, Store: store, PassivateAfter: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := Deposit.Invoke(ctx, client, "p", 7); err != nil {
		t.Fatal(err)
	}
	if r.Active() != 1 || store.loads.Load() != 1 {
		t.Fatalf("active %d, loads %d; want 1, 1", r.Active(), store.loads.Load())
	}
	bctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := fc.BlockUntilContext(bctx, 1); err != nil { // the idle timer
		t.Fatal(err)
	}
	fc.Advance(time.Minute)
	deadline := time.Now().Add(5 * time.Second)
	for r.Active() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the idle entity was not passivated")
		}
		time.Sleep(time.Millisecond)
	}
	a, err := Balance.Invoke(ctx, client, "p", done)
	if err != nil || a.Balance != 7 {
		t.Fatalf("after passivation: %+v, %v", a, err)
	}
	if store.loads.Load() != 2 {
		t.Fatalf("loads = %d, want 2 (reloaded once after passivation)", store.loads.Load())
	}
}

// The JSON path decodes arguments, encodes replies and names its errors.
func TestInvokeJSON(t *testing.T) {
	n := startNode(t, entities.NewMemoryStore())
	ctx := context.Background()
	reply, err := n.running.InvokeJSON(ctx, "j", "deposit", []byte("3"))
	if err != nil || string(reply) != `{"id":"j","balance":3}` {
		t.Fatalf("deposit: %s, %v", reply, err)
	}
	tests := []struct {
		name     string // the case
		entityID string // the entity
		method   string // the command
		arg      string // the JSON argument
		want     error  // the error it must wrap
	}{
		{"argument of the wrong type", "j", "deposit", `"three"`, components.ErrBadArgument},
		{"unknown method", "j", "transfer", `1`, components.ErrUnknownMethod},
		{"no entity id", "", "deposit", `1`, components.ErrMissingEntityID},
	}
	for _, tc := range tests {
		if _, err := n.running.InvokeJSON(ctx, tc.entityID, tc.method, []byte(tc.arg)); !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.want)
		}
	}
	call, err := Deposit.Deferred("j", 4)
	if err != nil {
		t.Fatal(err)
	}
	if reply, err := n.client.Dispatch(ctx, call); err != nil || string(reply) != `{"id":"j","balance":7}` {
		t.Fatalf("dispatch: %s, %v", reply, err)
	}
}

// A command whose caller already gave up is not run.
func TestCancelledCallerDoesNotWrite(t *testing.T) {
	store := entities.NewMemoryStore()
	n := startNode(t, store)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Deposit.Invoke(ctx, n.client, "x", 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want Canceled", err)
	}
	if got := n.balance(t, "x"); got != 0 {
		t.Fatalf("balance = %d, want 0", got)
	}
}

// Starting one entity type twice on one registry is refused.
func TestStartTwice(t *testing.T) {
	n := startNode(t, entities.NewMemoryStore())
	if _, err := Accts.Start(entities.Host{System: n.sys, Client: n.client, Store: entities.NewMemoryStore()}); err == nil {
		t.Fatal("second start succeeded")
	}
	if _, err := Accts.Start(entities.Host{}); err == nil {
		t.Fatal("start without a host succeeded")
	}
}

// The unit test kit runs one command against a given state.
func TestTry(t *testing.T) {
	tests := []struct {
		name        string // the case
		run         func() entities.Outcome[Acct, Acct]
		wantBalance int  // the state's balance after
		wantUpdated bool // an update effect
		wantErr     bool // an error (command error or failure)
	}{
		{"update", func() entities.Outcome[Acct, Acct] {
			return entities.Try(Accts, Deposit, "t", Acct{ID: "t", Balance: 1}, 2, nil)
		}, 3, true, false},
		{"error keeps the state", func() entities.Outcome[Acct, Acct] {
			return entities.Try(Accts, Deposit, "t", Acct{ID: "t", Balance: 1}, 0, nil)
		}, 1, false, true},
		{"reply", func() entities.Outcome[Acct, Acct] {
			return entities.Try(Accts, Balance, "t", Acct{ID: "t", Balance: 4}, done, nil)
		}, 4, false, false},
		{"panic", func() entities.Outcome[Acct, Acct] {
			return entities.Try(Accts, Boom, "t", Acct{ID: "t", Balance: 4}, done, nil)
		}, 4, false, true},
	}
	for _, tc := range tests {
		out := tc.run()
		if out.State.Balance != tc.wantBalance || out.Updated != tc.wantUpdated || (out.Err != nil) != tc.wantErr {
			t.Errorf("%s: %+v", tc.name, out)
		}
	}
	del := entities.Try(Accts, Close, "t", Acct{ID: "t", Balance: 9}, done, nil)
	if !del.Deleted || del.Reply != 9 || del.State != (Acct{ID: "t"}) {
		t.Errorf("delete: %+v", del)
	}
}

// The stateful kit keeps the state between commands, and a refused
// command leaves it as it was, with the refusal's kind.
func TestTestKit(t *testing.T) {
	kit := entities.NewTestKit(Accts, "k", nil)
	steps := []struct {
		name        string               // the step
		run         func() error         // the command, through the kit
		wantBalance int                  // the kit's balance after it
		wantKind    components.ErrorKind // the refusal's kind, if wantErr
		wantErr     bool                 // the command is refused
	}{
		{"withdraw from nothing", func() error { return entities.Exec(kit, Withdraw, 1).Err }, 0, components.NotFound, true},
		{"deposit", func() error { return entities.Exec(kit, Deposit, 5).Err }, 5, 0, false},
		{"deposit again", func() error { return entities.Exec(kit, Deposit, 2).Err }, 7, 0, false},
		{"withdraw too much", func() error { return entities.Exec(kit, Withdraw, 8).Err }, 7, components.Conflict, true},
		{"withdraw nothing", func() error { return entities.Exec(kit, Withdraw, 0).Err }, 7, components.Invalid, true},
		{"refuse plainly", func() error { return entities.Exec(kit, Deposit, -1).Err }, 7, components.Failure, true},
		{"withdraw", func() error { return entities.Exec(kit, Withdraw, 3).Err }, 4, 0, false},
		{"close", func() error { return entities.Exec(kit, Close, done).Err }, 0, 0, false},
	}
	for _, st := range steps {
		err := st.run()
		var ce *components.CommandError
		switch {
		case st.wantErr && (!errors.As(err, &ce) || ce.Kind != st.wantKind):
			t.Fatalf("%s: error %v, want a %v refusal", st.name, err, st.wantKind)
		case !st.wantErr && err != nil:
			t.Fatalf("%s: %v", st.name, err)
		case kit.State().Balance != st.wantBalance:
			t.Fatalf("%s: balance %d, want %d", st.name, kit.State().Balance, st.wantBalance)
		}
	}
}

// A refusal's kind reaches the caller of a running entity.
func TestRefusalKindThroughTheEntity(t *testing.T) {
	n := startNode(t, entities.NewMemoryStore())
	ctx := context.Background()
	if _, err := Deposit.Invoke(ctx, n.client, "r", 2); err != nil {
		t.Fatal(err)
	}
	_, err := Withdraw.Invoke(ctx, n.client, "r", 3)
	var ce *components.CommandError
	if !errors.As(err, &ce) || ce.Kind != components.Conflict || ce.Message != "withdraw 3: the balance is 2" {
		t.Fatalf("withdraw 3 of 2: %v, want a conflict refusal", err)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
