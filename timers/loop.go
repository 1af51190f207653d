package timers

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/trellis-go/trellis/internal/clocks"
)

// loop is one instance's event loop, the only goroutine that claims
// timers, plus the fixed pool of call workers and the reporter that writes
// outcomes back (worker.go).
//
// It sleeps until the earliest due time the store reported, and no longer
// than IdleCheck. A create that is earlier than that wakes it through
// wake, a coalescing channel of one slot: a burst of creates costs the
// loop at most one extra claim, not one per create. Other instances' early
// creates arrive the same way, through the store's subscription.
//
// Backpressure: the loop claims at most as many timers as there are idle
// workers (slots), so a burst of 50,000 due timers is taken from the store
// a batch at a time as workers free up, under at most Workers leases, with
// Workers goroutines.
type loop struct {
	s   *Scheduler
	cfg Config

	// wake is the coalescing "something earlier is due" signal.
	wake chan struct{}
	// deadline is the local time (UnixNano) the loop sleeps until, or
	// MaxInt64 while it is awake (claiming): then every create wakes it,
	// since the claim in progress may have missed it.
	deadline atomic.Int64
	// inFlight counts claimed timers whose worker has not finished.
	inFlight atomic.Int64
	// freed signals (coalescing) that a worker finished a call.
	freed chan struct{}
	// rounds counts claim rounds begun, claims those ended, and unsettled
	// the outcomes not yet written to the store: together they tell tests
	// that the loop has gone round since they moved the clock and that
	// everything it started is recorded (Settle).
	rounds, claims, unsettled atomic.Int64

	jobs    chan job
	results chan result

	stop     chan struct{}
	stopOnce sync.Once
	loopDone chan struct{}
	workers  sync.WaitGroup
	reported chan struct{}

	// callCtx is the parent of every call: cancelled only when Shutdown's
	// context ends before the calls do.
	callCtx     context.Context
	cancelCalls context.CancelFunc
	unsubscribe func()
}

// job is a claimed timer handed to a worker.
type job struct {
	t Timer
	// storeNow is the store's time of the claim and claimedAt the local
	// time just after it: lateness is storeNow-DueAt plus the local time
	// since claimedAt, which no clock skew between the two can distort.
	storeNow, claimedAt time.Time
	// leaseExpired: the timer's previous call lost its lease (see
	// claimBatch), so this call may repeat it.
	leaseExpired bool
	// storedCall, when set, is t's call still in its stored form, for the
	// worker to decode (claimBatch.calls).
	storedCall string
}

// claimTimeout bounds one store call of the loop or the reporter. Store
// calls are not cancelled by Shutdown: a claim cut short after Redis ran
// it would leave its timers leased to nobody until the lease expires.
const claimTimeout = 5 * time.Second

func startLoop(s *Scheduler) (*loop, error) {
	l := &loop{
		s: s, cfg: s.cfg,
		wake:     make(chan struct{}, 1),
		freed:    make(chan struct{}, 1),
		jobs:     make(chan job, s.cfg.Workers),
		results:  make(chan result, s.cfg.Workers),
		stop:     make(chan struct{}),
		loopDone: make(chan struct{}),
		reported: make(chan struct{}),
	}
	l.deadline.Store(math.MaxInt64)
	l.callCtx, l.cancelCalls = context.WithCancel(context.Background())
	unsubscribe, err := s.store.subscribe(l.poke)
	if err != nil {
		l.cancelCalls()
		return nil, err
	}
	l.unsubscribe = unsubscribe
	l.workers.Add(s.cfg.Workers)
	for range s.cfg.Workers {
		go l.worker()
	}
	go l.report()
	go l.run()
	return l, nil
}

// poke wakes the loop; it never blocks.
func (l *loop) poke() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// noteDue wakes the loop if a timer due at the local time at is earlier
// than the loop's planned wake-up.
func (l *loop) noteDue(at time.Time) {
	if at.UnixNano() < l.deadline.Load() {
		l.poke()
	}
}

func (l *loop) stopping() bool {
	select {
	case <-l.stop:
		return true
	default:
		return false
	}
}

// run is the loop goroutine.
func (l *loop) run() {
	defer close(l.loopDone)
	defer l.releaseQueued()
	clk := l.s.clk
	var errBackoff time.Duration
	var lastErrLog time.Time
	var nextPrune time.Time
	for !l.stopping() {
		if !clk.Now().Before(nextPrune) {
			nextPrune = l.prune(clk.Now())
		}
		free := l.cfg.Workers - int(l.inFlight.Load())
		if free <= 0 {
			select {
			case <-l.freed:
			case <-l.stop:
			}
			continue
		}
		want := min(free, l.cfg.MaxBatch)
		l.deadline.Store(math.MaxInt64)
		l.rounds.Add(1) // before the round reads any clock
		started := clk.Now()
		acks := l.s.acks.Load()
		ctx, cancel := context.WithTimeout(context.Background(), claimTimeout)
		b, err := l.s.store.claim(ctx, want, l.cfg.Lease)
		cancel()
		// Even with an error: what part of the store did claim is ours.
		for i, t := range b.timers {
			l.inFlight.Add(1)
			j := job{t: t, storeNow: b.now, claimedAt: clk.Now(), leaseExpired: b.leaseExpired[i]}
			if b.calls != nil {
				j.storedCall = b.calls[i]
			}
			l.jobs <- j
		}
		l.claims.Add(1)
		if len(b.corrupt) > 0 {
			l.s.log.Error("timers: removed timers whose stored records do not decode", "timers", b.corrupt)
		}
		if err != nil {
			errBackoff = min(max(2*errBackoff, 50*time.Millisecond), 2*time.Second)
			if time.Since(lastErrLog) > 10*time.Second {
				lastErrLog = time.Now()
				l.s.log.Error("timers: claiming due timers failed; retrying", "err", err, "retry_in", errBackoff)
			}
			l.backOff(errBackoff)
			continue
		}
		errBackoff = 0
		if len(b.wiped) > 0 {
			l.s.noteWiped(b.wiped, acks)
		}
		if len(b.timers) == want {
			continue // more may be due: claim again once workers are free
		}
		wait := b.wait
		if wait < 0 || wait > l.cfg.IdleCheck {
			wait = l.cfg.IdleCheck
		}
		// The store measured wait when it claimed, after started: waking
		// at started+wait is early by the claim's duration at most, which
		// is harmless (the store decides due-ness, so nothing runs early);
		// waking late is not. The wake-up is fixed on the clock here, not
		// counted from a later reading of it, so that a fake clock a test
		// advances meanwhile cannot push it past the due time.
		wake := started.Add(wait)
		l.deadline.Store(wake.UnixNano())
		timer, passed := clocks.TimerAt(clk, wake)
		if passed {
			continue
		}
		select {
		case <-timer.Chan():
		case <-l.wake:
			timer.Stop()
		case <-l.stop:
			timer.Stop()
		}
	}
}

// backOff waits d after a failed claim, in real time (an outage lasts
// real time, whatever clock the store keeps: a test's fake clock, which
// nothing may advance, must not hold the loop), or until a create wakes
// it or Shutdown.
func (l *loop) backOff(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-l.wake:
	case <-l.stop:
	}
}

// prune removes expired dead letters, a bounded batch, and returns when
// to prune next: at once while there may be more, else deadPruneEvery
// later (and after a store error, so that an outage is not hammered).
func (l *loop) prune(now time.Time) time.Time {
	ctx, cancel := context.WithTimeout(context.Background(), claimTimeout)
	more, err := l.s.pruneDead(ctx)
	cancel()
	if err != nil {
		l.s.log.Warn("timers: pruning dead letters failed; trying again later", "err", err)
	}
	if more {
		return now
	}
	return now.Add(deadPruneEvery)
}

// releaseQueued runs when the loop stops: timers claimed but not yet taken
// by a worker go back to the store at once instead of waiting out their
// lease, and the workers are told there is no more work.
func (l *loop) releaseQueued() {
	for {
		select {
		case j := <-l.jobs:
			l.unsettled.Add(1)
			l.results <- result{t: j.t, firing: firingOf(j.t), released: true}
			l.inFlight.Add(-1)
		default:
			close(l.jobs)
			return
		}
	}
}

// shutdown stops the loop in the order documented on Scheduler.Shutdown.
func (l *loop) shutdown(ctx context.Context) error {
	l.stopOnce.Do(func() { close(l.stop) })
	<-l.loopDone
	workersDone := make(chan struct{})
	go func() {
		l.workers.Wait()
		close(workersDone)
	}()
	var err error
	select {
	case <-workersDone:
	case <-ctx.Done():
		err = ctx.Err()
		l.cancelCalls()
		<-workersDone
	}
	close(l.results)
	<-l.reported
	l.unsubscribe()
	l.cancelCalls()
	return err
}
