package cluster

import (
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// TestLease: the window is lease×0.9 − margin from when the last accepted
// renewal was sent; a late answer to an older renewal never shortens it;
// revoke ends it.
func TestLease(t *testing.T) {
	const lease, margin = 10 * time.Second, 200 * time.Millisecond
	window := 8800 * time.Millisecond
	for _, tc := range []struct {
		name string
		// act is done to a Lease at clock time t0; it returns the
		// offsets from t0 to check and whether each should be valid.
		act  func(l *Lease, t0 time.Time)
		at   []time.Duration
		want []bool
	}{
		{"never renewed", func(*Lease, time.Time) {}, []time.Duration{0}, []bool{false}},
		{"one renewal", func(l *Lease, t0 time.Time) { l.renewed(t0) },
			[]time.Duration{0, window - 1, window}, []bool{true, true, false}},
		{"a later renewal extends", func(l *Lease, t0 time.Time) { l.renewed(t0); l.renewed(t0.Add(3 * time.Second)) },
			[]time.Duration{window, window + 3*time.Second - 1, window + 3*time.Second}, []bool{true, true, false}},
		{"an older answer does not shorten", func(l *Lease, t0 time.Time) { l.renewed(t0.Add(3 * time.Second)); l.renewed(t0) },
			[]time.Duration{window + 3*time.Second - 1}, []bool{true}},
		{"revoked", func(l *Lease, t0 time.Time) { l.renewed(t0); l.revoke() },
			[]time.Duration{0, time.Second}, []bool{false, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := clockwork.NewFakeClock()
			l := newLease(clock, lease, margin)
			t0 := clock.Now()
			tc.act(l, t0)
			for i, d := range tc.at {
				if got := l.Valid(t0.Add(d)); got != tc.want[i] {
					t.Errorf("Valid(t0+%v) = %v, want %v", d, got, tc.want[i])
				}
			}
		})
	}
}

// TestLeaseServingFollowsTheClock: Serving reads the Lease's clock.
func TestLeaseServingFollowsTheClock(t *testing.T) {
	clock := clockwork.NewFakeClock()
	l := newLease(clock, time.Second, 100*time.Millisecond) // window 800 ms
	l.renewed(clock.Now())
	clock.Advance(799 * time.Millisecond)
	if !l.Serving() {
		t.Fatal("not serving 799 ms into an 800 ms window")
	}
	clock.Advance(time.Millisecond)
	if l.Serving() {
		t.Fatal("still serving at the end of the window")
	}
}

// TestLeaseLastRenewal: LastRenewal is the send time of the latest
// accepted renewal (an older answer does not move it back), and survives
// revoke; SinceRenewal counts from it on the Lease's clock.
func TestLeaseLastRenewal(t *testing.T) {
	clock := clockwork.NewFakeClock()
	l := newLease(clock, time.Second, 100*time.Millisecond)
	if !l.LastRenewal().IsZero() || l.SinceRenewal() != 0 {
		t.Fatalf("before a renewal: last %v, since %v", l.LastRenewal(), l.SinceRenewal())
	}
	t0 := clock.Now()
	l.renewed(t0.Add(time.Second))
	l.renewed(t0) // a late answer to an older renewal
	clock.Advance(3 * time.Second)
	l.revoke()
	if got := l.LastRenewal(); !got.Equal(t0.Add(time.Second)) {
		t.Errorf("LastRenewal = %v, want t0+1s", got)
	}
	if got := l.SinceRenewal(); got != 2*time.Second {
		t.Errorf("SinceRenewal = %v, want 2s", got)
	}
}
