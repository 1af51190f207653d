package workflows_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/workflows"
)

// Fx returns the effect its command's argument, or its step's input,
// names. Its steps' failures would be retried an hour later: a failure
// that is not retried shows at once as a failed workflow.
type Fx struct {
	Note string `json:"note,omitempty"`
}

var (
	Fxs = workflows.Define("fx", func(string) Fx { return Fx{} }, workflows.Retries(3, time.Hour, time.Hour))

	FxDo = workflows.Command(Fxs, "do",
		func(ctx *workflows.Ctx[Fx, components.Done], s Fx, what string) workflows.Effect[Fx, components.Done] {
			s.Note = what
			switch what {
			case "pause":
				return ctx.UpdateState(s).Pause().ThenReply(components.Done{})
			case "pausefor":
				return ctx.PauseFor(time.Hour, "run", "step-end").ThenReply(components.Done{})
			case "update":
				return ctx.UpdateState(s).ThenReply(components.Done{})
			case "end":
				return ctx.UpdateState(s).End().ThenReply(components.Done{})
			case "error":
				return ctx.Error("boom")
			case "refuse":
				return ctx.Refuse(components.NotFound, "no such thing")
			case "zero":
				return workflows.Effect[Fx, components.Done]{}
			case "typed":
				return ctx.TransitionTo("typed", "not a number").ThenReply(components.Done{})
			}
			return ctx.UpdateState(s).TransitionTo("run", what).ThenReply(components.Done{})
		})
)

func init() {
	workflows.Step(Fxs, "run", func(ctx *workflows.StepCtx[Fx], s Fx, what string) workflows.StepEffect[Fx] {
		s.Note = "step " + what
		switch what {
		case "step-pause":
			return ctx.UpdateState(s).Pause()
		case "step-pausefor":
			return ctx.UpdateState(s).PauseFor(time.Hour, "run", "step-end")
		case "step-end":
			return ctx.UpdateState(s).End()
		case "step-zero":
			return workflows.StepEffect[Fx]{}
		case "step-unknown":
			return ctx.UpdateState(s).TransitionTo("nowhere", nil)
		case "step-lapse-unknown":
			return ctx.UpdateState(s).PauseFor(time.Hour, "nowhere", nil)
		}
		return ctx.Fail("unknown case %q", what)
	})
	workflows.Step(Fxs, "typed", func(ctx *workflows.StepCtx[Fx], s Fx, n int) workflows.StepEffect[Fx] {
		return ctx.End()
	})
}

// TestCommandEffects: each effect a command returns, on a workflow that
// has not started and on one paused by a command: a pause, a state update
// with no move (the status kept: a workflow not started keeps the state
// for the command that starts it), an end, and refusals of their kind (an
// error, a refusal, the zero effect), which change nothing.
func TestCommandEffects(t *testing.T) {
	cases := []struct {
		name, first, then string
		status            workflows.Status
		note              string
		kind              components.ErrorKind // for a refusal of then
		refused           string               // what the refusal says; "" when none
	}{
		{"pause", "", "pause", workflows.StatusPaused, "pause", 0, ""},
		{"pause for an hour, state kept", "pause", "pausefor", workflows.StatusPaused, "pause", 0, ""},
		{"update, not started", "", "update", workflows.StatusNotStarted, "update", 0, ""},
		{"update, paused", "pause", "update", workflows.StatusPaused, "update", 0, ""},
		{"end, paused", "pause", "end", workflows.StatusEnded, "end", 0, ""},
		{"error", "pause", "error", workflows.StatusPaused, "pause", components.Failure, "boom"},
		{"refuse", "pause", "refuse", workflows.StatusPaused, "pause", components.NotFound, "no such thing"},
		{"zero effect", "pause", "zero", workflows.StatusPaused, "pause", components.Failure, "returned no effect"},
		{"zero effect, not started", "", "zero", workflows.StatusNotStarted, "", components.Failure, "returned no effect"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := start(t, Fxs, nil, nil)
			ctx := context.Background()
			if c.first != "" {
				if _, err := FxDo.Invoke(ctx, e.client, "f-1", c.first); err != nil {
					t.Fatal(err)
				}
			}
			_, err := FxDo.Invoke(ctx, e.client, "f-1", c.then)
			switch {
			case c.refused == "" && err != nil:
				t.Fatalf("%s: %v", c.then, err)
			case c.refused != "" && (!refusedAs(err, c.kind) || !strings.Contains(err.Error(), c.refused)):
				t.Fatalf("%s: %v, want a refusal of kind %v saying %q", c.then, err, c.kind, c.refused)
			}
			in, err := e.wf.Get(ctx, "f-1")
			if err != nil || in.Status != c.status || in.State.Note != c.note {
				t.Errorf("after %s: %+v, %v; want %q with note %q", c.then, in, err, c.status, c.note)
			}
			if lapses := c.then == "pausefor"; lapses != !in.PauseUntil.IsZero() {
				t.Errorf("after %s: its pause lapses at %v", c.then, in.PauseUntil)
			}
		})
	}
}

// TestStepEffects: each effect a step returns: a pause with the state
// updated, with or without a timeout; and the moves that cannot be made
// (the zero effect, a move or a lapse to a step the workflow lacks, an
// input the step cannot decode), each failing the workflow at once, its
// error naming why, with no retry.
func TestStepEffects(t *testing.T) {
	cases := []struct {
		what   string
		status workflows.Status
		note   string
		error  string // what the workflow's error says; "" for none
	}{
		{"step-pause", workflows.StatusPaused, "step step-pause", ""},
		{"step-pausefor", workflows.StatusPaused, "step step-pausefor", ""},
		{"step-zero", workflows.StatusFailed, "step-zero", "no effect"},
		{"step-unknown", workflows.StatusFailed, "step-unknown", `"nowhere"`},
		{"step-lapse-unknown", workflows.StatusFailed, "step-lapse-unknown", `"nowhere"`},
		{"typed", workflows.StatusFailed, "", "decode"},
	}
	for _, c := range cases {
		t.Run(c.what, func(t *testing.T) {
			e := start(t, Fxs, nil, nil)
			ctx := context.Background()
			if _, err := FxDo.Invoke(ctx, e.client, "f-1", c.what); err != nil {
				t.Fatal(err)
			}
			in := waitFor(t, e, "f-1", string(c.status), status[Fx](c.status))
			if in.State.Note != c.note || !strings.Contains(in.Error, c.error) || in.Attempt != 0 {
				t.Errorf("%s: note %q, error %q, attempt %d; want note %q, an error saying %q, no retry",
					c.what, in.State.Note, in.Error, in.Attempt, c.note, c.error)
			}
			if c.what == "step-pausefor" {
				if want := e.clock.Now().Add(time.Hour); !in.PauseUntil.Equal(want) {
					t.Errorf("pause until %v, want %v", in.PauseUntil, want)
				}
				waitTimer(t, e, "f-1")
				e.clock.Advance(time.Hour)
				if err := e.timers.Settle(ctx); err != nil {
					t.Fatal(err)
				}
				if in := waitFor(t, e, "f-1", "ended", status[Fx](workflows.StatusEnded)); in.State.Note != "step step-end" {
					t.Errorf("after the lapse: note %q, want the lapse step's", in.State.Note)
				}
			}
		})
	}
}

// TestListSkipsAndFlags: a listing leaves out an instance that has not
// started (a command updated its state without moving it), as Get calls
// it not started, and lists a record that does not decode as failed,
// saying so, without failing the listing of the others.
func TestListSkipsAndFlags(t *testing.T) {
	e := start(t, Fxs, nil, nil)
	ctx := context.Background()
	for id, what := range map[string]string{"n-1": "update", "p-1": "pause"} {
		if _, err := FxDo.Invoke(ctx, e.client, id, what); err != nil {
			t.Fatal(err)
		}
	}
	if in, err := e.wf.Get(ctx, "n-1"); err != nil || in.Status != workflows.StatusNotStarted || in.State.Note != "update" {
		t.Fatalf("n-1: %+v, %v; want not started, its state updated", in, err)
	}
	if _, err := e.store.Save(ctx, Fxs.ComponentID(), "bad-1", []byte(`{bad`), 0); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		status workflows.Status
		want   []string // "id status"
	}{
		{"", []string{"bad-1 failed", "p-1 paused"}},
		{workflows.StatusFailed, []string{"bad-1 failed"}},
		{workflows.StatusPaused, []string{"p-1 paused"}},
	} {
		recs, _, err := e.wf.List(ctx, c.status, 10)
		if err != nil {
			t.Fatalf("list %q: %v", c.status, err)
		}
		var got []string
		for _, r := range recs {
			got = append(got, r.ID+" "+string(r.Status))
			if r.ID == "bad-1" && !strings.Contains(r.Error, "does not decode") {
				t.Errorf("bad-1's error %q does not say it does not decode", r.Error)
			}
		}
		if strings.Join(got, ",") != strings.Join(c.want, ",") {
			t.Errorf("list %q: %v, want %v", c.status, got, c.want)
		}
	}
}

// TestLookupIsTheRunning: the runners look a started workflow type up as
// the *Running its Start returned (what a test waits on), and know no
// other.
func TestLookupIsTheRunning(t *testing.T) {
	e := start(t, Fxs, nil, nil)
	op, ok := e.runners.Lookup(Fxs.ComponentID())
	if wf, typed := op.(*workflows.Running[Fx]); !ok || !typed || wf != e.wf {
		t.Errorf("Lookup(%q) = %T %v, want the *Running Start returned", Fxs.ComponentID(), op, ok)
	}
	if op, ok := e.runners.Lookup("nope"); ok {
		t.Errorf("Lookup(nope) = %T, want none", op)
	}
}
