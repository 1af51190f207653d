package impl

import (
	"sync/atomic"
	"time"
)

// stamps hands out numbers that order events across the instances of a
// service: each is the wall clock in nanoseconds, or one more than the last
// one handed out when the clock has not moved past it. Within a process
// they always rise; across processes they follow the clocks, so two
// events on two instances are ordered as they happened when they are
// further apart than the clocks disagree (NTP keeps that to milliseconds),
// and an event never ranks below one it followed on the same instance.
type stamps struct{ last atomic.Uint64 }

// next returns a stamp higher than every one s handed out before.
func (s *stamps) next() uint64 {
	for {
		last := s.last.Load()
		n := max(last+1, uint64(time.Now().UnixNano()))
		if s.last.CompareAndSwap(last, n) {
			return n
		}
	}
}
