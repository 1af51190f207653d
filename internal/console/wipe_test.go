package console

import (
	"context"
	"slices"
	"testing"

	"github.com/redis/go-redis/v9"
)

// WipeMarkers is wipeMarkers for the package's external tests.
var WipeMarkers = wipeMarkers

// wipeMarkers deletes the timer store's markers under prefix (one per
// partition), which is what FLUSHALL would do to the scheduler's view of
// its store without touching the other tests' keys on the shared Redis. It
// returns the first marker's key, which the wipe's explanation names.
func wipeMarkers(t testing.TB, rdb *redis.Client, prefix string) string {
	t.Helper()
	ctx := context.Background()
	markers, err := rdb.Keys(ctx, prefix+":timers:*:marker").Result()
	if err != nil || len(markers) == 0 {
		t.Fatalf("the timer markers under %s: %v, %v", prefix, markers, err)
	}
	if err := rdb.Del(ctx, markers...).Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(markers)
	return markers[0]
}
