package directory_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/trellis-go/trellis/internal/cluster/directory"
	"github.com/trellis-go/trellis/internal/keyspace"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
	"github.com/trellis-go/trellis/runtime"
)

// watcher records what a Watch reported last.
type watcher struct {
	mu   sync.Mutex
	last []runtime.RefAddress
	n    int
}

func (w *watcher) update(others []runtime.RefAddress) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.last, w.n = others, w.n+1
}

func (w *watcher) sees(want ...runtime.RefAddress) func() bool {
	return func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.n > 0 && slices.Equal(w.last, want)
	}
}

// TestDirectory: an instance sees the others' entries (not its own), a
// change, a withdrawal at Close, and the lapse of an abandoned instance's
// entries after the lease.
func TestDirectory(t *testing.T) {
	const lease = 500 * time.Millisecond
	rdb := testenv.Redis(t)
	space := keyspace.Must("directory-" + uuid.NewString()[:8])
	open := func(self string) *directory.Directory {
		d, err := directory.New(directory.Config{Client: rdb, Space: space, Self: self, Lease: lease, Poll: lease / 10})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(d.Abandon)
		return d
	}
	a, b, c := open("a:1"), open("b:1"), open("c:1")
	var w watcher
	a.Watch("jobs", w.update)
	eventually(t, "an empty listing", w.sees())

	a.Publish("jobs", []runtime.RefAddress{{Addr: "a:1", Path: "/user/mine"}})
	b.Publish("jobs", []runtime.RefAddress{{Addr: "b:1", Path: "/user/w1"}, {Addr: "b:1", Path: "/user/w2"}})
	c.Publish("jobs", []runtime.RefAddress{{Addr: "c:1", Path: "/user/w"}})
	c.Publish("other", []runtime.RefAddress{{Addr: "c:1", Path: "/user/x"}})
	eventually(t, "b's and c's workers, not a's own", w.sees(
		runtime.RefAddress{Addr: "b:1", Path: "/user/w1"}, runtime.RefAddress{Addr: "b:1", Path: "/user/w2"}, runtime.RefAddress{Addr: "c:1", Path: "/user/w"}))

	b.Publish("jobs", []runtime.RefAddress{{Addr: "b:1", Path: "/user/w2"}})
	eventually(t, "b's change", w.sees(runtime.RefAddress{Addr: "b:1", Path: "/user/w2"}, runtime.RefAddress{Addr: "c:1", Path: "/user/w"}))

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, "b's withdrawal", w.sees(runtime.RefAddress{Addr: "c:1", Path: "/user/w"}))

	start := time.Now()
	c.Abandon()
	eventually(t, "c's entries lapse", w.sees())
	if d := time.Since(start); d < lease/2 {
		t.Fatalf("an abandoned instance's entries went after %v, before their lease (%v) lapsed", d, lease)
	}
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testenv.Eventually(t, 5*time.Second, what, cond)
}

// TestConfigRefused: a directory without a client or an address is an error.
func TestConfigRefused(t *testing.T) {
	if _, err := directory.New(directory.Config{Self: "a:1"}); err == nil {
		t.Fatal("a directory without a Redis client was made")
	}
}
