package cluster

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/trellis-go/trellis/internal/testkit/testenv"
)

// TestReplaceSameAddr: a member replaces only the members at its own
// address that have stopped renewing, never itself, never a member at
// another address, never one that renews; and a member whose own key is
// gone replaces no one.
func TestReplaceSameAddr(t *testing.T) {
	const here, there = "127.0.0.1:7000", "10.1.2.3:7000"
	tests := []struct {
		name      string
		otherAddr string
		crashed   bool          // the other stopped renewing (Abandon)
		stale     time.Duration // replace's threshold
		replaced  bool
		waits     bool // a wait until the other becomes stale is returned
	}{
		{"same address, stopped renewing", here, true, 0, true, false},
		{"same address, renewing", here, false, time.Hour, false, true},
		{"same address, stopped renewing, not yet stale", here, true, time.Hour, false, true},
		{"another address, stopped renewing", there, true, 0, false, false},
	}
	for _, target := range testenv.RedisTargets {
		for _, tt := range tests {
			t.Run(target.Name+"/"+tt.name, func(t *testing.T) {
				client := target.Connect(t)
				prefix := testPrefix(t, client)
				cfgOld := testConfig(client, prefix, "old")
				cfgOld.Addr = tt.otherAddr
				old := mustJoin(t, cfgOld)
				if tt.crashed {
					old.Abandon()
				}
				m := mustJoin(t, testConfig(client, prefix, "new"))
				wait, ids, err := m.replace(t.Context(), tt.stale)
				if err != nil {
					t.Fatal(err)
				}
				if got := slices.Equal(ids, []string{"old"}); got != tt.replaced {
					t.Errorf("replaced %v, want old replaced: %v", ids, tt.replaced)
				}
				if (wait >= 0) != tt.waits {
					t.Errorf("wait %v, want one: %v", wait, tt.waits)
				}
				alive, err := m.alive(t.Context(), "old", old.Incarnation())
				if err != nil {
					t.Fatal(err)
				}
				if alive == tt.replaced {
					t.Errorf("old alive %v after replaced %v", alive, ids)
				}
				if ok, err := m.alive(t.Context(), "new", m.Incarnation()); err != nil || !ok {
					t.Errorf("the member replaced itself: alive %v, %v", ok, err)
				}
			})
		}
	}
	t.Run("a dead member replaces no one", func(t *testing.T) {
		client := testenv.RedisTargets[0].Connect(t)
		prefix := testPrefix(t, client)
		old := mustJoin(t, testConfig(client, prefix, "old"))
		old.Abandon()
		m := mustJoin(t, testConfig(client, prefix, "new"))
		if err := m.Leave(t.Context()); err != nil {
			t.Fatal(err)
		}
		if wait, ids, err := m.replace(t.Context(), 0); err != nil || len(ids) > 0 || wait >= 0 {
			t.Errorf("replace after leaving = %v, %v, %v; want nothing", wait, ids, err)
		}
	})
}

// TestRestartTakesItsShardsAtOnce: an instance that owns a shard crashes
// (no goodbye) and a new incarnation joins at the same address with
// ReplaceSameAddr: it owns the shard within staleAfter of the crash and a
// rebalancing poll, well before the old lease would have lapsed; without
// ReplaceSameAddr, it cannot take it until then.
func TestRestartTakesItsShardsAtOnce(t *testing.T) {
	testenv.Long(t)
	const lease = 6 * time.Second
	client := testenv.RedisTargets[0].Connect(t)
	tests := []struct {
		name    string
		replace bool
	}{
		{"replacing", true},
		{"not replacing", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prefix := testPrefix(t, client)
			cfgOld := testConfig(client, prefix, "old")
			cfgOld.Lease = lease
			old := mustJoin(t, cfgOld)
			if _, err := old.Acquire(t.Context(), 7); err != nil {
				t.Fatal(err)
			}
			old.Abandon()
			crashed := time.Now()

			cfgNew := testConfig(client, prefix, "new")
			cfgNew.Lease, cfgNew.ReplaceSameAddr = lease, tt.replace
			m := mustJoin(t, cfgNew)
			// The bound: the old lease lapses 4 to 6 s after the crash (its
			// last renewal was 0 to 2 s before); replacing takes 3 s
			// (staleAfter) after that renewal.
			bound := lease * 2 / 3
			var took time.Duration
			for deadline := crashed.Add(bound); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
				_, err := m.Acquire(t.Context(), 7)
				if err == nil {
					took = time.Since(crashed)
					break
				}
				if !errors.Is(err, ErrOwned) {
					t.Fatal(err)
				}
			}
			switch {
			case tt.replace && took == 0:
				t.Fatalf("the new incarnation did not take the shard within %v of the crash", bound)
			case !tt.replace && took != 0:
				t.Fatalf("without replacing, the shard was taken %v after the crash, before the lease lapsed", took)
			}
			if took > 0 {
				t.Logf("taken %v after the crash", took)
			}
		})
	}
}
