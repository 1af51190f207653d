package runtime

import (
	"testing"
	"time"
)

// TestSupervisionBackoffSequence pins the restart delays: none after a first
// failure, then minBackoff doubling with each failure in a row, capped at maxBackoff.
func TestSupervisionBackoffSequence(t *testing.T) {
	const minB = 10 * time.Millisecond
	tests := []struct {
		name  string          // the case
		super Supervision     // the strategy whose backoff is computed
		want  []time.Duration // backoff(n) for n = 1, 2, ...
	}{
		{
			name:  "doubles up to the cap",
			super: Restart(minB, 50*time.Millisecond),
			want:  []time.Duration{0, minB, 2 * minB, 4 * minB, 50 * time.Millisecond, 50 * time.Millisecond},
		},
		{
			name:  "cap is a power-of-two multiple of minB",
			super: Restart(minB, 8*minB),
			want:  []time.Duration{0, minB, 2 * minB, 4 * minB, 8 * minB, 8 * minB},
		},
		{
			name:  "default supervision",
			super: DefaultSupervision,
			want:  []time.Duration{0, minB, 2 * minB, 4 * minB, 8 * minB, 16 * minB},
		},
		{
			name:  "max below minB is raised to minB",
			super: Restart(minB, time.Millisecond),
			want:  []time.Duration{0, minB, minB, minB, minB, minB},
		},
		{
			name:  "minB under MinRestartBackoff: raised to it, so a failing Started cannot spin",
			super: Restart(0, time.Second),
			want:  []time.Duration{0, MinRestartBackoff, 2 * MinRestartBackoff, 4 * MinRestartBackoff, 8 * MinRestartBackoff, 16 * MinRestartBackoff},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for i, want := range tc.want {
				n := i + 1
				if got := tc.super.backoff(n); got != want {
					t.Errorf("backoff(%d) = %v, want %v", n, got, want)
				}
			}
		})
	}
}

// TestSupervisionBackoffLargeN pins that a long run of failures stays at the
// cap instead of overflowing the doubling.
func TestSupervisionBackoffLargeN(t *testing.T) {
	s := Restart(time.Millisecond, time.Hour)
	for _, n := range []int{40, 100, 1 << 20} {
		if got := s.backoff(n); got != time.Hour {
			t.Errorf("backoff(%d) = %v, want the cap %v", n, got, time.Hour)
		}
	}
}
