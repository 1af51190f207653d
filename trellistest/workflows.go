package trellistest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/trellis-go/trellis/workflows"
)

// WaitWorkflow runs workflow instance id of wf until it stands at one of
// statuses (workflows.StatusPaused, StatusEnded, StatusFailed...) and
// returns it: its state, current step, attempts and history. It fails the
// test when that takes more than limit of real time, saying where the
// instance stands then (its status, step, attempt and last error). A
// step's retry waits on the service's fake clock (RunWorkflow moves it
// there), and the timer of a paused workflow is a Trellis timer: move it
// on with Service.AdvanceTimers.
func WaitWorkflow[S any](t testing.TB, wf *workflows.Running[S], id string, limit time.Duration, statuses ...workflows.Status) workflows.Instance[S] {
	t.Helper()
	return waitWorkflow(t, wf, id, limit, statuses, nil)
}

// RunWorkflow is WaitWorkflow that also moves ts's fake clock to each of
// the instance's retries (Instance.NotBefore) while the instance waits
// for one, so that its failed steps are retried, with their backoff, and
// fail over without the test moving the clock itself. A pause's timer
// still waits for Service.AdvanceTimers. The clock is the service's:
// moving it on moves every step's timeout too, so run one workflow at a
// time this way, or others only while none of their steps runs.
func RunWorkflow[S any](t testing.TB, ts *Service, wf *workflows.Running[S], id string, limit time.Duration, statuses ...workflows.Status) workflows.Instance[S] {
	t.Helper()
	return waitWorkflow(t, wf, id, limit, statuses, func(in workflows.Instance[S]) {
		if now := ts.Clock.Now(); in.Status == workflows.StatusRunning && in.Attempt > 0 && in.NotBefore.After(now) {
			ts.Clock.Advance(in.NotBefore.Sub(now))
		}
	})
}

// waitWorkflow reads instance id of wf every millisecond until it stands
// at one of statuses, handing each other reading to each (when not nil).
func waitWorkflow[S any](t testing.TB, wf *workflows.Running[S], id string, limit time.Duration, statuses []workflows.Status, each func(workflows.Instance[S])) workflows.Instance[S] {
	t.Helper()
	var in workflows.Instance[S]
	var err error
	for deadline := time.Now().Add(limit); ; time.Sleep(time.Millisecond) {
		in, err = wf.Get(context.Background(), id)
		if err == nil && slices.Contains(statuses, in.Status) {
			return in
		}
		if err == nil && each != nil {
			each(in)
		}
		if time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatalf("workflow %s did not stand at one of %s within %v: it could not be read: %v", id, statusList(statuses), limit, err)
	}
	t.Fatalf("workflow %s did not stand at one of %s within %v: %s", id, statusList(statuses), limit, whereItStands(in))
	return in
}

// whereItStands says where instance in stands, for a failure's message:
// "failed at step "charge" after 3 failed runs: charge: the balance
// is 100".
func whereItStands[S any](in workflows.Instance[S]) string {
	var b strings.Builder
	b.WriteString(statusName(in.Status))
	if in.Suspended {
		b.WriteString(" (suspended)")
	}
	if in.Step != "" {
		fmt.Fprintf(&b, " at step %q", in.Step)
	}
	if in.Attempt > 0 {
		fmt.Fprintf(&b, " after %d failed runs", in.Attempt)
	}
	if in.Error != "" {
		b.WriteString(": " + in.Error)
	}
	return b.String()
}

// statusList names statuses for a failure's message.
func statusList(statuses []workflows.Status) string {
	names := make([]string, len(statuses))
	for i, st := range statuses {
		names[i] = statusName(st)
	}
	return strings.Join(names, ", ")
}

// statusName names a status; StatusNotStarted is "not started".
func statusName(st workflows.Status) string {
	if st == workflows.StatusNotStarted {
		return "not started"
	}
	return string(st)
}
