package timers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/internal/tracing"
)

// Recurrence is what makes a [Timer] recurring: its schedule and the run
// it is at. A recurring timer is one stored timer (it counts once toward
// MaxActive) whose runs follow one another: when a run's call succeeds,
// or gives up after its retries (leaving a dead letter named
// "<name>@<run time>~<k>", see deadRunName), the timer is set to its next run, with a new
// generation and fresh attempts, so that its [Firing] names the run.
type Recurrence struct {
	// Schedule is the timer's schedule, with its defaults filled in.
	Schedule Schedule
	// Run is the scheduled time of the timer's current run: the one due
	// (at DueAt, Run plus jitter) or running. A run is never started
	// before it.
	Run time.Time
	// Paused is true while the timer does not run; its DueAt is then
	// PausedDue. Resume sets it to the first run after the moment it
	// resumes.
	Paused bool
}

// PausedDue is the due time a paused recurring timer is stored with: it
// keeps the timer out of every claim and last in the run order.
var PausedDue = time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC)

// NextRuns returns up to n scheduled run times from the current run on;
// none while paused.
func (r Recurrence) NextRuns(n int) []time.Time {
	if r.Paused || n <= 0 {
		return nil
	}
	p, err := r.Schedule.plan()
	if err != nil {
		return nil
	}
	return append([]time.Time{r.Run}, p.next(r.Run, n-1)...)
}

// CreateRecurring schedules call to run on schedule under name, replacing
// any timer of that name (as Create does). Each run is at least once,
// never before its scheduled time, retried like a single timer's call
// (WithMaxRetries bounds the retries of each run); KeepIdentical keeps
// an identical timer of that name as it is. It fails with a
// *ScheduleError naming the field of a schedule that cannot be used (one
// with no run after now included), and as Create does otherwise.
func (s *Scheduler) CreateRecurring(ctx context.Context, name string, schedule Schedule, call components.DeferredCall, opts ...CreateOption) (Timer, error) {
	var o createOptions
	for _, opt := range opts {
		opt(&o)
	}
	if err := s.check(name, 0, call, o); err != nil {
		return Timer{}, fmt.Errorf("create recurring timer %q: %w", name, err)
	}
	if o.keepIdentical {
		if t, same, err := s.identical(ctx, name, schedule, call, o.maxRetries); err != nil || same {
			return t, err
		}
	}
	p, err := schedule.compile(s.clk.Now())
	if err != nil {
		return Timer{}, fmt.Errorf("create recurring timer %q: %w", name, err)
	}
	run, _ := p.after(s.clk.Now().Add(-time.Nanosecond))
	ctx, span := tracing.StartTimer(ctx, s.tracer, "timer create", name)
	t, err := s.putRecurringAt(ctx, name, call, o.maxRetries, &Recurrence{Schedule: p.s, Run: run}, time.Time{}, 0, tracing.CaptureForLink(ctx))
	tracing.End(span, components.ErrorType(err))
	return t, err
}

// putRecurringAt stores a recurring timer due at due (zero: at its run
// plus jitter) or paused, replacing the timer of that name; with ifGen >
// 0 only while the stored one has that generation (else ErrChanged). Its
// runs link to the trace context traceCtx ("" for none).
func (s *Scheduler) putRecurringAt(ctx context.Context, name string, call components.DeferredCall, maxRetries int, r *Recurrence, due time.Time, ifGen uint64, traceCtx string) (Timer, error) {
	switch {
	case r.Paused:
		due = PausedDue
	case due.IsZero():
		due = jittered(r.Run, r.Schedule.Jitter)
	}
	t, err := s.store.create(ctx, createRequest{
		name: name, at: due, recur: r, call: call, maxRetries: maxRetries, maxActive: s.cfg.MaxActive, ifGen: ifGen,
		traceCtx: traceCtx,
	})
	if err != nil {
		return Timer{}, fmt.Errorf("store recurring timer %q: %w", name, err)
	}
	s.noteCreated(due) // a paused timer's due time wakes nothing
	return t, nil
}

// ErrChanged is a pause or resume that lost a race: the timer was
// replaced, or its run ended, while it was read. Trying again reads the
// new one.
var ErrChanged = errors.New("timer changed meanwhile")

// Pause stops a recurring timer from running until Resume: its pending
// run (and the retries of a failing one) is dropped, and a call in flight
// can no longer move it on. Pausing a paused timer changes nothing.
// ErrNotFound when there is none; ErrInvalid for a single timer.
func (s *Scheduler) Pause(ctx context.Context, name string) (Timer, error) {
	return s.setPaused(ctx, name, true)
}

// Resume makes a paused recurring timer run again from its first
// scheduled run after now: runs that fell in the pause are not caught up.
// Resuming a running timer changes nothing. A schedule that ended
// meanwhile is a *ScheduleError (delete the timer).
func (s *Scheduler) Resume(ctx context.Context, name string) (Timer, error) {
	return s.setPaused(ctx, name, false)
}

func (s *Scheduler) setPaused(ctx context.Context, name string, paused bool) (Timer, error) {
	op := map[bool]string{true: "pause", false: "resume"}[paused]
	for range 3 {
		t, err := s.store.get(ctx, name)
		if err != nil {
			return Timer{}, fmt.Errorf("%s timer %q: %w", op, name, err)
		}
		if t.Recurring == nil {
			return Timer{}, fmt.Errorf("%s timer %q: %w: %w", op, name, ErrInvalid, errNoSchedule)
		}
		if t.Recurring.Paused == paused {
			return t, nil
		}
		r := *t.Recurring
		r.Paused = paused
		if !paused {
			p, err := r.Schedule.plan()
			if err == nil {
				var ok bool
				if r.Run, ok = p.after(s.clk.Now().Add(-time.Nanosecond)); !ok {
					err = &ScheduleError{Field: "end", Reason: "the schedule has no run after now"}
				}
			}
			if err != nil {
				return Timer{}, fmt.Errorf("%s timer %q: %w", op, name, err)
			}
		}
		t, err = s.putRecurringAt(ctx, name, t.Call, t.MaxRetries, &r, time.Time{}, t.Generation, t.TraceContext)
		if !errors.Is(err, ErrChanged) {
			return t, err
		}
	}
	return Timer{}, fmt.Errorf("%s timer %q: %w", op, name, ErrChanged)
}

// jittered is run delayed by a random part of jitter.
func jittered(run time.Time, jitter time.Duration) time.Time {
	if jitter <= 0 {
		return run
	}
	return run.Add(rand.N(jitter))
}

// deadRunName names the dead letter a recurring timer's run leaves:
// "<name>@<run time>~<k>", with the smallest k that puts it in the Redis
// partition of name, so that the store moves the run to the dead letters
// in the same atomic step that sets the timer to its next run.
func deadRunName(name string, run time.Time) string {
	base := name + "@" + run.UTC().Format(time.RFC3339) + "~"
	home := partitionOf(name)
	for k := 0; ; k++ {
		if n := base + strconv.Itoa(k); partitionOf(n) == home {
			return n
		}
	}
}

// The stored form of a recurring timer's call: recurTag, the length of
// the recurrence's JSON in decimal, ':', that JSON, then the call's stored
// form (storedcall.go). The Redis scripts read the tag and the length to
// swap the recurrence as the timer moves to its next run.
const recurTag = '\x02'

// storedRecurrence is a recurrence's stored JSON. Run is in nanoseconds:
// an interval's runs need not fall on whole milliseconds, and a run time
// rounded down would name a time before the run, whose next run is the
// run itself.
type storedRecurrence struct {
	Schedule Schedule `json:"s"`
	Run      int64    `json:"r"`
	Paused   bool     `json:"p,omitempty"`
}

// encodeRecurrence is the JSON of r in its stored form.
func encodeRecurrence(r *Recurrence) string {
	b, _ := json.Marshal(storedRecurrence{Schedule: r.Schedule, Run: r.Run.UnixNano(), Paused: r.Paused})
	return string(b)
}

// encodeStored is the stored form of a timer's call with its recurrence
// (nil for a single timer) and the trace context it was created in (""
// for none; see withTrace).
func encodeStored(r *Recurrence, call components.DeferredCall, traceCtx string) ([]byte, error) {
	c, err := encodeCall(call)
	c = withTrace(c, traceCtx)
	if err != nil || r == nil {
		return c, err
	}
	j := encodeRecurrence(r)
	return append([]byte(string(recurTag)+strconv.Itoa(len(j))+":"+j), c...), nil
}

// splitStored separates a stored form into its recurrence (nil for a
// single timer) and its call's stored form.
func splitStored(stored string) (*Recurrence, string, error) {
	if stored == "" || stored[0] != recurTag {
		return nil, stored, nil
	}
	n, rest, ok := strings.Cut(stored[1:], ":")
	size, err := strconv.Atoi(n)
	if !ok || err != nil || size < 0 || size > len(rest) {
		return nil, "", errors.New("corrupt recurrence header")
	}
	var sr storedRecurrence
	if err := json.Unmarshal([]byte(rest[:size]), &sr); err != nil {
		return nil, "", fmt.Errorf("recurrence: %w", err)
	}
	return &Recurrence{Schedule: sr.Schedule, Run: time.Unix(0, sr.Run).UTC(), Paused: sr.Paused}, rest[size:], nil
}

// decodeStored reads a stored form written by encodeStored: the
// recurrence, the call and the trace context.
func decodeStored(stored string) (*Recurrence, components.DeferredCall, string, error) {
	r, c, err := splitStored(stored)
	if err != nil {
		return nil, components.DeferredCall{}, "", err
	}
	traceCtx, c, err := cutTrace(c)
	if err != nil {
		return nil, components.DeferredCall{}, "", err
	}
	call, err := decodeCall(c)
	return r, call, traceCtx, err
}
