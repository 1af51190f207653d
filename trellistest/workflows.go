package trellistest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/trellis-go/trellis/workflows"
)

// WaitWorkflow runs workflow instance id of wf until it stands at one of
// statuses (workflows.StatusPaused, StatusEnded, StatusFailed...) and
// returns it: its state, current step, attempts and history. It fails the
// test when that takes more than limit of real time. A step's retry waits
// on the service's fake clock, and the timer of a paused workflow is a
// Trellis timer: move them on with Service.AdvanceTimers.
func WaitWorkflow[S any](t testing.TB, wf *workflows.Running[S], id string, limit time.Duration, statuses ...workflows.Status) workflows.Instance[S] {
	t.Helper()
	var in workflows.Instance[S]
	var err error
	Eventually(t, limit, "workflow "+id+" stands at one of "+statusList(statuses), func() bool {
		in, err = wf.Get(context.Background(), id)
		return err == nil && slices.Contains(statuses, in.Status)
	})
	return in
}

// statusList names statuses for a failure's message.
func statusList(statuses []workflows.Status) string {
	s := ""
	for i, st := range statuses {
		if i > 0 {
			s += ", "
		}
		if st == workflows.StatusNotStarted {
			st = "not started"
		}
		s += string(st)
	}
	return s
}
