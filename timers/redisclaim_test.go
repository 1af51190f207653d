package timers

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// TestRedisClaimReadsRecordsAfterwards: a claim reads its timers' records
// after the claim script (readRecords). A timer deleted or replaced in
// between leaves the batch (its claim ended with it), and its successor is
// untouched; a record that does not decode is removed and named; the rest
// come whole, their calls with them.
func TestRedisClaimReadsRecordsAfterwards(t *testing.T) {
	for _, kind := range redisTargets {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			client := connect(t, kind)
			clk := clockwork.NewFakeClock()
			store := newRedisStoreOn(t, client, newTestPrefix(), clk)
			s := newScheduler(t, store, newRecorder(clk), Config{})
			names := []string{"kept", "replaced", "deleted", "corrupt"}
			created := map[string]Timer{}
			for _, name := range names {
				created[name] = mustCreate(t, s, name, 0, testCall(`"`+name+`"`), WithMaxRetries(4))
			}
			clk.Advance(time.Millisecond)
			claimed, err := store.claim(t.Context(), len(names), time.Minute)
			if err != nil || len(claimed.timers) != len(names) {
				t.Fatalf("claim: %d timers, %v; want %d", len(claimed.timers), err, len(names))
			}

			// What happens between a claim's script and its read of the
			// records.
			successor := mustCreate(t, s, "replaced", time.Hour, testCall(`"successor"`))
			if err := s.Delete(t.Context(), "deleted"); err != nil {
				t.Fatal(err)
			}
			data := store.part("corrupt").keys[1]
			if err := client.HSet(t.Context(), data, "corrupt", "not a record").Err(); err != nil {
				t.Fatal(err)
			}

			b := claimBatch{}
			for i, tm := range claimed.timers {
				b.timers = append(b.timers, Timer{Name: tm.Name, Generation: tm.Generation, DueAt: tm.DueAt, Attempts: tm.Attempts})
				b.leaseExpired = append(b.leaseExpired, claimed.leaseExpired[i])
			}
			if err := store.readRecords(t.Context(), &b); err != nil {
				t.Fatal(err)
			}
			if len(b.timers) != 1 || b.timers[0].Name != "kept" || len(b.calls) != 1 || len(b.leaseExpired) != 1 {
				t.Fatalf("batch %+v with %d calls, want only kept", b.timers, len(b.calls))
			}
			got, want := b.timers[0], created["kept"]
			if !got.CreatedAt.Equal(want.CreatedAt) || got.MaxRetries != 4 || got.Attempts != 1 || got.Generation != want.Generation {
				t.Errorf("kept as read: %+v, want created %v, 4 retries, attempt 1 of generation %d", got, want.CreatedAt, want.Generation)
			}
			if _, call, _, err := decodeStored(b.calls[0]); err != nil || string(call.Argument) != `"kept"` {
				t.Errorf("kept's call %+v, %v", call, err)
			}
			if !slices.Equal(b.corrupt, []string{"corrupt"}) {
				t.Errorf("corrupt = %v, want [corrupt]", b.corrupt)
			}
			if _, err := s.Get(t.Context(), "corrupt"); !errors.Is(err, ErrNotFound) {
				t.Errorf("Get(corrupt) after the claim: %v, want ErrNotFound", err)
			}
			if tm, err := s.Get(t.Context(), "replaced"); err != nil || tm.Generation != successor.Generation {
				t.Errorf("Get(replaced) = %+v, %v; want its successor, generation %d", tm, err, successor.Generation)
			}
		})
	}
}
