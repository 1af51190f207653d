package workflows_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
	"github.com/trellis-go/trellis/trellistest"
	"github.com/trellis-go/trellis/workflows"
)

// transfersRun is how many transfers TestRedisTransfersWithKills runs
// (-workflows.transfers=40; 1000 for the long run, between 100 wallets).
var transfersRun = flag.Int("workflows.transfers", 40, "transfers of TestRedisTransfersWithKills")

// Moves move money between wallets: withdraw (a refusal, for want of
// money, ends the move), then deposit, each retried long enough to outlast
// a killed owner's lease.
var (
	Moves = workflows.Define("move", func(string) Transfer { return Transfer{} },
		workflows.Retries(40, 100*time.Millisecond, time.Second))

	BeginMove = workflows.Command(Moves, "begin",
		func(ctx *workflows.Ctx[Transfer, components.Done], _ Transfer, req Transfer) workflows.Effect[Transfer, components.Done] {
			if ctx.Status() != workflows.StatusNotStarted {
				return ctx.Conflict("move %s has started already", ctx.WorkflowID())
			}
			return ctx.UpdateState(req).TransitionTo("withdraw", nil).ThenReply(components.Done{})
		})
)

func init() {
	workflows.Step(Moves, "withdraw", func(ctx *workflows.StepCtx[Transfer], s Transfer, _ any) workflows.StepEffect[Transfer] {
		_, err := Debit.Invoke(ctx.Context(), ctx.Client(), s.From, s.Amount)
		var refused *components.CommandError
		switch {
		case errors.As(err, &refused):
			s.Steps = append(s.Steps, "refused")
			return ctx.UpdateState(s).End()
		case err != nil:
			return ctx.Fail("withdraw: %v", err)
		}
		s.Steps = append(s.Steps, "withdraw")
		return ctx.UpdateState(s).TransitionTo("deposit", nil)
	})
	workflows.Step(Moves, "deposit", func(ctx *workflows.StepCtx[Transfer], s Transfer, _ any) workflows.StepEffect[Transfer] {
		if _, err := Credit.Invoke(ctx.Context(), ctx.Client(), s.To, s.Amount); err != nil {
			return ctx.Fail("deposit: %v", err)
		}
		s.Steps = append(s.Steps, "deposit")
		return ctx.UpdateState(s).End()
	})
}

// TestRedisTransfersWithKills runs transfers between wallets over three
// instances on Redis in the cluster mode; at a random point of the run
// one of them is killed (the test kit's kill: no hand-over, its lease
// lapses) and another joins, and at a second random point one more is
// killed. Afterwards no transfer is lost (each ended: moved, or refused
// for want of money), the money is conserved exactly, and each wallet
// applied exactly the commands that the transfers' committed steps
// account for: none twice.
func TestRedisTransfersWithKills(t *testing.T) {
	testenv.Long(t)
	ctx := context.Background()
	n := *transfersRun
	nWallets := max(4, n/10)
	const funds = 1000
	var mu sync.Mutex
	var runners []*workflows.Running[Transfer]
	setup := func(h *trellis.Host, _ chi.Router) error {
		if _, err := Wallets.Start(h.Entities()); err != nil {
			return err
		}
		wf, err := Moves.Start(h.Workflows())
		mu.Lock()
		runners = append(runners, wf)
		mu.Unlock()
		return err
	}
	opts := []trellistest.Option{trellistest.WithLogger(slog.New(slog.DiscardHandler)),
		trellistest.WithConfig(func(c *trellis.Config) { c.ClusterLease = killLease })}
	instances := trellistest.StartInstances(t, 3, setup, opts...)
	trellistest.WaitSettled(t, instances...)
	survivor, reader := instances[0], runners[0]
	live := []*trellistest.Service{survivor, instances[1], instances[2]}
	wallets := make([]string, nWallets)
	for i := range wallets {
		wallets[i] = fmt.Sprintf("mw-%03d", i)
		fund(t, survivor.Client, wallets[i], funds)
	}

	rng := rand.New(rand.NewPCG(rand.Uint64(), 0))
	kill1, kill2 := n/4+rng.IntN(max(1, n/4)), n/2+rng.IntN(max(1, n/4))
	t.Logf("%d transfers between %d wallets; kills before transfers %d and %d", n, nWallets, kill1, kill2)
	moves := make(map[string]Transfer, n)
	for i := range n {
		switch i {
		case kill1:
			instances[1].Kill()
			live[1] = trellistest.JoinInstance(t, survivor, setup, opts...)
		case kill2:
			instances[2].Kill()
			live = live[:2]
		}
		from := rng.IntN(nWallets)
		to := (from + 1 + rng.IntN(nWallets-1)) % nWallets
		id := fmt.Sprintf("m-%04d", i)
		req := Transfer{From: wallets[from], To: wallets[to], Amount: 1 + rng.IntN(300)}
		moves[id] = req
		// Through the survivor; a call that meets a killed owner is sent
		// again (a second start is refused: the first one took).
		trellistest.Eventually(t, killLease+30*time.Second, "move "+id+" started", func() bool {
			_, err := BeginMove.Invoke(ctx, survivor.Client, id, req)
			var ce *components.CommandError
			return err == nil || errors.As(err, &ce) && ce.Kind == components.Conflict
		})
	}

	want := make(map[string]Wallet, nWallets)
	for _, w := range wallets {
		want[w] = Wallet{Balance: funds, Applied: 1}
	}
	ids := slices.Sorted(func(yield func(string) bool) {
		for id := range moves {
			if !yield(id) {
				return
			}
		}
	})
	for _, id := range ids {
		in := waitOver(t, reader, id, killLease+60*time.Second, live)
		req := moves[id]
		switch fmt.Sprint(in.State.Steps) {
		case "[withdraw deposit]":
			f, to := want[req.From], want[req.To]
			f.Balance, f.Applied = f.Balance-req.Amount, f.Applied+1
			want[req.From] = f
			to.Balance, to.Applied = to.Balance+req.Amount, to.Applied+1
			want[req.To] = to
		case "[refused]":
		default:
			t.Errorf("move %s is %s after %v (%s), want moved or refused", id, in.Status, in.State.Steps, in.Error)
		}
	}
	total := 0
	for _, w := range wallets {
		got := wallet(t, survivor.Client, w)
		total += got.Balance
		if got != want[w] {
			t.Errorf("wallet %s: %+v, want %+v from the moves' committed steps", w, got, want[w])
		}
	}
	if total != nWallets*funds {
		t.Errorf("the wallets hold %d, want %d: money was made or lost", total, nWallets*funds)
	}
}

// waitOver waits (bounded) until move id has ended or failed, and returns
// it; it fails the test with where the move stands. The retries' waits
// are on the live instances' fake clocks, which it moves on meanwhile.
func waitOver(t *testing.T, wf *workflows.Running[Transfer], id string, limit time.Duration, live []*trellistest.Service) workflows.Instance[Transfer] {
	t.Helper()
	var in workflows.Instance[Transfer]
	var err error
	deadline := time.Now().Add(limit)
	for !time.Now().After(deadline) {
		in, err = wf.Get(context.Background(), id)
		if err == nil && (in.Status == workflows.StatusEnded || in.Status == workflows.StatusFailed) {
			return in
		}
		for _, ts := range live {
			ts.Clock.Advance(100 * time.Millisecond)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("move %s has not ended within %v: %+v (%v)", id, limit, in, err)
	return in
}
