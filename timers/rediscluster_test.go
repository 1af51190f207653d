package timers

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/trellis-go/trellis/internal/testkit/testenv"
)

// TestRedisClaimSurvivesADeadMaster: with a master of a cluster killed,
// claims still hand out the due timers of the partitions on the live
// masters, with an error naming what failed, instead of failing whole and
// leaving them leased to nobody. (The live masters serve only with
// cluster-require-full-coverage off; with Redis's default, every master
// refuses commands from the moment the dead one is flagged failed until
// its replica is promoted.)
func TestRedisClaimSurvivesADeadMaster(t *testing.T) {
	t.Parallel()
	cl := testenv.StartCluster(t, "--cluster-require-full-coverage", "no", "--cluster-replica-no-failover", "yes")
	// Runs after the client is closed (cleanups run last first): a pool
	// that failed to dial the dead master probes it from a goroutine that
	// sleeps a second between tries and sees the close only then.
	t.Cleanup(func() { testenv.WaitGoroutinesGone(t, "(*ConnPool).tryDial") })
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

	// Claims go on while the master is dead: each gives what the live
	// partitions it asked have, with an error naming the dead ones it
	// asked, until every live timer is claimed (the replicas may not take
	// over, so the dead partitions stay dead).
	claimed := 0
	for tries := 0; claimed < onLive; tries++ {
		if tries == 4*redisPartitions {
			t.Fatalf("%d claims with a dead master gave %d timers, want the %d of the live masters' partitions", tries, claimed, onLive)
		}
		b, err := store.claim(ctx, n, time.Minute)
		for _, tm := range b.timers {
			if m, _ := client.MasterForKey(ctx, store.part(tm.Name).keys[0]); m.Options().Addr == victim.Options().Addr {
				t.Fatalf("claimed %s of the dead master", tm.Name)
			}
		}
		claimed += len(b.timers)
		if err != nil && !strings.Contains(err.Error(), "claimDueTimers") {
			t.Fatalf("claim with a dead master: %v", err)
		}
	}
	if claimed != onLive {
		t.Errorf("claims with a dead master gave %d timers, want the %d of the live masters' partitions", claimed, onLive)
	}
	if _, err := store.claim(ctx, n, time.Minute); err == nil {
		t.Errorf("claim with a dead master: no error")
	}
}
