package entities_test

import (
	"context"
	"crypto/rand"
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/internal/testenv"
)

// TestRedisStoreTwoInstancesLoseNoUpdate runs the concurrent-increment test
// over two RedisStores with separate clients (separate connection pools) on
// one Redis and prefix, as two server instances would: the revision check
// must hold across clients, not only within one.
func TestRedisStoreTwoInstancesLoseNoUpdate(t *testing.T) {
	prefix := newTestPrefix()
	a := newTestRedisStore(t, testenv.Redis(t), prefix)
	b := newTestRedisStore(t, testenv.Redis(t), prefix)
	testConcurrentIncrements(t, t.Context(), []entities.Store{a, b})
}

// TestRedisStoreSharedAcrossInstances checks that two instances see each
// other's writes and that a write computed from a stale read on one
// instance conflicts on the other.
func TestRedisStoreSharedAcrossInstances(t *testing.T) {
	ctx := t.Context()
	prefix := newTestPrefix()
	a := newTestRedisStore(t, testenv.Redis(t), prefix)
	b := newTestRedisStore(t, testenv.Redis(t), prefix)

	rev := mustSave(t, ctx, a, "counter", "c-1", `{"value":1}`, 0)
	wantRecord(t, ctx, b, "counter", "c-1", `{"value":1}`, rev)
	rev2 := mustSave(t, ctx, b, "counter", "c-1", `{"value":2}`, rev)
	wantConflict(t, "Save on a with the revision b replaced",
		saveErr(ctx, a, "counter", "c-1", `{"value":9}`, rev))
	wantRecord(t, ctx, a, "counter", "c-1", `{"value":2}`, rev2)
}

// TestRedisStoreKeyLayout pins the key layout documented on RedisStore, which
// operators and migrations rely on: the counter key, one hash per document
// with fields data and rev, and the length-prefixed entity type.
func TestRedisStoreKeyLayout(t *testing.T) {
	ctx := t.Context()
	client := testenv.Redis(t)
	prefix := newTestPrefix()
	s := newTestRedisStore(t, client, prefix)

	rev := mustSave(t, ctx, s, "a:b", "c", `{"x":1}`, 0)
	fields, err := client.HGetAll(ctx, prefix+":entity:3:a:b:c").Result()
	if err != nil {
		t.Fatalf("HGETALL: %v", err)
	}
	want := map[string]string{"data": `{"x":1}`, "rev": strconv.FormatUint(rev, 10)}
	if len(fields) != len(want) || fields["data"] != want["data"] || fields["rev"] != want["rev"] {
		t.Fatalf("document hash = %v, want %v", fields, want)
	}
	counter, err := client.Get(ctx, prefix+":entity-revision").Result()
	if err != nil {
		t.Fatalf("GET counter: %v", err)
	}
	if counter != want["rev"] {
		t.Fatalf("counter = %s, want %s (the last revision handed out)", counter, want["rev"])
	}

	// A hash written by hand in the documented layout is read back, which
	// also checks the default prefix. Only a document key is written under
	// the shared "trellis" prefix, never its counter.
	typ := "layout-" + rand.Text()
	key := "trellis:entity:" + strconv.Itoa(len(typ)) + ":" + typ + ":id:1"
	t.Cleanup(func() { client.Del(context.Background(), key) })
	if err := client.HSet(ctx, key, "data", `{"y":2}`, "rev", "18446744073709551615").Err(); err != nil {
		t.Fatalf("HSET: %v", err)
	}
	def := entities.NewRedisStore(client, "")
	// The largest revision survives the round trip exactly: revisions never
	// pass through Lua numbers (doubles).
	wantRecord(t, ctx, def, typ, "id:1", `{"y":2}`, 18446744073709551615)
	wantConflict(t, "Save with a revision one below the stored one",
		saveErr(ctx, def, typ, "id:1", `{}`, 18446744073709551614))
	mustDelete(t, ctx, def, typ, "id:1", 18446744073709551615)
	wantAbsent(t, ctx, def, typ, "id:1")
}

// TestRedisStoreCorruptDocument checks that a hash missing a field, or with
// a rev that is not a number, is reported as an error rather than read as
// absent or as revision 0.
func TestRedisStoreCorruptDocument(t *testing.T) {
	ctx := t.Context()
	client := testenv.Redis(t)
	prefix := newTestPrefix()
	s := newTestRedisStore(t, client, prefix)

	for id, fields := range map[string][]any{
		"no-rev":  {"data", "{}"},
		"no-data": {"rev", "5"},
		"bad-rev": {"data", "{}", "rev", "five"},
	} {
		if err := client.HSet(ctx, prefix+":entity:1:t:"+id, fields...).Err(); err != nil {
			t.Fatalf("HSET: %v", err)
		}
		if rec, err := s.Load(ctx, "t", id); err == nil {
			t.Errorf("Load of %s document = (%q, %d), want an error", id, rec.Data, rec.Revision)
		}
	}
	if rev, err := s.Revision(ctx, "t", "bad-rev"); err == nil {
		t.Errorf("Revision of bad-rev document = %d, want an error", rev)
	}
	if _, err := s.Save(ctx, "t", "bad-rev", []byte("{}"), 5); err == nil || errors.Is(err, entities.ErrConflict) {
		// The script compares revisions as text, so this is a conflict
		// ("five" ≠ "5") whose found revision cannot be parsed: an error,
		// but not ErrConflict, which would invite a retry that cannot win.
		t.Errorf("Save over bad-rev document: err = %v, want a non-conflict error", err)
	}
}

// TestRedisStoreUnreachable checks that a Redis that cannot be reached makes
// every method return an error naming the operation, not panic or hang.
func TestRedisStoreUnreachable(t *testing.T) {
	// A port that was just free and is now closed: connecting is refused at
	// once, so the test needs no timeout of its own to be fast.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	client := redis.NewClient(&redis.Options{
		Addr: addr,
		// Fail on the first refused dial: no command retries and no dial
		// retries (go-redis dials 5 times, 100 ms apart, by default).
		MaxRetries:    -1,
		DialerRetries: 1,
		DialTimeout:   5 * time.Second,
	})
	t.Cleanup(func() { _ = client.Close() })
	s := entities.NewRedisStore(client, newTestPrefix())
	ctx := t.Context()

	_, loadErr := s.Load(ctx, "counter", "c-1")
	_, revErr := s.Revision(ctx, "counter", "c-1")
	_, saveErr := s.Save(ctx, "counter", "c-1", []byte("{}"), 0)
	for op, err := range map[string]error{
		"ping":     s.Ping(ctx),
		"load":     loadErr,
		"revision": revErr,
		"save":     saveErr,
		"delete":   s.Delete(ctx, "counter", "c-1", 0),
	} {
		if err == nil {
			t.Errorf("%s against %s (closed): no error", op, addr)
			continue
		}
		if errors.Is(err, entities.ErrConflict) {
			t.Errorf("%s against %s (closed): %v, must not be ErrConflict", op, addr, err)
		}
		if !strings.HasPrefix(err.Error(), op+" ") {
			t.Errorf("%s error %q does not start with the operation", op, err)
		}
	}
}
