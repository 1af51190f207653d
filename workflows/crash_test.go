package workflows_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/workflows"
)

// Crash points: a transfer of three steps (withdraw, deposit, note) whose
// steps pass a crash point at their entry — right after the commit that
// entered them — and right after each entity command they invoke, before
// their own commit. These are the workflow's commit boundaries: the
// start's write and each step's commit (at the next step's entry), and
// each entity command's write. The crash mode kills the instance at one
// of them: the step blocks there until the instance's runner stops, so
// that nothing is written after the point and its outcome is not
// committed, and an instance started on the same store (the embedded
// store, kept) runs the workflow on. TestRedisKillAndResume kills a
// real instance (trellistest's Kill) at the "applied" point on Redis.

// crashes says where the instance is to crash; it records the points
// passed when none is set.
var crashes = struct {
	mu      sync.Mutex
	at      string
	reached chan struct{}
	passed  []string
}{}

// point is crash point name of a step run: it records it, or, when it is
// the point to crash at, signals it and waits for the instance to stop
// (true: the step must return at once).
func point(ctx context.Context, name string) bool {
	crashes.mu.Lock()
	if crashes.at != name {
		crashes.passed = append(crashes.passed, name)
		crashes.mu.Unlock()
		return false
	}
	crashes.at = "" // once: the next instance passes it
	reached := crashes.reached
	crashes.mu.Unlock()
	close(reached)
	<-ctx.Done()
	return true
}

var Crashy = workflows.Define("crashy", func(string) Transfer { return Transfer{} })

var BeginCrashy = workflows.Command(Crashy, "begin",
	func(ctx *workflows.Ctx[Transfer, Transfer], _ Transfer, req Transfer) workflows.Effect[Transfer, Transfer] {
		return ctx.UpdateState(req).TransitionTo("withdraw", nil).ThenReply(req)
	})

func init() {
	call := func(name string, cmd func(ctx *workflows.StepCtx[Transfer], s Transfer) error, next string) {
		workflows.Step(Crashy, name, func(ctx *workflows.StepCtx[Transfer], s Transfer, _ any) workflows.StepEffect[Transfer] {
			if point(ctx.Context(), name+": entered") {
				return ctx.Fail("crashed")
			}
			if cmd != nil {
				if err := cmd(ctx, s); err != nil {
					return ctx.Fail("%s: %v", name, err)
				}
				if point(ctx.Context(), name+": applied") {
					return ctx.Fail("crashed")
				}
			}
			s.Steps = append(s.Steps, name)
			if next == "" {
				return ctx.UpdateState(s).End()
			}
			return ctx.UpdateState(s).TransitionTo(next, nil)
		})
	}
	call("withdraw", func(ctx *workflows.StepCtx[Transfer], s Transfer) error {
		_, err := Debit.Invoke(ctx.Context(), ctx.Client(), s.From, s.Amount)
		return err
	}, "deposit")
	call("deposit", func(ctx *workflows.StepCtx[Transfer], s Transfer) error {
		_, err := Credit.Invoke(ctx.Context(), ctx.Client(), s.To, s.Amount)
		return err
	}, "note")
	call("note", nil, "")
}

// outcome is what a crash run is checked against: the workflow's state
// and each wallet's balance and count of commands applied.
type outcome struct {
	steps          string
	from, to       Wallet
	transition     uint64
	historyEntries int
}

// runCrashy runs one transfer on store, crashing at point at ("" for
// none): it kills the instance there and starts another on the store,
// which runs the transfer to its end.
func runCrashy(t *testing.T, at string) outcome {
	t.Helper()
	ctx := context.Background()
	store := entities.NewMemoryStore()
	first := start(t, Crashy, store, nil)
	fund(t, first.client, "from", 100)
	reached := make(chan struct{})
	crashes.mu.Lock()
	crashes.at, crashes.reached, crashes.passed = at, reached, nil
	crashes.mu.Unlock()
	if _, err := BeginCrashy.Invoke(ctx, first.client, "c-1", Transfer{From: "from", To: "to", Amount: 30}); err != nil {
		t.Fatal(err)
	}
	e := first
	if at != "" {
		<-reached
		if err := first.wf.Stop(ctx); err != nil { // the kill: the step run is not committed
			t.Fatal(err)
		}
		e = start(t, Crashy, store, first.clock)
	}
	in := waitFor(t, e, "c-1", "ended", status[Transfer](workflows.StatusEnded))
	return outcome{steps: strings.Join(in.State.Steps, ","), from: wallet(t, e.client, "from"), to: wallet(t, e.client, "to"),
		transition: in.Transition, historyEntries: len(in.History)}
}

// TestCrashPoints kills the instance at every commit boundary of a
// transfer in turn (found by a run without a crash) and checks that each
// run ends as the run without a crash does: the same steps done, the same
// transitions, each wallet's command applied once.
func TestCrashPoints(t *testing.T) {
	want := runCrashy(t, "")
	crashes.mu.Lock()
	points := slices.Clone(crashes.passed)
	crashes.mu.Unlock()
	if len(points) != 5 || want.from != (Wallet{Balance: 70, Applied: 2}) || want.to != (Wallet{Balance: 30, Applied: 1}) {
		t.Fatalf("the run without a crash passed %v and ended with %+v", points, want)
	}
	for _, at := range points {
		t.Run(at, func(t *testing.T) {
			if got := runCrashy(t, at); got != want {
				t.Errorf("crashed at %q: %+v, want %+v as without a crash", at, got, want)
			}
		})
	}
}
