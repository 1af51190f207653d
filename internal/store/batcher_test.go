package store

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/trellis-go/trellis/internal/testkit/testenv"
)

// echo counts its call in KEYS[1] and answers its argument; an argument
// "fail" is a script error.
var echo = redis.NewScript(`
if ARGV[1] == 'fail' then return redis.error_reply('asked to fail') end
redis.call('INCR', KEYS[1])
return ARGV[1]`)

// TestBatcher, on one Redis and on a Redis Cluster: many callers at once
// through two slots each get their own reply and their own error, every
// script runs once, and a script Redis does not have (flushed) is loaded
// and run.
func TestBatcher(t *testing.T) {
	for _, target := range testenv.RedisTargets {
		t.Run(target.Name, func(t *testing.T) {
			client := target.Connect(t)
			prefix := "batchertest-" + rand.Text()
			t.Cleanup(func() { testenv.DeleteKeys(t, client, prefix+":*") })
			b := NewBatcher(client, 2, 0)
			for _, flush := range []bool{false, true} {
				if flush {
					if err := client.ScriptFlush(t.Context()).Err(); err != nil { // every master's, on a cluster
						t.Fatal(err)
					}
				}
				const callers = 64
				var wg sync.WaitGroup
				errs := make(chan error, callers)
				for i := range callers {
					wg.Go(func() {
						arg := fmt.Sprint(i)
						if i%10 == 3 {
							arg = "fail"
						}
						key := fmt.Sprintf("%s:{k%d}", prefix, i%7) // several slots on a cluster
						got, err := b.Run(t.Context(), echo, []string{key}, arg).Text()
						switch {
						case arg == "fail" && (err == nil || !strings.Contains(err.Error(), "asked to fail")):
							errs <- fmt.Errorf("caller %d: %q, %v; want its script's error", i, got, err)
						case arg != "fail" && (err != nil || got != arg):
							errs <- fmt.Errorf("caller %d: %q, %v; want %q", i, got, err, arg)
						}
					})
				}
				wg.Wait()
				close(errs)
				for err := range errs {
					t.Error(err)
				}
			}
			if b.batched.Load() == 0 {
				t.Error("no script was sent in a pipeline: the callers never queued")
			}
			total := 0
			for k := range 7 {
				n, err := client.Get(t.Context(), fmt.Sprintf("%s:{k%d}", prefix, k)).Int()
				if err != nil {
					t.Fatal(err)
				}
				total += n
			}
			if want := 2 * (64 - 7); total != want { // 7 callers in 64 fail, twice
				t.Errorf("the scripts ran %d times, want %d (once each)", total, want)
			}
		})
	}
}

// TestBatcherDropsCancelled: a caller whose context ends while its script
// is queued behind a busy slot gets the context's error, and the script
// is not sent.
func TestBatcherDropsCancelled(t *testing.T) {
	client, b, key := heldBatcher(t, 0)
	hold := redis.NewScript(`return 1`)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx, echo, []string{key}, "x").Err() }()
	waitQueued(t, b, 1)
	cancel()
	b.free() // the held slot frees: it sends the queue
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("the cancelled caller got %v, want context.Canceled", err)
	}
	// The next script goes after the batch the freed slot sends: once it
	// is back, that batch is done.
	if err := b.Run(t.Context(), hold, nil).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := client.Exists(t.Context(), key).Result(); err != nil || n != 0 {
		t.Fatalf("the cancelled script ran (%d, %v)", n, err)
	}
}

// TestBatcherBoundsAPipeline: with at most 2 scripts a pipeline, the
// scripts queued beyond the bound are not lost: 5 queued behind a busy
// slot all run once, each caller with its own reply.
func TestBatcherBoundsAPipeline(t *testing.T) {
	client, b, key := heldBatcher(t, 2)
	replies := make(chan error, 5)
	for i := range 5 {
		go func() {
			got, err := b.Run(t.Context(), echo, []string{key}, fmt.Sprint(i)).Text()
			if err == nil && got != fmt.Sprint(i) {
				err = fmt.Errorf("caller %d got %q", i, got)
			}
			replies <- err
		}()
	}
	waitQueued(t, b, 5)
	b.free()
	for range 5 {
		if err := <-replies; err != nil {
			t.Error(err)
		}
	}
	if n, err := client.Get(t.Context(), key).Int(); err != nil || n != 5 {
		t.Errorf("the scripts ran %d times (%v), want 5", n, err)
	}
}

// heldBatcher is a Batcher of one slot, at most most scripts a pipeline,
// whose slot is held as if a send were in flight (b.free lets it go), on
// a Redis, with a key of the test's own.
func heldBatcher(t *testing.T, most int) (*redis.Client, *Batcher, string) {
	t.Helper()
	client := testenv.Redis(t)
	key := "batchertest-" + rand.Text()
	t.Cleanup(func() { client.Del(context.Background(), key) })
	b := NewBatcher(client, 1, most)
	b.mu.Lock()
	b.busy = 1
	b.mu.Unlock()
	return client, b, key
}

// waitQueued waits until n scripts are queued in b.
func waitQueued(t *testing.T, b *Batcher, n int) {
	t.Helper()
	testenv.Eventually(t, 10*time.Second, fmt.Sprintf("%d scripts queued", n), func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.queue) == n
	})
}
