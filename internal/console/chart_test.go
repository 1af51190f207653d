package console

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/timers"
)

func TestBucketOf(t *testing.T) {
	cases := []struct {
		due  time.Duration // how far from now the timer is due
		want int           // its bar: -1 for due already
	}{
		{due: -time.Hour, want: -1},
		{due: 0, want: -1},
		{due: time.Millisecond, want: 0},
		{due: 5 * time.Minute, want: 0},
		{due: 5*time.Minute + time.Millisecond, want: 1},
		{due: 30 * time.Minute, want: 5},
		{due: time.Hour, want: 11},
		// A little past the hour on the console's clock, within it on the
		// store's: the last bar, not out of range.
		{due: time.Hour + time.Second, want: 11},
	}
	for _, c := range cases {
		if got := bucketOf(c.due); got != c.want {
			t.Errorf("bucketOf(%v) = %d, want %d", c.due, got, c.want)
		}
	}
}

// newScheduler is a scheduler on the memory store with a fake clock, not
// started: its timers stay where they are put.
func newScheduler(t *testing.T) (*timers.Scheduler, *clockwork.FakeClock) {
	t.Helper()
	clock := clockwork.NewFakeClockAt(time.Now().Truncate(time.Millisecond))
	sched, err := timers.New(timers.NewMemoryStore(clock), components.NewClient(components.NewRegistry()), timers.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return sched, clock
}

func createAt(t *testing.T, sched *timers.Scheduler, name string, delay time.Duration) {
	t.Helper()
	c := components.DeferredCall{ComponentID: "orders", Method: "expire", Argument: []byte(`"o-1"`)}
	if _, err := sched.Create(context.Background(), name, delay, c); err != nil {
		t.Fatal(err)
	}
}

func TestChartDue(t *testing.T) {
	sched, clock := newScheduler(t)
	for name, delay := range map[string]time.Duration{
		"now":       0,
		"10s":       10 * time.Second,
		"20s":       20 * time.Second,
		"5m":        5 * time.Minute,
		"5m+1ms":    5*time.Minute + time.Millisecond,
		"10m+1ms":   10*time.Minute + time.Millisecond,
		"half-hour": 30 * time.Minute,
		"hour":      time.Hour,
		"hour+1ms":  time.Hour + time.Millisecond,
		"tomorrow":  24 * time.Hour,
	} {
		createAt(t, sched, name, delay)
	}
	// 15 s later, every timer is 15 s closer: "now" and "10s" are due;
	// "20s", "5m" and "5m+1ms" fall in the first five minutes, "10m+1ms"
	// in the second, "half-hour" in the sixth, "hour" and "hour+1ms" in
	// the last; "tomorrow" is out of the chart.
	clock.Advance(15 * time.Second)
	c, err := chartDue(context.Background(), sched, clock.Now(), maxChartTimers)
	if err != nil {
		t.Fatal(err)
	}
	want := dueChart{BucketSeconds: 300, Overdue: 2, Counts: []int{3, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 2}}
	if c.Overdue != want.Overdue || !slices.Equal(c.Counts, want.Counts) || c.Partial || c.BucketSeconds != 300 {
		t.Fatalf("chart %+v, want %+v", c, want)
	}
}

func TestChartDuePartial(t *testing.T) {
	sched, clock := newScheduler(t)
	const n = 2*timers.MaxListLimit + 500
	for i := range n {
		createAt(t, sched, fmt.Sprintf("t-%05d", i), 10*time.Minute)
	}
	cases := []struct {
		limit   int  // how many timers the chart may read
		counted int  // how many it counts
		partial bool // whether it says it is partial
	}{
		{limit: maxChartTimers, counted: n},
		{limit: timers.MaxListLimit, counted: timers.MaxListLimit, partial: true},
		{limit: timers.MaxListLimit + 1, counted: 2 * timers.MaxListLimit, partial: true},
	}
	for _, tc := range cases {
		c, err := chartDue(context.Background(), sched, clock.Now(), tc.limit)
		if err != nil {
			t.Fatal(err)
		}
		if c.Counts[1] != tc.counted || c.Partial != tc.partial {
			t.Errorf("limit %d: counted %d (partial %v), want %d (partial %v)", tc.limit, c.Counts[1], c.Partial, tc.counted, tc.partial)
		}
	}
}
