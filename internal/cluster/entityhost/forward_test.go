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
