package runtime

import "time"

type failureAction uint8

const (
	restartOnFailure failureAction = iota
	resumeOnFailure
	stopOnFailure
)

// Supervision says what happens to an actor whose behavior panics. The panic
// is always recovered and logged with its stack; the message that caused it
// is not handled again.
type Supervision struct {
	kind        failureAction
	minBackoff  time.Duration
	maxBackoff  time.Duration
	maxRestarts int
}

// MinRestartBackoff is the shortest wait before a restart after a failure
// in a row.
const MinRestartBackoff = time.Millisecond

// DefaultSupervision restarts at once after a first failure, then after
// 10 ms, 20 ms, … up to 10 s while failures keep coming.
var DefaultSupervision = Restart(10*time.Millisecond, 10*time.Second)

// Restart replaces the failed behavior with a fresh one from the actor's
// factory. The first failure restarts at once; each further failure in a row
// waits twice as long as the last, from minBackoff up to maxBackoff, with the
// mail (and the ends of watched actors) kept meanwhile for the new behavior;
// the failed one's timers are cancelled at once. A failure is in a row with
// the previous one when it comes at most max(2*maxBackoff, 1s) after it, so
// that a behavior that fails again just after a restart at the cap stays at
// the cap.
//
// A minBackoff under [MinRestartBackoff] counts as MinRestartBackoff: a
// behavior that fails in Started would otherwise restart itself in a loop
// that never gives its worker up.
func Restart(minBackoff, maxBackoff time.Duration) Supervision {
	minBackoff = max(minBackoff, MinRestartBackoff)
	if maxBackoff < minBackoff {
		maxBackoff = minBackoff
	}
	return Supervision{kind: restartOnFailure, minBackoff: minBackoff, maxBackoff: maxBackoff}
}

// Resume keeps the behavior and its state and goes on with the next message.
func Resume() Supervision { return Supervision{kind: resumeOnFailure} }

// StopOnFailure stops the actor.
func StopOnFailure() Supervision { return Supervision{kind: stopOnFailure} }

// WithMaxRestarts stops the actor instead of restarting it once it has
// failed more than n times in a row (0: no limit).
func (s Supervision) WithMaxRestarts(n int) Supervision {
	s.maxRestarts = n
	return s
}

// backoff is how long to wait before the restart after the n-th failure in a row.
func (s Supervision) backoff(n int) time.Duration {
	if n <= 1 {
		return 0
	}
	d := s.minBackoff
	for i := 2; i < n && d < s.maxBackoff; i++ {
		d *= 2
	}
	return min(d, s.maxBackoff)
}

// resetAfter is how long without a failure makes the next failure a first one.
func (s Supervision) resetAfter() time.Duration {
	return max(2*s.maxBackoff, time.Second)
}
