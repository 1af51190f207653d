package timers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/internal/tracing"
)

// result is the outcome of one claimed timer's call.
type result struct {
	t      Timer
	firing Firing
	err    error
	// released: the call did not run to an outcome because this instance
	// is stopping; the timer goes back to the store without a failure.
	released bool
	// skipped: a recurring timer's late run its catch-up policy drops.
	skipped bool
	// at is when the call ended, in the store's time.
	at time.Time
}

// worker runs calls until the loop closes jobs. The pool is fixed at
// Config.Workers goroutines for the scheduler's life.
func (l *loop) worker() {
	defer l.workers.Done()
	for j := range l.jobs {
		r := l.call(j)
		l.unsettled.Add(1)
		// Blocks while the reporter is behind: the slot stays taken, so
		// the loop claims less — backpressure all the way to the store.
		l.results <- r
		l.inFlight.Add(-1)
		select {
		case l.freed <- struct{}{}:
		default:
		}
	}
}

// call runs one timer's call with the per-call timeout and the firing in
// its context. The timeout is in real time even when the store runs on a
// fake clock: a call takes real time.
func (l *loop) call(j job) result {
	var decodeErr error
	if j.storedCall != "" {
		// A call that does not decode fails like one that ran and failed:
		// it is retried, and its error is on the timer for an operator.
		if j.t.Recurring, j.t.Call, j.t.TraceContext, decodeErr = decodeStored(j.storedCall); decodeErr != nil {
			decodeErr = fmt.Errorf("decode the stored call: %w", decodeErr)
		}
	}
	f := firingOf(j.t)
	m := l.s.metrics
	if skip, ok := l.skipLate(j); ok {
		return skip
	}
	if j.leaseExpired {
		m.leaseExpired.Inc()
	}
	// Every firing, so that a callee that sees a timer twice can tell a
	// retry or a re-run after a lost lease (same generation, next attempt)
	// from a replaced timer (new generation).
	if l.s.log.Enabled(l.callCtx, slog.LevelDebug) {
		l.s.log.LogAttrs(l.callCtx, slog.LevelDebug, "timer firing",
			slog.String("timer", f.Name), slog.Uint64("generation", f.Generation), slog.Int("attempt", f.Attempt),
			slog.Bool("leaseExpired", j.leaseExpired))
	}
	m.lateness.Observe((j.storeNow.Sub(j.t.DueAt) + l.s.clk.Since(j.claimedAt)).Seconds())
	m.inFlight.Inc()
	defer m.inFlight.Dec()

	ctx, cancel := context.WithTimeout(withFiring(l.callCtx, f), l.cfg.CallTimeout)
	defer cancel()
	start := time.Now()
	err := decodeErr
	ctx, span := tracing.StartTimerRun(ctx, l.s.tracer, f.Name, f.Attempt, j.t.TraceContext)
	defer func() { tracing.End(span, components.ErrorType(err)) }()
	if err == nil {
		err = dispatch(ctx, l.s.disp, j.t.Call)
	}
	elapsed := time.Since(start)
	if err != nil && l.callCtx.Err() != nil {
		// Cancelled by Shutdown, not failed: put it back for any instance.
		m.fired.WithLabelValues(resultCancelled).Inc()
		return result{t: j.t, firing: f, released: true, at: l.storeTime(j)}
	}
	label := classify(err)
	if (label == resultError || label == resultFailure) && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		// Whatever the callee made of its context ending, the cause is
		// the timeout. A call refused before it ran (no such component or
		// method, a bad argument) or a panic keeps its own reason: the
		// deadline passing meanwhile is a coincidence of a slow machine.
		err, label = fmt.Errorf("call timed out after %v: %w", l.cfg.CallTimeout, err), resultTimeout
	}
	m.called(label, elapsed)
	return result{t: j.t, firing: f, err: err, at: l.storeTime(j)}
}

// panicError is a panic of the dispatcher, recovered.
type panicError struct{ v any }

func (e *panicError) Error() string { return fmt.Sprintf("call panicked: %v", e.v) }

// dispatch runs call; a panic is a failure like any other (the timer
// retries), never a crash of the worker.
func dispatch(ctx context.Context, d Dispatcher, call components.DeferredCall) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &panicError{v: r}
		}
	}()
	_, err = d.Dispatch(ctx, call)
	return err
}

// isPanic reports whether err is a recovered panic of the dispatcher. (A
// function of its own: the target errors.As needs lives on the heap, which
// classify would otherwise pay for every call, successful ones too.)
func isPanic(err error) bool {
	var pe *panicError
	return errors.As(err, &pe)
}

// The values of the result label of trellis_timers_fired_total.
const (
	resultSuccess          = "success"
	resultError            = "error" // the callee's error effect
	resultTimeout          = "timeout"
	resultUnknownComponent = "unknown_component"
	resultUnknownMethod    = "unknown_method"
	resultBadArgument      = "bad_argument"
	resultPanic            = "panic"
	resultFailure          = "failure" // anything else
	resultCancelled        = "cancelled"
	resultSkipped          = "skipped" // a late recurring run the catch-up policy drops
)

// classify names why a call failed, from the errors components.Client
// keeps distinct.
func classify(err error) string {
	switch {
	case err == nil:
		return resultSuccess
	case errors.Is(err, context.DeadlineExceeded):
		return resultTimeout
	case errors.Is(err, components.ErrUnknownComponent):
		return resultUnknownComponent
	case errors.Is(err, components.ErrUnknownMethod):
		return resultUnknownMethod
	case errors.Is(err, components.ErrBadArgument), errors.Is(err, components.ErrMissingEntityID):
		return resultBadArgument
	case isPanic(err):
		return resultPanic
	}
	if _, ok := components.IsCommandError(err); ok {
		return resultError
	}
	return resultFailure
}

// reportBatch is the most outcomes written in one round of store calls.
const reportBatch = 512

// reportGather is how many outcomes the reporter waits for, reportLinger
// at most, while calls are still in flight: a store call costs Redis as
// much as a few outcomes do, so in a burst outcomes are written a few
// dozen at a time rather than one or two.
const (
	reportGather = 64
	reportLinger = time.Millisecond
)

// report writes outcomes to the store until the workers are done. It takes
// what is queued at once (up to reportBatch), and while calls are in
// flight waits up to reportLinger for reportGather of them, then writes
// them in one complete, one fail and one release call: under load that
// batches, and a lone outcome with nothing else in flight is written at
// once.
func (l *loop) report() {
	defer close(l.reported)
	batch := make([]result, 0, reportBatch)
	linger := time.NewTimer(time.Hour)
	linger.Stop()
	for r := range l.results {
		batch = append(batch[:0], r)
		lingering := false
	drain:
		for len(batch) < reportBatch {
			select {
			case r, ok := <-l.results:
				if !ok {
					break drain
				}
				batch = append(batch, r)
				continue
			default:
			}
			if len(batch) >= reportGather || l.inFlight.Load() == 0 {
				break
			}
			if !lingering {
				lingering = true
				linger.Reset(reportLinger)
			}
			select {
			case r, ok := <-l.results:
				if !ok {
					break drain
				}
				batch = append(batch, r)
			case <-linger.C:
				break drain
			}
		}
		if lingering {
			linger.Stop()
		}
		l.settle(batch)
		l.unsettled.Add(-int64(len(batch)))
	}
}

// settle writes one batch of outcomes, retrying store errors while the
// leases last: past that another instance may run the timers again, which
// at-least-once allows, so the outcome is dropped (and logged).
func (l *loop) settle(batch []result) {
	var done, released []Firing
	var failed []failure
	var advances []advanceRequest
	for _, r := range batch {
		giveUp := r.err != nil && r.t.MaxRetries > 0 && r.firing.Attempt > r.t.MaxRetries
		switch {
		case r.released:
			released = append(released, r.firing)
		case r.t.Recurring != nil && (r.skipped || r.err == nil || giveUp):
			advances = append(advances, l.advanceOf(r, giveUp))
		case r.err == nil:
			done = append(done, r.firing)
		default:
			failed = append(failed, failure{
				firing: r.firing, err: r.err.Error(), retryAfter: Backoff(r.firing.Attempt), giveUp: giveUp,
			})
		}
	}
	deadline := time.Now().Add(l.cfg.Lease)
	if l.stopping() {
		// Do not hold Shutdown for a whole lease while the store is down:
		// the leases expire and other instances run these timers.
		deadline = time.Now().Add(claimTimeout)
	}
	if len(done) > 0 {
		retry(l, deadline, "complete", func(ctx context.Context) error {
			_, err := l.s.store.complete(ctx, done)
			return err
		})
	}
	if len(failed) > 0 {
		var outcomes []failOutcome
		if retry(l, deadline, "reschedule", func(ctx context.Context) (err error) {
			outcomes, err = l.s.store.fail(ctx, failed)
			return err
		}) {
			l.noteFailed(failed, outcomes)
		}
	}
	if len(advances) > 0 {
		var outcomes []advanceOutcome
		if retry(l, deadline, "advance", func(ctx context.Context) (err error) {
			outcomes, err = l.s.store.advance(ctx, advances)
			return err
		}) {
			l.noteAdvanced(advances, outcomes)
		}
	}
	if len(released) > 0 {
		retry(l, deadline, "release", func(ctx context.Context) error {
			return l.s.store.release(ctx, released)
		})
	}
}

// noteFailed logs and counts rescheduled and given-up timers, and wakes
// the loop for the earliest retry.
func (l *loop) noteFailed(failed []failure, outcomes []failOutcome) {
	m := l.s.metrics
	for i, f := range failed {
		switch outcomes[i] {
		case failRescheduled:
			m.retries.Inc()
			l.noteDue(l.s.clk.Now().Add(f.retryAfter))
			log := l.s.log.Debug
			if f.firing.Attempt == 1 {
				log = l.s.log.Warn
			}
			log("timer call failed; retrying", "timer", f.firing.Name, "attempt", f.firing.Attempt,
				"retry_in", f.retryAfter, "err", f.err)
		case failGaveUp:
			m.givenUp.Inc()
			l.s.log.Error("timer gave up after its last retry; kept as a dead letter", "timer", f.firing.Name,
				"attempts", f.firing.Attempt, "err", f.err)
		}
	}
}

// retry runs op until it succeeds or deadline passes; it reports whether
// op succeeded.
func retry(l *loop, deadline time.Time, what string, op func(context.Context) error) bool {
	wait := 20 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(context.Background(), claimTimeout)
		err := op(ctx)
		cancel()
		if err == nil {
			return true
		}
		if time.Now().Add(wait).After(deadline) {
			l.s.log.Error("timers: could not record call outcomes; the timers will run again when their leases expire",
				"op", what, "err", err)
			return false
		}
		l.s.log.Warn("timers: recording call outcomes failed; retrying", "op", what, "err", err, "retry_in", wait)
		time.Sleep(wait) // real time: store outages are real
		wait = min(2*wait, time.Second)
	}
}
