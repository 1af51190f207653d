package entityhost_test

import (
	"context"
	"testing"
	"time"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/internal/cluster"
	"github.com/trellis-go/trellis/internal/keyspace"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
)

// TestForwardWaitsOutAMove: while a shard moves, an instance's record of
// it and its serving disagree for a moment: an owner that stopped serving
// the shard has not yet freed its record (a release), or an instance the
// record names does not serve the shard yet (an acquisition). A command
// forwarded there meanwhile, by a table that read the record, waits for
// the move to end and then is served, rather than being turned away to a
// table that names the same instance again until its caller gives up.
// The test holds each moment open by holding the record's write.
func TestForwardWaitsOutAMove(t *testing.T) {
	for _, tc := range []struct {
		name    string
		acquire bool // hold the acquisition (after its write), else the release (before it)
	}{
		{"release", false},
		{"acquisition", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			insts := startCluster(t, 3)
			leaver := insts[0]
			id := entityServedBy(t, leaver)
			shard := cluster.ShardOf("counter", id)
			for _, via := range insts[1:] { // their tables name the leaver
				if _, err := Add.Invoke(t.Context(), via.client, id, 1); err != nil {
					t.Fatal(err)
				}
			}
			holders := insts[:1]
			if tc.acquire {
				holders = insts[1:]
			}
			for _, h := range holders {
				h.hold.arm(h.prefix, shard, tc.acquire)
			}
			left := make(chan error, 1)
			go func() { left <- leaver.host.Rebalancer().Leave(context.Background()) }()
			held := awaitHeld(t, holders, shard)
			defer func() {
				for _, h := range holders {
					h.hold.release()
				}
				if err := <-left; err != nil {
					t.Errorf("leave: %v", err)
				}
			}()

			caller := insts[1]
			if caller == held {
				caller = insts[2]
			}
			ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
			defer cancel()
			done := make(chan error, 1)
			go func() {
				_, err := Add.Invoke(ctx, caller.client, id, 1)
				done <- err
			}()
			testenv.Eventually(t, 10*time.Second, "the forwarded command waiting on "+held.id, func() bool {
				select {
				case err := <-done:
					t.Fatalf("the command ended while the move was held: %v", err)
				default:
				}
				return held.waits.Load() > 0
			})
			for _, h := range holders {
				h.hold.release()
			}
			if err := <-done; err != nil {
				t.Fatalf("the command after the move: %v", err)
			}
			got, err := Get.Invoke(t.Context(), caller.client, id, components.Done{})
			if err != nil || got.Value != 3 {
				t.Fatalf("counter after the move = %+v, %v; want 3", got, err)
			}
		})
	}
}

// awaitHeld waits until one of holders holds its call on shard's record,
// and returns the one the record names once held: the releasing owner, or
// the instance whose acquisition was written.
func awaitHeld(t *testing.T, holders []*instance, shard int) *instance {
	t.Helper()
	reached := make(chan struct{}, len(holders))
	for _, h := range holders {
		go func() {
			select {
			case <-h.hold.reached:
				reached <- struct{}{}
			case <-t.Context().Done():
			}
		}()
	}
	select {
	case <-reached:
	case <-time.After(20 * time.Second):
		t.Fatal("no move of the shard began")
	}
	if len(holders) == 1 {
		return holders[0]
	}
	key := cluster.ShardRecordKey(keyspace.Must(holders[0].prefix), shard)
	owner, err := redisClient(t, testenv.RedisURL(t)).HGet(t.Context(), key, "owner").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range holders {
		if h.id == owner {
			return h
		}
	}
	t.Fatalf("the shard's record names %q, none of the holders", owner)
	return nil
}
