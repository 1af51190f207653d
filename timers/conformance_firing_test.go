package timers

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/timedactions"
)

// firingCases: when timers run, with what, and what failures do.
func firingCases() []conformanceCase {
	return []conformanceCase{
		{
			name:     "FiresAtDueNeverEarly",
			property: "a timer runs once at its due time, never a millisecond before, with its firing in the call's context, and is removed after success",
			run: func(t *testing.T, e *env) {
				s := e.start(t)
				tm := mustCreate(t, s, "a", 10*time.Second, testCall(`"x"`))
				advanceTo(t, e.clk, s, tm.DueAt.Add(-time.Millisecond))
				if n := e.rec.len(); n != 0 {
					t.Fatalf("%d calls 1 ms before the due time", n)
				}
				advanceTo(t, e.clk, s, tm.DueAt)
				calls := e.rec.all()
				if len(calls) != 1 {
					t.Fatalf("%d calls at the due time, want 1", len(calls))
				}
				want := Firing{Name: "a", Generation: tm.Generation, Attempt: 1, DueAt: tm.DueAt}
				if c := calls[0]; c.firing != want || !c.at.Equal(tm.DueAt) || string(c.call.Argument) != `"x"` {
					t.Errorf("call = %+v, want firing %+v at %v", c, want, tm.DueAt)
				}
				if _, err := s.Get(t.Context(), "a"); !errors.Is(err, ErrNotFound) {
					t.Errorf("Get after success = %v, want ErrNotFound", err)
				}
				if got := testutil.ToFloat64(s.metrics.fired.WithLabelValues(resultSuccess)); got != 1 {
					t.Errorf("fired_total{result=success} = %v, want 1", got)
				}
			},
		},
		{
			name:     "BackoffUntilGivenUp",
			property: "a failing call is retried after 3, 6, 12, 24, then 30 s; with maxRetries 5 it leaves the active timers (for the dead letters) after the 6th failed call, keeping attempts and last error until then",
			run: func(t *testing.T, e *env) {
				e.rec.handle = func(context.Context, components.DeferredCall) error { return components.Errorf("not yet") }
				s := e.start(t)
				tm := mustCreate(t, s, "a", time.Second, testCall(`1`), WithMaxRetries(5))
				gaps := []time.Duration{0, 3 * time.Second, 6 * time.Second, 12 * time.Second, 24 * time.Second, 30 * time.Second}
				runBackoff(t, e, s, tm, gaps)
				if _, err := s.Get(t.Context(), "a"); !errors.Is(err, ErrNotFound) {
					t.Fatalf("after maxRetries: Get = %v, want ErrNotFound", err)
				}
				e.clk.Advance(time.Hour)
				quiesce(t, s)
				if n := e.rec.len(); n != 6 {
					t.Errorf("%d calls, want 6 (1 + 5 retries)", n)
				}
				if r, g := testutil.ToFloat64(s.metrics.retries), testutil.ToFloat64(s.metrics.givenUp); r != 5 || g != 1 {
					t.Errorf("retries_total %v, given_up_total %v; want 5 and 1", r, g)
				}
			},
		},
		{
			name:     "RetriesForever",
			property: "maxRetries 0 retries forever, every 30 s after the fourth retry",
			run: func(t *testing.T, e *env) {
				e.rec.handle = func(context.Context, components.DeferredCall) error { return errors.New("down") }
				s := e.start(t)
				tm := mustCreate(t, s, "a", time.Second, testCall(`1`))
				gaps := []time.Duration{0, 3 * time.Second, 6 * time.Second, 12 * time.Second, 24 * time.Second,
					30 * time.Second, 30 * time.Second, 30 * time.Second}
				runBackoff(t, e, s, tm, gaps)
				got, err := s.Get(t.Context(), "a")
				if err != nil || got.Attempts != len(gaps) || got.LastError == "" {
					t.Errorf("after %d failures: %+v, %v", len(gaps), got, err)
				}
			},
		},
		{
			name:     "RetryThenSuccess",
			property: "a call that fails twice then succeeds is removed after the third call",
			run: func(t *testing.T, e *env) {
				e.rec.handle = func(ctx context.Context, _ components.DeferredCall) error {
					if f, _ := FiringFromContext(ctx); f.Attempt < 3 {
						return errors.New("flaky")
					}
					return nil
				}
				s := e.start(t)
				tm := mustCreate(t, s, "a", time.Second, testCall(`1`))
				runBackoff(t, e, s, tm, []time.Duration{0, 3 * time.Second, 6 * time.Second})
				if _, err := s.Get(t.Context(), "a"); !errors.Is(err, ErrNotFound) {
					t.Errorf("Get after success = %v, want ErrNotFound", err)
				}
			},
		},
		{
			name:     "FailureKinds",
			property: "an error effect, a panic, an unknown component or method, a bad argument and a timeout each fail the call: kept, retried, the reason in LastError and the metric",
			cfg:      Config{CallTimeout: 50 * time.Millisecond, Lease: time.Second},
			run:      runFailureKinds,
		},
	}
}

// runBackoff drives a timer that fails (until it may succeed) through
// calls at tm.DueAt plus the cumulative gaps, checking that none comes a
// millisecond early and that the timer records each failure.
func runBackoff(t *testing.T, e *env, s *Scheduler, tm Timer, gaps []time.Duration) {
	t.Helper()
	at := tm.DueAt
	for i, gap := range gaps {
		at = at.Add(gap)
		advanceTo(t, e.clk, s, at.Add(-time.Millisecond))
		if n := e.rec.len(); n != i {
			t.Fatalf("before call %d: %d calls, want %d (a call came early)", i+1, n, i)
		}
		advanceTo(t, e.clk, s, at)
		calls := e.rec.all()
		if len(calls) != i+1 {
			t.Fatalf("at call %d (%v after due): %d calls", i+1, at.Sub(tm.DueAt), len(calls))
		}
		if c := calls[i]; c.firing.Attempt != i+1 || !c.at.Equal(at) || c.firing.Generation != tm.Generation {
			t.Fatalf("call %d = %+v at %v, want attempt %d at %v", i+1, c.firing, c.at, i+1, at)
		}
		got, err := s.Get(t.Context(), tm.Name)
		if errors.Is(err, ErrNotFound) {
			return // succeeded or gave up; the caller checks which
		}
		wantDue := at.Add(Backoff(i + 1))
		if err != nil || got.Attempts != i+1 || got.LastError == "" || !got.DueAt.Equal(wantDue) || !got.LastAttemptAt.Equal(at) {
			t.Fatalf("after failed call %d: %+v (%v); want attempts %d, an error, due %v", i+1, got, err, i+1, wantDue)
		}
	}
}

// testAction is a timed action for FailureKinds.
var (
	testAction     = timedactions.Define("conformance-action")
	testActionFail = timedactions.Method(testAction, "fail", func(ctx *timedactions.Ctx, _ int) timedactions.Effect {
		return ctx.Error("refused on purpose")
	})
	testActionPanic = timedactions.Method(testAction, "panic", func(*timedactions.Ctx, int) timedactions.Effect {
		panic("boom")
	})
	testActionBlock = timedactions.Method(testAction, "block", func(ctx *timedactions.Ctx, _ int) timedactions.Effect {
		<-ctx.Context().Done()
		return ctx.Error("cancelled: %v", ctx.Context().Err())
	})
)

func runFailureKinds(t *testing.T, e *env) {
	client := components.NewClient(components.NewRegistry())
	if _, err := testAction.Start(client); err != nil {
		t.Fatal(err)
	}
	call := func(component, method, arg string) components.DeferredCall {
		return components.DeferredCall{ComponentID: component, Method: method, Argument: []byte(arg)}
	}
	cases := []struct {
		// name names the timer.
		name string
		// call is what it calls.
		call components.DeferredCall
		// result is the fired_total label the failure is counted under.
		result string
		// errText is part of the LastError it must leave.
		errText string
	}{
		{"error-effect", call(testAction.ComponentID(), testActionFail.Name(), `1`), resultError, "refused on purpose"},
		{"panic", call(testAction.ComponentID(), testActionPanic.Name(), `1`), resultFailure, "boom"},
		{"unknown-component", call("no-such-component", "x", `1`), resultUnknownComponent, "unknown component"},
		{"unknown-method", call(testAction.ComponentID(), "no-such-method", `1`), resultUnknownMethod, "unknown method"},
		{"bad-argument", call(testAction.ComponentID(), testActionFail.Name(), `"not an int"`), resultBadArgument, "bad argument"},
		{"timeout", call(testAction.ComponentID(), testActionBlock.Name(), `1`), resultTimeout, "timed out"},
	}
	s := startScheduler(t, e.store, client, e.cfg)
	for _, c := range cases {
		mustCreate(t, s, c.name, time.Second, c.call)
	}
	advanceTo(t, e.clk, s, epoch.Add(time.Second))
	for _, c := range cases {
		got, err := s.Get(t.Context(), c.name)
		if err != nil || got.Attempts != 1 || !strings.Contains(got.LastError, c.errText) || !got.DueAt.Equal(epoch.Add(4*time.Second)) {
			t.Errorf("%s: %+v, %v; want 1 attempt, an error containing %q, due again in 3 s", c.name, got, err, c.errText)
		}
		if n := testutil.ToFloat64(s.metrics.fired.WithLabelValues(c.result)); n < 1 {
			t.Errorf("%s: fired_total{result=%s} = %v", c.name, c.result, n)
		}
	}
	wantStats(t, s, Stats{Active: len(cases), Failing: len(cases), Limit: DefaultMaxActive, DueWithin1m: len(cases)})
}
