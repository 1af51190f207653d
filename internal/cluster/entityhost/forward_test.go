package entityhost_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/entities"
)

// TestForwardedStoreFaultAnsweredAtOnce: a command forwarded to an owner
// whose store fails its write comes back as soon as the owner answers,
// with what the owner knows: a write whose reply was lost as
// components.ErrOutcomeUnknown (never as "unavailable", and never run
// again elsewhere: it was applied once), a write Redis refused (LOADING)
// as components.ErrUnavailable (nothing changed). Neither waits for
// another owner, which does not come: the owner keeps its shards.
func TestForwardedStoreFaultAnsweredAtOnce(t *testing.T) {
	insts := startCluster(t, 2)
	owner, other := insts[0], insts[1]
	tests := []struct {
		name        string
		fault       int32
		want        error // the sentinel the caller gets
		notWant     error
		valueAfter1 int // the counter after the failed add of 1 and an add of 1
	}{
		{name: "reply lost", fault: faultLoseReply, want: components.ErrOutcomeUnknown, notWant: components.ErrUnavailable, valueAfter1: 2},
		{name: "store refuses", fault: faultRefuse, want: components.ErrUnavailable, notWant: components.ErrOutcomeUnknown, valueAfter1: 1},
	}
	ids := entitiesServedBy(t, owner, len(tests))
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := ids[i]
			// The entity exists: its load is done before the fault.
			if _, err := Get.Invoke(t.Context(), other.client, id, components.Done{}); err != nil {
				t.Fatal(err)
			}
			owner.fault.mode.Store(tt.fault)
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			start := time.Now()
			_, err := Add.Invoke(ctx, other.client, id, 1)
			took := time.Since(start)
			if !errors.Is(err, tt.want) || errors.Is(err, tt.notWant) || errors.Is(err, entities.ErrMoved) {
				t.Fatalf("forwarded add = %v; want %v and not %v", err, tt.want, tt.notWant)
			}
			if limit := 2 * time.Second; took > limit {
				t.Errorf("answered after %v, want within %v (the owner answered at once)", took, limit)
			}
			got, err := Add.Invoke(t.Context(), other.client, id, 1)
			if err != nil || got.Value != tt.valueAfter1 {
				t.Fatalf("add after the fault = %+v, %v; want %d (the failed add applied %d time(s))", got, err, tt.valueAfter1, tt.valueAfter1-1)
			}
		})
	}
}

// TestForwardToVanishedOwnerNamesIt: a command whose owner vanished
// (its transport gone, its lease not yet lapsed) and whose deadline ends
// before another instance takes the shard over did not run, and says
// so: unavailable because the owner could not be reached, not because
// of the store, and never of unknown outcome.
func TestForwardToVanishedOwnerNamesIt(t *testing.T) {
	insts := startCluster(t, 2)
	owner, other := insts[0], insts[1]
	id := entitiesServedBy(t, owner, 1)[0]
	if _, err := Add.Invoke(t.Context(), other.client, id, 1); err != nil {
		t.Fatal(err) // the other instance knows the owner
	}
	owner.kill(t)
	// A call written to the stream that was open when the owner vanished
	// may have reached it (outcome unknown); the stream's break is seen
	// by then, and the next call dials the owner and finds no one.
	var err error
	for range 3 {
		ctx, cancel := context.WithTimeout(t.Context(), testLease/4)
		_, err = Add.Invoke(ctx, other.client, id, 1)
		cancel()
		if !errors.Is(err, components.ErrOutcomeUnknown) {
			break
		}
	}
	if !errors.Is(err, components.ErrOwnerUnreachable) || !errors.Is(err, components.ErrUnavailable) ||
		errors.Is(err, components.ErrOutcomeUnknown) {
		t.Fatalf("add to a vanished owner = %v; want ErrOwnerUnreachable and ErrUnavailable, not outcome unknown", err)
	}
}
