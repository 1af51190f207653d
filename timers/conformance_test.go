package timers

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// The conformance suite: every case runs on a MemoryStore and on a
// RedisStore (real Redis), each on a fake clock, so the two stores are
// held to one contract. Cases are grouped by concern over several files:
// crudCases (this file), firingCases, inFlightCases and queryCases.

// conformanceCase is one clause of the scheduler-and-store contract.
type conformanceCase struct {
	// name is the subtest name.
	name string
	// property is the clause the case checks; it is logged when it fails.
	property string
	// cfg is the scheduler's config; zero fields take the defaults.
	cfg Config
	// run exercises e, a fresh empty store with a fake clock at epoch.
	run func(t *testing.T, e *env)
}

// env is a case's world: one store, its clock, a recording dispatcher.
type env struct {
	kind  storeKind
	clk   *clockwork.FakeClock
	store Store
	rec   *recorder
	cfg   Config
}

// scheduler returns a scheduler on the case's store that is not started.
func (e *env) scheduler(t *testing.T) *Scheduler { return newScheduler(t, e.store, e.rec, e.cfg) }

// start returns a started scheduler on the case's store.
func (e *env) start(t *testing.T) *Scheduler { return startScheduler(t, e.store, e.rec, e.cfg) }

func TestConformance(t *testing.T) {
	runConformance(t, slices.Concat(crudCases(), firingCases(), inFlightCases(), queryCases(), deadCases()))
}

// runConformance runs cases on every store kind.
func runConformance(t *testing.T, cases []conformanceCase) {
	for _, kind := range storeKinds {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					t.Cleanup(func() {
						if t.Failed() {
							t.Logf("property: %s", c.property)
						}
					})
					clk := clockwork.NewFakeClockAt(epoch)
					c.run(t, &env{kind: kind, clk: clk, store: newStore(t, kind, clk), rec: newRecorder(clk), cfg: c.cfg})
				})
			}
		})
	}
}

func crudCases() []conformanceCase {
	return []conformanceCase{
		{
			name:     "CreateThenGet",
			property: "Create stores the call, due = now + delay (ms), created = now, no attempts, a non-zero generation; Get returns the same",
			run: func(t *testing.T, e *env) {
				s := e.scheduler(t)
				created := mustCreate(t, s, "order-1", 10*time.Second, testCall(`{"id":1}`), WithMaxRetries(3))
				got, err := s.Get(t.Context(), "order-1")
				if err != nil {
					t.Fatalf("Get: %v", err)
				}
				for _, tm := range []Timer{created, got} {
					wantTimer(t, tm, Timer{Name: "order-1", Call: testCall(`{"id":1}`), DueAt: epoch.Add(10 * time.Second),
						CreatedAt: epoch, MaxRetries: 3, Generation: created.Generation})
				}
				if created.Generation == 0 {
					t.Error("generation 0")
				}
				if _, err := s.Get(t.Context(), "missing"); !errors.Is(err, ErrNotFound) {
					t.Errorf("Get(missing) = %v, want ErrNotFound", err)
				}
			},
		},
		{
			name:     "CreateReplaces",
			property: "creating an existing name replaces it: new call, due time and generation; still one timer",
			run: func(t *testing.T, e *env) {
				s := e.scheduler(t)
				first := mustCreate(t, s, "a", 10*time.Second, testCall(`1`))
				e.clk.Advance(time.Second)
				second := mustCreate(t, s, "a", 20*time.Second, testCall(`2`), WithMaxRetries(1))
				if second.Generation <= first.Generation {
					t.Errorf("generation %d after %d, want it to grow", second.Generation, first.Generation)
				}
				got, _ := s.Get(t.Context(), "a")
				wantTimer(t, got, Timer{Name: "a", Call: testCall(`2`), DueAt: epoch.Add(21 * time.Second),
					CreatedAt: epoch.Add(time.Second), MaxRetries: 1, Generation: second.Generation})
				wantStats(t, s, Stats{Active: 1, Limit: DefaultMaxActive, DueWithin1m: 1})
			},
		},
		{
			name:     "Delete",
			property: "Delete removes a timer; deleting a missing name is not an error",
			run: func(t *testing.T, e *env) {
				s := e.scheduler(t)
				if err := s.Delete(t.Context(), "never-created"); err != nil {
					t.Fatalf("Delete(missing) = %v, want nil", err)
				}
				mustCreate(t, s, "a", time.Minute, testCall(`1`))
				if err := s.Delete(t.Context(), "a"); err != nil {
					t.Fatalf("Delete: %v", err)
				}
				if _, err := s.Get(t.Context(), "a"); !errors.Is(err, ErrNotFound) {
					t.Errorf("Get after Delete = %v, want ErrNotFound", err)
				}
				wantStats(t, s, Stats{Limit: DefaultMaxActive})
			},
		},
		{
			name:     "PayloadLimit",
			property: "a 1,024-byte argument is accepted and a 1,025-byte one refused with a *LimitError naming the payload limit",
			run: func(t *testing.T, e *env) {
				s := e.scheduler(t)
				mustCreate(t, s, "max", time.Minute, testCall(jsonString(1024)))
				_, err := s.Create(t.Context(), "over", time.Minute, testCall(jsonString(1025)))
				wantLimit(t, err, LimitError{Limit: LimitPayload, Value: 1025, Max: 1024})
				if _, err := s.Get(t.Context(), "over"); !errors.Is(err, ErrNotFound) {
					t.Errorf("refused timer was stored: %v", err)
				}
			},
		},
		{
			name:     "PayloadLimitConfiguredDown",
			property: "MaxPayload can be configured below 1,024",
			cfg:      Config{MaxPayload: 100},
			run: func(t *testing.T, e *env) {
				s := e.scheduler(t)
				mustCreate(t, s, "max", time.Minute, testCall(jsonString(100)))
				_, err := s.Create(t.Context(), "over", time.Minute, testCall(jsonString(101)))
				wantLimit(t, err, LimitError{Limit: LimitPayload, Value: 101, Max: 100})
			},
		},
		{
			name:     "ActiveLimit",
			property: "with MaxActive n, n timers are accepted, the next refused with a *LimitError; replacing does not count twice; a delete makes room",
			cfg:      Config{MaxActive: 5},
			run: func(t *testing.T, e *env) {
				s := e.scheduler(t)
				for i := range 5 {
					mustCreate(t, s, string(rune('a'+i)), time.Minute, testCall(`1`))
				}
				_, err := s.Create(t.Context(), "f", time.Minute, testCall(`1`))
				wantLimit(t, err, LimitError{Limit: LimitActive, Value: 5, Max: 5})
				mustCreate(t, s, "c", 2*time.Minute, testCall(`2`)) // a replacement
				wantStats(t, s, Stats{Active: 5, Limit: 5, DueWithin1m: 4})
				if err := s.Delete(t.Context(), "a"); err != nil {
					t.Fatal(err)
				}
				mustCreate(t, s, "f", time.Minute, testCall(`1`))
			},
		},
		{
			name:     "InvalidRequests",
			property: "an empty name, a negative delay or maxRetries, or an invalid call is ErrInvalid; a long name a *LimitError",
			run: func(t *testing.T, e *env) {
				s := e.scheduler(t)
				for _, tc := range []struct {
					// what describes the bad request.
					what string
					// create makes it.
					create func() error
				}{
					{"empty name", func() error { _, err := s.Create(t.Context(), "", 0, testCall(`1`)); return err }},
					{"negative delay", func() error { _, err := s.Create(t.Context(), "a", -time.Second, testCall(`1`)); return err }},
					{"negative maxRetries", func() error {
						_, err := s.Create(t.Context(), "a", 0, testCall(`1`), WithMaxRetries(-1))
						return err
					}},
					{"no component", func() error {
						c := testCall(`1`)
						c.ComponentID = ""
						_, err := s.Create(t.Context(), "a", 0, c)
						return err
					}},
					{"argument not JSON", func() error { _, err := s.Create(t.Context(), "a", 0, testCall(`{`)); return err }},
				} {
					if err := tc.create(); !errors.Is(err, ErrInvalid) {
						t.Errorf("%s: err = %v, want ErrInvalid", tc.what, err)
					}
				}
				_, err := s.Create(t.Context(), string(make([]byte, 513)), 0, testCall(`1`))
				wantLimit(t, err, LimitError{Limit: LimitName, Value: 513, Max: 512})
				wantStats(t, s, Stats{Limit: DefaultMaxActive})
			},
		},
	}
}

// wantTimer compares a timer with want field by field.
func wantTimer(t *testing.T, got, want Timer) {
	t.Helper()
	if got.Name != want.Name || got.Call.String() != want.Call.String() || string(got.Call.Argument) != string(want.Call.Argument) ||
		!got.DueAt.Equal(want.DueAt) || !got.CreatedAt.Equal(want.CreatedAt) || got.Attempts != want.Attempts ||
		got.MaxRetries != want.MaxRetries || got.LastError != want.LastError ||
		!got.LastAttemptAt.Equal(want.LastAttemptAt) || got.Generation != want.Generation {
		t.Errorf("timer\n got %+v\nwant %+v", got, want)
	}
}

func wantStats(t *testing.T, s *Scheduler, want Stats) {
	t.Helper()
	got, err := s.Stats(t.Context())
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	if got != want {
		t.Errorf("Stats = %+v, want %+v", got, want)
	}
}

func wantLimit(t *testing.T, err error, want LimitError) {
	t.Helper()
	var le *LimitError
	if !errors.As(err, &le) || !errors.Is(err, ErrLimitExceeded) {
		t.Fatalf("err = %v, want a *LimitError wrapping ErrLimitExceeded", err)
	}
	if *le != want {
		t.Errorf("LimitError = %+v, want %+v", *le, want)
	}
}
