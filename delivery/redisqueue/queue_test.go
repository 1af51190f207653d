package redisqueue_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"go.uber.org/goleak"

	"github.com/trellis-go/trellis/delivery/durable"
	"github.com/trellis-go/trellis/delivery/internal/queuetest"
	"github.com/trellis-go/trellis/delivery/redisqueue"
	"github.com/trellis-go/trellis/internal/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestContract runs the durable queue contract against Redis, each subtest
// under a prefix of its own.
func TestContract(t *testing.T) {
	client := testenv.Redis(t)
	queuetest.Run(t, func(t *testing.T) (durable.Queue[queuetest.Payload], func() durable.Queue[queuetest.Payload]) {
		prefix := "trellis-test:" + t.Name() + ":" + uuid.NewString()
		open := func() durable.Queue[queuetest.Payload] {
			q, err := redisqueue.New[queuetest.Payload](client, prefix, nil)
			if err != nil {
				t.Fatal(err)
			}
			return q
		}
		q := open()
		t.Cleanup(func() { _ = q.(*redisqueue.Queue[queuetest.Payload]).Delete(context.Background()) })
		return q, open
	})
}

func TestNewRejectsBadPrefix(t *testing.T) {
	client := testenv.Redis(t)
	for _, p := range []string{"", "a{b", "c}"} {
		if _, err := redisqueue.New[int](client, p, nil); err == nil {
			t.Errorf("prefix %q accepted", p)
		}
	}
}
