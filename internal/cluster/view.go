package cluster

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/trellis-go/trellis/internal/keyspace"
)

// MemberStatus is what a [View] says of a member.
type MemberStatus string

// The statuses of a member in a [View].
const (
	// MemberAlive: its key is in Redis (its lease has not expired).
	MemberAlive MemberStatus = "alive"
	// MemberLeaving: alive, and handing its shards over ([Member.Drain]).
	MemberLeaving MemberStatus = "leaving"
	// MemberLapsed: its key expired (it stopped renewing: killed, cut off
	// from Redis), but shard records still name it as their owner. It is
	// listed until the others have taken those shards, within a poll
	// (lease/3); a member that lapsed owning nothing is not listed at all.
	MemberLapsed MemberStatus = "lapsed"
)

// ShardState is what a [View] says of a shard.
type ShardState string

// The states of a shard in a [View].
const (
	// ShardServed: its owner is alive and is the preferred owner.
	ShardServed ShardState = "served"
	// ShardHandingOver: its owner is alive but will give it up (it is
	// leaving, or [Assign] prefers another member): the owner releases
	// it after its commands in flight, and the preferred member takes it.
	ShardHandingOver ShardState = "handing_over"
	// ShardOrphaned: the incarnation its record names is no longer alive;
	// the preferred member takes it at its next poll.
	ShardOrphaned ShardState = "orphaned"
	// ShardUnowned: its record names no owner (released, or never taken).
	ShardUnowned ShardState = "unowned"
)

// MemberView is one member as a [View] shows it.
type MemberView struct {
	ID   string
	Addr string // "" when lapsed
	// Incarnation is the token of this join ("" when lapsed).
	Incarnation string
	Status      MemberStatus
	// Joined is when Redis registered this incarnation (Redis's clock);
	// zero when lapsed, or when the member joined before joins recorded it.
	Joined time.Time
	// Heartbeat is when Redis accepted its last renewal (or its join), on
	// Redis's clock; zero when lapsed.
	Heartbeat time.Time
	// LeaseExpiry is when Redis expires its key unless it renews before
	// (Redis's clock); zero when lapsed.
	LeaseExpiry time.Time
	// Shards counts the shard records that name it: this incarnation for
	// a live member, any for a lapsed one.
	Shards int
}

// ShardView is one shard as a [View] shows it.
type ShardView struct {
	Shard int
	// Owner is the member id its record names; "" when unowned.
	Owner string
	// Epoch counts the shard's changes of owner (0: never owned).
	Epoch uint64
	State ShardState
	// Preferred is the member [Assign] gives the shard to among the live
	// members that are not leaving; "" when there is none.
	Preferred string
}

// View is the cluster as Redis holds it, read for an operator by
// [ReadView].
type View struct {
	// Now is Redis's clock when the members were read: heartbeats and
	// lease expiries are on that clock, so their ages need no other.
	Now time.Time
	// Members are the live members, by id, then the lapsed ones, by id.
	Members []MemberView
	// Shards are every shard, by number (NumShards of them).
	Shards []ShardView
}

// Count returns how many shards are in state.
func (v View) Count(state ShardState) int {
	n := 0
	for _, s := range v.Shards {
		if s.State == state {
			n++
		}
	}
	return n
}

// ReadView reads the cluster of the service whose keys start with prefix
// (keyspace.DefaultPrefix when ""), without writing anything: the live
// members (one script on the members' slot) and every shard record, in
// one pipeline, so one round trip on one Redis and one per master on a
// Redis Cluster.
//
// It is consistent enough for an operator, not a snapshot: the records
// are read before the members (in order on one Redis; concurrently on a
// cluster's masters), so an owner a record names either was alive then
// or has lapsed since. A member that left gracefully between the two
// reads shows as lapsed with the shards it had just released.
func ReadView(ctx context.Context, client redis.UniversalClient, prefix string) (View, error) {
	fail := func(err error) (View, error) { return View{}, fmt.Errorf("cluster: read the view: %w", err) }
	if prefix == "" {
		prefix = keyspace.DefaultPrefix
	}
	space, err := keyspace.New(prefix)
	if err != nil {
		return fail(err)
	}
	k := keys{space}
	pipe := client.Pipeline()
	records := queueRecords(ctx, pipe, k)
	members := viewScript.Eval(ctx, pipe, []string{k.index()}, k.memberPrefix())
	if _, err := pipe.Exec(ctx); err != nil {
		return fail(err)
	}
	recs, err := records()
	if err != nil {
		return fail(err)
	}
	flat, err := members.StringSlice()
	if err != nil {
		return fail(err)
	}
	v, err := parseMembers(flat)
	if err != nil {
		return fail(err)
	}
	v.addShards(recs)
	return v, nil
}

// parseMembers reads the view script's answer: Redis's now, then seven
// values per live member (see view.lua).
func parseMembers(flat []string) (View, error) {
	const fields = 7 // id, addr, inc, beat, leaving, joined, ttl
	if len(flat) == 0 || (len(flat)-1)%fields != 0 {
		return View{}, fmt.Errorf("the members script gave %d values, want 1 and %d per member", len(flat), fields)
	}
	now, err := parseMillis(flat[0])
	if err != nil {
		return View{}, fmt.Errorf("time: %w", err)
	}
	v := View{Now: now}
	for i := 1; i < len(flat); i += fields {
		f := flat[i : i+fields]
		mv := MemberView{ID: f[0], Addr: f[1], Incarnation: f[2], Status: MemberAlive}
		if f[4] == "1" {
			mv.Status = MemberLeaving
		}
		if mv.Heartbeat, err = parseMillis(f[3]); err != nil {
			return View{}, fmt.Errorf("member %s: heartbeat: %w", f[0], err)
		}
		if mv.Joined, err = parseMillis(f[5]); err != nil {
			return View{}, fmt.Errorf("member %s: joined: %w", f[0], err)
		}
		ttl, err := strconv.ParseInt(f[6], 10, 64)
		if err != nil {
			return View{}, fmt.Errorf("member %s: time to live %q: %w", f[0], f[6], err)
		}
		mv.LeaseExpiry = now.Add(time.Duration(ttl) * time.Millisecond)
		v.Members = append(v.Members, mv)
	}
	slices.SortFunc(v.Members, func(a, b MemberView) int { return cmp.Compare(a.ID, b.ID) })
	return v, nil
}

// parseMillis reads a time in Unix milliseconds; "" is the zero time.
func parseMillis(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	ms, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is not a time in ms: %w", s, err)
	}
	return time.UnixMilli(ms), nil
}

// addShards sets the shards' states from their records and v's live
// members, counts each member's shards, and lists the owners that lapsed.
func (v *View) addShards(recs []Record) {
	live := make(map[string]*MemberView, len(v.Members))
	var candidates []string
	for i := range v.Members {
		mv := &v.Members[i]
		live[mv.ID] = mv
		if mv.Status == MemberAlive {
			candidates = append(candidates, mv.ID)
		}
	}
	preferred := Assign(candidates)
	lapsed := map[string]int{} // shards per lapsed owner id
	v.Shards = make([]ShardView, len(recs))
	for s, rec := range recs {
		sv := ShardView{Shard: s, Owner: rec.Owner, Epoch: rec.Epoch}
		if preferred != nil {
			sv.Preferred = preferred[s]
		}
		owner, alive := live[rec.Owner]
		switch {
		case rec.Free():
			sv.State, sv.Owner = ShardUnowned, ""
		case !alive || owner.Incarnation != rec.Incarnation:
			sv.State = ShardOrphaned
			if !alive {
				lapsed[rec.Owner]++
			}
		case owner.Status == MemberLeaving || sv.Preferred != rec.Owner:
			sv.State = ShardHandingOver
			owner.Shards++
		default:
			sv.State = ShardServed
			owner.Shards++
		}
		v.Shards[s] = sv
	}
	for _, id := range slices.Sorted(maps.Keys(lapsed)) {
		v.Members = append(v.Members, MemberView{ID: id, Status: MemberLapsed, Shards: lapsed[id]})
	}
}
