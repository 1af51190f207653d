package timers

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/trellis-go/trellis/internal/testenv"
)

// TestRedisClaimSurvivesADeadMaster: with a master of a cluster killed, a
// claim still hands out the due timers of the partitions on the live
// masters, with an error naming what failed, instead of failing whole and
// leaving them leased to nobody. (The live masters serve only with
// cluster-require-full-coverage off; with Redis's default, every master
// refuses commands from the moment the dead one is flagged failed until
// its replica is promoted.)
func TestRedisClaimSurvivesADeadMaster(t *testing.T) {
	t.Parallel()
	cl := testenv.StartCluster(t, "--cluster-require-full-coverage", "no")
	client := cl.Client(t)
	// No key cleanup: the cluster is the test's own, and one of its
	// masters will be dead.
	store := NewRedisStore(client, newTestPrefix())
	s := newScheduler(t, store, newRecorder(nil), Config{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	victim, err := client.MasterForKey(ctx, store.parts[0].keys[0])
	if err != nil {
		t.Fatal(err)
	}
	const n = 64
	onLive := 0
	for i := range n {
		name := fmt.Sprintf("t-%d", i)
		mustCreate(t, s, name, 0, testCall(`1`))
		m, err := client.MasterForKey(ctx, store.part(name).keys[0])
		if err != nil {
			t.Fatal(err)
		}
		if m.Options().Addr != victim.Options().Addr {
			onLive++
		}
	}
	if onLive == 0 || onLive == n {
		t.Fatalf("%d of %d timers on live masters; the test needs some on each side", onLive, n)
	}
	cl.Kill9(victim.Options().Addr)

	var b claimBatch
	waitFor(t, "the timers to be due", func() bool {
		b, err = store.claim(ctx, n, time.Minute)
		return len(b.timers) > 0 || err == nil
	})
	if err == nil {
		t.Errorf("claim with a dead master: no error")
	}
	if len(b.timers) != onLive {
		t.Errorf("claim with a dead master gave %d timers, want the %d of the live masters' partitions (err %v)", len(b.timers), onLive, err)
	}
}
