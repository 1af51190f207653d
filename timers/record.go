package timers

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// decodeRecord reads a Redis record (layout in redisscripts.go).
func decodeRecord(name, rec string) (Timer, error) {
	t, stored, err := decodeRecordHeader(name, rec)
	if err != nil {
		return Timer{}, err
	}
	if t.Recurring, t.Call, t.TraceContext, err = decodeStored(stored); err != nil {
		return Timer{}, fmt.Errorf("timer %q: stored call: %w", name, err)
	}
	return t, nil
}

// decodeRecordHeader reads a Redis record but its call, which it returns
// in its stored form.
func decodeRecordHeader(name, rec string) (t Timer, storedCall string, err error) {
	var nums [7]int64
	rest, ok := cutInts(rec, nums[:])
	if !ok {
		return Timer{}, "", fmt.Errorf("timer %q: corrupt record header %q", name, rec[:min(len(rec), 80)])
	}
	errLen := int(nums[6])
	if errLen < 0 || errLen > len(rest) {
		return Timer{}, "", fmt.Errorf("timer %q: corrupt record: error length %d", name, errLen)
	}
	t = Timer{
		Name: name, Generation: uint64(nums[0]), CreatedAt: time.UnixMilli(nums[1]),
		MaxRetries: int(nums[2]), DueAt: time.UnixMilli(nums[3]), Attempts: int(nums[4]),
		LastError: rest[:errLen],
	}
	if nums[5] != 0 {
		t.LastAttemptAt = time.UnixMilli(nums[5])
	}
	return t, rest[errLen:], nil
}

// applyState overrides t's attempts, last attempt, due time and last error
// with its state (layout in redisscripts.go), if the state is of t's
// generation: "" (none) leaves t as its record has it.
func applyState(t *Timer, state string) error {
	if state == "" {
		return nil
	}
	s := Timer{Name: t.Name}
	if err := readState(&s, state); err != nil {
		return err
	}
	if s.Generation != t.Generation {
		return nil // a state left of an earlier generation
	}
	t.DueAt, t.Attempts, t.LastError, t.LastAttemptAt = s.DueAt, s.Attempts, s.LastError, s.LastAttemptAt
	return nil
}

// readState sets t's generation, due time, attempts, last attempt and
// last error from a state (layout in redisscripts.go).
func readState(t *Timer, state string) error {
	var nums [5]int64
	rest, ok := cutInts(state, nums[:])
	if !ok {
		return fmt.Errorf("timer %q: corrupt state %q", t.Name, state[:min(len(state), 80)])
	}
	if errLen := int(nums[4]); errLen < 0 || errLen > len(rest) {
		return fmt.Errorf("timer %q: corrupt state: error length %d", t.Name, errLen)
	}
	t.Generation, t.DueAt, t.Attempts, t.LastError = uint64(nums[0]), time.UnixMilli(nums[1]), int(nums[2]), rest[:nums[4]]
	t.LastAttemptAt = time.Time{}
	if nums[3] != 0 {
		t.LastAttemptAt = time.UnixMilli(nums[3])
	}
	return nil
}

// cutInts reads len(nums) decimal integers off the front of s, each
// followed by ':', and returns what follows them.
func cutInts(s string, nums []int64) (rest string, ok bool) {
	rest = s
	for i := range nums {
		field, after, found := strings.Cut(rest, ":")
		n, err := strconv.ParseInt(field, 10, 64)
		if !found || err != nil {
			return "", false
		}
		nums[i], rest = n, after
	}
	return rest, true
}
