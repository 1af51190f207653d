package timers

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/trellis-go/trellis/components"
)

func TestConformanceRecurring(t *testing.T) { runConformance(t, recurCases()) }

// mustRecur creates a recurring timer or fails the test.
func mustRecur(t *testing.T, s *Scheduler, name string, sc Schedule, opts ...CreateOption) Timer {
	t.Helper()
	tm, err := s.CreateRecurring(t.Context(), name, sc, testCall(`{"r":1}`), opts...)
	if err != nil {
		t.Fatalf("CreateRecurring(%q): %v", name, err)
	}
	return tm
}

// runsOf is the scheduled run times of the recorded calls of name.
func runsOf(e *env, name string) []time.Time {
	var out []time.Time
	for _, c := range e.rec.all() {
		if c.firing.Name == name {
			out = append(out, c.firing.Run)
		}
	}
	return out
}

// wantRuns checks the recorded runs of name.
func wantRuns(t *testing.T, e *env, name string, want ...time.Time) {
	t.Helper()
	got := runsOf(e, name)
	if len(got) != len(want) {
		t.Fatalf("runs of %q = %v, want %v", name, got, want)
	}
	for i := range got {
		if !got[i].Equal(want[i]) {
			t.Errorf("run %d of %q = %v, want %v", i, name, got[i], want[i])
		}
	}
}

// failUntil makes calls fail while the clock is before until.
func failUntil(e *env, until time.Time) {
	e.rec.handle = func(context.Context, components.DeferredCall) error {
		if e.clk.Now().Before(until) {
			return components.Errorf("down")
		}
		return nil
	}
}

func recurCases() []conformanceCase {
	minute := func(n int) time.Time { return epoch.Add(time.Duration(n) * time.Minute) }
	return []conformanceCase{
		{
			name: "RecurringKeepIdentical",
			property: "CreateRecurring with KeepIdentical keeps an identical timer (same schedule, a zero start matching any, call and retries) " +
				"on its first anchor; a different one, or a create without the option, replaces it anchored now",
			run: func(t *testing.T, e *env) {
				s := e.start(t)
				// Its first run is after the clock moves, so that no run
				// replaces it (a new generation) while the cases run.
				first := mustRecur(t, s, "r", Schedule{Every: time.Minute, Start: minute(1)})
				e.clk.Advance(30 * time.Second)
				tests := []struct {
					name   string
					sc     Schedule
					opts   []CreateOption
					kept   bool
					wantAt time.Time
				}{
					{"identical, kept", Schedule{Every: time.Minute}, []CreateOption{KeepIdentical()}, true, minute(1)},
					{"identical with its start, kept", Schedule{Every: time.Minute, Start: minute(1)}, []CreateOption{KeepIdentical()}, true, minute(1)},
					{"identical but its start, replaced", Schedule{Every: time.Minute, Start: minute(2)}, []CreateOption{KeepIdentical()}, false, minute(2)},
					{"other retries, replaced", Schedule{Every: time.Minute}, []CreateOption{KeepIdentical(), WithMaxRetries(3)}, false, epoch.Add(30 * time.Second)},
				}
				for _, tt := range tests {
					tm := mustRecur(t, s, "r", tt.sc, tt.opts...)
					if kept := tm.Generation == first.Generation; kept != tt.kept || !tm.Recurring.Run.Equal(tt.wantAt) {
						t.Fatalf("%s: generation %d (first %d), run %v; want kept=%v, run %v",
							tt.name, tm.Generation, first.Generation, tm.Recurring.Run, tt.kept, tt.wantAt)
					}
				}
				if tm := mustRecur(t, s, "r", Schedule{Every: time.Minute}); !tm.Recurring.Run.Equal(epoch.Add(30 * time.Second)) {
					t.Fatalf("without the option: run %v, want anchored now", tm.Recurring.Run)
				}
			},
		},
		{
			name:     "RecurringRunsEachRunOnce",
			property: "a recurring timer runs each scheduled run once, never early, each run with a new generation and its run time in the firing; Get shows the next run",
			run: func(t *testing.T, e *env) {
				s := e.start(t)
				tm := mustRecur(t, s, "r", Schedule{Every: time.Minute, Start: minute(1)})
				if tm.Recurring == nil || !tm.Recurring.Run.Equal(minute(1)) || !tm.DueAt.Equal(minute(1)) {
					t.Fatalf("created %+v, want its first run at %v", tm, minute(1))
				}
				for n := 1; n <= 3; n++ {
					advanceTo(t, e.clk, s, minute(n).Add(-time.Millisecond))
					advanceTo(t, e.clk, s, minute(n))
				}
				wantRuns(t, e, "r", minute(1), minute(2), minute(3))
				gens := map[uint64]bool{}
				for _, c := range e.rec.all() {
					if c.at.Before(c.firing.Run) {
						t.Errorf("run %v called early, at %v", c.firing.Run, c.at)
					}
					gens[c.firing.Generation] = true
				}
				if len(gens) != 3 {
					t.Errorf("%d generations over 3 runs, want one per run", len(gens))
				}
				got, err := s.Get(t.Context(), "r")
				if err != nil || got.Recurring == nil || !got.Recurring.Run.Equal(minute(4)) || got.Attempts != 0 {
					t.Fatalf("Get = %+v, %v; want the next run at %v with no attempts", got, err, minute(4))
				}
				if next := got.Recurring.NextRuns(3); len(next) != 3 || !next[2].Equal(minute(6)) {
					t.Errorf("NextRuns = %v", next)
				}
			},
		},
		{
			name:     "RecurringCountsOnceAndReplaces",
			property: "a recurring timer counts once toward MaxActive whatever its runs; a create of its name replaces it",
			cfg:      Config{MaxActive: 1},
			run: func(t *testing.T, e *env) {
				s := e.start(t)
				mustRecur(t, s, "r", Schedule{Every: time.Second})
				advanceTo(t, e.clk, s, epoch.Add(3*time.Second))
				var le *LimitError
				if _, err := s.Create(t.Context(), "other", time.Hour, testCall(`1`)); !errors.As(err, &le) {
					t.Fatalf("a second timer at MaxActive 1: %v, want a LimitError", err)
				}
				wantStats(t, s, Stats{Active: 1, Limit: 1, DueWithin1m: 1})
				mustCreate(t, s, "r", time.Hour, testCall(`2`))
				got, _ := s.Get(t.Context(), "r")
				if got.Recurring != nil {
					t.Errorf("the replacement is still recurring: %+v", got.Recurring)
				}
			},
		},
		{
			name:     "RecurringPauseResume",
			property: "a paused recurring timer does not run and shows no next run; resumed, it runs from its first run after now (the paused ones are not caught up)",
			run: func(t *testing.T, e *env) {
				s := e.start(t)
				mustRecur(t, s, "r", Schedule{Every: time.Minute, Start: minute(1)})
				p, err := s.Pause(t.Context(), "r")
				if err != nil || !p.Recurring.Paused || !p.DueAt.Equal(PausedDue) || p.Recurring.NextRuns(2) != nil {
					t.Fatalf("Pause = %+v, %v", p, err)
				}
				advanceTo(t, e.clk, s, minute(5).Add(30*time.Second))
				wantRuns(t, e, "r")
				r, err := s.Resume(t.Context(), "r")
				if err != nil || r.Recurring.Paused || !r.Recurring.Run.Equal(minute(6)) {
					t.Fatalf("Resume = %+v, %v; want the next run at %v", r, err, minute(6))
				}
				advanceTo(t, e.clk, s, minute(6))
				wantRuns(t, e, "r", minute(6))
				if _, err := s.Pause(t.Context(), "missing"); !errors.Is(err, ErrNotFound) {
					t.Errorf("Pause of a missing timer: %v", err)
				}
				mustCreate(t, s, "single", time.Hour, testCall(`1`))
				if _, err := s.Pause(t.Context(), "single"); !errors.Is(err, ErrInvalid) {
					t.Errorf("Pause of a single timer: %v, want ErrInvalid", err)
				}
			},
		},
		{
			name:     "RecurringRunGivesUpScheduleGoesOn",
			property: "a run that fails past its retries leaves a dead letter named after the run (a single timer with the call) and the schedule goes on",
			run: func(t *testing.T, e *env) {
				s := e.start(t)
				failUntil(e, minute(2))
				mustRecur(t, s, "r", Schedule{Every: time.Minute, Start: minute(1)}, WithMaxRetries(1))
				advanceTo(t, e.clk, s, minute(1))
				advanceTo(t, e.clk, s, minute(1).Add(Backoff(1)))
				d, err := s.GetDeadLetter(t.Context(), deadRunName("r", minute(1)))
				if err != nil || d.Recurring != nil || d.Attempts != 2 || d.LastError != "down" || string(d.Call.Argument) != `{"r":1}` {
					t.Fatalf("dead letter of the run = %+v, %v", d, err)
				}
				advanceTo(t, e.clk, s, minute(2))
				wantRuns(t, e, "r", minute(1), minute(1), minute(2))
				got, err := s.Get(t.Context(), "r")
				if err != nil || !got.Recurring.Run.Equal(minute(3)) {
					t.Fatalf("after the dead run: %+v, %v; want the schedule at %v", got, err, minute(3))
				}
			},
		},
		{
			name:     "RecurringCatchUpAfterAnHourDown",
			property: "after an hour with no instance running: once runs the first missed run and then the next future one; skip runs none; all runs each missed run within its window, oldest first",
			run: func(t *testing.T, e *env) {
				s := e.scheduler(t)
				sc := Schedule{Every: time.Minute, Start: minute(1)}
				for _, p := range []CatchUpPolicy{CatchUpOnce, CatchUpSkip, CatchUpAll} {
					sc.CatchUp, sc.CatchUpWindow = p, 30*time.Minute
					mustRecur(t, s, string(p), sc)
				}
				e.clk.Advance(time.Hour + 30*time.Second) // nothing runs
				s = e.start(t)
				// 30 runs one after another, each a claim and a settle: tens of
				// milliseconds at rest, bounded generously for a loaded machine.
				waitWithin(t, time.Minute, "the catch-up", func() bool { return len(runsOf(e, "all")) >= 30 })
				quiesce(t, s)
				wantRuns(t, e, "once", minute(1))
				wantRuns(t, e, "skip")
				var all []time.Time // the window reaches back to 30:30
				for n := 31; n <= 60; n++ {
					all = append(all, minute(n))
				}
				wantRuns(t, e, "all", all...)
				for _, name := range []string{"once", "skip", "all"} {
					if got, _ := s.Get(t.Context(), name); got.Recurring == nil || !got.Recurring.Run.Equal(minute(61)) {
						t.Errorf("%s: next run %+v, want %v", name, got.Recurring, minute(61))
					}
				}
			},
		},
		{
			name:     "RecurringOverlapWhileRetried",
			property: "runs that fall due while a run is retried are skipped (skip) or one of them, the latest, runs at once after it (queue)",
			run: func(t *testing.T, e *env) {
				s := e.start(t)
				failUntil(e, minute(61))
				for _, p := range []OverlapPolicy{OverlapSkip, OverlapQueueOne} {
					mustRecur(t, s, string(p), Schedule{Every: time.Minute, Start: minute(1), Overlap: p})
				}
				for at := minute(1); !at.After(minute(62)); at = at.Add(30 * time.Second) {
					advanceTo(t, e.clk, s, at)
				}
				succeeded := func(name string) []time.Time {
					var out []time.Time
					for _, c := range e.rec.all() {
						if c.firing.Name == name && !c.at.Before(minute(61)) {
							out = append(out, c.firing.Run)
						}
					}
					return out
				}
				if got := succeeded("skip"); len(got) != 2 || !got[0].Equal(minute(1)) || !got[1].Equal(minute(62)) {
					t.Errorf("skip: runs from the recovery on = %v, want the retried run then %v", got, minute(62))
				}
				if got := succeeded("queue"); len(got) != 3 || !got[0].Equal(minute(1)) || !got[1].Equal(minute(61)) || !got[2].Equal(minute(62)) {
					t.Errorf("queue: runs from the recovery on = %v, want the retried run, %v, %v", got, minute(61), minute(62))
				}
			},
		},
		{
			name:     "RecurringCronAcrossDST",
			property: "a cron schedule in a zone with DST follows local time on a fake clock: 02:30 Paris on the spring-forward day runs at 03:30 CEST, then 02:30 again",
			run: func(t *testing.T, e *env) {
				e.clk.Advance(time.Date(2030, 3, 30, 12, 0, 0, 0, time.UTC).Sub(e.clk.Now()))
				s := e.start(t)
				mustRecur(t, s, "dst", Schedule{Cron: "30 2 * * *", TimeZone: "Europe/Paris"})
				first := time.Date(2030, 3, 31, 1, 30, 0, 0, time.UTC) // 03:30 CEST
				second := time.Date(2030, 4, 1, 0, 30, 0, 0, time.UTC) // 02:30 CEST
				advanceTo(t, e.clk, s, first.Add(-time.Millisecond))
				wantRuns(t, e, "dst")
				advanceTo(t, e.clk, s, first)
				advanceTo(t, e.clk, s, second)
				wantRuns(t, e, "dst", first, second)
			},
		},
	}
}
