package trellis

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trellis-go/trellis/delivery"
)

// An owner stores a send made again under the same id once, and answers
// it with the first one's sequence number; one that surely stored nothing
// is run again; one that may have stored is not.
func TestRememberedSends(t *testing.T) {
	errMaybe := errors.New("deadline after the hand-over")
	cases := []struct {
		name     string
		ids      []string // one send per id, in turn
		results  []error  // what the send returns on each run, in turn (nil: stored)
		runs     int      // sends run
		wantErrs []error  // what each do returns
		wantSeqs []delivery.SeqNr
	}{
		{"the same id twice: stored once", []string{"a", "a"}, nil, 1, []error{nil, nil}, []delivery.SeqNr{1, 1}},
		{"two ids: stored twice", []string{"a", "b"}, nil, 2, []error{nil, nil}, []delivery.SeqNr{1, 2}},
		{"no id: always run", []string{"", ""}, nil, 2, []error{nil, nil}, []delivery.SeqNr{1, 2}},
		{"not stored, then again: run again", []string{"a", "a"}, []error{delivery.ErrNotSent, nil}, 2, []error{delivery.ErrNotSent, nil}, []delivery.SeqNr{0, 2}},
		{"may have stored, then again: not run again", []string{"a", "a"}, []error{errMaybe}, 1, []error{errMaybe, errMaybe}, []delivery.SeqNr{0, 0}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newRememberedSends(8)
			runs := 0
			for i, id := range tc.ids {
				seq, err := r.do(t.Context(), id, func() (delivery.SeqNr, error) {
					runs++
					if runs <= len(tc.results) && tc.results[runs-1] != nil {
						return 0, tc.results[runs-1]
					}
					return delivery.SeqNr(runs), nil
				})
				if !errors.Is(err, tc.wantErrs[i]) || (tc.wantErrs[i] == nil) != (err == nil) || seq != tc.wantSeqs[i] {
					t.Fatalf("send %d (%q) = %d, %v; want %d, %v", i, id, seq, err, tc.wantSeqs[i], tc.wantErrs[i])
				}
			}
			if runs != tc.runs {
				t.Fatalf("%d sends run, want %d", runs, tc.runs)
			}
		})
	}
}

// A send made again while the first still runs waits for it, and gets
// its answer; a waiter whose context ends gets that.
func TestRememberedSendsWhileRunning(t *testing.T) {
	r := newRememberedSends(8)
	release := make(chan struct{})
	var runs atomic.Int32
	send := func() (delivery.SeqNr, error) {
		runs.Add(1)
		<-release
		return 7, nil
	}
	var wg sync.WaitGroup
	results := make(chan delivery.SeqNr, 4)
	wg.Go(func() {
		seq, _ := r.do(t.Context(), "a", send)
		results <- seq
	})
	deadline := time.Now().Add(5 * time.Second)
	for runs.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the first send did not start")
		}
		time.Sleep(time.Millisecond) // a poll, bounded by the deadline
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := r.do(ctx, "a", send); !errors.Is(err, context.Canceled) {
		t.Fatalf("a waiter whose context ended: %v, want context.Canceled", err)
	}
	for range 3 {
		wg.Go(func() {
			seq, err := r.do(t.Context(), "a", send)
			if err != nil {
				t.Errorf("a waiter: %v", err)
			}
			results <- seq
		})
	}
	close(release)
	wg.Wait()
	close(results)
	for seq := range results {
		if seq != 7 {
			t.Fatalf("answer %d, want 7", seq)
		}
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("%d sends run, want 1", n)
	}
}

// Past its limit, the oldest sends are forgotten (and run again), the
// newest remembered; memory stays at the limit.
func TestRememberedSendsForgetTheOldest(t *testing.T) {
	const limit = 4
	r := newRememberedSends(limit)
	runs := 0
	send := func() (delivery.SeqNr, error) { runs++; return delivery.SeqNr(runs), nil }
	for i := range 10 {
		if _, err := r.do(t.Context(), fmt.Sprint(i), send); err != nil {
			t.Fatal(err)
		}
	}
	if len(r.byID) != limit || len(r.order) != limit {
		t.Fatalf("remembered %d ids in %d places, want %d", len(r.byID), len(r.order), limit)
	}
	before := runs
	if seq, _ := r.do(t.Context(), "9", send); seq != 10 || runs != before {
		t.Fatalf("the newest: answer %d after %d runs, want 10 after none", seq, runs-before)
	}
	if _, _ = r.do(t.Context(), "0", send); runs != before+1 {
		t.Fatalf("the oldest was remembered")
	}
}
