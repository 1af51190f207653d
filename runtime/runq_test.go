package runtime

import (
	goruntime "runtime"
	"sync"
	"testing"
)

type runInt int

func (runInt) run(*worker)   {}
func (runInt) home() *worker { return nil }

// The run queue is FIFO, says when it is full or empty, and reuses its
// slots lap after lap.
func TestRunQueueOrderAndBounds(t *testing.T) {
	q := newRunQueue(4)
	for lap := range 3 {
		for i := range 4 {
			if !q.push(runInt(lap*10 + i)) {
				t.Fatalf("lap %d: push %d refused with room left", lap, i)
			}
		}
		if q.push(runInt(99)) {
			t.Fatalf("lap %d: push into a full queue accepted", lap)
		}
		if n := q.len(); n != 4 {
			t.Fatalf("lap %d: len %d, want 4", lap, n)
		}
		for i := range 4 {
			r, ok := q.pop()
			if !ok || r != runInt(lap*10+i) {
				t.Fatalf("lap %d: pop %d = %v, %v", lap, i, r, ok)
			}
		}
		if r, ok := q.pop(); ok {
			t.Fatalf("lap %d: pop from an empty queue gave %v", lap, r)
		}
	}
}

// Concurrent pushers and poppers neither lose nor duplicate a mailbox.
func TestRunQueueConcurrent(t *testing.T) {
	q := newRunQueue(64)
	const pushers, each = 4, 5000
	var wg sync.WaitGroup
	for p := range pushers {
		wg.Go(func() {
			for i := range each {
				for !q.push(runInt(p*each + i)) {
					goruntime.Gosched() // full: let a popper run, even on one processor
				}
			}
		})
	}
	seen := make([]bool, pushers*each)
	var mu sync.Mutex
	var popped sync.WaitGroup
	remaining := make(chan struct{}, pushers*each)
	for range pushers * each {
		remaining <- struct{}{}
	}
	close(remaining)
	for range 3 {
		popped.Go(func() {
			for range remaining {
				r, ok := q.pop()
				for ; !ok; r, ok = q.pop() {
					goruntime.Gosched() // empty: let a pusher run
				}
				mu.Lock()
				if seen[r.(runInt)] {
					t.Errorf("%d popped twice", r)
				}
				seen[r.(runInt)] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	popped.Wait()
	for i, ok := range seen {
		if !ok {
			t.Fatalf("%d never popped", i)
		}
	}
}
