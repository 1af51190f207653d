package timers

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// movingClock is a fake clock that, once told to (moveAfter), moves by
// jump right after its nth reading (Now or Since) from then on: a test's
// Advance from another goroutine landing between two steps of the loop.
type movingClock struct {
	*clockwork.FakeClock

	mu   sync.Mutex
	left int // readings left before the move; 0 when none is due
	jump time.Duration
	done bool
}

func (c *movingClock) moveAfter(n int, jump time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.left, c.jump = n, jump
}

func (c *movingClock) moved() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.done
}

// read counts one reading, and moves the clock after the nth.
func (c *movingClock) read() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.left == 0 {
		return
	}
	if c.left--; c.left == 0 {
		c.FakeClock.Advance(c.jump)
		c.done = true
	}
}

func (c *movingClock) Now() time.Time {
	defer c.read()
	return c.FakeClock.Now()
}

func (c *movingClock) Since(t time.Time) time.Duration {
	defer c.read()
	return c.FakeClock.Since(t)
}

// clockedStore is a store whose scheduler reads clk.
type clockedStore struct {
	Store
	clk clockwork.Clock
}

func (s *clockedStore) clock() clockwork.Clock { return s.clk }

// TestLoopWakesWhereverTheClockMoves: a fake clock moved past a timer's
// due time at any step of the loop's round (between its claim and its
// sleep, say) has the loop run the timer without another move of the
// clock, as a test that advances the clock and then waits needs.
func TestLoopWakesWhereverTheClockMoves(t *testing.T) {
	for n := 1; n <= 8; n++ {
		t.Run(fmt.Sprintf("after reading %d", n), func(t *testing.T) {
			fake := clockwork.NewFakeClockAt(epoch)
			clk := &movingClock{FakeClock: fake}
			rec := newRecorder(fake)
			s := startScheduler(t, &clockedStore{Store: NewMemoryStore(fake), clk: clk}, rec, Config{})
			mustCreate(t, s, "due", 3*time.Second, testCall(`1`))
			quiesce(t, s)
			clk.moveAfter(n, 4*time.Second)
			for !clk.moved() {
				quiesce(t, s) // a round of the loop, reading the clock
			}
			waitFor(t, "the call of the timer the clock moved past", func() bool { return rec.len() == 1 })
		})
	}
}
