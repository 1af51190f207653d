// Package ratelog bounds how many lines of one kind a log gets: a fault
// that repeats thousands of times a second (a peer with a wrong secret,
// an owner whose store lost every answer) is logged a few times a second,
// each line saying how many were left out before it.
package ratelog

import (
	"sync"
	"time"
)

// Limit lets through at most Max log lines per Window; the first line of
// the next window says how many were left out. Its zero value lets
// nothing through; it is safe for concurrent use.
type Limit struct {
	Max    int
	Window time.Duration

	mu      sync.Mutex
	start   time.Time // of the current window
	n       int       // lines let through in it
	leftOut int       // lines held back since the last one let through
}

// Allow reports whether a line may be logged at now, and how many lines
// were left out before it.
func (l *Limit) Allow(now time.Time) (ok bool, leftOut int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.start) >= l.Window {
		l.start, l.n = now, 0
	}
	if l.n >= l.Max {
		l.leftOut++
		return false, 0
	}
	l.n++
	leftOut, l.leftOut = l.leftOut, 0
	return true, leftOut
}
