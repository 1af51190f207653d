package cluster

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/trellis-go/trellis/internal/keyspace"
)

// TestShardOfIsPinned: ShardOf and the shard tags may never change once
// released (state is laid out by them): these values are pinned.
func TestShardOfIsPinned(t *testing.T) {
	for _, tc := range []struct {
		typ, id string
		want    int
	}{
		{"order", "1", 218},
		{"order", "2", 44},
		{"counter", "visits", 192},
		{"a:b", "c", 121},
		{"a", "b:c", 237},
		{"", "", 42},
	} {
		if got := ShardOf(tc.typ, tc.id); got != tc.want {
			t.Errorf("ShardOf(%q, %q) = %d, want %d", tc.typ, tc.id, got, tc.want)
		}
	}
	for _, tc := range []struct {
		shard int
		want  string
	}{{0, "s.0.3"}, {1, "s.1.336"}, {255, "s.255.118"}} {
		if got := ShardTag(tc.shard); got != tc.want {
			t.Errorf("ShardTag(%d) = %q, want %q", tc.shard, got, tc.want)
		}
	}
}

// TestShardOfIsFNVOfTheKey: ShardOf hashes its pieces in place, as hash/fnv
// hashes "<len(type)>:<type>:<id>", and allocates nothing.
func TestShardOfIsFNVOfTheKey(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	text := func() string {
		b := make([]byte, rng.IntN(40))
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		return string(b)
	}
	for range 2000 {
		typ, id := text(), text()
		h := fnv.New64a()
		_, _ = h.Write([]byte(strconv.Itoa(len(typ)) + ":" + typ + ":" + id))
		if got, want := ShardOf(typ, id), int(mix64(h.Sum64())%NumShards); got != want {
			t.Fatalf("ShardOf(%q, %q) = %d, want %d", typ, id, got, want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { ShardOf("order", "o-12345") }); n != 0 {
		t.Errorf("ShardOf allocates %v times", n)
	}
}

// TestShardTagsSpreadOverSlots: tag i is in the i-th of NumShards equal
// slot ranges, so masters with equal contiguous ranges get equal shares.
func TestShardTagsSpreadOverSlots(t *testing.T) {
	for s := range NumShards {
		lo, hi := s*keyspace.Slots/NumShards, (s+1)*keyspace.Slots/NumShards
		if slot := keyspace.Slot(keyspace.Tag(ShardTag(s))); slot < lo || slot >= hi {
			t.Errorf("shard %d: tag %q in slot %d, want [%d, %d)", s, ShardTag(s), slot, lo, hi)
		}
	}
}

// TestShardOfSpread: 100 000 ids of one type fall within ±25 % of an even
// share on every shard (390 each; one standard deviation is 5 %).
func TestShardOfSpread(t *testing.T) {
	const n = 100_000
	var count [NumShards]int
	for i := range n {
		count[ShardOf("order", strconv.Itoa(i))]++
	}
	even := n / NumShards
	for s, c := range count {
		if c < even*3/4 || c > even*5/4 {
			t.Errorf("shard %d has %d of %d ids, want %d ± 25 %%", s, c, n, even)
		}
	}
}

// TestAssign: every shard gets a member of the set, shares are even to
// one shard, and the table depends on the set alone (not its order or
// repeats).
func TestAssign(t *testing.T) {
	if got := Assign(nil); got != nil {
		t.Errorf("Assign(nil) = %v, want nil", got)
	}
	for _, n := range []int{1, 2, 3, 5, 7, 16} {
		t.Run(fmt.Sprint(n, " members"), func(t *testing.T) {
			ids := memberIDs(n)
			table := Assign(ids)
			load := map[string]int{}
			for s, id := range table {
				if !slices.Contains(ids, id) {
					t.Fatalf("shard %d goes to %q, not a member", s, id)
				}
				load[id]++
			}
			lo, hi := NumShards/n, (NumShards+n-1)/n
			for _, id := range ids {
				if load[id] < lo || load[id] > hi {
					t.Errorf("%s has %d shards, want %d to %d", id, load[id], lo, hi)
				}
			}
			shuffled := append(slices.Clone(ids), ids[0])
			slices.Reverse(shuffled)
			if !slices.Equal(Assign(shuffled), table) {
				t.Error("the table depends on the order of the members or on repeats")
			}
		})
	}
}

// TestAssignMovesFew: a join or a leave moves little more than the share
// that must move (a quarter of the shards when a 4th member joins; the
// leaver's third when one of 3 leaves).
func TestAssignMovesFew(t *testing.T) {
	ids := memberIDs(4)
	three := Assign(ids[:3])
	for _, tc := range []struct {
		name  string
		after []string
		least int // what must move
	}{
		{"a 4th member joins", ids, NumShards / 4},
		{"one of 3 leaves", ids[:2], NumShards / 3},
	} {
		after := Assign(tc.after)
		moved := 0
		for s := range NumShards {
			if three[s] != after[s] {
				moved++
			}
		}
		t.Logf("%s: %d of %d shards move (about %d must)", tc.name, moved, NumShards, tc.least)
		if moved > tc.least*5/4 {
			t.Errorf("%s: %d shards move, want at most %d", tc.name, moved, tc.least*5/4)
		}
	}
}

// memberIDs returns n fixed uuid-like ids.
func memberIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%08x-0000-4000-8000-%012d", i*2654435761, i)
	}
	return ids
}
