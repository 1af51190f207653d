package entities_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
)

// TestRedisStoreTwoInstancesLoseNoUpdate runs the concurrent-increment test
// over two RedisStores with separate clients (separate connection pools) on
// one Redis, and on a cluster, and one prefix, as two server instances
// would: the revision check must hold across clients, not only within one.
func TestRedisStoreTwoInstancesLoseNoUpdate(t *testing.T) {
	for _, target := range testenv.RedisTargets {
		t.Run(target.Name, func(t *testing.T) {
			prefix := newTestPrefix()
			a := newTestRedisStore(t, target.Connect(t), prefix)
			b := newTestRedisStore(t, target.Connect(t), prefix)
			testConcurrentIncrements(t, t.Context(), []entities.Store{a, b})
		})
	}
}

// TestRedisStoreSharedAcrossInstances checks that two instances see each
// other's writes and that a write computed from a stale read on one
// instance conflicts on the other, also across a delete and a re-create.
func TestRedisStoreSharedAcrossInstances(t *testing.T) {
	for _, target := range testenv.RedisTargets {
		t.Run(target.Name, func(t *testing.T) {
			ctx := t.Context()
			prefix := newTestPrefix()
			a := newTestRedisStore(t, target.Connect(t), prefix)
			b := newTestRedisStore(t, target.Connect(t), prefix)

			rev := mustSave(t, ctx, a, "counter", "c-1", `{"value":1}`, 0)
			wantRecord(t, ctx, b, "counter", "c-1", `{"value":1}`, rev)
			rev2 := mustSave(t, ctx, b, "counter", "c-1", `{"value":2}`, rev)
			wantConflict(t, "Save on a with the revision b replaced",
				saveErr(ctx, a, "counter", "c-1", `{"value":9}`, rev))
			wantRecord(t, ctx, a, "counter", "c-1", `{"value":2}`, rev2)

			// b deletes and re-creates; a still holds rev2 and must not
			// mistake the new document for the one it read.
			mustDelete(t, ctx, b, "counter", "c-1", rev2)
			rev3 := mustSave(t, ctx, b, "counter", "c-1", `{"value":1}`, 0)
			if got, err := a.Revision(ctx, "counter", "c-1"); err != nil || got == rev2 || got != rev3 {
				t.Fatalf("a.Revision after b's delete and re-create = %d, %v; want %d (not the %d a held)", got, err, rev3, rev2)
			}
			wantConflict(t, "Save on a with the revision before the delete",
				saveErr(ctx, a, "counter", "c-1", `{"value":9}`, rev2))
		})
	}
}

// TestRedisStoreKeyLayout pins the key layout documented on RedisStore, which
// operators and migrations rely on: one hash per document with fields data
// and rev, the length-prefixed entity type, the tombstone a delete leaves,
// and no other key.
func TestRedisStoreKeyLayout(t *testing.T) {
	ctx := t.Context()
	client := testenv.Redis(t)
	prefix := newTestPrefix()
	s := newTestRedisStore(t, client, prefix)
	key := prefix + ":entity:3:a:b:c"
	wantHash := func(step string, want map[string]string) {
		t.Helper()
		fields, err := client.HGetAll(ctx, key).Result()
		if err != nil {
			t.Fatalf("%s: HGETALL: %v", step, err)
		}
		if len(fields) != len(want) {
			t.Fatalf("%s: document hash = %v, want %v", step, fields, want)
		}
		for f, v := range want {
			if fields[f] != v {
				t.Fatalf("%s: document hash = %v, want %v", step, fields, want)
			}
		}
	}

	rev := mustSave(t, ctx, s, "a:b", "c", `{"x":1}`, 0)
	if rev != 1 {
		t.Fatalf("first revision = %d, want 1 (revisions count per document)", rev)
	}
	wantHash("created", map[string]string{"data": `{"x":1}`, "rev": "1"})
	mustDelete(t, ctx, s, "a:b", "c", rev)
	wantHash("deleted", map[string]string{"gone": "1"})
	mustSave(t, ctx, s, "a:b", "c", `{"x":2}`, 0)
	wantHash("re-created", map[string]string{"data": `{"x":2}`, "rev": "2"})
	if keys, err := client.Keys(ctx, prefix+":*").Result(); err != nil || len(keys) != 1 || keys[0] != key {
		t.Fatalf("keys under the prefix = %v, %v; want only %s", keys, err, key)
	}

	// Hashes written by hand in the documented layout are read back and
	// continue from their revision, which also checks the default prefix
	// and the decimal carry. Only keys of a type of this test's own are
	// written under the shared "trellis" prefix.
	typ := "layout-" + rand.Text()
	def := entities.NewRedisStore(client, "")
	for _, tc := range []struct {
		// fields is the hash written by hand.
		fields []any
		// live is the revision Load must see (0: absent, a tombstone).
		live uint64
		// next is the revision the next Save must give.
		next uint64
	}{
		{[]any{"data", `{"y":2}`, "rev", "99"}, 99, 100},
		{[]any{"gone", "1999"}, 0, 2000},
		{[]any{"data", `{}`, "rev", "18446744073709551614"}, 18446744073709551614, 18446744073709551615},
	} {
		id := fmt.Sprintf("id:%v", tc.fields[len(tc.fields)-1])
		key := "trellis:entity:" + strconv.Itoa(len(typ)) + ":" + typ + ":" + id
		t.Cleanup(func() { client.Del(context.Background(), key) })
		if err := client.HSet(ctx, key, tc.fields...).Err(); err != nil {
			t.Fatalf("HSET: %v", err)
		}
		if got, err := def.Revision(ctx, typ, id); err != nil || got != tc.live {
			t.Fatalf("%v: Revision = %d, %v; want %d", tc.fields, got, err, tc.live)
		}
		if got := mustSave(t, ctx, def, typ, id, `{"z":3}`, tc.live); got != tc.next {
			t.Fatalf("%v: Save gave revision %d, want %d", tc.fields, got, tc.next)
		}
	}
	// The largest revision survives the round trip exactly (revisions never
	// pass through Lua numbers), and a document at it cannot be saved
	// again: an error, not a conflict, and nothing written.
	id := "id:18446744073709551614"
	wantConflict(t, "Save with a revision one below the stored one",
		saveErr(ctx, def, typ, id, `{}`, 18446744073709551614))
	_, err := def.Save(ctx, typ, id, []byte(`{"w":1}`), 18446744073709551615)
	if err == nil || errors.Is(err, entities.ErrConflict) || !strings.Contains(err.Error(), "uint64") {
		t.Fatalf("Save past the largest revision: err = %v, want an error saying the revisions ran out", err)
	}
	wantRecord(t, ctx, def, typ, id, `{"z":3}`, 18446744073709551615)
	mustDelete(t, ctx, def, typ, id, 18446744073709551615)
	wantAbsent(t, ctx, def, typ, id)
}

// TestRedisStoreSpreadsOverMasters: on a cluster of 3 masters, documents
// are spread over all of them, each holding 20–50 % (no hash tag keeps
// them together).
func TestRedisStoreSpreadsOverMasters(t *testing.T) {
	ctx := t.Context()
	client := testenv.RedisCluster(t)
	prefix := newTestPrefix()
	s := newTestRedisStore(t, client, prefix)
	const n = 3000
	for i := range n {
		mustSave(t, ctx, s, "order", fmt.Sprintf("order-%d", i), `{}`, 0)
	}
	shares := testenv.KeysPerMaster(t, client, prefix+":*")
	total := 0
	for _, k := range shares {
		total += k
	}
	if total != n || len(shares) != 3 {
		t.Fatalf("keys per master = %v; want %d keys over 3 masters", shares, n)
	}
	for addr, k := range shares {
		if share := float64(k) / n; share < 0.2 || share > 0.5 {
			t.Errorf("master %s holds %.1f %% of the documents, want 20–50 %% (all: %v)", addr, 100*share, shares)
		}
	}
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
