package workflows_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/workflows"
)

// Job runs "work" (which fails while opFail is set, with one retry an
// hour later), then "after", which ends it.
type Job struct {
	Done []string `json:"done,omitempty"`
}

var (
	Jobs = workflows.Define("job", func(string) Job { return Job{} }, workflows.Retries(1, time.Hour, time.Hour))

	StartJob = workflows.Command(Jobs, "start",
		func(ctx *workflows.Ctx[Job, components.Done], s Job, _ components.Done) workflows.Effect[Job, components.Done] {
			return ctx.TransitionTo("work", nil).ThenReply(components.Done{})
		})

	opFail atomic.Bool
	// workKeys are the keys "work" ran under, by workflow id.
	workKeys sync.Map
)

func init() {
	workflows.Step(Jobs, "work", func(ctx *workflows.StepCtx[Job], s Job, _ any) workflows.StepEffect[Job] {
		keys, _ := workKeys.LoadOrStore(ctx.WorkflowID(), &keyList{})
		keys.(*keyList).add(ctx.IdempotencyKey())
		if opFail.Load() {
			return ctx.Fail("work: refused")
		}
		s.Done = append(s.Done, "work")
		return ctx.UpdateState(s).TransitionTo("after", nil)
	})
	workflows.Step(Jobs, "after", func(ctx *workflows.StepCtx[Job], s Job, _ any) workflows.StepEffect[Job] {
		s.Done = append(s.Done, "after")
		return ctx.UpdateState(s).End()
	})
}

type keyList struct {
	mu   sync.Mutex
	keys []string
}

func (k *keyList) add(key string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.keys = append(k.keys, key)
}

func (k *keyList) get() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.keys)
}

// runs are the keys "work" of id ran under.
func runs(id string) []string {
	k, ok := workKeys.Load(id)
	if !ok {
		return nil
	}
	return k.(*keyList).get()
}

// refusedAs reports whether err is a command refusal of kind.
func refusedAs(err error, kind components.ErrorKind) bool {
	var ce *components.CommandError
	return errors.As(err, &ce) && ce.Kind == kind
}

// TestOperatorActions drives one job through every operator action: a
// running job waiting an hour for its retry is suspended (paused, its
// wait dropped) and resumed (it runs now, under the same key); retry now
// cuts the next wait short; a job out of retries (failed, at its step) is
// retried from its first attempt under the same key and ends; skip moves
// a job to a named step; cancel ends one; and each refusal is its kind.
func TestOperatorActions(t *testing.T) {
	workKeys.Clear() // a run before (-count) ran its jobs under the same ids
	opFail.Store(true)
	t.Cleanup(func() { opFail.Store(false) })
	e := start(t, Jobs, nil, nil)
	ctx := context.Background()
	op := func(id string, action workflows.Action, step string) (workflows.Record, error) {
		return e.wf.Operate(ctx, id, workflows.Operation{Action: action, Step: step})
	}
	begin := func(id string) {
		t.Helper()
		if _, err := StartJob.Invoke(ctx, e.client, id, components.Done{}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, e, id, "waiting for its retry", func(in workflows.Instance[Job]) bool { return in.Attempt == 1 })
	}

	begin("j-1")
	rec, err := op("j-1", workflows.Suspend, "")
	if err != nil || rec.Status != workflows.StatusPaused || !rec.Suspended || rec.Step != "work" {
		t.Fatalf("suspend: %+v, %v; want paused, suspended at work", rec, err)
	}
	if _, err := op("j-1", workflows.Suspend, ""); !refusedAs(err, components.Conflict) {
		t.Errorf("a second suspend: %v, want a conflict", err)
	}
	if _, err := op("j-1", workflows.Resume, ""); err != nil {
		t.Fatal(err)
	}
	// Resumed: it runs now (not an hour later) and fails its last retry.
	in := waitFor(t, e, "j-1", "failed", status[Job](workflows.StatusFailed))
	if in.Step != "work" || in.Error != "work: refused" {
		t.Errorf("failed at %q with %q, want at work with its error", in.Step, in.Error)
	}
	opFail.Store(false)
	if _, err := op("j-1", workflows.Retry, ""); err != nil {
		t.Fatal(err)
	}
	in = waitFor(t, e, "j-1", "ended", status[Job](workflows.StatusEnded))
	if !slices.Equal(in.State.Done, []string{"work", "after"}) {
		t.Errorf("done %v, want work then after", in.State.Done)
	}
	if keys := runs("j-1"); len(keys) != 3 || keys[0] != keys[1] || keys[1] != keys[2] {
		t.Errorf("work ran under %v: want three runs under one key", keys)
	}
	outcomes := make([]string, 0, len(in.History))
	for _, h := range in.History {
		outcomes = append(outcomes, h.Outcome)
	}
	if want := "to work,retry,suspended,resumed,failed,retried,to after,ended"; strings.Join(outcomes, ",") != want {
		t.Errorf("history %v, want %s", outcomes, want)
	}

	opFail.Store(true)
	begin("j-2")
	if _, err := op("j-2", workflows.Retry, ""); err != nil {
		t.Fatal(err)
	}
	waitFor(t, e, "j-2", "failed by its retry now", status[Job](workflows.StatusFailed))

	for _, c := range []struct {
		name   string
		id     string
		action workflows.Action
		step   string
		input  string
		kind   components.ErrorKind
		names  string // what the refusal names
	}{
		{"unknown step", "j-2", workflows.Skip, "nowhere", "", components.Invalid, "nowhere"},
		{"input not JSON", "j-2", workflows.Skip, "after", `{bad`, components.Invalid, "input"},
		{"unknown action", "j-2", "jump", "", "", components.Invalid, "jump"},
		{"not started", "j-none", workflows.Cancel, "", "", components.NotFound, "j-none"},
		{"resume of a failed job", "j-2", workflows.Resume, "", "", components.Conflict, "failed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := e.wf.Operate(ctx, c.id, workflows.Operation{Action: c.action, Step: c.step, Input: json.RawMessage(c.input)})
			if !refusedAs(err, c.kind) {
				t.Errorf("%s: %v, want a refusal of kind %v", c.action, err, c.kind)
			}
			if err != nil && !strings.Contains(err.Error(), c.names) {
				t.Errorf("%v does not name %q", err, c.names)
			}
		})
	}
	if _, _, err := e.wf.List(ctx, "", 10); err != nil {
		t.Errorf("list after the refusals: %v", err) // nothing they refused was written
	}

	if _, err := op("j-2", workflows.Skip, "after"); err != nil {
		t.Fatal(err)
	}
	in = waitFor(t, e, "j-2", "ended", status[Job](workflows.StatusEnded))
	if !slices.Equal(in.State.Done, []string{"after"}) {
		t.Errorf("done %v, want after only (skipped)", in.State.Done)
	}

	begin("j-3")
	recs, more, err := e.wf.List(ctx, workflows.StatusRunning, 10)
	if err != nil || more || len(recs) != 1 || recs[0].ID != "j-3" {
		t.Errorf("running: %+v (more %v, %v), want j-3", recs, more, err)
	}
	if rec, err := op("j-3", workflows.Cancel, ""); err != nil || rec.Status != workflows.StatusEnded || rec.Error != "cancelled by an operator" {
		t.Errorf("cancel: %+v, %v", rec, err)
	}
	if _, err := op("j-3", workflows.Skip, "after"); !refusedAs(err, components.Conflict) || !strings.Contains(err.Error(), "has ended") {
		t.Errorf("skip of an ended job: %v, want a conflict saying it has ended", err)
	}
	ended, _, err := e.wf.List(ctx, workflows.StatusEnded, 10)
	if err != nil || len(ended) != 3 {
		t.Errorf("ended: %d (%v), want 3", len(ended), err)
	}
	if all, more, err := e.wf.List(ctx, "", 2); err != nil || len(all) != 2 || !more || all[0].ID != "j-1" {
		t.Errorf("every job, two at most: %+v (more %v, %v)", all, more, err)
	}
}
