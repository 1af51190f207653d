package deadlines

import (
	"context"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// testAsk is an ask whose expiry the test hears of on a channel.
type testAsk struct {
	name    string
	expired chan<- string
	Entry
}

func (a *testAsk) BookEntry() *Entry { return &a.Entry }
func (a *testAsk) Expire() {
	if a.Done.CompareAndSwap(false, true) {
		a.expired <- a.name
	}
}

var _ Wait = (*testAsk)(nil)

// The book expires asks in deadline order on one timer, never expires the
// ones answered or abandoned, and leaves no timer behind once it has fired
// with nothing left.
func TestBook(t *testing.T) {
	type step struct {
		add     string        // an ask to add, with timeout
		timeout time.Duration // for add
		answer  string        // an ask to answer (mark done, as its reply does)
		abandon bool          // abandon every ask (the asker stopped)
		advance time.Duration // move the clock, then expect exactly want
		want    []string      // the asks that expire after advance, in order
		timers  int           // with advance: the timers pending afterwards
	}
	tests := []struct {
		name  string // the case
		steps []step
	}{
		{name: "deadline order, not insertion order", steps: []step{
			{add: "a", timeout: 3 * time.Second}, {add: "b", timeout: time.Second}, {add: "c", timeout: 2 * time.Second},
			{advance: time.Second, want: []string{"b"}, timers: 1},
			{advance: time.Second, want: []string{"c"}, timers: 1},
			{advance: time.Second, want: []string{"a"}, timers: 0},
		}},
		{name: "asks due together expire together", steps: []step{
			{add: "a", timeout: time.Second}, {add: "b", timeout: time.Second},
			{advance: time.Second, want: []string{"a", "b"}, timers: 0},
		}},
		{name: "an answered ask never expires; the next one still does", steps: []step{
			{add: "a", timeout: time.Second}, {add: "b", timeout: 2 * time.Second}, {answer: "a"},
			{advance: time.Second, timers: 1}, // the timer set for a fires early and is set for b
			{advance: time.Second, want: []string{"b"}, timers: 0},
		}},
		{name: "a reply leaves the timer set; it fires once for nothing; the next ask sets it again", steps: []step{
			{add: "a", timeout: time.Second}, {answer: "a"},
			{advance: 0, timers: 1},
			{advance: time.Second, timers: 0},
			{add: "b", timeout: time.Second},
			{advance: time.Second, want: []string{"b"}, timers: 0},
		}},
		{name: "a later ask keeps the timer; an earlier one moves it", steps: []step{
			{add: "a", timeout: 2 * time.Second}, {answer: "a"}, {add: "b", timeout: 3 * time.Second}, {add: "c", timeout: time.Second},
			{advance: time.Second, want: []string{"c"}, timers: 1},
			{advance: time.Second, timers: 1}, // set for a, answered: fires for nothing and is set for b
			{advance: time.Second, want: []string{"b"}, timers: 0},
		}},
		{name: "abandoned asks never expire", steps: []step{
			{add: "a", timeout: time.Second}, {add: "b", timeout: 2 * time.Second}, {abandon: true},
			{advance: 0, timers: 0},
			{advance: 3 * time.Second, timers: 0},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fc := clockwork.NewFakeClock()
			b := New(fc)
			expired := make(chan string, 8)
			asks := make(map[string]*testAsk)
			for i, s := range tc.steps {
				switch {
				case s.add != "":
					asks[s.add] = &testAsk{name: s.add, expired: expired}
					b.Add(asks[s.add], s.timeout)
				case s.answer != "":
					asks[s.answer].Done.Store(true)
				case s.abandon:
					b.Abandon()
				default:
					fc.Advance(s.advance)
					for _, want := range s.want {
						select {
						case got := <-expired:
							if got != want {
								t.Fatalf("step %d: %q expired, want %q", i, got, want)
							}
						case <-time.After(5 * time.Second):
							t.Fatalf("step %d: %q did not expire", i, want)
						}
					}
					// A fire runs on its own goroutine: wait until the
					// clock has the timers the step expects, and no more,
					// then check that nothing else expired.
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					err := fc.BlockUntilContext(ctx, s.timers)
					cancel()
					if err != nil {
						t.Fatalf("step %d: the clock never had %d timers pending: %v", i, s.timers, err)
					}
					ctx, cancel = context.WithCancel(context.Background())
					cancel() // answers at once: are there more than s.timers now?
					if fc.BlockUntilContext(ctx, s.timers+1) == nil {
						t.Fatalf("step %d: more than %d timers pending", i, s.timers)
					}
					// A barrier: a fire in progress holds the lock until it has
					// expired what is due.
					b.mu.Lock()
					b.mu.Unlock() //nolint:gocritic // the barrier above, not a critical section
					select {
					case got := <-expired:
						t.Fatalf("step %d: %q expired, want none after %v", i, got, s.want)
					default:
					}
				}
			}
		})
	}
}

// Answered asks are swept out as new ones come, even while the earliest
// one still waits for its reply (so they are not at the top of the heap):
// the book stays within twice what is outstanding (or minSweep), and only
// the unanswered ask expires.
func TestBookSweeps(t *testing.T) {
	fc := clockwork.NewFakeClock()
	b := New(fc)
	expired := make(chan string, 8)
	b.Add(&testAsk{name: "slow", expired: expired}, time.Second)
	most := 0
	for range 10_000 {
		a := &testAsk{name: "answered", expired: expired}
		b.Add(a, time.Minute)
		a.Done.Store(true) // its reply came
		most = max(most, len(b.waits))
	}
	if limit := 2 * minSweep; most > limit {
		t.Fatalf("the book held %d asks, want at most %d (one outstanding)", most, limit)
	}
	fc.Advance(time.Second)
	select {
	case got := <-expired:
		if got != "slow" {
			t.Fatalf("%q expired, want slow", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the outstanding ask did not expire")
	}
	b.mu.Lock() // the fire holds it until it has expired what is due
	defer b.mu.Unlock()
	select {
	case got := <-expired:
		t.Fatalf("%q expired too", got)
	default:
	}
}
