package redisqueue_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.uber.org/goleak"

	"github.com/trellis-go/trellis/delivery/durable"
	"github.com/trellis-go/trellis/delivery/internal/testkit/queuetest"
	"github.com/trellis-go/trellis/delivery/redisqueue"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(testenv.Servers(m)) }

// TestContract runs the durable queue contract against one Redis and a
// Redis Cluster, each subtest under a prefix of its own.
func TestContract(t *testing.T) {
	for _, target := range testenv.RedisTargets {
		t.Run(target.Name, func(t *testing.T) {
			client := target.Connect(t)
			queuetest.Run(t, func(t *testing.T) (durable.Queue[queuetest.Payload], func() durable.Queue[queuetest.Payload]) {
				prefix := "trellis-test:" + t.Name() + ":" + uuid.NewString()
				// A reopened queue is a restarted controller's: the old
				// one gave the lease up as it stopped.
				var last *redisqueue.Queue[queuetest.Payload]
				open := func() durable.Queue[queuetest.Payload] {
					if last != nil {
						if err := last.Release(t.Context()); err != nil {
							t.Fatal(err)
						}
					}
					q, err := redisqueue.New[queuetest.Payload](client, prefix, nil)
					if err != nil {
						t.Fatal(err)
					}
					last = q
					return q
				}
				q := open()
				t.Cleanup(func() { _ = q.(*redisqueue.Queue[queuetest.Payload]).Delete(context.Background()) })
				return q, open
			})
		})
	}
}

// TestProducersSpreadOverMasters: on a cluster, each producer's keys are in
// one slot (its scripts need that), and 60 producers' queues are spread
// over all 3 masters.
func TestProducersSpreadOverMasters(t *testing.T) {
	client := testenv.RedisCluster(t)
	ctx := t.Context()
	base := "trellis-test-spread-" + uuid.NewString()
	t.Cleanup(func() { testenv.DeleteKeys(t, client, "{"+base+"*") })
	const producers = 60
	for i := range producers {
		q, err := redisqueue.New[int](client, fmt.Sprintf("%s-%d", base, i), nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, qual := range []string{"a", "b"} {
			if err := q.StoreMessageSent(ctx, durable.MessageSent[int]{SeqNr: nextSeqNr(ctx, t, q), Qualifier: qual, Message: i, Timestamp: time.Now()}); err != nil {
				t.Fatal(err)
			}
		}
		if err := q.StoreMessageConfirmed(ctx, 1, "a", time.Now()); err != nil {
			t.Fatal(err)
		}
		slots := map[int64]bool{}
		prefix := fmt.Sprintf("{%s-%d}", base, i)
		for _, k := range []string{prefix + ":meta", prefix + ":confirmed", prefix + ":qualifiers", prefix + ":q:a", prefix + ":q:b"} {
			slots[client.ClusterKeySlot(ctx, k).Val()] = true
		}
		if len(slots) != 1 {
			t.Fatalf("producer %d's keys are in %d slots", i, len(slots))
		}
	}
	perMaster := testenv.KeysPerMaster(t, client, "{"+base+"-*}:meta")
	if len(perMaster) != 3 {
		t.Fatalf("queues per master = %v", perMaster)
	}
	for addr, n := range perMaster {
		if n == 0 || n > producers/2 {
			t.Errorf("master %s holds %d of %d queues (all: %v)", addr, n, producers, perMaster)
		}
	}
}

// nextSeqNr is the queue's next sequence number.
func nextSeqNr(ctx context.Context, t *testing.T, q *redisqueue.Queue[int]) durable.SeqNr {
	t.Helper()
	st, err := q.LoadState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return st.CurrentSeqNr
}

func TestNewRejectsBadPrefix(t *testing.T) {
	client := testenv.Redis(t)
	for _, p := range []string{"", "a{b", "c}"} {
		if _, err := redisqueue.New[int](client, p, nil); err == nil {
			t.Errorf("prefix %q accepted", p)
		}
	}
}
