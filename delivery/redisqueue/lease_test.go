package redisqueue_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/trellis-go/trellis/delivery/durable"
	"github.com/trellis-go/trellis/delivery/redisqueue"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
)

// twoOwners returns two Queue values of one producer, as two processes
// would have, with the lease given.
func twoOwners(t *testing.T, lease time.Duration) (a, b *redisqueue.Queue[int]) {
	t.Helper()
	client := testenv.Redis(t)
	svc := "trellis-test-lease-" + uuid.NewString()[:8]
	t.Cleanup(func() { testenv.DeleteKeys(t, client, svc+":*") })
	open := func() *redisqueue.Queue[int] {
		q, err := redisqueue.ForService[int](client, svc, "notices", nil, redisqueue.WithLease(lease))
		if err != nil {
			t.Fatal(err)
		}
		return q
	}
	return open(), open()
}

func sent(n durable.SeqNr) durable.MessageSent[int] {
	return durable.MessageSent[int]{SeqNr: n, Message: int(n), Timestamp: time.Now()}
}

// TestLeaseOneOwner: while one queue value holds the lease another cannot
// load; once it lapses the other takes over, the epoch moves on, and every
// write of the deposed owner is refused with ErrFenced, so that what its
// successor stored stays as it is.
func TestLeaseOneOwner(t *testing.T) {
	ctx := t.Context()
	a, b := twoOwners(t, 300*time.Millisecond)
	sa, err := a.LoadState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var owned *durable.OwnedError
	if _, err := b.LoadState(ctx); !errors.As(err, &owned) || !errors.Is(err, durable.ErrOwned) ||
		owned.RetryIn <= 0 || owned.RetryIn > 300*time.Millisecond {
		t.Fatalf("second load: %v, want an OwnedError with RetryIn in (0, 300ms]", err)
	}
	if err := a.StoreMessageSent(ctx, sent(1)); err != nil {
		t.Fatal(err)
	}
	// a stops renewing (its process froze): its lease lapses.
	var sb durable.State[int]
	testenv.Eventually(t, 5*time.Second, "the second owner takes over", func() bool {
		sb, err = b.LoadState(ctx)
		return err == nil
	})
	if sb.Incarnation != sa.Incarnation+1 || len(sb.Unconfirmed) != 1 || sb.CurrentSeqNr != 2 {
		t.Fatalf("takeover state: epoch %d (first %d), unconfirmed %d, current %d", sb.Incarnation, sa.Incarnation, len(sb.Unconfirmed), sb.CurrentSeqNr)
	}
	for name, write := range map[string]func() error{
		"store sent":      func() error { return a.StoreMessageSent(ctx, sent(2)) },
		"store confirmed": func() error { return a.StoreMessageConfirmed(ctx, 1, durable.NoQualifier, time.Now()) },
		"renew":           func() error { return a.Renew(ctx) },
	} {
		if err := write(); !errors.Is(err, durable.ErrFenced) {
			t.Errorf("deposed owner's %s: %v, want ErrFenced", name, err)
		}
	}
	// The deposed owner's release leaves the new owner's lease alone.
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := a.LoadState(ctx); !errors.Is(err, durable.ErrOwned) {
		t.Fatalf("load after the deposed owner's release: %v, want ErrOwned", err)
	}
	if err := b.StoreMessageSent(ctx, sent(2)); err != nil {
		t.Fatalf("the new owner's store: %v", err)
	}
	if s := load(ctx, t, b); len(s.Unconfirmed) != 2 {
		t.Fatalf("unconfirmed after the takeover: %d, want 2", len(s.Unconfirmed))
	}
}

// TestLeaseRenewAndRelease: a renewed lease outlives its first term, and a
// released one is taken over at once.
func TestLeaseRenewAndRelease(t *testing.T) {
	ctx := t.Context()
	// A renewal lands at most RenewEvery plus two Redis calls after the
	// last one, and the lease lapses if that gap reaches the lease: a
	// second leaves two thirds of it for a loaded machine under -race to
	// be late, where 300 ms left 200 ms.
	const lease = time.Second
	a, b := twoOwners(t, lease)
	load(ctx, t, a)
	deadline := time.Now().Add(3*lease + lease/2) // more than three leases
	for time.Now().Before(deadline) {
		if err := a.Renew(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := b.LoadState(ctx); !errors.Is(err, durable.ErrOwned) {
			t.Fatalf("load while the owner renews: %v, want ErrOwned", err)
		}
		time.Sleep(a.RenewEvery()) // the owner's renewal period: what is under test
	}
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	load(ctx, t, b)
	if err := a.StoreMessageSent(ctx, sent(1)); !errors.Is(err, durable.ErrFenced) {
		t.Fatalf("store after the handover: %v, want ErrFenced", err)
	}
}

// TestLeaseHolder: Holder names the owner whose lease runs, as it recorded
// itself when it took the lease, and nobody before a load, after a release
// or after an owner that recorded no name took over.
func TestLeaseHolder(t *testing.T) {
	ctx := t.Context()
	client := testenv.Redis(t)
	svc := "trellis-test-holder-" + uuid.NewString()[:8]
	t.Cleanup(func() { testenv.DeleteKeys(t, client, svc+":*") })
	open := func(opts ...redisqueue.Option) *redisqueue.Queue[int] {
		q, err := redisqueue.ForService[int](client, svc, "notices", nil, append(opts, redisqueue.WithLease(time.Second))...)
		if err != nil {
			t.Fatal(err)
		}
		return q
	}
	a, b, anon := open(redisqueue.WithHolder("a 10.0.0.1:25520")), open(redisqueue.WithHolder("b 10.0.0.2:25520")), open()
	holder := func(step, want string, wantHeld bool) {
		t.Helper()
		if got, held, err := a.Holder(ctx); err != nil || got != want || held != wantHeld {
			t.Errorf("%s: Holder = %q, %v, %v; want %q, %v", step, got, held, err, want, wantHeld)
		}
	}
	holder("before any load", "", false)
	load(ctx, t, a)
	holder("a loaded", "a 10.0.0.1:25520", true)
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	holder("a released", "", false)
	load(ctx, t, b)
	holder("b loaded", "b 10.0.0.2:25520", true)
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
	load(ctx, t, anon)
	holder("an owner without a name loaded", "", true)
}

// TestServiceKeysAndPruning: every key of a service's queue starts with
// the service's prefix, and a qualifier whose messages are all confirmed
// (a worker that left) leaves the qualifiers set and the confirmed hash.
func TestServiceKeysAndPruning(t *testing.T) {
	ctx := t.Context()
	client := testenv.Redis(t)
	svc := "trellis-test-keys-" + uuid.NewString()[:8]
	t.Cleanup(func() { testenv.DeleteKeys(t, client, svc+":*") })
	q, err := redisqueue.ForService[int](client, svc, "jobs", nil)
	if err != nil {
		t.Fatal(err)
	}
	load(ctx, t, q)
	for i, qual := range []string{"worker-1", "worker-2", "worker-1"} {
		m := sent(durable.SeqNr(i + 1))
		m.Qualifier = qual
		if err := q.StoreMessageSent(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	keys := func() []string {
		ks, err := client.Keys(ctx, svc+":*").Result()
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(ks)
		return ks
	}
	base := svc + ":queue:{jobs}:"
	want := []string{base + "lease", base + "meta", base + "q:worker-1", base + "q:worker-2", base + "qualifiers"}
	if got := keys(); !slices.Equal(got, want) {
		t.Fatalf("keys %v, want %v", got, want)
	}
	if err := q.StoreMessageConfirmed(ctx, 2, "worker-2", time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := q.StoreMessageConfirmed(ctx, 1, "worker-1", time.Now()); err != nil {
		t.Fatal(err)
	}
	quals, _ := client.SMembers(ctx, base+"qualifiers").Result()
	confirmed, _ := client.HKeys(ctx, base+"confirmed").Result()
	if !slices.Equal(quals, []string{"worker-1"}) || !slices.Equal(confirmed, []string{"worker-1"}) {
		t.Fatalf("after worker-2 is done: qualifiers %v, confirmed %v; want only worker-1 in both", quals, confirmed)
	}
	if err := q.StoreMessageConfirmed(ctx, 3, "worker-1", time.Now()); err != nil {
		t.Fatal(err)
	}
	if got, want := keys(), []string{base + "lease", base + "meta"}; !slices.Equal(got, want) {
		t.Fatalf("keys once everything is confirmed %v, want %v", got, want)
	}
}

func load(ctx context.Context, t *testing.T, q *redisqueue.Queue[int]) durable.State[int] {
	t.Helper()
	s, err := q.LoadState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
