package entities_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/internal/cluster"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
)

// batchMemory is a fencedMemory that writes batches (entities.BatchStore):
// each write, batch or not, waits for a step from the test while steps is
// set, and tells entered first; a batch can be made to fail once.
type batchMemory struct {
	*fencedMemory
	steps   chan struct{} // nil: writes go at once
	entered chan struct{}

	mu       sync.Mutex
	batches  []int // each batch's number of updates
	batchErr error // the next batch's failure
}

func newBatchMemory(f cluster.Fence) *batchMemory {
	return &batchMemory{fencedMemory: newFencedMemory(f), entered: make(chan struct{}, 64)}
}

// step lets one waiting write go.
func (s *batchMemory) step(t *testing.T) {
	t.Helper()
	select {
	case s.steps <- struct{}{}:
	case <-time.After(5 * time.Second):
		t.Fatal("no write waited for its step")
	}
}

// openAll lets every write go, now and from now on.
func (s *batchMemory) openAll() { close(s.steps) }

// failNextBatch makes the next batch fail with err.
func (s *batchMemory) failNextBatch(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.batchErr = err
}

// waitEntered waits until a write waits for its step.
func (s *batchMemory) waitEntered(t *testing.T) {
	t.Helper()
	select {
	case <-s.entered:
	case <-time.After(5 * time.Second):
		t.Fatal("no write began")
	}
}

func (s *batchMemory) gate() {
	if s.steps != nil {
		s.entered <- struct{}{}
		<-s.steps
	}
}

func (s *batchMemory) SaveFenced(ctx context.Context, f cluster.Fence, typ, id string, data []byte, expected uint64) (uint64, error) {
	s.gate()
	return s.fencedMemory.SaveFenced(ctx, f, typ, id, data, expected)
}

func (s *batchMemory) SaveFencedBatch(ctx context.Context, f cluster.Fence, typ, id string, updates []entities.Update, expected uint64) ([]uint64, error) {
	s.gate()
	s.mu.Lock()
	s.batches = append(s.batches, len(updates))
	err := s.batchErr
	s.batchErr = nil
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if f != *s.current.Load() {
		return nil, fmt.Errorf("save: %w", entities.ErrFenced)
	}
	revs := make([]uint64, len(updates))
	for i, u := range updates {
		rev, err := s.Save(ctx, typ, id, u.Data, expected)
		if err != nil {
			return nil, err // the tests' batches never fail half-way
		}
		revs[i], expected = rev, rev
	}
	return revs, nil
}

// queueBehindWrite starts a node serving entity a (balance 5), holds a
// deposit of 1 in its write, and sends the commands of send one after the
// other, each once the one before was admitted: they queue behind it in
// that order. It returns the node, whether command i (0 the held deposit)
// has been answered, and a wait for every reply.
func queueBehindWrite(t *testing.T, s *batchMemory, send ...command) (*node, func(i int) bool, func() []result) {
	t.Helper()
	c := &fakeCluster{fence: fence1, serving: true, routes: []string{""}}
	n := startNode(t, s, func(h *entities.Host) { h.Cluster = c })
	if _, err := Deposit.Invoke(t.Context(), n.client, "a", 5); err != nil {
		t.Fatal(err)
	}
	s.steps = make(chan struct{})
	results := make([]chan result, len(send)+1)
	run := func(i int, f func() (any, error)) {
		results[i] = make(chan result, 1)
		go func() {
			v, err := f()
			results[i] <- result{v, err}
		}()
	}
	run(0, func() (any, error) { return Deposit.Invoke(context.Background(), n.client, "a", 1) })
	s.waitEntered(t)
	for i, f := range send {
		run(i+1, func() (any, error) { return f(n) })
		testenv.Eventually(t, 5*time.Second, "the command to be admitted", func() bool {
			c.mu.Lock()
			defer c.mu.Unlock()
			return c.admitted == i+2
		})
	}
	answered := func(i int) bool { return len(results[i]) > 0 }
	return n, answered, func() []result {
		out := make([]result, len(results))
		for i, ch := range results {
			select {
			case out[i] = <-ch:
			case <-time.After(5 * time.Second):
				t.Fatalf("no reply to command %d", i)
			}
		}
		return out
	}
}

type result struct {
	v   any
	err error
}

// command sends a command to entity a of n.
type command = func(n *node) (any, error)

func deposit1(n *node) (any, error) { return Deposit.Invoke(context.Background(), n.client, "a", 1) }
func balanceOf(n *node) (any, error) {
	return Balance.Invoke(context.Background(), n.client, "a", done)
}

// TestBatchQueuedCommandsOneWrite: commands that queued behind a write run
// together, each on the state the ones before it left, with one write for
// all; their replies are the states they made.
func TestBatchQueuedCommandsOneWrite(t *testing.T) {
	s := newBatchMemory(fence1)
	n, _, wait := queueBehindWrite(t, s, slices.Repeat([]command{deposit1}, 10)...)
	s.step(t) // the held deposit
	s.waitEntered(t)
	s.step(t) // the batch
	var got []int
	for i, r := range wait() {
		if r.err != nil {
			t.Fatalf("command %d: %v", i, r.err)
		}
		got = append(got, r.v.(Acct).Balance)
	}
	if want := []int{6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}; !slices.Equal(got, want) {
		t.Fatalf("replies %v, want %v", got, want)
	}
	s.mu.Lock()
	batches := slices.Clone(s.batches)
	s.mu.Unlock()
	if !slices.Equal(batches, []int{10}) {
		t.Fatalf("batches %v, want one of 10", batches)
	}
	if b := n.balance(t, "a"); b != 16 {
		t.Fatalf("balance %d, want 16", b)
	}
	if overlap.Load() {
		t.Fatal("two handlers of one entity ran at once")
	}
}

// TestBatchReplyWaitsForWrite: a read queued after an update is answered
// only once the update is written, and with it.
func TestBatchReplyWaitsForWrite(t *testing.T) {
	s := newBatchMemory(fence1)
	_, answered, wait := queueBehindWrite(t, s, deposit1, balanceOf)
	s.step(t)
	s.waitEntered(t) // the batch is being written
	if answered(1) || answered(2) {
		t.Fatal("a command of the batch was answered before its write")
	}
	s.step(t)
	r := wait()
	if r[2].err != nil || r[2].v.(Acct).Balance != 7 {
		t.Fatalf("balance read after the deposit = %+v, want 7", r[2])
	}
}

// TestBatchFailures: a batch whose write conflicts runs its commands again
// one at a time from the stored state; one the fence refuses drops the
// state and each command goes again through routing; either way every
// command ends with its effect, once.
func TestBatchFailures(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"conflict", fmt.Errorf("save: %w", entities.ErrConflict)},
		{"fenced", fmt.Errorf("save: %w", entities.ErrFenced)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newBatchMemory(fence1)
			n, _, wait := queueBehindWrite(t, s, slices.Repeat([]command{deposit1}, 3)...)
			s.failNextBatch(tc.err)
			loads := s.loads.Load()
			s.openAll()
			for _, r := range wait() {
				if r.err != nil {
					t.Fatal(r.err)
				}
			}
			s.mu.Lock()
			first := s.batches[0]
			s.mu.Unlock()
			if first != 3 || s.loads.Load() == loads {
				t.Fatalf("first batch of %d, %d loads after it; want the 3 queued deposits, and the state loaded again",
					first, s.loads.Load()-loads)
			}
			if b := n.balance(t, "a"); b != 9 {
				t.Fatalf("balance %d, want 9: each deposit once", b)
			}
		})
	}
}

// TestBatchUnknownWriteReadsAnswered: when a batch's write gets no
// answer, its writes are of unknown outcome, and a read batched behind
// them, which changed nothing, is answered truthfully (from the state as
// it was before the batch, which none of its writes is known to have
// changed), not with the write's "may have applied the change".
func TestBatchUnknownWriteReadsAnswered(t *testing.T) {
	s := newBatchMemory(fence1)
	_, _, wait := queueBehindWrite(t, s, deposit1, balanceOf)
	s.failNextBatch(fmt.Errorf("save: %w", components.ErrOutcomeUnknown))
	s.openAll()
	r := wait()
	if r[0].err != nil {
		t.Fatalf("the held deposit: %v", r[0].err)
	}
	if !errors.Is(r[1].err, components.ErrOutcomeUnknown) {
		t.Fatalf("the batched deposit = %+v, want outcome unknown", r[1])
	}
	if r[2].err != nil || r[2].v.(Acct).Balance != 6 {
		t.Fatalf("the batched read = %+v, want 6 (the balance before the batch)", r[2])
	}
}

// TestBatchEndsAtDelete: a delete in a batch writes what came before it,
// then runs alone; the commands after it run on the deleted entity.
func TestBatchEndsAtDelete(t *testing.T) {
	s := newBatchMemory(fence1)
	closeA := func(n *node) (any, error) { return Close.Invoke(context.Background(), n.client, "a", done) }
	n, _, wait := queueBehindWrite(t, s, []command{deposit1, closeA, deposit1}...)
	s.step(t)
	s.waitEntered(t) // the deposit's batch, before the close
	s.openAll()
	r := wait()
	if r[2].err != nil || r[2].v.(int) != 7 {
		t.Fatalf("close = %+v, want the balance 7", r[2])
	}
	if r[3].err != nil || r[3].v.(Acct).Balance != 1 {
		t.Fatalf("deposit after the close = %+v, want a new account of 1", r[3])
	}
	if b := n.balance(t, "a"); b != 1 {
		t.Fatalf("balance %d, want 1", b)
	}
}
