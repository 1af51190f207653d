package workflows

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/internal/deadlines"
	"github.com/trellis-go/trellis/internal/tracing"
)

// One run of a step. Its handler runs on the goroutine that drives the
// workflow, under the step's timeout. A handler that returns in time costs
// no other goroutine; one that runs past its timeout has its context
// cancelled, and the drive goes on without it on a new goroutine, which
// commits the timeout (stepLimit.Expire), while the handler keeps the old
// one until it returns: what it returns then is dropped. A stop or a
// shard's hand-over waits for the handler, so that it does not run on
// while the shard's next owner runs the step.

// ranStep is a step run, ready to commit: which run it was, its outcome
// a, and its span, which the commit ends with errType (the commit's spans
// are its children).
type ranStep struct {
	at      attempt
	a       commitArg
	span    trace.Span
	errType string
}

// attempt names a run of a step: the step, the transition it runs under
// and its attempt's number (from 1).
type attempt struct {
	step       string
	transition uint64
	number     int
}

// attempt is the run of rec's step that comes next.
func (rec *record) attempt() attempt {
	return attempt{step: rec.Step, transition: rec.Transition, number: rec.Attempt + 1}
}

// stepResult is what a step's handler gave: its effect, or err when its
// input did not decode; panicked is what it panicked with.
type stepResult[S any] struct {
	eff      StepEffect[S]
	err      error
	panicked any
}

// run runs rec's step once on this goroutine and returns its outcome, to
// commit. False: the run went past its timeout and d was handed over to
// another goroutine; the caller leaves d alone.
func (r *Running[S]) run(d *drive, id string, rec record) (ranStep, bool) {
	ctx, at := d.ctx, rec.attempt()
	started := r.clock.Now()
	if !rec.Deadline.IsZero() && !started.Before(rec.Deadline) {
		a := commitArg{Transition: rec.Transition, Started: started, TimedOut: true, At: r.clock.Now()}
		return ranStep{at: at, a: a, span: noop.Span{}}, true
	}
	if why := r.staleKeys(id, rec, started); why != "" {
		a := commitArg{Transition: rec.Transition, Started: started, At: started, Error: why, Stale: true}
		return ranStep{at: at, a: a, span: noop.Span{}, errType: "failed"}, true
	}
	def := r.t.step(rec.Step)
	if def == nil {
		err := fmt.Errorf("workflow %s/%s is at step %q, which its code no longer has", r.t.id, id, rec.Step)
		return r.outcome(ctx, at, started, noop.Span{}, stepResult[S]{}, err), true
	}
	state, err := r.t.decode(id, rec)
	if err != nil {
		return r.outcome(ctx, at, started, noop.Span{}, stepResult[S]{err: err}, nil), true
	}
	timeout := def.settings.stepTimeout
	if !rec.Deadline.IsZero() {
		timeout = min(timeout, rec.Deadline.Sub(started))
	}
	// On the runner's clock (clockwork's own WithTimeout blocks in Err on
	// a fake clock), in its book of step timeouts.
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	runCtx, span := r.stepSpan(runCtx, id, rec)
	key := StepKey(r.t.id, id, rec.Run, rec.Step, rec.entered())
	limit := &stepLimit[S]{cancel: cancel, r: r, d: d, id: id, at: at, started: started, span: span, timeout: timeout,
		sctx: StepCtx[S]{ctx: components.WithIdempotencyKey(runCtx, key), workflowID: id, client: r.host.Entities.Client,
			step: rec.Step, attempt: at.number, transition: rec.Transition, key: key}}
	r.limits.Add(limit, timeout) // whole before the book's timer goroutine may see it
	res := call(def, &limit.sctx, state, rec.Input)
	if !limit.Done.CompareAndSwap(false, true) {
		return ranStep{}, false // timed out: Expire handed the drive over
	}
	switch {
	case res.panicked != nil:
		err = fmt.Errorf("step %q panicked: %v", rec.Step, res.panicked)
	case ctx.Err() != nil:
		err = fmt.Errorf("step %q stopped: %w", rec.Step, context.Cause(ctx))
	}
	return r.outcome(ctx, at, started, span, res, err), true
}

// call runs def's handler, recovering a panic.
func call[S any](def *stepDef[S], sctx *StepCtx[S], state S, input []byte) (res stepResult[S]) {
	defer func() {
		if p := recover(); p != nil {
			res = stepResult[S]{panicked: p}
		}
	}()
	eff, err := def.run(sctx, state, input)
	return stepResult[S]{eff: eff, err: err}
}

// outcome is the commit of run at, which started at started, in span:
// err is a missing step, a panic, the timeout or a stop; else res's effect
// (an input that did not decode, a zero effect or an effect's encoding
// fail the run for good).
func (r *Running[S]) outcome(ctx context.Context, at attempt, started time.Time, span trace.Span, res stepResult[S], err error) ranStep {
	a := commitArg{Transition: at.transition, Started: started}
	if sc := span.SpanContext(); sc.IsSampled() { // else CaptureForLink is "": spare the context
		a.Span = tracing.CaptureForLink(trace.ContextWithSpanContext(ctx, sc))
	}
	errType := ""
	switch {
	case err != nil:
		a.Error, errType = err.Error(), "failed"
		a.Missing = r.t.step(at.step) == nil
	case res.err != nil:
		a.Error, a.Permanent, errType = res.err.Error(), true, "bad effect"
	case !res.eff.set:
		a.Error, a.Permanent, errType = fmt.Sprintf("step %q returned no effect (the zero StepEffect)", at.step), true, "bad effect"
	case res.eff.err != nil:
		a.Error, errType = res.eff.err.Error(), "failed"
	default:
		d, err := encodeMove(res.eff.update, res.eff.state, res.eff.move)
		if err != nil {
			a.Error, a.Permanent = err.Error(), true
		} else {
			a.Decision = &d
		}
	}
	a.At = r.clock.Now()
	return ranStep{at: at, a: a, span: span, errType: errType}
}

// stepLimit is a step run's timeout in the runner's book of them
// (Running.limits): one timer on the runner's clock for every run in
// flight, rather than one per run. It holds what the drive needs to go on
// without the run when it expires.
type stepLimit[S any] struct {
	deadlines.Entry // Done: the run returned, or its timeout passed
	cancel          context.CancelCauseFunc
	r               *Running[S]
	d               *drive
	id              string
	at              attempt
	started         time.Time
	span            trace.Span
	timeout         time.Duration
	sctx            StepCtx[S] // the run's, here to share the limit's allocation
}

// BookEntry is the timeout's place in the book.
func (l *stepLimit[S]) BookEntry() *deadlines.Entry { return &l.Entry }

// Expire cancels the run's context with context.DeadlineExceeded, unless
// the run returned, and hands the drive over to a new goroutine, which
// commits the timeout as the run's outcome and goes on, while the handler
// holds the run's.
func (l *stepLimit[S]) Expire() {
	if !l.Done.CompareAndSwap(false, true) {
		return
	}
	l.cancel(context.DeadlineExceeded)
	late := fmt.Errorf("step %q ran past its timeout of %s", l.at.step, l.timeout)
	ran := l.r.outcome(l.d.ctx, l.at, l.started, l.span, stepResult[S]{}, late)
	go l.r.drive(l.id, l.d, &ran)
}

var _ deadlines.Wait = (*stepLimit[int])(nil)

// stepSpan opens the span of one attempt of rec's step, linked to the
// command that started the workflow.
func (r *Running[S]) stepSpan(ctx context.Context, id string, rec record) (context.Context, trace.Span) {
	if r.tracer == nil {
		return ctx, noop.Span{}
	}
	opts := append(tracing.LinkTo(rec.Trace), trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(
		tracing.AttrComponent.String(r.t.id), tracing.AttrEntityID.String(id), attrStep.String(rec.Step),
		attrAttempt.Int(rec.Attempt+1), attrTransition.Int64(int64(rec.Transition))))
	return r.tracer.Start(ctx, "workflow step "+r.t.id+"."+rec.Step, opts...)
}

// The attributes of a step's span.
const (
	attrStep       = attribute.Key("trellis.workflow.step")
	attrAttempt    = attribute.Key("trellis.workflow.attempt")
	attrTransition = attribute.Key("trellis.workflow.transition")
)

// staleKeysPrefix starts the error of a step not run because its keys may
// have expired: an operator's retry of it runs it anyway.
const staleKeysPrefix = "not run: the answers its entity commands recorded may have expired"

// staleKeys is why rec's step must not run now, "" when it may: it was
// entered longer ago than the entities keep the answers of commands with
// an idempotency key (Host.KeyRetention, less a margin for the clocks of
// the instances and the store), so a command its earlier runs applied
// might be applied again. The workflow then fails, for an operator to
// skip the step or retry it knowingly.
func (r *Running[S]) staleKeys(id string, rec record, now time.Time) string {
	if rec.EnteredAt.IsZero() {
		return ""
	}
	retention := r.host.Entities.KeyRetention
	if retention <= 0 {
		retention = entities.DefaultKeyRetention
	}
	if now.Sub(rec.EnteredAt) < retention-min(time.Minute, retention/10) {
		return ""
	}
	return fmt.Sprintf("%s (step %q of %s/%s entered %s, kept %s): skip it, or retry it if running it again is safe",
		staleKeysPrefix, rec.Step, r.t.id, id, rec.EnteredAt.Format(time.RFC3339), retention)
}
