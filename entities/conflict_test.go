package entities_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
)

// waitLimit bounds every wait in these tests; nothing waits on a bare sleep.
const waitLimit = 5 * time.Second

// conflictStore is a MemoryStore whose next writes conflict, as if another
// instance had written first.
type conflictStore struct {
	*entities.MemoryStore
	conflicts atomic.Int32 // how many of the next saves conflict
	saves     atomic.Int32 // saves tried, conflicting or not
}

func (s *conflictStore) Save(ctx context.Context, typ, id string, data []byte, expected uint64) (uint64, error) {
	s.saves.Add(1)
	if s.conflicts.Add(-1) >= 0 {
		return 0, fmt.Errorf("injected: another instance wrote first: %w", entities.ErrConflict)
	}
	return s.MemoryStore.Save(ctx, typ, id, data, expected)
}

// TestConflictPauseOnEntityClock pins that the pause before a retry after
// write conflicts runs on the entity's clock, not on real time: under a
// fake clock the command waits until the clock has moved (by at most
// MaxJitter), and a caller that gives up ends the wait, leaving the entity
// free for the next command and the store unwritten.
func TestConflictPauseOnEntityClock(t *testing.T) {
	tests := []struct {
		name   string // the case
		cancel bool   // give up during the pause (else: advance the clock by MaxJitter)
	}{
		{name: "clock advanced", cancel: false},
		{name: "caller gives up", cancel: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			store := &conflictStore{MemoryStore: entities.NewMemoryStore()}
			// Never passivated: the pause is the only timer on the clock.
			n := startNode(t, store, func(h *entities.Host) { h.PassivateAfter = -1 })
			// The first conflict retries at once, the second after a pause.
			store.conflicts.Store(2)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			type result struct {
				acct Acct
				err  error
			}
			replied := make(chan result, 1)
			go func() {
				a, err := Deposit.Invoke(ctx, n.client, "p", 3)
				replied <- result{a, err}
			}()

			bctx, bcancel := context.WithTimeout(context.Background(), waitLimit)
			defer bcancel()
			if err := n.clock.BlockUntilContext(bctx, 1); err != nil {
				t.Fatalf("the command did not pause on the entity's clock: %v", err)
			}
			select {
			case res := <-replied:
				t.Fatalf("the command ended while its clock stood still: %+v", res)
			default:
			}

			want := 3
			if tc.cancel {
				cancel()
				want = 0
				if res := testenv.Recv(t, replied, waitLimit); !errors.Is(res.err, context.Canceled) {
					t.Fatalf("Invoke = %+v, want an error wrapping context.Canceled", res)
				}
			} else {
				n.clock.Advance(entities.MaxJitter)
				if res := testenv.Recv(t, replied, waitLimit); res.err != nil || res.acct.Balance != 3 {
					t.Fatalf("Invoke = %+v, want balance 3 and no error", res)
				}
			}
			// Bounded: an entity still in its pause would never answer.
			bal, err := Balance.Invoke(bctx, n.client, "p", done)
			if err != nil || bal.Balance != want {
				t.Fatalf("balance = %+v, %v; want %d", bal, err, want)
			}
			if got, wantSaves := store.saves.Load(), int32(3); !tc.cancel && got != wantSaves {
				t.Fatalf("saves = %d, want %d (two conflicts, then the write)", got, wantSaves)
			}
		})
	}
}
