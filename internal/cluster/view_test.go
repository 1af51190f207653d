package cluster

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/trellis-go/trellis/internal/testkit/testenv"
)

// TestReadView, on one Redis and on a Redis Cluster: an empty cluster has
// every shard unowned; then with members a, b and c owning a few shards,
// b leaving and c crashed (it stops renewing), the view shows each
// member's status, address, join, heartbeat and lease expiry on Redis's
// clock, each shard's owner, epoch, state and preferred owner, and c as
// lapsed while a record still names it; once c joins again, its old
// shard stays orphaned under its id.
func TestReadView(t *testing.T) {
	for _, target := range testenv.RedisTargets {
		t.Run(target.Name, func(t *testing.T) {
			client := target.Connect(t)
			prefix := testPrefix(t, client)
			v, err := ReadView(t.Context(), client, prefix)
			if err != nil {
				t.Fatal(err)
			}
			if len(v.Members) != 0 || len(v.Shards) != NumShards || v.Count(ShardUnowned) != NumShards {
				t.Fatalf("empty cluster: %d members, %d shards, %d unowned", len(v.Members), len(v.Shards), v.Count(ShardUnowned))
			}
			if age := time.Since(v.Now); age < -5*time.Second || age > 5*time.Second {
				t.Errorf("Redis's now %v is %v from this machine's", v.Now, age)
			}

			a := mustJoin(t, testConfig(client, prefix, "a"))
			cfgB := testConfig(client, prefix, "b")
			cfgB.Addr = "10.1.2.3:9000"
			b := mustJoin(t, cfgB)
			c := mustJoin(t, testConfig(client, prefix, "c"))
			// While a and c are the candidates, a owns one shard it is
			// preferred for (served) and one c is preferred for (handing
			// over); b owns one and leaves; c owns one it is preferred for, and
			// crashes.
			pref := Assign([]string{"a", "c"})
			aServed, aHanding := slices.Index(pref, "a"), slices.Index(pref, "c")
			cShard := aHanding + 1 + slices.Index(pref[aHanding+1:], "c")
			bShard := firstOther(aServed, aHanding, cShard)
			for _, own := range []struct {
				m     *Member
				shard int
			}{{a, aServed}, {a, aHanding}, {b, bShard}, {c, cShard}} {
				if _, err := own.m.Acquire(t.Context(), own.shard); err != nil {
					t.Fatal(err)
				}
			}
			if err := b.Drain(t.Context()); err != nil {
				t.Fatal(err)
			}

			v, err = ReadView(t.Context(), client, prefix)
			if err != nil {
				t.Fatal(err)
			}
			checkStates(t, v, map[int]ShardState{aServed: ShardServed, aHanding: ShardHandingOver, bShard: ShardHandingOver, cShard: ShardServed})
			checkMembers(t, v, "a=alive/2 b=leaving/1 c=alive/1")
			for _, mv := range v.Members {
				checkTimes(t, v, mv)
			}
			if got := v.Members[1].Addr; got != "10.1.2.3:9000" {
				t.Errorf("b's address %q", got)
			}
			joinedA := v.Members[0].Joined

			c.stopRenewing()
			testenv.Eventually(t, testLease+2*time.Second, "c to lapse", func() bool {
				v, err = ReadView(t.Context(), client, prefix)
				if err != nil {
					t.Fatal(err)
				}
				return len(v.Members) == 3 && v.Members[2].Status == MemberLapsed
			})
			// c is gone from the candidates: a is preferred for every shard.
			checkStates(t, v, map[int]ShardState{aServed: ShardServed, aHanding: ShardServed, bShard: ShardHandingOver, cShard: ShardOrphaned})
			checkMembers(t, v, "a=alive/2 b=leaving/1 c=lapsed/1")
			lapsed := v.Members[2]
			if !lapsed.Heartbeat.IsZero() || !lapsed.LeaseExpiry.IsZero() || lapsed.Addr != "" {
				t.Errorf("lapsed c shows a heartbeat, a lease or an address: %+v", lapsed)
			}
			if got := v.Shards[cShard].Owner; got != "c" {
				t.Errorf("the orphaned shard's owner %q, want c", got)
			}
			if a := v.Members[0]; !a.Joined.Equal(joinedA) || !a.Heartbeat.After(a.Joined) {
				t.Errorf("a joined %v, then %v; heartbeat %v: want the join kept and the heartbeat renewed since", joinedA, a.Joined, a.Heartbeat)
			}
			for s, sv := range v.Shards {
				if sv.Preferred != "a" {
					t.Fatalf("shard %d prefers %q, want a (the only candidate)", s, sv.Preferred)
				}
			}
			if got := []int{v.Count(ShardServed), v.Count(ShardHandingOver), v.Count(ShardOrphaned), v.Count(ShardUnowned)}; !slices.Equal(got, []int{2, 1, 1, NumShards - 4}) {
				t.Errorf("served, handing over, orphaned, unowned = %v", got)
			}
			if v.Shards[cShard].Epoch != 1 || v.Shards[0].Shard != 0 || v.Shards[NumShards-1].Shard != NumShards-1 {
				t.Errorf("shards misnumbered or c's epoch %d, want 1", v.Shards[cShard].Epoch)
			}

			// c joins again under its id (a new incarnation): it is alive
			// with no shard, and its old one stays orphaned under its id.
			mustJoin(t, testConfig(client, prefix, "c"))
			if v, err = ReadView(t.Context(), client, prefix); err != nil {
				t.Fatal(err)
			}
			checkMembers(t, v, "a=alive/2 b=leaving/1 c=alive/0")
			if sv := v.Shards[cShard]; sv.State != ShardOrphaned || sv.Owner != "c" {
				t.Errorf("c's old shard after c joined again: %+v, want orphaned, owner c", sv)
			}
		})
	}
}

// firstOther is the lowest shard not among taken.
func firstOther(taken ...int) int {
	for s := range NumShards {
		if !slices.Contains(taken, s) {
			return s
		}
	}
	panic("no shard left")
}

// checkStates checks the state of the shards want names, and that every
// other shard is unowned.
func checkStates(t *testing.T, v View, want map[int]ShardState) {
	t.Helper()
	for s, sv := range v.Shards {
		w, ok := want[s]
		if !ok {
			w = ShardUnowned
		}
		if sv.State != w {
			t.Errorf("shard %d (owner %q, preferred %q) is %s, want %s", s, sv.Owner, sv.Preferred, sv.State, w)
		}
	}
}

// checkMembers checks the members' ids, statuses and shard counts, as
// "id=status/shards ...", in the view's order.
func checkMembers(t *testing.T, v View, want string) {
	t.Helper()
	got := ""
	for i, mv := range v.Members {
		if i > 0 {
			got += " "
		}
		got += mv.ID + "=" + string(mv.Status) + "/" + strconv.Itoa(mv.Shards)
	}
	if got != want {
		t.Errorf("members %q, want %q", got, want)
	}
}

// checkTimes checks a live member's times against Redis's now: joined, then
// a heartbeat at most one lease ago, and a lease that ends within one
// lease from now.
func checkTimes(t *testing.T, v View, mv MemberView) {
	t.Helper()
	switch {
	case mv.Joined.IsZero() || mv.Joined.After(mv.Heartbeat):
		t.Errorf("%s: joined %v, heartbeat %v", mv.ID, mv.Joined, mv.Heartbeat)
	case mv.Heartbeat.After(v.Now) || v.Now.Sub(mv.Heartbeat) > testLease:
		t.Errorf("%s: heartbeat %v, Redis's now %v", mv.ID, mv.Heartbeat, v.Now)
	case !mv.LeaseExpiry.After(v.Now) || mv.LeaseExpiry.Sub(v.Now) > testLease:
		t.Errorf("%s: lease expires %v, Redis's now %v", mv.ID, mv.LeaseExpiry, v.Now)
	}
}
