package timers

import (
	"context"
	"strconv"
	"time"

	"github.com/trellis-go/trellis/components"
)

// Timer is a stored timer as the scheduler and the admin queries see it.
// Times are the store's: Redis TIME for a [RedisStore] (unless a clock was
// injected), the store's clock for a [MemoryStore].
type Timer struct {
	// Name is the timer's unique name in its store (across every instance
	// sharing it). Creating a timer under an existing name replaces it.
	Name string
	// Call is the deferred call the timer makes.
	Call components.DeferredCall
	// DueAt is when the next attempt is due, or when the running attempt
	// was due while a call is in flight. A timer never runs before it.
	DueAt time.Time
	// CreatedAt is when this generation of the timer was created.
	CreatedAt time.Time
	// Attempts counts the calls started for this generation, including one
	// in flight and one whose instance died before reporting.
	Attempts int
	// MaxRetries is how many failed calls are retried; 0 retries forever.
	MaxRetries int
	// LastError is why the last failed call failed; "" if none failed.
	LastError string
	// LastAttemptAt is when the last call started; zero if none has.
	LastAttemptAt time.Time
	// Generation identifies this creation of the timer: every Create gets a
	// new one from a counter that only grows (the counter of the name's
	// partition in the Redis store, where a name always lives in the same
	// partition; store-wide in the memory store), so a generation seen once
	// for a name never comes back, not even after a delete and a re-create
	// under that name. Timers of different names may share one. A
	// recurring timer gets a new one for each run.
	Generation uint64
	// Recurring is the schedule of a recurring timer; nil for a single
	// timer.
	Recurring *Recurrence
	// TraceContext is the W3C trace context (traceparent, and tracestate
	// after a newline) of the span that created this generation, which
	// each of its runs links to; "" when it was created untraced. It is
	// stored with the timer, outside the call's MaxPayload.
	TraceContext string
}

// Failing reports whether the timer's last call failed.
func (t Timer) Failing() bool { return t.LastError != "" }

// Firing identifies one call of a timer. Timers run at least once, so a
// callee that must not act twice deduplicates on it: (Name, Generation)
// identifies the timer it is running for (a replaced timer has a new
// generation; a recurring timer gets a new one for each run, so the pair
// names the run), Attempt which try this is (it grows on every retry and on
// every re-run after an instance died mid-call).
type Firing struct {
	Name       string
	Generation uint64
	Attempt    int
	// DueAt is when this attempt was due, in the store's time.
	DueAt time.Time
	// Run is the scheduled time of a recurring timer's run (each run has
	// its own Generation too); zero for a single timer.
	Run time.Time
}

// ID is the firing as one string, "name#generation#attempt". Names may
// contain '#'; the two numbers are always the last two fields.
func (f Firing) ID() string {
	return f.Name + "#" + strconv.FormatUint(f.Generation, 10) + "#" + strconv.Itoa(f.Attempt)
}

// String is ID.
func (f Firing) String() string { return f.ID() }

type firingKey struct{}

// FiringFromContext returns the firing whose call ctx belongs to: every
// call a timer makes gets it in its context, so a callee (and whatever it
// calls with that context) can deduplicate. ok is false outside a timer
// call.
func FiringFromContext(ctx context.Context) (f Firing, ok bool) {
	f, ok = ctx.Value(firingKey{}).(Firing)
	return f, ok
}

// withFiring puts f in ctx for FiringFromContext.
func withFiring(ctx context.Context, f Firing) context.Context {
	return context.WithValue(ctx, firingKey{}, f)
}

// Backoff is the wait before the retry that follows the failedAttempts-th
// failed call: 3 s, 6 s, 12 s, 24 s, then 30 s for every later retry
// (exponential from 3 s, capped at 30 s, as Akka does). Values below 1 are
// treated as 1.
func Backoff(failedAttempts int) time.Duration {
	const first, maxWait = 3 * time.Second, 30 * time.Second
	if failedAttempts < 1 {
		failedAttempts = 1
	}
	if failedAttempts > 4 {
		return maxWait
	}
	return first << (failedAttempts - 1)
}
