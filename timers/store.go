package timers

import (
	"context"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/trellis-go/trellis/components"
)

// Store is where timers live: a [MemoryStore] (the embedded default, one
// process) or a [RedisStore] (durable, shared by every instance on one
// Redis or Redis Cluster). Both pass the same conformance suite, the Redis
// store on one Redis and on a cluster.
//
// The interface is sealed: its methods are the private protocol between
// the scheduler and its storage (claims, leases, settling), which is not
// a stable API, so only this package implements it.
type Store interface {
	backend
}

// backend is the protocol between the scheduler and a store. Every method
// that changes more than one thing does so atomically. Times are the
// store's (its clock, or Redis TIME), in whole milliseconds: due times are
// rounded up and "now" for due-ness is rounded down, so a timer is never
// claimed before its due time even by a microsecond.
type backend interface {
	// clock is what the loop sleeps on and what a fake clock in tests
	// drives; due-ness itself is decided by the store.
	clock() clockwork.Clock
	// open prepares the store for a running scheduler (the marker keys)
	// and returns the markers it had to write: all of them for a new
	// store, some when part of it was wiped while no scheduler ran.
	open(ctx context.Context) (missing []string, err error)
	// create stores a timer due delay from now, replacing one of the same
	// name, unless that would make more than maxActive timers (a
	// *LimitError). If the timer is now the earliest, it wakes the other
	// schedulers subscribed to the store.
	create(ctx context.Context, r createRequest) (Timer, error)
	// get returns a timer or an error wrapping ErrNotFound.
	get(ctx context.Context, name string) (Timer, error)
	// remove deletes a timer; a missing one is not an error.
	remove(ctx context.Context, name string) error
	list(ctx context.Context, q listQuery) (Page, error)
	stats(ctx context.Context) (storeStats, error)
	// claim takes up to max due timers under a lease of the given length:
	// each gets Attempts+1, LastAttemptAt = now, and is hidden from other
	// claims until the lease expires. With an error the batch may still
	// hold timers claimed from the part of the store that answered: they
	// are claimed, and must be run.
	claim(ctx context.Context, max int, lease time.Duration) (claimBatch, error)
	// complete removes the timers whose call succeeded, unless they were
	// replaced or deleted meanwhile (then it leaves them: ok false).
	complete(ctx context.Context, fs []Firing) (ok []bool, err error)
	// fail records failed calls: it reschedules each after its backoff, or
	// removes it when it gave up; a firing that is no longer the timer's
	// current attempt (replaced, deleted, or claimed again after its
	// lease expired) is left alone.
	fail(ctx context.Context, fs []failure) ([]failOutcome, error)
	// release puts claimed timers back, due now, without counting a
	// failure: what a stopping instance does with calls it did not finish.
	release(ctx context.Context, fs []Firing) error
	// subscribe calls wake whenever another scheduler sharing the store
	// created a timer that is now the earliest; cancel stops it and waits.
	subscribe(wake func()) (cancel func(), err error)
	// advance moves recurring timers on after a run: to their next run
	// with a new generation and no attempts, or (no next) removes them;
	// and keeps a dead letter of a run that gave up. A firing that is no
	// longer the timer's (generation, and attempt when checked) is left
	// alone.
	advance(ctx context.Context, as []advanceRequest) ([]advanceOutcome, error)
	// deadList, deadGet and deadRemove are the dead letters' list, read
	// (an error wrapping ErrNotFound) and delete (a missing one is fine).
	deadList(ctx context.Context, q listQuery) (DeadLetterPage, error)
	deadGet(ctx context.Context, name string) (DeadLetter, error)
	deadRemove(ctx context.Context, name string) error
	// putDead stores a dead letter as it is given (an import), with a new
	// generation, replacing one of the same name.
	putDead(ctx context.Context, d DeadLetter) error
	// revive turns a dead letter into an active timer due now with no
	// attempts, atomically, unless an active timer has the name
	// (ErrNameTaken) or that would make more than maxActive timers (a
	// *LimitError); ErrNotFound when there is none.
	revive(ctx context.Context, name string, maxActive int) (Timer, error)
	// prune removes dead letters that died more than retention ago, at
	// most max per partition; more is true when one partition had max.
	prune(ctx context.Context, retention time.Duration, max int) (n int, more bool, err error)
	// resetMarker writes the markers again after a wipe was acknowledged.
	resetMarker(ctx context.Context) error
	ping(ctx context.Context) error
	// putImportJob stores an import job's record (replacing its last),
	// kept for ttl; getImportJob reads it (ErrNotFound when gone).
	putImportJob(ctx context.Context, job ImportJob, ttl time.Duration) error
	getImportJob(ctx context.Context, id string) (ImportJob, error)
}

type createRequest struct {
	name       string
	delay      time.Duration
	call       components.DeferredCall
	maxRetries int
	maxActive  int
	// at, when set, is the due time instead of now+delay.
	at time.Time
	// recur makes the timer recurring.
	recur *Recurrence
	// ifGen, when set, makes the create replace only a timer of that
	// generation (ErrChanged otherwise, ErrNotFound when there is none).
	ifGen uint64
	// traceCtx is the W3C trace context the timer is created in
	// (tracing.CaptureForLink), kept with it; "" for none or an unsampled one.
	traceCtx string
}

// claimBatch is one claim's result.
type claimBatch struct {
	// now is the store's time of the claim.
	now time.Time
	// wait is how long from now until the earliest timer left is due (or
	// its lease expires); negative when the store is empty.
	wait time.Duration
	// timers are the claimed timers: Attempts already counts this call.
	timers []Timer
	// leaseExpired[i] is true when timers[i] was claimed again because
	// the lease of its previous call expired with no outcome recorded (the
	// instance running it died, stalled, or could not reach the store):
	// that call may have run, so this one may be its duplicate.
	leaseExpired []bool
	// calls, when a store sets it, holds timers[i]'s call in its stored
	// form (encodeCall), not yet decoded, and timers[i].Call is zero:
	// decoding 1 KB calls is most of what a claim costs the client, so the
	// workers do it, in parallel, rather than the loop's one goroutine.
	calls []string
	// wiped names the markers written by open that are gone.
	wiped []string
	// corrupt names the timers dropped because their records did not
	// decode.
	corrupt []string
}

type failure struct {
	firing Firing
	err    string
	// retryAfter is the backoff before the next attempt.
	retryAfter time.Duration
	// giveUp moves the timer to the dead letters instead of rescheduling it.
	giveUp bool
}

// advanceRequest is one recurring timer's move after a run.
type advanceRequest struct {
	firing       Firing
	checkAttempt bool
	// next is the recurrence at the next run, due at due; nil when the
	// schedule has no more runs.
	next *Recurrence
	due  time.Time
	// dead names the dead letter the run leaves ("" when it succeeded),
	// with err its last error.
	dead, err string
}

type advanceOutcome int

const (
	advanceStale advanceOutcome = iota
	advanced
	advanceEnded
)

type failOutcome int

const (
	// failStale: the firing is not the timer's current attempt; nothing changed.
	failStale failOutcome = iota
	failRescheduled
	failGaveUp // moved to the dead letters
)

type storeStats struct {
	active, failing, dueWithin1m int
	// dead is the number of dead letters kept.
	dead int
}

// maxErrorLen bounds the stored last error, so that a callee returning a
// huge error cannot grow every timer's record.
const maxErrorLen = 512

// firingOf is the firing of a claimed timer's current attempt.
func firingOf(t Timer) Firing {
	f := Firing{Name: t.Name, Generation: t.Generation, Attempt: t.Attempts, DueAt: t.DueAt}
	if t.Recurring != nil {
		f.Run = t.Recurring.Run
	}
	return f
}

// Millisecond rounding of store times, see backend.
func ceilMs(t time.Time) int64  { return (t.UnixNano() + 999_999) / 1_000_000 }
func floorMs(t time.Time) int64 { return t.UnixNano() / 1_000_000 }
func durMs(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}
