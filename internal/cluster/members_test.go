package cluster

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/redis/go-redis/v9"

	"github.com/trellis-go/trellis/internal/keyspace"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
)

// TestMembers, on one Redis and on a Redis Cluster: joined members are
// listed with their address and a recent heartbeat; an id cannot join
// twice while live; Leave removes a member at once, and a member that
// stops renewing (a crash) drops out when its lease expires in Redis;
// Drain shows as Leaving.
func TestMembers(t *testing.T) {
	for _, target := range testenv.RedisTargets {
		t.Run(target.Name, func(t *testing.T) {
			client := target.Connect(t)
			prefix := testPrefix(t, client)
			a := mustJoin(t, testConfig(client, prefix, "a"))
			cfgB := testConfig(client, prefix, "b")
			cfgB.Addr = "10.1.2.3:9000"
			b := mustJoin(t, cfgB)

			list, err := a.Members(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if got := memberAddrs(list); !slices.Equal(got, []string{"a=127.0.0.1:7000", "b=10.1.2.3:9000"}) {
				t.Fatalf("Members = %v", got)
			}
			for _, mi := range list {
				if age := time.Since(mi.Heartbeat); age < -time.Second || age > 5*time.Second {
					t.Errorf("%s: heartbeat %v is %v old", mi.ID, mi.Heartbeat, age)
				}
			}
			if !a.Lease().Serving() {
				t.Error("a just joined and is not serving")
			}

			if _, err := Join(t.Context(), testConfig(client, prefix, "a")); !errors.Is(err, ErrIDLive) {
				t.Errorf("second Join of a = %v, want ErrIDLive", err)
			}

			if err := b.Drain(t.Context()); err != nil {
				t.Fatal(err)
			}
			list, err = a.Members(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			for _, mi := range list {
				if mi.Leaving != (mi.ID == "b") {
					t.Errorf("%s: Leaving = %v after b drained", mi.ID, mi.Leaving)
				}
			}
			if err := b.Leave(t.Context()); err != nil {
				t.Fatal(err)
			}
			if b.Lease().Serving() {
				t.Error("b serves after leaving")
			}
			expectMembers(t, a, []string{"a"}, time.Second)

			c := mustJoin(t, testConfig(client, prefix, "c"))
			c.stopRenewing() // crash: no Leave
			expectMembers(t, a, []string{"a", "c"}, 0)
			expectMembers(t, a, []string{"a"}, testLease+2*time.Second)
		})
	}
}

// TestRenewalKeepsTheLease: over three lease lengths the renewer keeps the
// member listed and serving.
func TestRenewalKeepsTheLease(t *testing.T) {
	client := testenv.Redis(t)
	m := mustJoin(t, testConfig(client, testPrefix(t, client), "a"))
	tick := time.NewTicker(10 * time.Millisecond) // the sampling pace
	defer tick.Stop()
	for deadline := time.Now().Add(3 * testLease); time.Now().Before(deadline); <-tick.C {
		if !m.Lease().Serving() {
			t.Fatal("the lease lapsed while the renewer ran")
		}
	}
	expectMembers(t, m, []string{"a"}, 0)
}

// TestLostMembership: when a renewal finds the key gone (it expired, here
// it is deleted), the member stops serving at once and says so on Lost.
func TestLostMembership(t *testing.T) {
	client := testenv.Redis(t)
	prefix := testPrefix(t, client)
	m := mustJoin(t, testConfig(client, prefix, "a"))
	if err := client.Del(t.Context(), keys{keyspace.Must(prefix)}.member("a")).Err(); err != nil {
		t.Fatal(err)
	}
	testenv.Recv(t, m.Lost(), 2*testLease)
	if m.Lease().Serving() {
		t.Error("serving after the membership was lost")
	}
}

// expectMembers waits up to limit (0: checks once) until m lists exactly
// the ids want.
func expectMembers(t *testing.T, m *Member, want []string, limit time.Duration) {
	t.Helper()
	var got []string
	check := func() bool {
		list, err := m.Members(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		got = got[:0]
		for _, mi := range list {
			got = append(got, mi.ID)
		}
		slices.Sort(got)
		return slices.Equal(got, want)
	}
	if limit == 0 {
		if !check() {
			t.Fatalf("members %v, want %v", got, want)
		}
		return
	}
	testenv.Eventually(t, limit, "members to be "+strings.Join(want, ","), check)
}

func memberAddrs(list []MemberInfo) []string {
	var out []string
	for _, mi := range list {
		out = append(out, mi.ID+"="+mi.Addr)
	}
	slices.Sort(out)
	return out
}

// renewalLimit bounds, in real time, TestServingFollowsRenewals' waits for
// a renewal the fake clock's tick started: a Redis call, or its 100 ms
// timeout, and a new connection after the thaw. It returns as soon as
// the renewal lands; the bound only has to outlast a loaded machine's
// stalls under -race, which reach seconds.
const renewalLimit = 10 * time.Second

// TestServingFollowsRenewals, on a fake clock and a Redis of the test's
// own: every accepted renewal extends the lease from when it was sent;
// while Redis does not answer the member keeps trying and stops serving
// exactly at the end of its window; once Redis answers again (the key
// had not expired) it serves again.
func TestServingFollowsRenewals(t *testing.T) {
	server := testenv.StartRedisServer(t)
	client := redis.NewClient(&redis.Options{Addr: server.Addr(), MaxRetries: -1,
		DialTimeout: 100 * time.Millisecond, ReadTimeout: 100 * time.Millisecond, WriteTimeout: 100 * time.Millisecond})
	t.Cleanup(func() { _ = client.Close() }) // after the member's Leave
	clock := clockwork.NewFakeClock()
	cfg := testConfig(client, "t", "a")
	cfg.Lease = 3 * time.Second // the renewals are 1 s apart on the fake clock
	cfg.Clock = clock
	m := mustJoin(t, cfg)
	if err := clock.BlockUntilContext(t.Context(), 1); err != nil { // the renewer's ticker
		t.Fatal(err)
	}
	w := window(cfg.Lease, cfg.Margin)
	if got, want := m.Lease().Until(), clock.Now().Add(w); !got.Equal(want) {
		t.Fatalf("after Join the window ends at %v, want %v", got, want)
	}

	renewedAt := func(sent time.Time) {
		t.Helper()
		testenv.Eventually(t, renewalLimit, "the renewal sent at "+sent.String(), func() bool {
			return m.Lease().Until().Equal(sent.Add(w))
		})
	}
	clock.Advance(time.Second)
	renewedAt(clock.Now())
	lastSent := clock.Now()

	server.Freeze()
	for i := range int64(2) { // two renewals fail (they time out in real time)
		clock.Advance(time.Second)
		testenv.Eventually(t, renewalLimit, "a renewal to time out", func() bool { return m.renew.failures.Load() > i })
	}
	clock.Advance(lastSent.Add(w).Sub(clock.Now()) - time.Millisecond)
	if !m.Lease().Serving() {
		t.Fatal("not serving 1 ms before the end of the window")
	}
	clock.Advance(time.Millisecond)
	if m.Lease().Serving() {
		t.Fatal("still serving at the end of the window while Redis did not answer")
	}

	server.Thaw()
	clock.Advance(time.Second)
	testenv.Eventually(t, renewalLimit, "a renewal to be accepted after the thaw", func() bool {
		return m.Lease().Until().After(lastSent.Add(w))
	})
	if !m.Lease().Serving() {
		t.Fatal("not serving after a renewal was accepted again")
	}
	select {
	case <-m.Lost():
		t.Fatal("the membership was lost over a short outage")
	default:
	}
}
