package timers

import (
	"context"
	"fmt"
	"hash/crc32"
	"slices"

	"github.com/redis/go-redis/v9"

	"github.com/trellis-go/trellis/internal/keyspace"
)

// redisPartitions is how many partitions a Redis store splits its timers
// into. Each partition's keys share a hash tag, so its scripts stay atomic
// on a Redis Cluster, and the tags spread the partitions evenly over the
// cluster's slots (keyspace.SpreadTags): 16 partitions put 5 or 6 on each
// of 3 masters. It is part of the key layout: every instance on a store
// must agree on it, so it is not configurable.
const redisPartitions = 16

// partitionTags are the partitions' hash tags, the same in every process.
var partitionTags = keyspace.SpreadTags("t", redisPartitions)

// partition is one partition's keys, all in one slot.
type partition struct {
	// keys are what every script gets first: KEYS[1] the due sorted set,
	// KEYS[2] the data hash, KEYS[3] the failing set, KEYS[4] the state
	// hash.
	keys []string
	// withDead is keys and then KEYS[5] the dead-letter hash, KEYS[6] the
	// dead letters' sorted set by time of death: what the scripts that
	// settle, count or prune get.
	withDead []string
	// settle is withDead and then KEYS[7] the generation counter: what the
	// scripts that settle calls get.
	settle []string
	// dead and deadAt are the dead-letter hash and sorted set.
	dead, deadAt string
	// gen is the partition's generation counter and marker its wipe marker.
	gen, marker string
}

func newPartitions(keys keyspace.Space) []partition {
	ps := make([]partition, redisPartitions)
	for i, tag := range partitionTags {
		k := func(name string) string { return keys.Tagged("timers", tag, name) }
		keys := []string{k("due"), k("data"), k("failing"), k("state")}
		ps[i] = partition{keys: keys, dead: k("dead"), deadAt: k("deadat"), gen: k("generation"), marker: k("marker")}
		ps[i].withDead = append(slices.Clip(keys), ps[i].dead, ps[i].deadAt)
		ps[i].settle = append(slices.Clip(ps[i].withDead), ps[i].gen)
	}
	return ps
}

// partitionOf is the partition a timer name lives in, for good: a name is
// in one partition only, which is what keeps names unique service-wide
// and a replace atomic.
func partitionOf(name string) int {
	return int(crc32.ChecksumIEEE([]byte(name)) % redisPartitions)
}

// scriptCall is one run of a script: on one partition's keys, with args.
type scriptCall struct {
	keys []string
	args []any
}

// evalEach runs script once per call in one pipeline: on one Redis that is
// one round trip; on a cluster go-redis sends each master its share at the
// same time. Calls that find the script missing from a server's cache (a
// new server, or a replica just promoted) are sent again with the script's
// source. It returns one command per call, in order; an error is the first
// call's that failed, naming it.
func evalEach(ctx context.Context, client redis.UniversalClient, script *redis.Script, calls []scriptCall) ([]*redis.Cmd, error) {
	if len(calls) == 0 {
		return nil, nil
	}
	cmds := make([]*redis.Cmd, len(calls))
	send := func(which []int, eval bool) error {
		pipe := client.Pipeline()
		for _, i := range which {
			if eval {
				cmds[i] = script.Eval(ctx, pipe, calls[i].keys, calls[i].args...)
			} else {
				cmds[i] = script.EvalSha(ctx, pipe, calls[i].keys, calls[i].args...)
			}
		}
		_, err := pipe.Exec(ctx)
		return err
	}
	all := make([]int, len(calls))
	for i := range all {
		all[i] = i
	}
	if err := send(all, false); err != nil {
		var missing []int
		for i, c := range cmds {
			if redis.HasErrorPrefix(c.Err(), "NOSCRIPT") {
				missing = append(missing, i)
			}
		}
		if len(missing) > 0 {
			_ = send(missing, true)
		}
	}
	for i, c := range cmds {
		if err := c.Err(); err != nil {
			return cmds, fmt.Errorf("on %s: %w", calls[i].keys[0], err)
		}
	}
	return cmds, nil
}

// byPartition groups the indexes of names by partition, in order.
func byPartition(n int, name func(i int) string) map[int][]int {
	groups := make(map[int][]int)
	for i := range n {
		p := partitionOf(name(i))
		groups[p] = append(groups[p], i)
	}
	return groups
}
