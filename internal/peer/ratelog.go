package peer

import (
	"sync"
	"time"
)

// logLimit lets through at most max log lines per window, so that a
// misconfigured peer calling thousands of times a second (a wrong
// secret, a clock far off) does not flood the log; the first line of the
// next window says how many were left out.
type logLimit struct {
	max    int
	window time.Duration

	mu      sync.Mutex
	start   time.Time // of the current window
	n       int       // lines let through in it
	leftOut int       // lines held back since the last one let through
}

// allow reports whether a line may be logged at now, and how many lines
// were left out before it.
func (l *logLimit) allow(now time.Time) (ok bool, leftOut int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.start) >= l.window {
		l.start, l.n = now, 0
	}
	if l.n >= l.max {
		l.leftOut++
		return false, 0
	}
	l.n++
	leftOut, l.leftOut = l.leftOut, 0
	return true, leftOut
}
