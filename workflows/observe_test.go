package workflows_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/internal/testkit/fixture"
	"github.com/trellis-go/trellis/trellistest"
	"github.com/trellis-go/trellis/workflows"
)

// TestMetricsAndSpans runs jobs in a service that traces every span: a
// job whose step fails once, is retried now by an operator, fails its
// last retry, is retried from its failure and ends; another that keeps
// running. Each attempt of a step is a span linked to the command that
// started the job, a failed one marked so, with its commit (the entity
// save of the record) under it; /metrics counts the starts,
// the ends by outcome, the runs and retries of each step, and the running
// instances.
func TestMetricsAndSpans(t *testing.T) {
	fixture.JobsFailing.Store(true)
	t.Cleanup(func() { fixture.JobsFailing.Store(false) })
	spans := trellistest.NewSpans(t)
	jobs := &fixture.Jobs{}
	ts := trellistest.Start(t, jobs.App, spans.Option())
	ctx, caller := spans.Provider.Tracer("test").Start(context.Background(), "caller")
	if _, err := fixture.StartJob.Invoke(ctx, ts.Host().Client, "j-1", components.Done{}); err != nil {
		t.Fatal(err)
	}
	caller.End()
	jobs.Begin(t, ts.Host(), "j-2", workflows.StatusRunning, 1)
	trellistest.Eventually(t, 10*time.Second, "j-1 waits for its retry", func() bool {
		in, err := jobs.Running.Get(context.Background(), "j-1")
		return err == nil && in.Attempt == 1
	})
	retry := func() {
		t.Helper()
		if _, err := jobs.Running.Operate(context.Background(), "j-1", workflows.Operation{Action: workflows.Retry}); err != nil {
			t.Fatal(err)
		}
	}
	retry() // now: it fails its last retry
	trellistest.WaitWorkflow(t, jobs.Running, "j-1", 10*time.Second, workflows.StatusFailed)
	fixture.JobsFailing.Store(false)
	retry() // from its failure: it ends
	trellistest.WaitWorkflow(t, jobs.Running, "j-1", 10*time.Second, workflows.StatusEnded)

	var work, failed, linked int
	for _, sp := range spans.Named("workflow step job.*") {
		if sp.Name() == "workflow step job.work" {
			work++
			if sp.Status().Code == codes.Error {
				failed++
			}
		}
		if !slices.Contains(sp.Attributes(), attribute.String("trellis.entity.id", "j-1")) {
			continue
		}
		spans.Child(t, sp, "entity save") // the commit of the run's outcome
		if len(sp.Links()) == 1 && sp.Links()[0].SpanContext.TraceID() == caller.SpanContext().TraceID() {
			linked++
		} else {
			t.Errorf("%s of j-1 links to %v, want the caller's trace %s", sp.Name(), sp.Links(), caller.SpanContext().TraceID())
		}
	}
	// j-1: work failed twice and ran once more, then after; j-2: work
	// failed once.
	if work != 4 || failed != 3 || linked != 4 {
		t.Errorf("work: %d spans, %d failed; %d of j-1's linked to its caller; want 4, 3 and 4 (spans: %v)", work, failed, linked, spans.Names())
	}

	metrics := string(ts.Get(t, "/metrics").Body)
	for _, want := range []string{
		`trellis_workflow_started_total{workflow="job"} 2`,
		`trellis_workflow_ended_total{outcome="failed",workflow="job"} 1`,
		`trellis_workflow_ended_total{outcome="ended",workflow="job"} 1`,
		`trellis_workflow_step_retries_total{step="work",workflow="job"} 2`,
		`trellis_workflow_step_seconds_count{outcome="failed",step="work",workflow="job"} 3`,
		`trellis_workflow_step_seconds_count{outcome="ok",step="after",workflow="job"} 1`,
		`trellis_workflow_instances{status="running",workflow="job"} 1`,
		`trellis_workflow_instances{status="paused",workflow="job"} 0`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics has no %s", want)
		}
	}

	// j-2 suspended (paused), then cancelled (ended as cancelled).
	for _, c := range []struct {
		action workflows.Action
		want   []string
	}{
		{workflows.Suspend, []string{
			`trellis_workflow_instances{status="running",workflow="job"} 0`,
			`trellis_workflow_instances{status="paused",workflow="job"} 1`,
		}},
		{workflows.Cancel, []string{
			`trellis_workflow_instances{status="paused",workflow="job"} 0`,
			`trellis_workflow_ended_total{outcome="cancelled",workflow="job"} 1`,
		}},
	} {
		if _, err := jobs.Running.Operate(context.Background(), "j-2", workflows.Operation{Action: c.action}); err != nil {
			t.Fatal(err)
		}
		metrics := string(ts.Get(t, "/metrics").Body)
		for _, want := range c.want {
			if !strings.Contains(metrics, want) {
				t.Errorf("after %s: /metrics has no %s", c.action, want)
			}
		}
	}
}
