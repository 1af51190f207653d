package peer

import "time"

// positiveOr is v, or def when v is zero or negative: how the configs'
// sizes and durations take their defaults.
func positiveOr[T int | int64 | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}
