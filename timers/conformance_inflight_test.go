package timers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
)

// inFlightCases: what happens around a call in flight — replacement,
// deletion, a dead instance's lease, shutdown — and how loops wake up.
func inFlightCases() []conformanceCase {
	var cases []conformanceCase
	for _, outcome := range []error{nil, errors.New("failed")} {
		cases = append(cases,
			conformanceCase{
				name:     fmt.Sprintf("ReplacedWhileInFlight/outcome=%v", outcome),
				property: "a timer replaced while its old call runs keeps the replacement, whatever the old call's outcome (generation check)",
				run: func(t *testing.T, e *env) {
					g := newGate(e)
					s := e.start(t)
					mustCreate(t, s, "a", time.Second, testCall(`1`))
					e.clk.Advance(time.Second)
					g.waitStarted(t)
					repl := mustCreate(t, s, "a", time.Hour, testCall(`2`))
					g.finish(outcome)
					quiesce(t, s)
					got, err := s.Get(t.Context(), "a")
					if err != nil {
						t.Fatalf("replacement lost: %v", err)
					}
					wantTimer(t, got, repl)
				},
			},
			conformanceCase{
				name:     fmt.Sprintf("DeletedWhileInFlight/outcome=%v", outcome),
				property: "a timer deleted while its call runs stays deleted, whatever the call's outcome",
				run: func(t *testing.T, e *env) {
					g := newGate(e)
					s := e.start(t)
					mustCreate(t, s, "a", time.Second, testCall(`1`))
					e.clk.Advance(time.Second)
					g.waitStarted(t)
					if err := s.Delete(t.Context(), "a"); err != nil {
						t.Fatal(err)
					}
					g.finish(outcome)
					quiesce(t, s)
					if _, err := s.Get(t.Context(), "a"); !errors.Is(err, ErrNotFound) {
						t.Fatalf("deleted timer came back: %v", err)
					}
				},
			})
	}
	return append(cases,
		conformanceCase{
			name:     "DeadInstanceLeaseExpires",
			property: "a timer claimed by an instance that never reports runs again on another instance when (not before) the lease expires, as the next attempt; the dead run's late failure is then ignored",
			cfg:      Config{Lease: 10 * time.Second, CallTimeout: 5 * time.Second},
			run: func(t *testing.T, e *env) {
				g := newGate(e)
				// Created through an instance that is not started, so that
				// the dead instance's claim cannot lose the timer to the
				// live instance, which starts only after it.
				tm := mustCreate(t, e.scheduler(t), "a", time.Hour, testCall(`1`))
				// The dead instance: claims with a lease and never reports.
				e.clk.Advance(time.Hour)
				dead, err := e.store.claim(t.Context(), 10, 10*time.Second)
				if err != nil || len(dead.timers) != 1 || dead.timers[0].Attempts != 1 {
					t.Fatalf("dead claim = %+v, %v", dead, err)
				}
				logs := &firingLog{}
				cfg := e.cfg
				cfg.Logger = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
				s := startScheduler(t, e.store, e.rec, cfg)
				advanceTo(t, e.clk, s, tm.DueAt.Add(10*time.Second-time.Millisecond))
				if n := e.rec.len(); n != 0 {
					t.Fatalf("%d calls before the lease expired", n)
				}
				e.clk.Advance(time.Millisecond)
				if f := g.waitStarted(t); f.Attempt != 2 || f.Generation != tm.Generation {
					t.Fatalf("re-run firing %+v, want attempt 2 of generation %d", f, tm.Generation)
				}
				out, err := e.store.fail(t.Context(), []failure{{firing: firingOf(dead.timers[0]), err: "late", retryAfter: time.Hour}})
				if err != nil || out[0] != failStale {
					t.Fatalf("dead instance's late failure: %v, %v; want it ignored", out, err)
				}
				g.finish(nil)
				quiesce(t, s)
				if _, err := s.Get(t.Context(), "a"); !errors.Is(err, ErrNotFound) {
					t.Fatalf("after the re-run succeeded: %v", err)
				}
				if n := testutil.ToFloat64(s.metrics.leaseExpired); n != 1 {
					t.Errorf("lease_expired_runs_total = %v, want 1 (the re-run)", n)
				}
				want := firingLine{Msg: "timer firing", Timer: "a", Generation: tm.Generation, Attempt: 2, LeaseExpired: true}
				if got := logs.firings(t); !slices.Equal(got, []firingLine{want}) {
					t.Errorf("firing log lines %+v, want %+v", got, []firingLine{want})
				}
			},
		},
		conformanceCase{
			name:     "ClaimTellsExpiredLease",
			property: "a claim says which timers it takes again because their previous call's lease expired, and only those: not a first run, a retry after a failure or a run after a release",
			run: func(t *testing.T, e *env) {
				const lease = 10 * time.Second
				mustCreate(t, e.scheduler(t), "a", time.Second, testCall(`1`))
				e.clk.Advance(time.Second)
				steps := []struct {
					what   string                            // the claim
					before func(t *testing.T, claimed Timer) // what happens after the previous claim
					want   bool                              // the claim says the lease expired
				}{
					{"the first run", func(*testing.T, Timer) {}, false},
					{"the retry after a failure", func(t *testing.T, claimed Timer) {
						out, err := e.store.fail(t.Context(), []failure{{firing: firingOf(claimed), err: "x", retryAfter: time.Second}})
						if err != nil || out[0] != failRescheduled {
							t.Fatalf("fail: %v, %v", out, err)
						}
						e.clk.Advance(time.Second)
					}, false},
					{"the run after a release", func(t *testing.T, claimed Timer) {
						if err := e.store.release(t.Context(), []Firing{firingOf(claimed)}); err != nil {
							t.Fatal(err)
						}
					}, false},
					{"the run after the lease expired", func(*testing.T, Timer) { e.clk.Advance(lease) }, true},
				}
				var claimed Timer
				for _, st := range steps {
					st.before(t, claimed)
					b, err := e.store.claim(t.Context(), 10, lease)
					if err != nil || len(b.timers) != 1 || len(b.leaseExpired) != 1 {
						t.Fatalf("%s: claim = %+v, %v; want one timer", st.what, b, err)
					}
					if b.leaseExpired[0] != st.want {
						t.Errorf("%s: the claim says the lease expired: %v, want %v", st.what, b.leaseExpired[0], st.want)
					}
					claimed = b.timers[0]
				}
			},
		},
		conformanceCase{
			name:     "ShutdownFinishesInFlight",
			property: "Shutdown stops claiming and waits for calls in flight; their outcomes are recorded",
			run: func(t *testing.T, e *env) {
				g := newGate(e)
				s := e.scheduler(t)
				if err := s.Start(t.Context()); err != nil {
					t.Fatal(err)
				}
				mustCreate(t, s, "a", time.Second, testCall(`1`))
				mustCreate(t, s, "b", 2*time.Second, testCall(`1`))
				e.clk.Advance(time.Second)
				g.waitStarted(t)
				l := s.currentLoop()
				done := make(chan error)
				go func() { done <- s.Shutdown(context.Background()) }()
				// Until the loop goroutine has returned it may still be in
				// a claim round begun before Shutdown closed its stop.
				<-l.loopDone
				e.clk.Advance(time.Second) // b is due, but nobody claims any more
				g.finish(nil)
				if err := <-done; err != nil {
					t.Fatalf("Shutdown: %v", err)
				}
				if _, err := s.Get(t.Context(), "a"); !errors.Is(err, ErrNotFound) {
					t.Errorf("finished call not recorded: %v", err)
				}
				if got, _ := s.Get(t.Context(), "b"); got.Attempts != 0 {
					t.Errorf("b was claimed after Shutdown began: %+v", got)
				}
			},
		},
		conformanceCase{
			name:     "ShutdownReleasesCancelled",
			property: "calls still running when Shutdown's context ends are cancelled and released: due again at once, with no failure recorded; another instance runs them",
			run: func(t *testing.T, e *env) {
				newGate(e)
				s := e.scheduler(t)
				if err := s.Start(t.Context()); err != nil {
					t.Fatal(err)
				}
				tm := mustCreate(t, s, "a", time.Second, testCall(`1`))
				e.clk.Advance(time.Second)
				waitFor(t, "the call", func() bool { return e.rec.len() == 1 })
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				if err := s.Shutdown(ctx); !errors.Is(err, context.Canceled) {
					t.Fatalf("Shutdown = %v, want context.Canceled", err)
				}
				got, err := s.Get(t.Context(), "a")
				if err != nil || got.Attempts != 1 || got.LastError != "" || !got.DueAt.Equal(tm.DueAt) {
					t.Fatalf("released timer = %+v, %v; want attempt 1 kept, no error, due now", got, err)
				}
				e.rec.handle = nil
				other := e.start(t)
				quiesce(t, other)
				if calls := e.rec.all(); len(calls) != 2 || calls[1].firing.Attempt != 2 {
					t.Fatalf("calls = %+v, want the released timer run again as attempt 2", calls)
				}
			},
		},
		conformanceCase{
			name:     "EarlierCreateWakesLoop",
			property: "a loop sleeping until a later timer (or IdleCheck) is woken by a create that is due earlier, and re-plans to it",
			cfg:      Config{IdleCheck: 24 * time.Hour},
			run: func(t *testing.T, e *env) {
				s := e.start(t)
				mustCreate(t, s, "late", time.Hour, testCall(`1`))
				waitSleepingUntil(t, s, e.clk.Now().Add(time.Hour))
				soon := mustCreate(t, s, "soon", time.Second, testCall(`1`))
				waitSleepingUntil(t, s, soon.DueAt)
				e.clk.Advance(time.Second)
				waitFor(t, "the early timer", func() bool { return e.rec.len() == 1 })
			},
		},
		conformanceCase{
			name:     "EarlierCreateWakesOtherInstance",
			property: "a create on one instance that is due earlier wakes a sleeping loop on another instance sharing the store",
			cfg:      Config{IdleCheck: 24 * time.Hour},
			run: func(t *testing.T, e *env) {
				s := e.start(t)
				creator := e.scheduler(t) // not started: only creates
				mustCreate(t, creator, "late", time.Hour, testCall(`1`))
				waitSleepingUntil(t, s, e.clk.Now().Add(time.Hour))
				soon := mustCreate(t, creator, "soon", time.Second, testCall(`1`))
				waitSleepingUntil(t, s, soon.DueAt)
			},
		},
		conformanceCase{
			name:     "InstancesShareTimers",
			property: "three instances on one store run each of 300 timers exactly once",
			cfg:      Config{Workers: 4, MaxBatch: 8},
			run: func(t *testing.T, e *env) {
				instances := []*Scheduler{e.start(t), e.start(t), e.start(t)}
				for i := range 300 {
					mustCreate(t, instances[i%3], fmt.Sprintf("t-%03d", i), time.Duration(1+i%10)*time.Second, testCall(`1`))
				}
				for range 10 {
					e.clk.Advance(time.Second)
					for _, s := range instances {
						quiesce(t, s)
					}
				}
				waitFor(t, "all 300 timers", func() bool { return e.rec.distinct() == 300 })
				quiesce(t, instances[0])
				if n := e.rec.len(); n != 300 {
					t.Errorf("%d calls for 300 timers", n)
				}
				wantStats(t, instances[0], Stats{Limit: DefaultMaxActive})
			},
		},
	)
}

// gate makes e's recorder block each call until the test finishes it.
type gate struct {
	started chan Firing
	release chan error
}

func newGate(e *env) *gate {
	g := &gate{started: make(chan Firing, 100), release: make(chan error)}
	e.rec.handle = func(ctx context.Context, _ components.DeferredCall) error {
		f, _ := FiringFromContext(ctx)
		g.started <- f
		select {
		case err := <-g.release:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return g
}

func (g *gate) waitStarted(t *testing.T) Firing {
	t.Helper()
	select {
	case f := <-g.started:
		return f
	case <-time.After(20 * time.Second):
		t.Fatal("timed out waiting for a call to start")
		return Firing{}
	}
}

func (g *gate) finish(err error) { g.release <- err }

// waitSleepingUntil waits until s's loop sleeps with its wake-up planned
// at the (fake) time at.
func waitSleepingUntil(t *testing.T, s *Scheduler, at time.Time) {
	t.Helper()
	l := s.currentLoop()
	waitFor(t, fmt.Sprintf("the loop to sleep until %v", at), func() bool { return l.deadline.Load() == at.UnixNano() })
}

// firingLog keeps a scheduler's JSON log lines; safe for its goroutines.
type firingLog struct{ testenv.LogBuffer }

// firingLine is what a "timer firing" log line says.
type firingLine struct {
	Msg          string `json:"msg"`
	Timer        string `json:"timer"`
	Generation   uint64 `json:"generation"`
	Attempt      int    `json:"attempt"`
	LeaseExpired bool   `json:"leaseExpired"`
}

// firings returns the "timer firing" lines logged so far.
func (l *firingLog) firings(t *testing.T) []firingLine {
	t.Helper()
	var out []firingLine
	for line := range strings.Lines(l.String()) {
		var f firingLine
		if err := json.Unmarshal([]byte(line), &f); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if f.Msg == "timer firing" {
			out = append(out, f)
		}
	}
	return out
}
