package workflows_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/workflows"
)

// Slow's "sleep" step waits for its context's end: it always runs past
// its timeout of 2s, is not retried, and fails over to "after". Its
// workflow times out after a minute, to "giveup"; "idle" pauses with no
// timeout of its own. "failing" fails at once and "blocking" waits for its
// context's end, each with retries an hour apart, so that the workflow's
// timeout comes during a retry's backoff or cuts a run short.
type Slow struct {
	Outcome string `json:"outcome,omitempty"`
}

var (
	Slows = workflows.Define("slow", func(string) Slow { return Slow{} },
		workflows.Timeout(time.Minute, "giveup", nil))

	Go = workflows.Command(Slows, "go",
		func(ctx *workflows.Ctx[Slow, components.Done], s Slow, step string) workflows.Effect[Slow, components.Done] {
			return ctx.TransitionTo(step, nil).ThenReply(components.Done{})
		})

	sleeping = make(chan struct{}, 4)
)

func init() {
	workflows.Step(Slows, "sleep",
		func(ctx *workflows.StepCtx[Slow], s Slow, _ any) workflows.StepEffect[Slow] {
			sleeping <- struct{}{}
			<-ctx.Context().Done()
			return ctx.Fail("woken")
		}, workflows.StepTimeout(2*time.Second), workflows.Retries(0, time.Second, time.Second), workflows.FailoverTo("after", "timed out"))
	workflows.Step(Slows, "after",
		func(ctx *workflows.StepCtx[Slow], s Slow, why string) workflows.StepEffect[Slow] {
			s.Outcome = why
			return ctx.UpdateState(s).End()
		})
	workflows.Step(Slows, "idle",
		func(ctx *workflows.StepCtx[Slow], s Slow, _ any) workflows.StepEffect[Slow] {
			return ctx.Pause()
		})
	workflows.Step(Slows, "failing",
		func(ctx *workflows.StepCtx[Slow], s Slow, _ any) workflows.StepEffect[Slow] {
			return ctx.Fail("not yet")
		}, workflows.Retries(3, time.Hour, time.Hour))
	workflows.Step(Slows, "blocking",
		func(ctx *workflows.StepCtx[Slow], s Slow, _ any) workflows.StepEffect[Slow] {
			sleeping <- struct{}{}
			<-ctx.Context().Done()
			return ctx.Fail("woken")
		}, workflows.StepTimeout(time.Hour), workflows.Retries(3, time.Hour, time.Hour))
	workflows.Step(Slows, "giveup",
		func(ctx *workflows.StepCtx[Slow], s Slow, _ any) workflows.StepEffect[Slow] {
			s.Outcome = "gave up"
			return ctx.UpdateState(s).End()
		})
}

// TestTimeouts: a step that runs past its timeout (on the fake clock)
// fails, and with no retries goes to its failover step; a workflow paused
// past its own timeout is woken by its timer and goes to its timeout step,
// as one waiting for a retry does at its deadline, not after the backoff,
// and one whose run its deadline cuts short does, not to a retry.
func TestTimeouts(t *testing.T) {
	cases := []struct {
		name, step string
		advance    time.Duration
		want       string
	}{
		{"step timeout", "sleep", 2 * time.Second, "timed out"},
		{"workflow timeout", "idle", time.Minute, "gave up"},
		{"workflow timeout in a retry's backoff", "failing", time.Minute, "gave up"},
		{"workflow timeout cutting a run short", "blocking", time.Minute, "gave up"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := start(t, Slows, nil, nil)
			ctx := context.Background()
			if _, err := Go.Invoke(ctx, e.client, "s-1", c.step); err != nil {
				t.Fatal(err)
			}
			switch c.step {
			case "sleep", "blocking":
				<-sleeping // its timeout's timer is set
			case "failing":
				waitFor(t, e, "s-1", "a retry an hour away", func(in workflows.Instance[Slow]) bool { return in.Attempt == 1 })
			default:
				waitFor(t, e, "s-1", "paused", status[Slow](workflows.StatusPaused))
				waitTimer(t, e, "s-1")
			}
			e.clock.Advance(c.advance)
			if err := e.timers.Settle(ctx); err != nil {
				t.Fatal(err)
			}
			in := waitFor(t, e, "s-1", "ended", status[Slow](workflows.StatusEnded))
			if in.State.Outcome != c.want {
				t.Errorf("outcome %q, want %q; history %+v", in.State.Outcome, c.want, in.History)
			}
		})
	}
}

// Evolving is a workflow whose code changes between two starts: its
// first version has a step "old", its second does not.
type Evolving struct{}

var (
	EvolvingV1 = workflows.Define("evolving", func(string) Evolving { return Evolving{} })
	EvolvingV2 = workflows.Define("evolving", func(string) Evolving { return Evolving{} })

	StartV1 = workflows.Command(EvolvingV1, "start",
		func(ctx *workflows.Ctx[Evolving, components.Done], s Evolving, _ components.Done) workflows.Effect[Evolving, components.Done] {
			return ctx.TransitionTo("old", nil).ThenReply(components.Done{})
		})
	_ = workflows.Command(EvolvingV2, "start",
		func(ctx *workflows.Ctx[Evolving, components.Done], s Evolving, _ components.Done) workflows.Effect[Evolving, components.Done] {
			return ctx.TransitionTo("new", nil).ThenReply(components.Done{})
		})

	oldRunning = make(chan struct{}, 1)
)

func init() {
	workflows.Step(EvolvingV1, "old",
		func(ctx *workflows.StepCtx[Evolving], s Evolving, _ any) workflows.StepEffect[Evolving] {
			oldRunning <- struct{}{}
			<-ctx.Context().Done()
			return ctx.Fail("stopped")
		})
	workflows.Step(EvolvingV2, "new",
		func(ctx *workflows.StepCtx[Evolving], s Evolving, _ any) workflows.StepEffect[Evolving] {
			return ctx.End()
		})
}

// TestStepRemoved: a workflow stored at a step that the code of the next
// deploy no longer has is marked failed with that reason, not retried.
func TestStepRemoved(t *testing.T) {
	ctx := context.Background()
	v1 := start(t, EvolvingV1, nil, nil)
	if _, err := StartV1.Invoke(ctx, v1.client, "e-1", components.Done{}); err != nil {
		t.Fatal(err)
	}
	<-oldRunning
	if err := v1.wf.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	v2 := start(t, EvolvingV2, v1.store, nil)
	in := waitFor(t, v2, "e-1", "failed", status[Evolving](workflows.StatusFailed))
	if !strings.Contains(in.Error, `at step "old", which its code no longer has`) || in.Attempt != 0 {
		t.Errorf("failed with %q after %d attempts", in.Error, in.Attempt)
	}
}

// Stubborn's "hold" step ignores its context: it returns only when the
// test releases it, long past its timeout of 2s. Its "boom" step panics
// on its first attempt and ends on its second.
type Stubborn struct {
	Outcome string `json:"outcome,omitempty"`
}

var (
	Stubborns = workflows.Define("stubborn", func(string) Stubborn { return Stubborn{} })

	Push = workflows.Command(Stubborns, "push",
		func(ctx *workflows.Ctx[Stubborn, components.Done], s Stubborn, step string) workflows.Effect[Stubborn, components.Done] {
			return ctx.TransitionTo(step, nil).ThenReply(components.Done{})
		})

	holding  = make(chan struct{}, 1)
	release  = make(chan struct{})
	returned = make(chan struct{}, 1)
)

func init() {
	workflows.Step(Stubborns, "hold",
		func(ctx *workflows.StepCtx[Stubborn], s Stubborn, _ any) workflows.StepEffect[Stubborn] {
			holding <- struct{}{}
			<-release
			defer func() { returned <- struct{}{} }()
			s.Outcome = "held to the end"
			return ctx.UpdateState(s).End()
		}, workflows.StepTimeout(2*time.Second), workflows.Retries(0, time.Second, time.Second), workflows.FailoverTo("after", "timed out"))
	workflows.Step(Stubborns, "after",
		func(ctx *workflows.StepCtx[Stubborn], s Stubborn, why string) workflows.StepEffect[Stubborn] {
			s.Outcome = why
			return ctx.UpdateState(s).End()
		})
	workflows.Step(Stubborns, "boom",
		func(ctx *workflows.StepCtx[Stubborn], s Stubborn, _ any) workflows.StepEffect[Stubborn] {
			if ctx.Attempt() == 1 {
				panic("first attempt")
			}
			s.Outcome = "second attempt"
			return ctx.UpdateState(s).End()
		}, workflows.Retries(1, time.Second, time.Second))
}

// TestStepIgnoringItsTimeout: a step whose handler ignores its context
// and runs on past its timeout does not hold its workflow: the timeout
// is committed and the workflow goes on to its failover step while the
// handler still runs; what the handler returns later is dropped.
func TestStepIgnoringItsTimeout(t *testing.T) {
	// A run before (-count) closed release; nothing runs the step now.
	holding, release, returned = make(chan struct{}, 1), make(chan struct{}), make(chan struct{}, 1)
	e := start(t, Stubborns, nil, nil)
	var once sync.Once
	letGo := func() { once.Do(func() { close(release) }) }
	t.Cleanup(letGo) // before the runner's Stop, which waits for the handler
	ctx := context.Background()
	if _, err := Push.Invoke(ctx, e.client, "h-1", "hold"); err != nil {
		t.Fatal(err)
	}
	<-holding // its timeout's timer is set
	e.clock.Advance(2 * time.Second)
	in := waitFor(t, e, "h-1", "ended", status[Stubborn](workflows.StatusEnded))
	if in.State.Outcome != "timed out" {
		t.Fatalf("outcome %q while the handler still runs, want %q; history %+v", in.State.Outcome, "timed out", in.History)
	}
	letGo()
	<-returned
	// Get is read after what the late handler could have written: an
	// ended workflow takes no commit, and the runner commits nothing for
	// a run it handed over.
	if err := e.wf.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	after, err := e.wf.Get(ctx, "h-1")
	if err != nil {
		t.Fatal(err)
	}
	if after.State.Outcome != "timed out" || len(after.History) != len(in.History) {
		t.Errorf("after the late return: outcome %q, %d history entries (before %d): %+v",
			after.State.Outcome, len(after.History), len(in.History), after.History)
	}
}

// TestStepPanics: a step whose handler panics fails that attempt with
// the panic as its error, and is retried.
func TestStepPanics(t *testing.T) {
	e := start(t, Stubborns, nil, nil)
	ctx := context.Background()
	if _, err := Push.Invoke(ctx, e.client, "b-1", "boom"); err != nil {
		t.Fatal(err)
	}
	in := waitFor(t, e, "b-1", "retrying", func(in workflows.Instance[Stubborn]) bool { return in.Attempt == 1 })
	if !strings.Contains(in.Error, `step "boom" panicked: first attempt`) {
		t.Errorf("error %q, want the panic", in.Error)
	}
	e.clock.Advance(time.Second)
	in = waitFor(t, e, "b-1", "ended", status[Stubborn](workflows.StatusEnded))
	if in.State.Outcome != "second attempt" {
		t.Errorf("outcome %q, want %q; history %+v", in.State.Outcome, "second attempt", in.History)
	}
}
