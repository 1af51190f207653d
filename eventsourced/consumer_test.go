package eventsourced_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/consumers"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
	"github.com/trellis-go/trellis/trellistest"
)

// seen records the events a consumer handled, per entity.
type seen struct {
	mu     sync.Mutex
	events map[string][]string
}

func (s *seen) handle(ctx *consumers.Ctx, e consumers.Event) consumers.Effect {
	s.mu.Lock()
	defer s.mu.Unlock()
	text := fmt.Sprintf("%d:%s:%v", e.Seq, e.Name, e.Event)
	if e.Deleted {
		text = fmt.Sprintf("%d:deleted", e.Seq)
	}
	s.events[e.EntityID] = append(s.events[e.EntityID], text)
	return ctx.Done()
}

func (s *seen) of(id string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Sprint(s.events[id])
}

// TestConsumeEvents: a consumer of the type's events gets each event,
// decoded, in order per entity, and the
// deletion; on memory, one Redis and a Redis Cluster.
func TestConsumeEvents(t *testing.T) {
	for _, target := range []string{"memory", "redis", "redis-cluster"} {
		t.Run(target, func(t *testing.T) {
			s := &seen{events: map[string][]string{}}
			setup := func(h *trellis.Host, r chi.Router) error {
				if err := startWallets(h, r); err != nil {
					return err
				}
				_, err := consumers.DefineEvents("wallet-events", Wallets, s.handle).Start(h.Consumers())
				return err
			}
			var ts *trellistest.Service
			switch target {
			case "memory":
				ts = trellistest.Start(t, setup)
			case "redis":
				ts = trellistest.StartInstances(t, 1, setup)[0]
				trellistest.WaitSettled(t, ts)
			default:
				url := testenv.RedisClusterURL(t)
				ts = trellistest.StartInstances(t, 1, setup, trellistest.WithConfig(func(c *trellis.Config) { c.RedisURL, c.RedisClusterURL = "", url }))[0]
				trellistest.WaitSettled(t, ts)
			}
			ctx := context.Background()
			for i := range 3 {
				for _, id := range []string{"a", "b"} {
					if _, err := Deposit.Invoke(ctx, ts.Client, id, Deposited{Amount: i + 1}); err != nil {
						t.Fatal(err)
					}
				}
			}
			if _, err := Move.Invoke(ctx, ts.Client, "a", 1); err != nil {
				t.Fatal(err)
			}
			if _, err := Close.Invoke(ctx, ts.Client, "b", done); err != nil {
				t.Fatal(err)
			}
			want := map[string]string{
				"a": "[1:deposited:{1 } 2:deposited:{2 } 3:deposited:{3 } 4:withdrawn:{1} 5:deposited:{1 moved}]",
				"b": "[1:deposited:{1 } 2:deposited:{2 } 3:deposited:{3 } 4:withdrawn:{6} 4:deleted]",
			}
			for id, w := range want {
				testenv.Eventually(t, 30*time.Second, "the consumer to see "+id+"'s events", func() bool { return s.of(id) == w })
			}
		})
	}
}
