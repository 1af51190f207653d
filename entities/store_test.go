package entities_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
)

func TestMemoryStoreConformance(t *testing.T) {
	runStoreConformance(t, func(t *testing.T) entities.Store {
		return entities.NewMemoryStore()
	})
}

// TestRedisStoreConformance runs the suite on one Redis and on a Redis
// Cluster, where every document is in the slot of its own key.
func TestRedisStoreConformance(t *testing.T) {
	for _, target := range testenv.RedisTargets {
		t.Run(target.Name, func(t *testing.T) {
			client := target.Connect(t)
			runStoreConformance(t, func(t *testing.T) entities.Store {
				return newTestRedisStore(t, client, newTestPrefix())
			})
		})
	}
}

// newTestPrefix returns a key prefix no other test uses, so that tests (and
// packages) sharing the test Redis cannot see each other's documents.
func newTestPrefix() string {
	// rand.Text is base32 (A–Z, 2–7): nothing that is special in a SCAN
	// MATCH pattern.
	return "test-" + rand.Text()
}

// newTestRedisStore returns a RedisStore over client under prefix and
// deletes every key under the prefix when the test ends.
func newTestRedisStore(t *testing.T, client redis.UniversalClient, prefix string) *entities.RedisStore {
	t.Helper()
	// Registered after the client's own cleanup, so it runs before the
	// client is closed (cleanups run last-in, first-out).
	t.Cleanup(func() { testenv.DeleteKeys(t, client, prefix+":*") })
	return entities.NewRedisStore(client, prefix)
}

// runStoreConformance checks that a Store keeps the contract documented on
// entities.Store. newStore must return a new, empty store each time it is
// called; every case gets its own.
func runStoreConformance(t *testing.T, newStore func(t *testing.T) entities.Store) {
	cases := []struct {
		// name is the subtest name.
		name string
		// property is the clause of the Store contract the case checks; it
		// is logged when the case fails.
		property string
		// run exercises s, a new empty store; ctx ends with the subtest.
		run func(t *testing.T, ctx context.Context, s entities.Store)
	}{
		{
			name:     "AbsentLoadIsNilZero",
			property: "Load of an absent document returns (nil, 0); Revision returns 0",
			run: func(t *testing.T, ctx context.Context, s entities.Store) {
				wantAbsent(t, ctx, s, "counter", "c-1")
			},
		},
		{
			name:     "CreateWithExpectedZero",
			property: "Save with expected 0 creates an absent document and returns its new, non-zero revision",
			run: func(t *testing.T, ctx context.Context, s entities.Store) {
				rev := mustSave(t, ctx, s, "counter", "c-1", `{"value":1}`, 0)
				if rev == 0 {
					t.Fatal("Save returned revision 0, which means absent")
				}
				wantRecord(t, ctx, s, "counter", "c-1", `{"value":1}`, rev)
			},
		},
		{
			name:     "SaveWrongRevisionConflicts",
			property: "Save with a revision that is not the stored one fails with ErrConflict and writes nothing",
			run: func(t *testing.T, ctx context.Context, s entities.Store) {
				// Absent document, expected non-zero.
				wantConflict(t, "Save absent with expected 7", saveErr(ctx, s, "counter", "c-1", `{"value":9}`, 7))
				wantAbsent(t, ctx, s, "counter", "c-1")

				rev := mustSave(t, ctx, s, "counter", "c-1", `{"value":1}`, 0)
				for _, expected := range []uint64{0, rev - 1, rev + 1, rev + 1000} {
					if expected == rev {
						continue
					}
					wantConflict(t, fmt.Sprintf("Save with expected %d (stored %d)", expected, rev),
						saveErr(ctx, s, "counter", "c-1", `{"value":9}`, expected))
					wantRecord(t, ctx, s, "counter", "c-1", `{"value":1}`, rev)
				}
			},
		},
		{
			name:     "SaveRightRevision",
			property: "Save with the stored revision replaces the document and returns a greater revision",
			run: func(t *testing.T, ctx context.Context, s entities.Store) {
				rev := mustSave(t, ctx, s, "counter", "c-1", `{"value":1}`, 0)
				for i := 2; i <= 5; i++ {
					data := fmt.Sprintf(`{"value":%d}`, i)
					next := mustSave(t, ctx, s, "counter", "c-1", data, rev)
					if next <= rev {
						t.Fatalf("Save after revision %d returned %d, want greater", rev, next)
					}
					rev = next
					wantRecord(t, ctx, s, "counter", "c-1", data, rev)
				}
			},
		},
		{
			name:     "RevisionsGrowPerDocumentAcrossDeletes",
			property: "every write of a document gets a revision greater than any that document had, deletes included",
			run: func(t *testing.T, ctx context.Context, s entities.Store) {
				highest := map[[2]string]uint64{}
				held := map[[2]string]uint64{}
				// Interleave writes and deletes of several documents, so
				// that a revision reset by a delete, or taken from another
				// document, would show.
				for round := range 4 {
					for _, typ := range []string{"counter", "cart"} {
						for _, id := range []string{"x", "y", "z"} {
							doc := [2]string{typ, id}
							if round%2 == 1 && id != "z" {
								mustDelete(t, ctx, s, typ, id, held[doc])
								held[doc] = 0
								continue
							}
							rev := mustSave(t, ctx, s, typ, id, fmt.Sprintf(`{"round":%d}`, round), held[doc])
							if rev <= highest[doc] {
								t.Fatalf("%s/%s: Save returned revision %d, not above %d, the highest it had", typ, id, rev, highest[doc])
							}
							held[doc], highest[doc] = rev, rev
						}
					}
				}
			},
		},
		{
			name:     "RecreateAfterDeleteGetsNewRevision",
			property: "a document deleted and created again gets a revision greater than any before (no ABA)",
			run: func(t *testing.T, ctx context.Context, s entities.Store) {
				rev1 := mustSave(t, ctx, s, "counter", "c-1", `{"value":1}`, 0)
				rev2 := mustSave(t, ctx, s, "counter", "c-1", `{"value":2}`, rev1)
				other := mustSave(t, ctx, s, "counter", "c-2", `{"value":1}`, 0)
				mustDelete(t, ctx, s, "counter", "c-1", rev2)
				wantAbsent(t, ctx, s, "counter", "c-1")

				rev3 := mustSave(t, ctx, s, "counter", "c-1", `{"value":1}`, 0)
				if rev3 <= rev2 {
					t.Fatalf("re-created document got revision %d, want > %d (the highest it had)", rev3, rev2)
				}
				// The other document is untouched by all of it.
				wantRecord(t, ctx, s, "counter", "c-2", `{"value":1}`, other)
				wantRecord(t, ctx, s, "counter", "c-1", `{"value":1}`, rev3)
				// A writer that still holds a revision from before the delete
				// must not overwrite the new document.
				for _, stale := range []uint64{rev1, rev2} {
					wantConflict(t, fmt.Sprintf("Save with pre-delete revision %d", stale),
						saveErr(ctx, s, "counter", "c-1", `{"value":99}`, stale))
				}
				wantRecord(t, ctx, s, "counter", "c-1", `{"value":1}`, rev3)
			},
		},
		{
			name:     "DeleteRightRevision",
			property: "Delete with the stored revision removes the document",
			run: func(t *testing.T, ctx context.Context, s entities.Store) {
				rev := mustSave(t, ctx, s, "counter", "c-1", `{"value":1}`, 0)
				mustDelete(t, ctx, s, "counter", "c-1", rev)
				wantAbsent(t, ctx, s, "counter", "c-1")
			},
		},
		{
			name:     "DeleteWrongRevisionConflicts",
			property: "Delete with a revision that is not the stored one fails with ErrConflict and deletes nothing",
			run: func(t *testing.T, ctx context.Context, s entities.Store) {
				rev1 := mustSave(t, ctx, s, "counter", "c-1", `{"value":1}`, 0)
				rev2 := mustSave(t, ctx, s, "counter", "c-1", `{"value":2}`, rev1)
				for _, expected := range []uint64{0, rev1, rev2 + 1} {
					wantConflict(t, fmt.Sprintf("Delete with expected %d (stored %d)", expected, rev2),
						s.Delete(ctx, "counter", "c-1", expected))
					wantRecord(t, ctx, s, "counter", "c-1", `{"value":2}`, rev2)
				}
			},
		},
		{
			name:     "DeleteAbsent",
			property: "Delete of an absent document succeeds with expected 0 and conflicts with any other",
			run: func(t *testing.T, ctx context.Context, s entities.Store) {
				mustDelete(t, ctx, s, "counter", "never", 0)
				wantAbsent(t, ctx, s, "counter", "never")
				wantConflict(t, "Delete absent with expected 3", s.Delete(ctx, "counter", "never", 3))

				// Absent again after a delete: the same holds.
				rev := mustSave(t, ctx, s, "counter", "c-1", `{}`, 0)
				mustDelete(t, ctx, s, "counter", "c-1", rev)
				mustDelete(t, ctx, s, "counter", "c-1", 0)
				wantConflict(t, "Delete deleted with its old revision", s.Delete(ctx, "counter", "c-1", rev))
			},
		},
		{
			name:     "RevisionMatchesLoad",
			property: "Revision returns what Load returns as the revision, through create, update and delete",
			run: func(t *testing.T, ctx context.Context, s entities.Store) {
				check := func(step string) {
					t.Helper()
					rec, err := s.Load(ctx, "counter", "c-1")
					if err != nil {
						t.Fatalf("%s: Load: %v", step, err)
					}
					rev, err := s.Revision(ctx, "counter", "c-1")
					if err != nil {
						t.Fatalf("%s: Revision: %v", step, err)
					}
					if rev != rec.Revision {
						t.Fatalf("%s: Revision = %d, Load revision = %d", step, rev, rec.Revision)
					}
				}
				check("absent")
				rev := mustSave(t, ctx, s, "counter", "c-1", `{"value":1}`, 0)
				check("created")
				rev = mustSave(t, ctx, s, "counter", "c-1", `{"value":2}`, rev)
				check("updated")
				mustDelete(t, ctx, s, "counter", "c-1", rev)
				check("deleted")
			},
		},
		{
			name:     "TypesAndIDsAreSeparateNamespaces",
			property: "(type, id) pairs never collide, whatever characters they contain",
			run: func(t *testing.T, ctx context.Context, s entities.Store) {
				docs := [][2]string{
					{"counter", "same"},
					{"cart", "same"},
					// The same characters split differently between type and id.
					{"a:b", "c"},
					{"a", "b:c"},
					{"a:b:c", ""},
					{"a", ":b:c"},
					{"a:", "b:c"},
					// Hash-tag and path characters.
					{"{a}", "b"},
					{"{a", "}b"},
					{"a", "{b}"},
					{"a/b", "c"},
					{"a", "b/c"},
					// Key-layout look-alikes.
					{"1:a", "b"},
					{"1", "a:b"},
					{"entity", "x"},
					{"entity-revision", "x"},
					{"ünïcødé", "ĩd"},
				}
				revs := make([]uint64, len(docs))
				for i, d := range docs {
					revs[i] = mustSave(t, ctx, s, d[0], d[1], docData(d), 0)
				}
				for i, d := range docs {
					wantRecord(t, ctx, s, d[0], d[1], docData(d), revs[i])
				}
				// Deleting one leaves the others alone.
				mustDelete(t, ctx, s, "a:b", "c", revs[2])
				for i, d := range docs {
					if i == 2 {
						wantAbsent(t, ctx, s, d[0], d[1])
						continue
					}
					wantRecord(t, ctx, s, d[0], d[1], docData(d), revs[i])
				}
			},
		},
		{
			name:     "DataIsCopied",
			property: "the store keeps its own copy: changing the slice given to Save or returned by Load does not change the stored document",
			run: func(t *testing.T, ctx context.Context, s entities.Store) {
				// The caller reuses its buffer after each Save, on create
				// and on update.
				buf := []byte(`{"value":1}`)
				rev, err := s.Save(ctx, "counter", "c-1", buf, 0)
				if err != nil {
					t.Fatalf("Save: %v", err)
				}
				copy(buf, `{"value":7}`)
				wantRecord(t, ctx, s, "counter", "c-1", `{"value":1}`, rev)
				copy(buf, `{"value":2}`)
				if rev, err = s.Save(ctx, "counter", "c-1", buf, rev); err != nil {
					t.Fatalf("Save: %v", err)
				}
				copy(buf, `{"value":7}`)
				wantRecord(t, ctx, s, "counter", "c-1", `{"value":2}`, rev)

				// The caller changes what Load gave it.

				rec, err := s.Load(ctx, "counter", "c-1")
				if err != nil {
					t.Fatalf("Load: %v", err)
				}
				copy(rec.Data, `{"value":8}`)
				wantRecord(t, ctx, s, "counter", "c-1", `{"value":2}`, rev)
			},
		},
		{
			name:     "EmptyDocumentIsPresent",
			property: "a document saved empty loads as present (its revision), with empty data",
			run: func(t *testing.T, ctx context.Context, s entities.Store) {
				rev := mustSave(t, ctx, s, "counter", "c-1", "", 0)
				wantRecord(t, ctx, s, "counter", "c-1", "", rev)
			},
		},
		{
			name:     "ConcurrentIncrementsLoseNoUpdate",
			property: "writers doing load → modify → save-with-revision → retry on conflict never lose an update",
			run: func(t *testing.T, ctx context.Context, s entities.Store) {
				testConcurrentIncrements(t, ctx, []entities.Store{s})
			},
		},
		{
			name:     "DoneContextFails",
			property: "every method returns an error wrapping the context's error when the context is done, and writes nothing",
			run: func(t *testing.T, ctx context.Context, s entities.Store) {
				rev := mustSave(t, ctx, s, "counter", "c-1", `{"value":1}`, 0)

				done, cancel := context.WithCancel(ctx)
				cancel()
				_, err := s.Load(done, "counter", "c-1")
				wantCanceled(t, "Load", err)
				_, err = s.Revision(done, "counter", "c-1")
				wantCanceled(t, "Revision", err)
				_, err = s.Save(done, "counter", "c-1", []byte(`{"value":2}`), rev)
				wantCanceled(t, "Save", err)
				_, err = s.Save(done, "counter", "c-2", []byte(`{"value":2}`), 0)
				wantCanceled(t, "Save (create)", err)
				wantCanceled(t, "Delete", s.Delete(done, "counter", "c-1", rev))
				wantCanceled(t, "Ping", s.Ping(done))

				wantRecord(t, ctx, s, "counter", "c-1", `{"value":1}`, rev)
				wantAbsent(t, ctx, s, "counter", "c-2")
				if err := s.Ping(ctx); err != nil {
					t.Fatalf("Ping with a live context: %v", err)
				}
			},
		},
		{
			name:     "ConflictErrorSaysWhat",
			property: "a conflict error names the operation, entity type, id, and the expected and found revisions (project convention, beyond the interface)",
			run: func(t *testing.T, ctx context.Context, s entities.Store) {
				rev := mustSave(t, ctx, s, "counter", "c-1", `{}`, 0)
				stale := rev + 5
				for op, err := range map[string]error{
					"save":   saveErr(ctx, s, "counter", "c-1", `{}`, stale),
					"delete": s.Delete(ctx, "counter", "c-1", stale),
				} {
					wantConflict(t, op, err)
					msg := err.Error()
					for _, want := range []string{
						op, "counter", "c-1",
						"expected revision " + strconv.FormatUint(stale, 10),
						"found " + strconv.FormatUint(rev, 10),
					} {
						if !strings.Contains(msg, want) {
							t.Errorf("%s conflict error %q does not mention %q", op, msg, want)
						}
					}
				}
			},
		},
	}

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("property: %s", tc.property)
				}
			})
			tc.run(t, t.Context(), newStore(t))
		})
	}
}

// testConcurrentIncrements has 8 goroutines, spread over stores round-robin,
// each add 1 to one counter document 200 times by load → modify → save with
// the loaded revision → retry on ErrConflict, then checks that the counter
// is exactly 1600 and that every successful save got its own revision. With
// a store that let a stale save through, increments would be lost.
func testConcurrentIncrements(t *testing.T, ctx context.Context, stores []entities.Store) {
	t.Helper()
	const (
		workers    = 8
		increments = 200
		typ, id    = "counter", "shared"
	)
	type counter struct {
		Value int `json:"value"`
	}

	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		revs      = make(map[uint64]bool, workers*increments)
		conflicts int
	)
	for w := range workers {
		s := stores[w%len(stores)]
		wg.Go(func() {
			mine := make([]uint64, 0, increments)
			myConflicts := 0
			defer func() {
				mu.Lock()
				defer mu.Unlock()
				for _, r := range mine {
					if revs[r] {
						t.Errorf("revision %d returned by two successful saves", r)
					}
					revs[r] = true
				}
				conflicts += myConflicts
			}()
			for range increments {
				for {
					rec, err := s.Load(ctx, typ, id)
					if err != nil {
						t.Errorf("worker %d: Load: %v", w, err)
						return
					}
					var c counter
					if rec.Revision != 0 {
						if err := json.Unmarshal(rec.Data, &c); err != nil {
							t.Errorf("worker %d: decode %q: %v", w, rec.Data, err)
							return
						}
					}
					c.Value++
					data, err := json.Marshal(c)
					if err != nil {
						t.Errorf("worker %d: encode: %v", w, err)
						return
					}
					rev, err := s.Save(ctx, typ, id, data, rec.Revision)
					if errors.Is(err, entities.ErrConflict) {
						myConflicts++
						continue // someone else wrote first: reload and redo
					}
					if err != nil {
						t.Errorf("worker %d: Save: %v", w, err)
						return
					}
					mine = append(mine, rev)
					break
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}

	rec, err := stores[0].Load(ctx, typ, id)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	var c counter
	if err := json.Unmarshal(rec.Data, &c); err != nil {
		t.Fatalf("decode %q: %v", rec.Data, err)
	}
	if c.Value != workers*increments {
		t.Fatalf("counter = %d after %d×%d increments: %d updates lost",
			c.Value, workers, increments, workers*increments-c.Value)
	}
	if len(revs) != workers*increments {
		t.Fatalf("%d distinct revisions from %d successful saves", len(revs), workers*increments)
	}
	if !revs[rec.Revision] {
		t.Fatalf("final revision %d was not returned by any save", rec.Revision)
	}
	t.Logf("%d increments over %d store(s), %d conflicts retried", workers*increments, len(stores), conflicts)
}

func docData(d [2]string) string {
	data, _ := json.Marshal(map[string]string{"type": d[0], "id": d[1]})
	return string(data)
}

func mustSave(t *testing.T, ctx context.Context, s entities.Store, typ, id, data string, expected uint64) uint64 {
	t.Helper()
	rev, err := s.Save(ctx, typ, id, []byte(data), expected)
	if err != nil {
		t.Fatalf("Save(%q, %q, expected %d): %v", typ, id, expected, err)
	}
	return rev
}

// saveErr is Save for a call that is expected to fail.
func saveErr(ctx context.Context, s entities.Store, typ, id, data string, expected uint64) error {
	_, err := s.Save(ctx, typ, id, []byte(data), expected)
	return err
}

func mustDelete(t *testing.T, ctx context.Context, s entities.Store, typ, id string, expected uint64) {
	t.Helper()
	if err := s.Delete(ctx, typ, id, expected); err != nil {
		t.Fatalf("Delete(%q, %q, expected %d): %v", typ, id, expected, err)
	}
}

func wantConflict(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, entities.ErrConflict) {
		t.Fatalf("%s: err = %v, want ErrConflict", what, err)
	}
}

func wantCanceled(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, context.Canceled) {
		t.Errorf("%s with a canceled context: err = %v, want context.Canceled", what, err)
	}
}

// wantAbsent checks that Load returns (nil, 0) and Revision returns 0.
func wantAbsent(t *testing.T, ctx context.Context, s entities.Store, typ, id string) {
	t.Helper()
	rec, err := s.Load(ctx, typ, id)
	if err != nil {
		t.Fatalf("Load(%q, %q): %v", typ, id, err)
	}
	if rec.Data != nil || rec.Revision != 0 {
		t.Fatalf("Load(%q, %q) = (%q, %d), want (nil, 0)", typ, id, rec.Data, rec.Revision)
	}
	rev, err := s.Revision(ctx, typ, id)
	if err != nil {
		t.Fatalf("Revision(%q, %q): %v", typ, id, err)
	}
	if rev != 0 {
		t.Fatalf("Revision(%q, %q) = %d, want 0", typ, id, rev)
	}
}

// wantRecord checks that Load returns (data, rev) and Revision returns rev.
func wantRecord(t *testing.T, ctx context.Context, s entities.Store, typ, id, data string, rev uint64) {
	t.Helper()
	rec, err := s.Load(ctx, typ, id)
	if err != nil {
		t.Fatalf("Load(%q, %q): %v", typ, id, err)
	}
	if rec.Data == nil || !bytes.Equal(rec.Data, []byte(data)) || rec.Revision != rev {
		t.Fatalf("Load(%q, %q) = (%q, %d), want (%q, %d)", typ, id, rec.Data, rec.Revision, data, rev)
	}
	got, err := s.Revision(ctx, typ, id)
	if err != nil {
		t.Fatalf("Revision(%q, %q): %v", typ, id, err)
	}
	if got != rev {
		t.Fatalf("Revision(%q, %q) = %d, want %d", typ, id, got, rev)
	}
}
