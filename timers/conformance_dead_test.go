package timers

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/trellis-go/trellis/components"
)

// deadCases are the dead letters' clauses of the conformance suite.
func deadCases() []conformanceCase {
	return []conformanceCase{
		{
			name:     "GiveUpKeepsADeadLetter",
			property: "a timer whose retries ran out becomes a dead letter with its call, attempts, last error and time of death; it is not active, is counted in Stats, and does not run again",
			run: func(t *testing.T, e *env) {
				s := e.start(t)
				tm, died := killTimer(t, e, s, "a", testCall(`{"id":7}`))
				if _, err := s.Get(t.Context(), "a"); !errors.Is(err, ErrNotFound) {
					t.Fatalf("Get of a dead timer = %v, want ErrNotFound", err)
				}
				d, err := s.GetDeadLetter(t.Context(), "a")
				if err != nil {
					t.Fatalf("GetDeadLetter: %v", err)
				}
				wantTimer(t, d.Timer, Timer{Name: "a", Call: testCall(`{"id":7}`), DueAt: died, CreatedAt: epoch,
					Attempts: 2, MaxRetries: 1, LastError: "no", LastAttemptAt: died, Generation: tm.Generation})
				if !d.DiedAt.Equal(died) {
					t.Errorf("DiedAt = %v, want %v", d.DiedAt, died)
				}
				wantStats(t, s, Stats{Limit: DefaultMaxActive, DeadLetters: 1})
				e.clk.Advance(time.Hour)
				quiesce(t, s)
				if n := e.rec.len(); n != 2 {
					t.Errorf("%d calls, want 2: a dead letter does not run", n)
				}
				if g := testutil.ToFloat64(s.metrics.givenUp); g != 1 {
					t.Errorf("given_up_total = %v, want 1", g)
				}
			},
		},
		{
			name:     "DeadLettersOutsideTheLimit",
			property: "dead letters do not count toward MaxActive; retrying one does, and is refused at the limit",
			cfg:      Config{MaxActive: 1},
			run: func(t *testing.T, e *env) {
				s := e.start(t)
				killTimer(t, e, s, "a", testCall(`1`))
				mustCreate(t, s, "b", time.Hour, testCall(`2`))
				var le *LimitError
				if _, err := s.RetryDeadLetter(t.Context(), "a"); !errors.As(err, &le) || le.Limit != LimitActive {
					t.Fatalf("RetryDeadLetter at the limit = %v, want a LimitError on active timers", err)
				}
				if _, err := s.GetDeadLetter(t.Context(), "a"); err != nil {
					t.Errorf("a refused retry lost the dead letter: %v", err)
				}
			},
		},
		{
			name:     "RetryRunsAgainWithFreshRetries",
			property: "RetryDeadLetter makes the dead letter an active timer due now with its call and maxRetries, a new generation and no attempts; the dead letter is gone; the timer runs",
			run: func(t *testing.T, e *env) {
				s := e.start(t)
				dead, _ := killTimer(t, e, s, "a", testCall(`"again"`))
				e.rec.handle = nil
				tm, err := s.RetryDeadLetter(t.Context(), "a")
				if err != nil {
					t.Fatalf("RetryDeadLetter: %v", err)
				}
				now := e.clk.Now()
				wantTimer(t, tm, Timer{Name: "a", Call: testCall(`"again"`), DueAt: now, CreatedAt: now, MaxRetries: 1,
					Generation: tm.Generation})
				if tm.Generation <= dead.Generation {
					t.Errorf("generation %d, want more than the dead one's %d", tm.Generation, dead.Generation)
				}
				if _, err := s.GetDeadLetter(t.Context(), "a"); !errors.Is(err, ErrNotFound) {
					t.Errorf("GetDeadLetter after retry = %v, want ErrNotFound", err)
				}
				quiesce(t, s)
				calls := e.rec.all()
				if len(calls) != 3 || calls[2].firing.Attempt != 1 || calls[2].firing.Generation != tm.Generation {
					t.Fatalf("calls %+v; want a third, attempt 1 of the new generation", calls)
				}
				wantStats(t, s, Stats{Limit: DefaultMaxActive})
			},
		},
		{
			name:     "RetryRefusals",
			property: "RetryDeadLetter of a missing name is ErrNotFound, and of a name an active timer has is ErrNameTaken (the timer and the dead letter untouched)",
			run: func(t *testing.T, e *env) {
				s := e.start(t)
				if _, err := s.RetryDeadLetter(t.Context(), "none"); !errors.Is(err, ErrNotFound) {
					t.Errorf("RetryDeadLetter(none) = %v, want ErrNotFound", err)
				}
				killTimer(t, e, s, "a", testCall(`1`))
				mustCreate(t, s, "a", time.Hour, testCall(`2`))
				if _, err := s.RetryDeadLetter(t.Context(), "a"); !errors.Is(err, ErrNameTaken) {
					t.Errorf("RetryDeadLetter over an active timer = %v, want ErrNameTaken", err)
				}
				if got, err := s.Get(t.Context(), "a"); err != nil || string(got.Call.Argument) != "2" {
					t.Errorf("active timer = %+v, %v; want the one created", got, err)
				}
				if _, err := s.GetDeadLetter(t.Context(), "a"); err != nil {
					t.Errorf("GetDeadLetter: %v", err)
				}
			},
		},
		{
			name:     "DeleteDeadLetter",
			property: "DeleteDeadLetter removes it; deleting a missing one is not an error",
			run: func(t *testing.T, e *env) {
				s := e.start(t)
				killTimer(t, e, s, "a", testCall(`1`))
				for range 2 {
					if err := s.DeleteDeadLetter(t.Context(), "a"); err != nil {
						t.Fatalf("DeleteDeadLetter: %v", err)
					}
				}
				if _, err := s.GetDeadLetter(t.Context(), "a"); !errors.Is(err, ErrNotFound) {
					t.Errorf("GetDeadLetter after delete = %v, want ErrNotFound", err)
				}
				wantStats(t, s, Stats{Limit: DefaultMaxActive})
			},
		},
		{
			name:     "RetentionPrunes",
			property: "a dead letter is kept for DeadLetterRetention after it died, then pruned by the running loop",
			cfg:      Config{DeadLetterRetention: time.Hour},
			run: func(t *testing.T, e *env) {
				s := e.start(t)
				_, died := killTimer(t, e, s, "a", testCall(`1`))
				advanceTo(t, e.clk, s, died.Add(time.Hour-time.Second))
				if _, err := s.GetDeadLetter(t.Context(), "a"); err != nil {
					t.Fatalf("within the retention: %v", err)
				}
				advanceTo(t, e.clk, s, died.Add(time.Hour+deadPruneEvery))
				if _, err := s.GetDeadLetter(t.Context(), "a"); !errors.Is(err, ErrNotFound) {
					t.Errorf("after the retention: GetDeadLetter = %v, want ErrNotFound", err)
				}
				if p := testutil.ToFloat64(s.metrics.deadPruned); p != 1 {
					t.Errorf("dead_letters_pruned_total = %v, want 1", p)
				}
			},
		},
		{
			name:     "PruneIsBounded",
			property: "one pruning pass removes at most its batch per partition and says when there may be more",
			run: func(t *testing.T, e *env) {
				s := e.start(t)
				for _, name := range []string{"a", "b", "c"} {
					killTimer(t, e, s, name, testCall(`1`))
				}
				e.clk.Advance(time.Second) // every one died a millisecond ago or more
				total, passes := 0, 0
				for more := true; more; passes++ {
					n, m, err := e.store.prune(t.Context(), time.Millisecond, 1)
					if err != nil {
						t.Fatalf("prune: %v", err)
					}
					if n > redisPartitions {
						t.Fatalf("one pass with a batch of 1 pruned %d", n)
					}
					total, more = total+n, m
				}
				if total != 3 || passes < 2 {
					t.Errorf("pruned %d in %d passes, want 3 in at least 2 (the first pass is full)", total, passes)
				}
			},
		},
		{
			name:     "ListDeadLettersFilters",
			property: "dead letters filter by component, method and entity of their call, combined with AND and with the name",
			run: func(t *testing.T, e *env) {
				s := e.start(t)
				call := func(component, method, entity string) components.DeferredCall {
					return components.DeferredCall{ComponentID: component, Method: method, EntityID: entity, Argument: []byte(`1`)}
				}
				killTimer(t, e, s, "cart-42-expire", call("cart", "expire", "42"))
				killTimer(t, e, s, "cart-42-remind", call("cart", "remind", "42"))
				killTimer(t, e, s, "order-7-expire", call("order", "expire", "7"))
				for _, c := range []struct {
					q    DeadLetterQuery
					want []string
				}{
					{DeadLetterQuery{ComponentID: "cart"}, []string{"cart-42-expire", "cart-42-remind"}},
					{DeadLetterQuery{Method: "expire"}, []string{"cart-42-expire", "order-7-expire"}},
					{DeadLetterQuery{EntityID: "42", Method: "remind"}, []string{"cart-42-remind"}},
					{DeadLetterQuery{EntityID: "7", NameContains: "cart"}, nil},
				} {
					p, err := s.ListDeadLetters(t.Context(), c.q)
					if err != nil {
						t.Fatal(err)
					}
					var got []string
					for _, d := range p.DeadLetters {
						got = append(got, d.Name)
					}
					if !slices.Equal(got, c.want) {
						t.Errorf("%+v lists %v, want %v", c.q, got, c.want)
					}
				}
			},
		},
		{
			name:     "ListDeadLettersPages",
			property: "ListDeadLetters lists by time of death then name, filters by name, and its cursor walks every dead letter once",
			run: func(t *testing.T, e *env) {
				s := e.start(t)
				for _, name := range []string{"c", "b", "a", "skip-me"} {
					killTimer(t, e, s, name, testCall(`1`))
				}
				var got []string
				q := DeadLetterQuery{NameContains: "", Limit: 2}
				for {
					p, err := s.ListDeadLetters(t.Context(), q)
					if err != nil {
						t.Fatalf("ListDeadLetters: %v", err)
					}
					for _, d := range p.DeadLetters {
						got = append(got, d.Name)
					}
					if p.NextCursor == "" {
						break
					}
					q.Cursor = p.NextCursor
				}
				if want := []string{"c", "b", "a", "skip-me"}; !slices.Equal(got, want) {
					t.Errorf("walk = %v, want %v", got, want)
				}
				p, err := s.ListDeadLetters(t.Context(), DeadLetterQuery{NameContains: "skip"})
				if err != nil || len(p.DeadLetters) != 1 || p.DeadLetters[0].Name != "skip-me" {
					t.Errorf("filtered = %+v, %v; want skip-me alone", p, err)
				}
				if _, err := s.ListDeadLetters(t.Context(), DeadLetterQuery{Cursor: "%%"}); !errors.Is(err, ErrInvalidQuery) {
					t.Errorf("bad cursor = %v, want ErrInvalidQuery", err)
				}
			},
		},
	}
}

// killTimer creates a timer with one retry whose call fails, and runs it
// to its end: it returns the timer as created and when it died.
func killTimer(t *testing.T, e *env, s *Scheduler, name string, call components.DeferredCall) (Timer, time.Time) {
	t.Helper()
	e.rec.handle = func(context.Context, components.DeferredCall) error { return components.Errorf("no") }
	tm := mustCreate(t, s, name, time.Second, call, WithMaxRetries(1))
	advanceTo(t, e.clk, s, tm.DueAt)
	died := tm.DueAt.Add(Backoff(1))
	advanceTo(t, e.clk, s, died)
	if _, err := s.GetDeadLetter(t.Context(), name); err != nil {
		t.Fatalf("%q after its last retry: %v", name, err)
	}
	return tm, died
}
