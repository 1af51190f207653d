package workflows_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"go.opentelemetry.io/otel/trace"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/trellistest"
	"github.com/trellis-go/trellis/workflows"
)

// TestPauseTimerUnderItsStep: the timer a step's pause arms is created
// under the span of that step's run (the timer's "timer create" span is
// its child, in its trace), and the timer's run, once the pause lapses,
// links to that creation — so a trace shows which step armed which timer.
func TestPauseTimerUnderItsStep(t *testing.T) {
	spans := trellistest.NewSpans(t)
	var wf *workflows.Running[Payment]
	ts := trellistest.Start(t, func(h *trellis.Host, _ chi.Router) error {
		var err error
		wf, err = Payments.Start(h.Workflows())
		return err
	}, spans.Option())
	if _, err := Pay.Invoke(context.Background(), ts.Client, "p-1", 500); err != nil {
		t.Fatal(err)
	}
	trellistest.WaitWorkflow(t, wf, "p-1", 10*time.Second, workflows.StatusPaused)
	step := spans.Wait(t, "workflow step payment.check")
	spans.Child(t, step, "timer create")
	ts.AdvanceTimers(t, time.Hour)
	trellistest.WaitWorkflow(t, wf, "p-1", 10*time.Second, workflows.StatusEnded)
	// The timer may be armed more than once (the shard's resume arms it
	// too): each time under the step, and its run links to the last.
	created := map[trace.SpanID]bool{}
	for _, sp := range spans.Named("timer create") {
		if trellistest.SpanAttr(sp, "trellis.timer.name") != workflows.TimerName("payment", "p-1") {
			continue
		}
		if sp.Parent().SpanID() != step.SpanContext().SpanID() {
			t.Errorf("the pause's timer was created under %s, want the step that paused (%s)", sp.Parent().SpanID(), step.SpanContext().SpanID())
		}
		created[sp.SpanContext().SpanID()] = true
	}
	run := spans.Wait(t, "timer run")
	if links := run.Links(); len(links) != 1 || !created[links[0].SpanContext.SpanID()] {
		t.Errorf("the timer's run links to %v, want its creation under the step", links)
	}
}
