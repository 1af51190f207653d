package listing

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trellis-go/trellis/internal/cluster"
)

// TestSince: readers at about the same time share one listing, bucketed
// by shard; a reader whose position is later than a listing's start gets
// a new one; a failed listing is not kept.
func TestSince(t *testing.T) {
	ids := []string{"a", "b", "c", "d", "e", "f"}
	key := Key{Kind: "states", EntityType: "counter"}
	tests := []struct {
		name      string
		fail      bool // the first listing fails
		later     bool // the second reader read its position after the first listing began
		wantLists int32
	}{
		{name: "shared", wantLists: 1},
		{name: "too old for a later reader", later: true, wantLists: 2},
		{name: "a failure is not kept", fail: true, wantLists: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var j Shared
			var lists atomic.Int32
			list := func(context.Context) ([]string, error) {
				if lists.Add(1) == 1 && tc.fail {
					return nil, errors.New("the store is out of reach")
				}
				return ids, nil
			}
			start := time.Now()
			first, err := j.Since(t.Context(), key, start, list)
			if tc.fail != (err != nil) {
				t.Fatalf("first listing: %v", err)
			}
			at := start
			if tc.later {
				at = time.Now().Add(time.Millisecond)
			}
			second, err := j.Since(t.Context(), key, at, list)
			if err != nil {
				t.Fatal(err)
			}
			if n := lists.Load(); n != tc.wantLists {
				t.Fatalf("%d listings, want %d", n, tc.wantLists)
			}
			if !tc.fail && len(first) != len(second) {
				t.Fatalf("the two readers got %v and %v", first, second)
			}
			n := 0
			for shard, in := range second {
				for _, id := range in {
					if cluster.ShardOf(key.EntityType, id) != shard {
						t.Errorf("%s listed in shard %d", id, shard)
					}
					n++
				}
			}
			if n != len(ids) {
				t.Errorf("%d ids listed, want %d", n, len(ids))
			}
		})
	}
}

// TestSinceWaitsForTheListingUnderWay: readers that come while a listing
// is under way wait for it (or, come after, take it) rather than make
// their own.
func TestSinceWaitsForTheListingUnderWay(t *testing.T) {
	var j Shared
	key := Key{Kind: "journals", EntityType: "account"}
	var lists atomic.Int32
	release := make(chan struct{})
	list := func(context.Context) ([]string, error) {
		lists.Add(1)
		<-release
		return []string{"x"}, nil
	}
	start := time.Now()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if _, err := j.Since(t.Context(), key, start, list); err != nil {
				t.Error(err)
			}
		})
	}
	deadline := time.Now().Add(10 * time.Second)
	for lists.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
	if n := lists.Load(); n != 1 {
		t.Fatalf("%d listings for 8 readers at once, want 1", n)
	}
}

// TestListingsAreForgotten: a listing is dropped keepFor after it was
// made, so the ids are not held for good; a reader after that lists anew.
func TestListingsAreForgotten(t *testing.T) {
	defer func(d time.Duration) { keepFor = d }(keepFor)
	keepFor = 10 * time.Millisecond
	var j Shared
	key := Key{Kind: "states", EntityType: "counter"}
	var lists atomic.Int32
	list := func(context.Context) ([]string, error) { lists.Add(1); return []string{"a"}, nil }
	start := time.Now()
	if _, err := j.Since(t.Context(), key, start, list); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		j.mu.Lock()
		kept := len(j.done)
		j.mu.Unlock()
		if kept == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the listing is still kept")
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := j.Since(t.Context(), key, start, list); err != nil {
		t.Fatal(err)
	}
	if n := lists.Load(); n != 2 {
		t.Fatalf("%d listings, want 2: the forgotten one made anew", n)
	}
}
